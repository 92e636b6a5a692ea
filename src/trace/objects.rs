//! From a sampled instruction address to the shared object and function it lies in: the
//! process's executable file mappings (`/proc/PID/maps`) and the object's ELF symbols
//! (`.symtab` where it was not stripped, else the exported `.dynsym`; a stripped object
//! with neither is named by its file alone).

use object::{Object, ObjectSegment, ObjectSymbol};
use std::path::Path;

/// One executable, file-backed mapping of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub lo: u64,
    pub hi: u64,
    /// Offset in the file of `lo`.
    pub offset: u64,
    pub path: String,
}

/// A process's executable file mappings, sorted by address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Maps(Vec<Mapping>);

impl Maps {
    /// The executable mappings of `/proc/PID/maps` text. Anonymous code (a JIT), the vdso
    /// and the like are left out: no file names them. A file deleted since it was mapped
    /// (a plugin rebuilt under a running host) keeps its old path.
    pub fn parse(text: &str) -> Maps {
        let mut v: Vec<Mapping> = text
            .lines()
            .filter_map(|line| {
                let mut f = line.splitn(6, ' ');
                let range = f.next()?;
                let perms = f.next()?;
                let offset = u64::from_str_radix(f.next()?, 16).ok()?;
                let _dev = f.next()?;
                let _inode = f.next()?;
                let path = f.next()?.trim_start();
                if perms.as_bytes().get(2) != Some(&b'x') || !path.starts_with('/') {
                    return None;
                }
                let path = path.strip_suffix(" (deleted)").unwrap_or(path);
                let (lo, hi) = range.split_once('-')?;
                Some(Mapping {
                    lo: u64::from_str_radix(lo, 16).ok()?,
                    hi: u64::from_str_radix(hi, 16).ok()?,
                    offset,
                    path: path.to_string(),
                })
            })
            .filter(|m| m.lo < m.hi)
            .collect();
        v.sort_by_key(|m| m.lo);
        Maps(v)
    }

    /// `/proc/PID/maps` read now; empty when the process is gone.
    pub fn of(pid: i32) -> Maps {
        std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .map(|t| Maps::parse(&t))
            .unwrap_or_default()
    }

    /// The mapping holding `ip` and the file offset `ip` is at.
    pub fn find(&self, ip: u64) -> Option<(&Mapping, u64)> {
        let i = self.0.partition_point(|m| m.lo <= ip);
        let m = self.0.get(i.checked_sub(1)?)?;
        (ip < m.hi).then(|| (m, ip - m.lo + m.offset))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// An object's functions by address, and its loadable segments to turn a file offset into
/// the address its symbols use.
#[derive(Debug, Clone, Default)]
pub struct Symbols {
    /// (address, size, name), sorted by address; size 0 when the table does not say.
    funcs: Vec<(u64, u64, String)>,
    /// (file offset, file size, virtual address) of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
    /// Which table named them: "symtab", "dynsym" or "" (none: stripped of both).
    pub table: &'static str,
}

/// Larger objects are named by file only: reading a DAW's 200 MB library at the end of a
/// watch would cost more than it tells.
const MAX_OBJECT_BYTES: u64 = 256 << 20;

impl Symbols {
    /// The symbols of the ELF file at `path`; None when it cannot be read or is no ELF.
    /// Only the parts the ELF parser asks for are read (its headers and symbol tables):
    /// a host's 80 MB binary with debug information costs the watcher a few hundred kB,
    /// and a file truncated meanwhile is a short read, not a fault.
    pub fn of(path: &Path) -> Option<Symbols> {
        let file = std::fs::File::open(path).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > MAX_OBJECT_BYTES {
            return None;
        }
        let cache = object::ReadCache::new(file);
        let parsed = object::File::parse(&cache).ok()?;
        Symbols::of_file(&parsed)
    }

    fn of_file<'d, R: object::ReadRef<'d>>(file: &object::File<'d, R>) -> Option<Symbols> {
        let segments = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        let take = |it: object::SymbolIterator<'d, '_, R>| -> Vec<(u64, u64, String)> {
            it.filter(|s| s.kind() == object::SymbolKind::Text && s.is_definition())
                .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_string())))
                .filter(|(_, _, n)| !n.is_empty())
                .collect()
        };
        let (mut funcs, table) = match take(file.symbols()) {
            v if !v.is_empty() => (v, "symtab"),
            _ => match take(file.dynamic_symbols()) {
                v if !v.is_empty() => (v, "dynsym"),
                v => (v, ""),
            },
        };
        funcs.sort_by_key(|f| f.0);
        funcs.dedup_by_key(|f| f.0);
        Some(Symbols {
            funcs,
            segments,
            table,
        })
    }

    /// The function at file offset `off`: the one whose range holds it, or, where the table
    /// gives no size, the nearest before it.
    pub fn at_offset(&self, off: u64) -> Option<&str> {
        let &(foff, _, vaddr) = self
            .segments
            .iter()
            .find(|&&(o, size, _)| off >= o && off < o.saturating_add(size))?;
        let addr = off - foff + vaddr;
        let i = self.funcs.partition_point(|f| f.0 <= addr);
        let (start, size, name) = self.funcs.get(i.checked_sub(1)?)?;
        (*size == 0 || addr < start.saturating_add(*size)).then_some(name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0a00000-55d0c0a02000 r--p 00000000 fe:01 123 /usr/bin/jalv
55d0c0a02000-55d0c0a08000 r-xp 00002000 fe:01 123 /usr/bin/jalv
7f0000000000-7f0000001000 r-xp 00000000 00:00 0 
7f1000000000-7f1000004000 r-xp 00001000 fe:01 77 /tmp/x y/spin.lv2/spin.so (deleted)
7f2000000000-7f2000010000 r-xp 00010000 fe:01 78 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
";

    #[test]
    fn executable_file_mappings_are_kept_and_an_address_finds_its_file_offset() {
        let m = Maps::parse(MAPS);
        assert_eq!(m.0.len(), 3, "{m:?}");
        let (map, off) = m.find(0x55d0c0a02010).unwrap();
        assert_eq!((map.path.as_str(), off), ("/usr/bin/jalv", 0x2010));
        // A path with a space, deleted since: its name without the mark.
        let (map, off) = m.find(0x7f1000000100).unwrap();
        assert_eq!(
            (map.path.as_str(), off),
            ("/tmp/x y/spin.lv2/spin.so", 0x1100)
        );
        assert!(m.find(0x7f0000000010).is_none(), "anonymous code");
        assert!(m.find(0x55d0c0a08000).is_none(), "one past the end");
        assert!(m.find(0x10).is_none());
        assert!(Maps::parse("garbage\n\n-\n1-2 r-x").is_empty());
    }

    /// A plugin's file is another party's: the watcher reads the ELF of whatever code its
    /// samples fell in. Truncated at every 61st byte and with bytes overwritten at random
    /// places (headers, section and symbol tables alike), a real ELF gives symbols or none,
    /// never a panic, and every lookup in what it gave answers.
    #[test]
    fn a_truncated_or_corrupted_elf_gives_symbols_or_none_never_a_panic() {
        let real = std::fs::read("/bin/true").expect("coreutils' /bin/true");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hostile.so");
        let check = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            if let Some(s) = Symbols::of(&path) {
                for off in (0..bytes.len() as u64 + 64).step_by(97) {
                    let _ = s.at_offset(off);
                }
                let _ = s.at_offset(u64::MAX);
            }
        };
        assert!(Symbols::of(Path::new("/bin/true")).is_some());
        for len in (0..real.len()).step_by(61) {
            check(&real[..len]);
        }
        // A small linear congruential generator: the same mutants on every run.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            x >> 33
        };
        for _ in 0..300 {
            let mut b = real.clone();
            for _ in 0..1 + next() % 16 {
                // Half of the writes land in the first 4 KiB, where the headers are.
                let span = if next() % 2 == 0 {
                    4096.min(b.len())
                } else {
                    b.len()
                };
                let at = (next() as usize) % span;
                b[at] = match next() % 3 {
                    0 => 0xff,
                    1 => 0,
                    _ => next() as u8,
                };
            }
            check(&b);
        }
    }
}
