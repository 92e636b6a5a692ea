//! The built-in stressors, run as `xrunlab __stressor KIND` in a child process so that a
//! minimal system without stress-ng (a Raspberry Pi image) can still be measured under load.
//!
//! Each loop polls the stop request (SIGTERM/SIGINT set it through `rt::interrupt`) at
//! least every few milliseconds, then reports `xrunlab-stressor: KIND ops=N seconds=S` (the
//! CLI prints it) for the session's record. Files live in the session's directory, which
//! the parent removes.

use super::spec::Preset;
use crate::error::{Error, Result};
use crate::rt::clock::{monotonic_ns, sleep_until_ns};
use crate::rt::interrupt::requested;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const CHUNK: usize = 1 << 20;

/// Options of one built-in stressor process.
#[derive(Debug, Clone)]
pub struct StressorOpts {
    pub kind: Preset,
    pub dir: Option<PathBuf>,
    pub size: u64,
}

/// What one stressor did, for the session's record: its line is
/// `xrunlab-stressor: KIND ops=N seconds=S` on the child's stdout.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran {
    pub kind: Preset,
    pub ops: u64,
    pub secs: f64,
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "xrunlab-stressor: {} ops={} seconds={:.3}",
            self.kind, self.ops, self.secs
        )
    }
}

/// Run until asked to stop. `note` gets, when it happens, a line the session records as the
/// stressor's skip (`xrunlab-stressor-skip: …`, the child's stdout too).
pub fn run(o: &StressorOpts, note: &mut dyn FnMut(String)) -> Result<Ran> {
    let t0 = monotonic_ns();
    let ops = match o.kind {
        Preset::Cpu => cpu(),
        Preset::Io => io_sync(),
        Preset::Vm => vm()?,
        Preset::Udp => udp()?,
        Preset::Netdev => netdev()?,
        Preset::Cache => cache(),
        Preset::Timer => timer(),
        Preset::DiskWrite => disk_write(dir(o)?, o.size)?,
        Preset::DiskCopy => disk_copy(dir(o)?, o.size)?,
        Preset::DiskRead => disk_read(dir(o)?, o.size, note)?,
        Preset::Proc => proc_sweeps(10_000_000, false),
        Preset::Top => proc_sweeps(100_000_000, true),
        Preset::Paper => {
            return Err(Error::usage(
                "paper is a set of stressors, not one; the session expands it",
            ))
        }
    };
    Ok(Ran {
        kind: o.kind,
        ops,
        secs: (monotonic_ns() - t0) as f64 / 1e9,
    })
}

fn dir(o: &StressorOpts) -> Result<&Path> {
    o.dir
        .as_deref()
        .ok_or_else(|| Error::usage(format!("__stressor {} needs --dir", o.kind)))
}

fn cpu() -> u64 {
    let mut ops = 0u64;
    let mut x = 1.0f64;
    let mut n = 0x9e37_79b9_7f4a_7c15u64;
    while !requested() {
        // Mixed float and integer work, ~1 ms per op, so the stop request is seen promptly.
        for _ in 0..200_000 {
            x = (x * 1.000_000_1 + 0.5).sqrt();
            n ^= n << 13;
            n ^= n >> 7;
            n ^= n << 17;
        }
        std::hint::black_box((x, n));
        ops += 1;
    }
    ops
}

fn io_sync() -> u64 {
    let mut ops = 0;
    while !requested() {
        // SAFETY: sync has no preconditions.
        unsafe { libc::sync() };
        ops += 1;
    }
    ops
}

/// Touch every page of an anonymous mapping, then give the pages back, so every pass
/// page-faults and zeroes memory again (the kernel's memory-management paths, not just RAM).
fn vm() -> Result<u64> {
    const BYTES: usize = 128 << 20;
    // SAFETY: anonymous private mapping; checked for MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Error::io("mmap", std::io::Error::last_os_error()));
    }
    let base = p as *mut u8;
    let mut ops = 0;
    'outer: while !requested() {
        for off in (0..BYTES).step_by(4096) {
            // SAFETY: off < BYTES, inside the mapping.
            unsafe { base.add(off).write_volatile(ops as u8) };
            if off % (16 << 20) == 0 && requested() {
                break 'outer;
            }
        }
        // SAFETY: the range is our mapping.
        unsafe { libc::madvise(p, BYTES, libc::MADV_DONTNEED) };
        ops += 1;
    }
    // SAFETY: unmapping what we mapped.
    unsafe { libc::munmap(p, BYTES) };
    Ok(ops)
}

/// Datagrams through the loopback interface only: both ends are bound to 127.0.0.1.
fn udp() -> Result<u64> {
    use std::net::UdpSocket;
    let io = |e| Error::io("udp loopback socket", e);
    let rx = UdpSocket::bind("127.0.0.1:0").map_err(io)?;
    rx.set_read_timeout(Some(std::time::Duration::from_millis(50)))
        .map_err(io)?;
    let tx = UdpSocket::bind("127.0.0.1:0").map_err(io)?;
    tx.connect(rx.local_addr().map_err(io)?).map_err(io)?;
    let msg = [0x5au8; 1024];
    let mut buf = [0u8; 2048];
    let mut ops = 0;
    while !requested() {
        for _ in 0..16 {
            let _ = tx.send(&msg);
        }
        for _ in 0..16 {
            if rx.recv(&mut buf).is_ok() {
                ops += 1;
            }
        }
    }
    Ok(ops)
}

/// Query every network interface's flags, MTU and index through ioctls, as stress-ng's
/// netdev stressor exercises the device layer.
fn netdev() -> Result<u64> {
    // SAFETY: plain socket call.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if fd < 0 {
        return Err(Error::io("netdev socket", std::io::Error::last_os_error()));
    }
    let mut names: Vec<[libc::c_char; libc::IFNAMSIZ]> = Vec::new();
    // SAFETY: if_nameindex returns an array terminated by a zero entry, freed below.
    unsafe {
        let list = libc::if_nameindex();
        if !list.is_null() {
            let mut i = 0;
            while (*list.add(i)).if_index != 0 {
                let mut n = [0 as libc::c_char; libc::IFNAMSIZ];
                let src = std::ffi::CStr::from_ptr((*list.add(i)).if_name).to_bytes();
                for (d, s) in n.iter_mut().zip(src.iter().take(libc::IFNAMSIZ - 1)) {
                    *d = *s as libc::c_char;
                }
                names.push(n);
                i += 1;
            }
            libc::if_freenameindex(list);
        }
    }
    let mut ops = 0;
    while !requested() {
        for n in &names {
            for req in [
                libc::SIOCGIFFLAGS,
                libc::SIOCGIFMTU,
                libc::SIOCGIFINDEX,
                libc::SIOCGIFHWADDR,
            ] {
                // SAFETY: ifreq is plain data; the name is NUL-terminated.
                unsafe {
                    let mut ifr: libc::ifreq = std::mem::zeroed();
                    ifr.ifr_name = *n;
                    libc::ioctl(fd, req as _, &mut ifr);
                }
                ops += 1;
            }
        }
        if names.is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    // SAFETY: closing our socket.
    unsafe { libc::close(fd) };
    Ok(ops)
}

/// Strided walk over a buffer larger than the last-level caches of the boards this
/// targets, so most accesses miss and evict the measured threads' data.
fn cache() -> u64 {
    const BYTES: usize = 32 << 20;
    let mut buf = vec![0u8; BYTES];
    let mut idx = 0usize;
    let mut ops = 0;
    while !requested() {
        for _ in 0..1_000_000 {
            idx = (idx + 4099 * 64) % BYTES;
            buf[idx] = buf[idx].wrapping_add(1);
        }
        std::hint::black_box(&buf);
        ops += 1;
    }
    ops
}

/// 20 000 timer wake-ups per second: load on the timer and scheduler paths.
fn timer() -> u64 {
    let mut next = monotonic_ns();
    let mut ops = 0;
    while !requested() {
        next += 50_000;
        let now = monotonic_ns();
        if next < now {
            next = now;
        }
        sleep_until_ns(next);
        ops += 1;
    }
    ops
}

/// Data that neither compresses nor deduplicates, so the disk really sees the bytes.
fn noise_chunk() -> Vec<u8> {
    let mut v = vec![0u8; CHUNK];
    let mut s = 0x2545_f491_4f6c_dd1du64;
    for b in v.chunks_mut(8) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        b.copy_from_slice(&s.to_le_bytes()[..b.len()]);
    }
    v
}

fn file_err(p: &Path, e: std::io::Error) -> Error {
    Error::io(format!("stressor file {}", p.display()), e)
}

/// Write `size` bytes to `path` (then fsync); stops early on a stop request. Returns MiB written.
fn write_file(path: &Path, size: u64, chunk: &[u8]) -> Result<u64> {
    let mut f = File::create(path).map_err(|e| file_err(path, e))?;
    let mut written = 0u64;
    while written < size && !requested() {
        let n = chunk.len().min((size - written) as usize);
        f.write_all(&chunk[..n]).map_err(|e| file_err(path, e))?;
        written += n as u64;
    }
    f.sync_all().map_err(|e| file_err(path, e))?;
    Ok(written >> 20)
}

/// Senoner's disk write: write a large file, again and again. Ops are MiB written.
fn disk_write(dir: &Path, size: u64) -> Result<u64> {
    let chunk = noise_chunk();
    let path = dir.join("disk-write.dat");
    let mut ops = 0;
    while !requested() {
        ops += write_file(&path, size, &chunk)?;
        let _ = std::fs::remove_file(&path);
    }
    Ok(ops)
}

/// Senoner's disk copy: copy a large file to another. Ops are MiB copied.
fn disk_copy(dir: &Path, size: u64) -> Result<u64> {
    let chunk = noise_chunk();
    let src = dir.join("disk-copy.src");
    let dst = dir.join("disk-copy.dst");
    write_file(&src, size, &chunk)?;
    let mut buf = vec![0u8; CHUNK];
    let mut ops = 0;
    while !requested() {
        let mut r = File::open(&src).map_err(|e| file_err(&src, e))?;
        let mut w = File::create(&dst).map_err(|e| file_err(&dst, e))?;
        while !requested() {
            let n = r.read(&mut buf).map_err(|e| file_err(&src, e))?;
            if n == 0 {
                break;
            }
            w.write_all(&buf[..n]).map_err(|e| file_err(&dst, e))?;
            ops += 1;
        }
        w.sync_all().map_err(|e| file_err(&dst, e))?;
        drop(w);
        let _ = std::fs::remove_file(&dst);
    }
    Ok(ops)
}

/// Senoner's disk read: read a large file back, with its pages evicted from the page cache
/// before each pass (POSIX_FADV_DONTNEED on the clean, fsynced file) so the reads reach
/// the device. Per-file eviction needs no privilege and leaves the rest of the system's
/// cache alone, unlike writing /proc/sys/vm/drop_caches. Ops are MiB read.
fn disk_read(dir: &Path, size: u64, note: &mut dyn FnMut(String)) -> Result<u64> {
    let chunk = noise_chunk();
    let path = dir.join("disk-read.dat");
    write_file(&path, size, &chunk)?;
    let f = File::open(&path).map_err(|e| file_err(&path, e))?;
    let mut buf = vec![0u8; CHUNK];
    let mut ops = 0;
    let mut warned = false;
    while !requested() {
        use std::os::fd::AsRawFd;
        // SAFETY: fd is open; the advice only affects the page cache.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 && !warned {
            note(format!(
                "xrunlab-stressor-skip: page cache not dropped (posix_fadvise: {}); reads may be served from memory",
                std::io::Error::from_raw_os_error(rc)
            ));
            warned = true;
        }
        let mut off = 0u64;
        while off < size && !requested() {
            let n = f.read_at(&mut buf, off).map_err(|e| file_err(&path, e))?;
            if n == 0 {
                break;
            }
            off += n as u64;
            ops += 1;
        }
    }
    Ok(ops)
}

/// Read /proc/PID/{stat,status,cmdline} of every process each `period_ns`, as `top -d`
/// does (plus the system-wide files with `top_files`). Ops are sweeps.
fn proc_sweeps(period_ns: u64, top_files: bool) -> u64 {
    let mut buf = Vec::with_capacity(64 << 10);
    let read = |p: &str, buf: &mut Vec<u8>| {
        buf.clear();
        if let Ok(mut f) = File::open(p) {
            let _ = f.read_to_end(buf);
        }
    };
    let mut ops = 0;
    while !requested() {
        if let Ok(rd) = std::fs::read_dir("/proc") {
            for e in rd.flatten() {
                let name = e.file_name();
                let Some(pid) = name
                    .to_str()
                    .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
                else {
                    continue;
                };
                for f in ["stat", "status", "cmdline"] {
                    read(&format!("/proc/{pid}/{f}"), &mut buf);
                }
            }
        }
        if top_files {
            for f in [
                "/proc/stat",
                "/proc/meminfo",
                "/proc/loadavg",
                "/proc/uptime",
            ] {
                read(f, &mut buf);
            }
        }
        ops += 1;
        // top sleeps its delay after each refresh, so a slow sweep stretches the period
        // rather than being followed by catch-up sweeps.
        sleep_until_ns(monotonic_ns() + period_ns);
    }
    ops
}
