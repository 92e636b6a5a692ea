//! The hostile LV2 plugins of tests/fixtures/lv2-hostile (see its hostile.c), built into a
//! scratch directory to use as LV2_PATH. scripts/hostile-pass builds the same bundle.

pub const NONAME: &str = "urn:xrunlab:hostile:noname";
pub const GAP: &str = "urn:xrunlab:hostile:gap";
pub const DUP: &str = "urn:xrunlab:hostile:dup";
pub const HANG: &str = "urn:xrunlab:hostile:hang";
pub const SEGV: &str = "urn:xrunlab:hostile:segv";
pub const STUCK_INIT: &str = "urn:xrunlab:hostile:stuck-init";
pub const SLOW_INIT: &str = "urn:xrunlab:hostile:slow-init";

/// A directory holding the built bundle (use it as LV2_PATH); None when the LV2 headers are
/// missing (under CI that fails the test: install-deps installs lv2-dev).
pub fn build() -> Option<tempfile::TempDir> {
    super::lv2_fixture::build("lv2-hostile", "hostile", &[])
}
