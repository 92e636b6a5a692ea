//! The hostile LV2 plugins of tests/fixtures/lv2-hostile (see its hostile.c), built into a
//! scratch directory to use as LV2_PATH. scripts/hostile-pass builds the same bundle.

use std::path::Path;

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
    let header = Path::new("/usr/include/lv2/core/lv2.h").exists();
    if !super::require(
        header,
        "lv2-dev (lv2/core/lv2.h) to build the hostile plugins",
    ) {
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lv2-hostile/hostile.lv2");
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("hostile.lv2");
    std::fs::create_dir(&bundle).unwrap();
    for f in ["manifest.ttl", "hostile.c"] {
        std::fs::copy(src.join(f), bundle.join(f)).unwrap();
    }
    let cc = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(bundle.join("hostile.so"))
        .arg(bundle.join("hostile.c"))
        .output()
        .unwrap();
    assert!(cc.status.success(), "cc: {}", super::show(&cc));
    Some(dir)
}
