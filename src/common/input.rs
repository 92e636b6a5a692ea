//! Reading a file a user named (docs/ARCHITECTURE.md §2 (g) "Bounded inputs"): a result, a
//! manifest, cyclictest output, a latency model, a fixture tree. Every such read goes through
//! [`read_capped`], so `/dev/zero`, a FIFO, a directory or a file larger than its kind can be
//! is refused with exit 2 before any memory is spent on it: `report /dev/zero` once read until
//! the OOM killer fired.

use crate::error::{Error, Result};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

const MIB: u64 = 1 << 20;

/// A result file. The per-second series dominate a latency result, about 180 bytes per CPU
/// and second pretty-printed: a day on 16 CPUs is 250 MB. Nothing xrunlab writes for less
/// than days of measurement is larger.
pub const RESULT_MAX_BYTES: u64 = 256 * MIB;

/// A suite's manifest: a few hundred bytes per stage, a few dozen stages.
pub const MANIFEST_MAX_BYTES: u64 = 16 * MIB;

/// cyclictest output (`import`) and recorded latency distributions (the sim's
/// `file:PATH` model). cyclictest takes `-h` up to 1,000,000 buckets; its dense text layout
/// prints every bucket for every thread, about 450 MB for 64 threads at that size.
pub const CYCLICTEST_MAX_BYTES: u64 = 512 * MIB;

/// A file of /proc, /sys or /etc, live or in a fixture tree: the largest, /proc/interrupts,
/// is a few MB on a machine of a thousand CPUs.
pub const SYSTEM_FILE_MAX_BYTES: u64 = 16 * MIB;

/// The text of the regular file at `path` (symlinks followed), at most `cap` bytes. `what`
/// names the kind of file in the messages ("result", "cyclictest output"). Anything else, a
/// file above the cap (or one that grows past it while being read) and text that is not
/// UTF-8 are `Error::Input` (exit 2) saying why.
pub fn read_capped(path: &Path, cap: u64, what: &str) -> Result<String> {
    let bytes = read_capped_bytes(path, cap, what)?;
    String::from_utf8(bytes).map_err(|e| {
        Error::input(
            path,
            format!(
                "is not UTF-8 text (invalid byte at offset {}): expected a {what}",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// As [`read_capped`], the bytes as they are.
pub fn read_capped_bytes(path: &Path, cap: u64, what: &str) -> Result<Vec<u8>> {
    // The path is looked at before it is opened: opening a FIFO waits for a writer, and
    // opening some devices does something.
    let meta =
        std::fs::metadata(path).map_err(|e| Error::input(path, format!("cannot read: {e}")))?;
    refuse_unless_regular(path, &meta.file_type(), what)?;
    // O_NONBLOCK: should the path have become a FIFO since, the open returns at once and the
    // check of the open file below refuses it. It changes nothing for a regular file.
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| Error::input(path, format!("cannot read: {e}")))?;
    let meta = f
        .metadata()
        .map_err(|e| Error::input(path, format!("cannot read: {e}")))?;
    refuse_unless_regular(path, &meta.file_type(), what)?;
    let too_big = |size: String| {
        Error::input(
            path,
            format!(
                "is {size}, more than a {what} can be ({}): not read",
                human(cap)
            ),
        )
    };
    if meta.len() > cap {
        return Err(too_big(human(meta.len())));
    }
    // /proc and /sys report sizes of 0 or 4096 whatever they hold, and a file may grow
    // after the check: the read stops one byte past the cap either way.
    let mut buf = Vec::with_capacity(meta.len() as usize);
    (&mut f)
        .take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Error::input(path, format!("cannot read: {e}")))?;
    if buf.len() as u64 > cap {
        return Err(too_big(
            "larger than that (it grew while being read)".into(),
        ));
    }
    Ok(buf)
}

fn refuse_unless_regular(path: &Path, t: &std::fs::FileType, what: &str) -> Result<()> {
    if t.is_file() {
        return Ok(());
    }
    let kind = if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    let via = if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        " (the symlink's target)"
    } else {
        ""
    };
    Err(Error::input(
        path,
        format!("is {kind}{via}: expected a {what} file"),
    ))
}

/// `n` bytes in the largest whole unit.
fn human(n: u64) -> String {
    match n {
        n if n >= MIB && n.is_multiple_of(MIB) => format!("{} MiB", n / MIB),
        n if n >= MIB => format!("{:.1} MiB", n as f64 / MIB as f64),
        n => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(r: Result<String>) -> String {
        let e = r.unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
        e.to_string()
    }

    #[test]
    fn a_regular_file_within_the_cap_is_read() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        std::fs::write(&p, "{}\n").unwrap();
        assert_eq!(read_capped(&p, 3, "result").unwrap(), "{}\n");
    }

    #[test]
    fn devices_fifos_directories_and_big_files_are_refused_before_reading() {
        let d = tempfile::tempdir().unwrap();
        let e = msg(read_capped(Path::new("/dev/zero"), 1 << 20, "result"));
        assert!(
            e.contains("character device") && e.contains("result"),
            "{e}"
        );
        let link = d.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = msg(read_capped(&link, 1 << 20, "result"));
        assert!(e.contains("character device (the symlink's target)"), "{e}");
        let e = msg(read_capped(d.path(), 1 << 20, "result"));
        assert!(e.contains("a directory"), "{e}");
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: c is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer ever opens it: a read that opened it would block here forever.
        let e = msg(read_capped(&fifo, 1 << 20, "result"));
        assert!(e.contains("FIFO"), "{e}");
        let big = d.path().join("big.json");
        std::fs::write(&big, "x".repeat(11)).unwrap();
        let e = msg(read_capped(&big, 10, "result"));
        assert!(e.contains("11 bytes") && e.contains("10 bytes"), "{e}");
        let e = msg(read_capped(&d.path().join("absent"), 10, "result"));
        assert!(e.contains("cannot read"), "{e}");
    }

    #[test]
    fn a_file_reporting_a_small_size_is_still_stopped_at_the_cap() {
        // /proc files report a size of 0 whatever they hold.
        let e = msg(read_capped(Path::new("/proc/self/maps"), 8, "system file"));
        assert!(e.contains("grew"), "{e}");
    }

    #[test]
    fn text_that_is_not_utf8_is_refused_with_where() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        std::fs::write(&p, b"{\"a\xff\"}").unwrap();
        let e = msg(read_capped(&p, 100, "result"));
        assert!(e.contains("not UTF-8") && e.contains("offset 3"), "{e}");
        assert_eq!(read_capped_bytes(&p, 100, "result").unwrap().len(), 6);
    }
}
