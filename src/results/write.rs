//! Atomic writing (a temp file in the target directory + fsync + rename), so a reader never
//! sees a partial file and an interrupted write leaves no debris but the temp file's removal.
//! Every whole output goes through here, on `common::output`, which streamed ones use too;
//! `common::target` decides what may stand at the name.

use super::ResultDoc;
use crate::common::output::Output;
use crate::common::target::{self, Naming};
use crate::error::{Error, Result};
use std::io::Write;
use std::path::Path;

/// Write `bytes` to `path`, a name the user gave (`-o FILE`), atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_all(Output::create(path)?, bytes)
}

/// Write `bytes` to `path`, a name xrunlab made up in a directory the user gave
/// (`--textfile DIR`): only a regular file (or nothing) may stand there.
pub fn write_atomic_derived(path: &Path, bytes: &[u8]) -> Result<()> {
    write_all(Output::create_derived(path)?, bytes)
}

/// Refuse, before anything is measured, a target the writer would refuse at the end.
pub fn check_target(path: &Path) -> Result<()> {
    target::classify(path, Naming::User).map(|_| ())
}

/// Likewise for a name xrunlab makes up (`DIR/xrunlab.prom`): only a regular file may be there.
pub fn check_target_derived(path: &Path) -> Result<()> {
    target::classify(path, Naming::Derived).map(|_| ())
}

fn write_all(mut out: Output, bytes: &[u8]) -> Result<()> {
    out.write_all(bytes)
        .map_err(|e| Error::io(format!("writing {}", out.path().display()), e))?;
    // On failure the new file is removed when `out` is dropped.
    out.commit()
}

/// Serialise a result and write it atomically.
pub fn write_json_atomic(path: &Path, doc: &ResultDoc) -> Result<()> {
    let mut s = doc.to_json();
    s.push('\n');
    write_atomic(path, s.as_bytes())
}

/// Read a result file, with errors that name the file and say what is wrong (exit 2).
pub fn read_result(path: &Path) -> Result<ResultDoc> {
    parse_result(path, &read_result_text(path)?)
}

/// The text of a result file, bounded (docs/ARCHITECTURE.md §2 "Bounded inputs").
pub fn read_result_text(path: &Path) -> Result<String> {
    crate::common::input::read_capped(path, crate::common::input::RESULT_MAX_BYTES, "result")
}

/// The result `text` read from `path` holds (`path` names it in errors).
pub fn parse_result(path: &Path, text: &str) -> Result<ResultDoc> {
    let mut value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        Error::input(
            path,
            format!("not JSON (line {}, column {}): {e}", e.line(), e.column()),
        )
    })?;
    super::migrate::upgrade(&mut value);
    match value.get("schema_version") {
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(super::SCHEMA_VERSION as u64) => {}
        Some(serde_json::Value::Number(n)) => {
            return Err(Error::input(
                path,
                format!(
                "schema_version {n} is not supported by this xrunlab (it reads versions {} to {})",
                super::migrate::OLDEST_READABLE,
                super::SCHEMA_VERSION
            ),
            ))
        }
        Some(other) => {
            return Err(Error::input(
                path,
                format!(
                    "schema_version is {other}: expected a whole number such as {}",
                    super::SCHEMA_VERSION
                ),
            ))
        }
        None => {
            return Err(Error::input(
                path,
                "not an xrunlab result: no schema_version",
            ))
        }
    }
    // serde takes a number as the index of an enum variant: `"kind": 5` would be read as
    // the sixth kind. A kind is its name.
    match value.get("kind") {
        Some(serde_json::Value::String(_)) => {}
        Some(other) => {
            return Err(Error::input(
                path,
                format!("kind is {other}: expected a name such as \"latency\""),
            ))
        }
        None => return Err(Error::input(path, "not an xrunlab result: no kind")),
    }
    let doc: ResultDoc = serde_json::from_value(value)
        .map_err(|e| Error::input(path, format!("not a valid xrunlab result: {e}")))?;
    super::validate(&doc).map_err(|m| Error::input(path, m))?;
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
        let e = write_atomic(&dir.path().join("nope/r.json"), b"x").unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE);
    }

    #[test]
    fn a_pipe_or_device_target_is_written_in_place_not_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fifo");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // The reader is open before the write, as a shell's `| cat` would be.
        let mut reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&p)
            .unwrap();
        write_atomic(&p, b"through the pipe").unwrap();
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut reader, &mut got).unwrap();
        assert_eq!(got, b"through the pipe");
        assert!(std::fs::metadata(&p).unwrap().file_type().is_fifo());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // Nobody reading: an error at once, not a hang.
        drop(reader);
        let e = write_atomic(&p, b"x").unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE);
        assert!(e.to_string().contains("no process reads"), "{e}");
        // A name xrunlab made up is never a pipe it writes into.
        let e = write_atomic_derived(&p, b"x").unwrap_err();
        assert!(
            e.to_string().contains("is a FIFO, not a regular file"),
            "{e}"
        );
        // /dev/null stays a device.
        write_atomic(Path::new("/dev/null"), b"gone").unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }

    /// A symlink at the name is replaced by the new file; what it pointed to is untouched.
    #[test]
    fn a_symlink_at_the_name_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let p = dir.path().join("out.json");
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        write_atomic(&p, b"result").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(std::fs::symlink_metadata(&p).unwrap().is_file());
        assert_eq!(std::fs::read(&p).unwrap(), b"result");
        // A temp name is not derived from the PID: links planted there change nothing.
        let planted = dir
            .path()
            .join(format!(".next.json.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        write_atomic(&dir.path().join("next.json"), b"result").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    }

    #[test]
    fn reading_garbage_is_an_input_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.json");
        std::fs::write(&p, "{\"a\":").unwrap();
        let e = read_result(&p).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE);
        assert!(e.to_string().contains("line 1"), "{e}");
        std::fs::write(&p, "{\"a\":1}").unwrap();
        assert!(read_result(&p)
            .unwrap_err()
            .to_string()
            .contains("schema_version"));
    }

    /// A field of the wrong type is named as what it is, not as missing or as something else.
    #[test]
    fn version_and_kind_of_the_wrong_type_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        let fixture = |kind: &str| {
            let f = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/results/run.json"
            );
            let mut v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            v["kind"] = serde_json::from_str(kind).unwrap();
            v
        };
        let mut v = fixture("\"run\"");
        v["schema_version"] = "1".into();
        std::fs::write(&p, v.to_string()).unwrap();
        let e = read_result(&p).unwrap_err().to_string();
        assert!(
            e.contains("schema_version is \"1\": expected a whole number"),
            "{e}"
        );
        // 5 was once read as the index of the sixth kind (latencytest).
        for kind in ["5", "null", "[\"run\"]"] {
            std::fs::write(&p, fixture(kind).to_string()).unwrap();
            let e = read_result(&p).unwrap_err();
            assert_eq!(e.exit_code(), crate::error::EXIT_USAGE);
            assert!(e.to_string().contains(&format!("kind is {kind}")), "{e}");
        }
    }
}
