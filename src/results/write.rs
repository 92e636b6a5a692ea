//! Atomic writing (temp file in the target directory + fsync + rename), so a reader never
//! sees a partial file and an interrupted write leaves no debris but the temp file's removal.

use super::ResultDoc;
use crate::error::{Error, Result};
use std::io::Write;
use std::path::Path;

/// Write `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(Error::usage(format!(
            "cannot write {}: directory {} does not exist",
            path.display(),
            dir.display()
        )));
    }
    // A rename would replace a device or a pipe (`-o /dev/null`, `-o /dev/stdout`) with a
    // regular file: as root that destroys /dev/null for the whole machine. Such targets have
    // no partial-file problem to avoid, so they are written in place.
    if let Ok(meta) = std::fs::metadata(path) {
        if !meta.is_file() && !meta.is_dir() {
            return std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|mut f| f.write_all(bytes))
                .map_err(|e| Error::io(format!("writing {}", path.display()), e));
        }
    }
    let name = path
        .file_name()
        .ok_or_else(|| Error::usage(format!("{} is not a file path", path.display())))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(format!("writing {}", path.display()), e)
    })
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
        let reader = {
            let p = p.clone();
            std::thread::spawn(move || std::fs::read(p).unwrap())
        };
        write_atomic(&p, b"through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        assert!(std::fs::metadata(&p).unwrap().file_type().is_fifo());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
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
