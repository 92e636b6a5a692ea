//! The LV2 plugins of tests/fixtures/lv2-* built from their C source into a scratch
//! directory to use as LV2_PATH (the bundle as `DIR/NAME.lv2`).

use std::path::Path;

/// `tests/fixtures/FIXTURE/NAME.lv2` (its `manifest.ttl` and `NAME.c`) built into a scratch
/// directory, with `libs` on the link line; None when the LV2 headers are missing (under CI
/// that fails the test: install-deps installs lv2-dev).
pub fn build(fixture: &str, name: &str, libs: &[&str]) -> Option<tempfile::TempDir> {
    let header = Path::new("/usr/include/lv2/core/lv2.h").exists();
    if !super::require(
        header,
        &format!("lv2-dev (lv2/core/lv2.h) to build the {fixture} test plugins"),
    ) {
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(fixture)
        .join(format!("{name}.lv2"));
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join(format!("{name}.lv2"));
    std::fs::create_dir(&bundle).unwrap();
    let source = format!("{name}.c");
    for f in ["manifest.ttl", source.as_str()] {
        std::fs::copy(src.join(f), bundle.join(f)).unwrap();
    }
    let cc = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(bundle.join(format!("{name}.so")))
        .arg(bundle.join(&source))
        .args(libs)
        .output()
        .unwrap();
    assert!(cc.status.success(), "cc: {}", super::show(&cc));
    Some(dir)
}
