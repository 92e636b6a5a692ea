//! The one way xrunlab creates an output file (docs/ARCHITECTURE.md §2 "Writing"): whole
//! results (`results::write`) and streamed ones (`--trace` CSVs, a suite's stage logs, the
//! generated man pages) alike. It lives in `common` because the engine and the measurements,
//! below `results`, stream outputs too.
//!
//! What stands at the name decides how (`target::classify`): a regular file or nothing gets a
//! new file created `O_CREAT|O_EXCL|O_NOFOLLOW` under an unpredictable name in the same
//! directory and renamed over the name by [`Output::commit`], so a symlink planted there is
//! replaced, never written through; a device or pipe the user means is opened non-blocking
//! (a FIFO nobody reads is an error now, not a hang); one of our own descriptors
//! (`/dev/stdout`, `-`) is written through a duplicate of it.

use super::target::{self, Naming, Target};
use crate::error::{Error, Result};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// An output being written. Dropped without [`Output::commit`], a new file is removed and the
/// name keeps what it had.
pub struct Output {
    sink: Sink,
    path: PathBuf,
}

enum Sink {
    /// A new regular file, renamed over the name on commit.
    New(tempfile::NamedTempFile),
    /// A device, a pipe or a descriptor of ours, written as it is.
    Direct(File),
}

impl Output {
    /// Open `path`, a name the user gave (`-o FILE`, `--trace FILE`), for writing.
    pub fn create(path: &Path) -> Result<Output> {
        Self::create_as(path, Naming::User)
    }

    /// Open `path`, a name xrunlab made up in a directory the user gave (`DIR/xrunlab.prom`,
    /// a stage's log): only a regular file (or nothing) may stand there.
    pub fn create_derived(path: &Path) -> Result<Output> {
        Self::create_as(path, Naming::Derived)
    }

    fn create_as(path: &Path, naming: Naming) -> Result<Output> {
        let sink = match target::classify(path, naming)? {
            Target::Descriptor(fd) => Sink::Direct(duplicate(fd, path)?),
            Target::InPlace => Sink::Direct(open_in_place(path)?),
            Target::Replace => Sink::New(new_beside(path)?),
        };
        Ok(Output {
            sink,
            path: path.to_path_buf(),
        })
    }

    /// The open file, for a child's stdout or a `csv::Writer` over `&File`.
    pub fn file(&self) -> &File {
        match &self.sink {
            Sink::New(t) => t.as_file(),
            Sink::Direct(f) => f,
        }
    }

    /// Whether this is a new regular file of ours (which may be cut or removed), not a device.
    pub fn is_new_file(&self) -> bool {
        matches!(self.sink, Sink::New(_))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Make what was written the file at the name: fsync and rename a new file over it.
    pub fn commit(self) -> Result<()> {
        let io = |e: std::io::Error| Error::io(format!("writing {}", self.path.display()), e);
        match self.sink {
            Sink::Direct(_) => Ok(()),
            Sink::New(t) => {
                t.as_file().sync_all().map_err(io)?;
                t.persist(&self.path).map_err(|e| io(e.error))?;
                Ok(())
            }
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file().flush()
    }
}

/// A directory that does not exist is the user's mistake (exit 2), not the machine's.
fn directory_of(path: &Path) -> Result<&Path> {
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
    Ok(dir)
}

/// A new file under an unpredictable name, created exclusively and never through a link.
/// Opened for reading too, so a cut trace can find its last complete line.
fn new_beside(path: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = directory_of(path)?;
    let name = path
        .file_name()
        .ok_or_else(|| Error::usage(format!("{} is not a file path", path.display())))?;
    let prefix = format!(".{}.", name.to_string_lossy());
    tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .make_in(dir, |p| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o666)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(p)
        })
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

/// A device or pipe the user means. Opened non-blocking so a FIFO nobody reads is an error
/// now, not a hang that ignores Ctrl-C; blocking again afterwards, since a reader slower
/// than us is not an error.
fn open_in_place(path: &Path) -> Result<File> {
    let io = |e: std::io::Error| Error::io(format!("writing {}", path.display()), e);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => Error::usage(format!(
                "cannot write {}: it is a FIFO no process reads, so nothing would receive the output",
                path.display()
            )),
            _ => io(e),
        })?;
    nix::fcntl::fcntl(
        &f,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
    )
    .map_err(|e| io(e.into()))?;
    Ok(f)
}

/// A descriptor this process holds, shared (offset included) with whatever else is printed
/// on it.
fn duplicate(fd: i32, path: &Path) -> Result<File> {
    use std::os::fd::BorrowedFd;
    // SAFETY: `fd` was just found open (in /proc/self/fd, or standard output for `-`) and is
    // only borrowed for the dup.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    fd.try_clone_to_owned()
        .map(File::from)
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_appears_only_on_commit_and_a_dropped_one_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("trace.csv");
        std::fs::write(&p, b"old").unwrap();
        let mut o = Output::create(&p).unwrap();
        assert!(o.is_new_file());
        o.write_all(b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        o.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        let mut o = Output::create(&p).unwrap();
        o.write_all(b"lost").unwrap();
        drop(o);
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_symlink_at_the_name_is_replaced_and_its_target_kept() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let p = dir.path().join("out.log");
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        let mut o = Output::create_derived(&p).unwrap();
        o.write_all(b"log").unwrap();
        o.commit().unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(std::fs::symlink_metadata(&p).unwrap().is_file());
    }

    #[test]
    fn a_missing_directory_is_a_usage_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = Output::create(&dir.path().join("no/x.csv")).err().unwrap();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE);
    }
}
