//! What an output path is before anything is written to it (docs/ARCHITECTURE.md §2
//! "Writing"). xrunlab usually runs as root, and outputs often go to directories other users
//! can write (a textfile collector's folder, a shared results folder, /tmp): whatever such a
//! user plants at the name — a symlink to a root file or to a disk, a FIFO — must neither be
//! written through nor block the writer.

use crate::error::{Error, Result};
use std::fs::Metadata;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Whether a path was named by the user as it is (`-o FILE`, `--export F=FILE`), or made up
/// by xrunlab inside a directory the user named (`--textfile DIR`, a suite's manifest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// A device or pipe there is written in place if no other user could have put it there
    /// (`-o /dev/null`, `-o /dev/stdout`).
    User,
    /// Only a regular file makes sense: anything else at the name is refused.
    Derived,
}

/// How the writer treats the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Absent, a regular file, or a symlink to one: a new file is renamed over the name (a
    /// symlink is replaced, never written through).
    Replace,
    /// A device or a pipe the user means: opened (non-blocking) and written in place, since a
    /// rename as root would replace `/dev/null` with a regular file.
    InPlace,
    /// A descriptor this process holds, named through /proc (`-o /dev/stdout`): written
    /// through that descriptor, so a redirected file is not reopened at offset 0 under
    /// what the command prints after it.
    Descriptor(i32),
}

/// Classify `path` for writing, or refuse it (exit 2) with the reason.
pub fn classify(path: &Path, naming: Naming) -> Result<Target> {
    let refuse = |why: String| {
        Err(Error::usage(format!(
            "cannot write {}: {why}",
            path.display()
        )))
    };
    // `-o -`: standard output, as `-o /dev/stdout` is; a file named "-" is `./-`.
    if naming == Naming::User && path.as_os_str() == "-" {
        return Ok(Target::Descriptor(1));
    }
    let Ok(named) = std::fs::symlink_metadata(path) else {
        return Ok(Target::Replace);
    };
    let Ok(resolved) = std::fs::metadata(path) else {
        if own_descriptor(path).is_some() {
            return refuse("it names a descriptor that is not open".into());
        }
        // A dangling symlink: the rename replaces the link itself.
        return Ok(Target::Replace);
    };
    let kind = special_kind(&resolved);
    if let Some(fd) = own_descriptor(path) {
        // `-o /dev/stdout > out.json`: never a rename over /dev/stdout.
        if naming == Naming::User && untrusted_step(path, &named, &resolved).is_none() {
            return Ok(Target::Descriptor(fd));
        }
        return refuse("it is a link to an open descriptor (/proc/…/fd)".into());
    }
    let Some(kind) = kind else {
        return Ok(Target::Replace);
    };
    if resolved.is_dir() {
        return refuse("it is a directory: give a file name inside it".into());
    }
    if kind == "socket" {
        return refuse("it is a socket, which cannot be written as a file".into());
    }
    let via = if named.file_type().is_symlink() {
        " (through a symbolic link)"
    } else {
        ""
    };
    if naming == Naming::Derived {
        return refuse(format!(
            "it is a {kind}{via}, not a regular file: remove it and run again"
        ));
    }
    if let Some(who) = untrusted_step(path, &named, &resolved) {
        return refuse(format!(
            "it is a {kind}{via} that {who}: refusing to write through what another user may have planted"
        ));
    }
    Ok(Target::InPlace)
}

/// "FIFO", "character device", … for what is not a regular file (None for one).
fn special_kind(m: &Metadata) -> Option<&'static str> {
    let t = m.file_type();
    Some(if t.is_file() {
        return None;
    } else if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_char_device() {
        "character device"
    } else {
        "special file"
    })
}

/// The first step of the way from `path` to the special file it names that a user other than
/// root and this process's could have chosen, said as a phrase; None when every step is
/// trusted. A step is trusted when its owner is root or us and its directory is one only root
/// or we can change (not group/world-writable, or sticky so others cannot replace our entry).
fn untrusted_step(path: &Path, named: &Metadata, resolved: &Metadata) -> Option<String> {
    let mut cur: PathBuf = path.to_path_buf();
    let mut meta = named.clone();
    // Bounded like the kernel's own limit on nested links.
    for _ in 0..40 {
        let is_link = meta.file_type().is_symlink();
        let device =
            resolved.file_type().is_block_device() || resolved.file_type().is_char_device();
        // Other users cannot make device nodes, so only the directory matters for one; a
        // FIFO or a symlink anyone can make, so its owner matters too.
        if (is_link || !device) && !ours(meta.uid()) {
            return Some(format!(
                "{} is owned by uid {}",
                shown(&cur, path),
                meta.uid()
            ));
        }
        let dir = parent(&cur);
        match std::fs::metadata(&dir) {
            Ok(d) if ours(d.uid()) && (d.mode() & 0o022 == 0 || d.mode() & 0o1000 != 0) => {}
            Ok(d) => {
                return Some(format!(
                    "lies in {}, which uid {} or others can change",
                    dir.display(),
                    d.uid()
                ))
            }
            Err(_) => return Some(format!("lies in {}, which cannot be read", dir.display())),
        }
        // A trusted link into /proc names a descriptor this process holds, whoever opened it.
        if !is_link || cur.starts_with("/proc") {
            return None;
        }
        let Ok(link) = std::fs::read_link(&cur) else {
            return Some(format!("{} cannot be read", cur.display()));
        };
        let next = if link.is_absolute() {
            link
        } else {
            dir.join(link)
        };
        match std::fs::symlink_metadata(&next) {
            Ok(m) => {
                meta = m;
                cur = next;
            }
            // The kernel's own links (/proc/self/fd/1 → "pipe:[123]") name no path: the
            // trusted link we stand on leads there.
            Err(_) => return None,
        }
    }
    Some("goes through too many symbolic links".into())
}

/// The descriptor of ours a link on the way from `path` names (`/dev/stdout` →
/// `/proc/self/fd/1`), if any.
fn own_descriptor(path: &Path) -> Option<i32> {
    let pid = std::process::id().to_string();
    let mut cur = path.to_path_buf();
    for _ in 0..40 {
        let link = std::fs::read_link(&cur).ok()?;
        let next = if link.is_absolute() {
            link
        } else {
            parent(&cur).join(link)
        };
        let mut parts = next.components().map(|c| c.as_os_str().to_string_lossy());
        let head: Vec<_> = parts.by_ref().take(4).collect();
        if head.len() == 4
            && head[1] == "proc"
            && (head[2] == "self" || head[2] == pid.as_str())
            && head[3] == "fd"
        {
            return parts.next()?.parse().ok();
        }
        cur = next;
    }
    None
}

fn ours(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::geteuid().as_raw()
}

fn parent(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn shown(cur: &Path, named: &Path) -> String {
    if cur == named {
        "the name".into()
    } else {
        cur.display().to_string()
    }
}
