//! Where a watched thread spends its time: one task-clock sampling event per thread
//! (`perf_event_open`), its ring read by the watcher (methods.md "Inside the late client").
//!
//! A software clock, not a hardware counter: a guest often has no PMU, and the task clock
//! ticks only while the thread runs, so every sample is time the thread itself spent, and
//! the samples in a cycle times the period are that cycle's CPU time. The kernel writes each
//! sample into a ring the watcher maps; nothing runs in the sampled thread but the kernel's
//! own interrupt, so the watched session's code is not touched. Timestamps are taken on
//! CLOCK_MONOTONIC, the trace's and the watch's clock, so a sample falls into the same
//! late run the trace found.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use perf_event_open_sys::bindings as perf;

/// One sample: when, which thread, where it was (`user` false: in the kernel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub time_ns: u64,
    pub tid: i32,
    pub ip: u64,
    pub user: bool,
}

/// The ring's data pages per thread: 64 KiB hold 2 700 samples, 0.7 s of a thread that
/// never sleeps at 250 µs (the default is 1 ms), and the watcher drains it every 0.1 s.
const DATA_PAGES: usize = 16;

/// A sampling event on one thread and its mapped ring.
#[derive(Debug)]
pub struct ThreadSampler {
    tid: i32,
    _fd: OwnedFd,
    base: *mut u8,
    len: usize,
    data_offset: usize,
    data_size: usize,
}

// SAFETY: the mapping is owned by this value alone and only read and written through
// `&mut self` (drain) or freed in Drop; the kernel's side is synchronised by data_head
// (acquire) and data_tail (release), as perf_event_open(2) prescribes.
unsafe impl Send for ThreadSampler {}

impl ThreadSampler {
    /// Sample thread `tid` every `period_ns` of its own CPU time. Needs CAP_PERFMON (root)
    /// or a `perf_event_paranoid` that allows it for the thread's owner.
    pub fn open(tid: i32, period_ns: u64) -> io::Result<ThreadSampler> {
        // SAFETY: perf_event_attr is plain data; all zeros is its documented default.
        let mut attr: perf::perf_event_attr = unsafe { std::mem::zeroed() };
        attr.type_ = perf::PERF_TYPE_SOFTWARE;
        attr.size = std::mem::size_of::<perf::perf_event_attr>() as u32;
        attr.config = perf::PERF_COUNT_SW_TASK_CLOCK as u64;
        attr.__bindgen_anon_1.sample_period = period_ns.max(10_000);
        attr.sample_type =
            (perf::PERF_SAMPLE_IP | perf::PERF_SAMPLE_TID | perf::PERF_SAMPLE_TIME) as u64;
        attr.set_exclude_hv(1);
        attr.set_use_clockid(1);
        attr.clockid = libc::CLOCK_MONOTONIC;
        // SAFETY: attr is a valid, fully initialised perf_event_attr that outlives the call;
        // the kernel only reads it (and may write its size back on E2BIG).
        let fd = unsafe {
            perf_event_open_sys::perf_event_open(
                &mut attr,
                tid,
                -1,
                -1,
                perf::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just returned by the kernel and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sysconf has no memory arguments.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = page * (1 + DATA_PAGES);
        // SAFETY: a fresh shared mapping of the event's ring, as perf_event_open(2) describes;
        // the result is checked before use.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let head = base as *const perf::perf_event_mmap_page;
        // SAFETY: the first page is the kernel's perf_event_mmap_page, mapped above.
        let (off, size) = unsafe { ((*head).data_offset, (*head).data_size) };
        // Kernels before 4.1 leave these 0: the data then starts at the second page.
        let (data_offset, data_size) = if size == 0 {
            (page, page * DATA_PAGES)
        } else {
            (off as usize, size as usize)
        };
        Ok(ThreadSampler {
            tid,
            _fd: fd,
            base: base as *mut u8,
            len,
            data_offset,
            data_size,
        })
    }

    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// Move every sample the kernel wrote since the last drain to `out`; returns the
    /// samples the kernel reported lost (the ring was full).
    pub fn drain(&mut self, out: &mut Vec<Sample>, bytes: &mut Vec<u8>) -> u64 {
        let meta = self.base as *mut perf::perf_event_mmap_page;
        // SAFETY: data_head and data_tail are naturally aligned u64 fields of the mapped
        // control page, shared with the kernel; atomics give the ordering the ABI asks for.
        let (head_a, tail_a) = unsafe {
            (
                AtomicU64::from_ptr(std::ptr::addr_of_mut!((*meta).data_head)),
                AtomicU64::from_ptr(std::ptr::addr_of_mut!((*meta).data_tail)),
            )
        };
        let head = head_a.load(Ordering::Acquire);
        let tail = tail_a.load(Ordering::Relaxed);
        let avail = (head.wrapping_sub(tail) as usize).min(self.data_size);
        bytes.clear();
        let start = (tail as usize) % self.data_size;
        let first = avail.min(self.data_size - start);
        // SAFETY: both ranges lie inside the data area of the mapping (start < data_size,
        // first ≤ data_size − start, avail − first ≤ start); the kernel does not write
        // between tail and head until data_tail moves past them.
        unsafe {
            let data = self.base.add(self.data_offset);
            bytes.extend_from_slice(std::slice::from_raw_parts(data.add(start), first));
            bytes.extend_from_slice(std::slice::from_raw_parts(data, avail - first));
        }
        tail_a.store(head, Ordering::Release);
        parse(bytes, out)
    }
}

impl Drop for ThreadSampler {
    fn drop(&mut self) {
        // SAFETY: base/len are the mapping made in open and not used after this.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

/// A record's CPU mode (perf_event_header.misc & 7): 2 is user space.
const MISC_USER: u16 = 2;

/// The ring's records (`perf_event_header` then the body) as samples; returns the samples
/// the kernel counted lost. A truncated or malformed record ends the parse.
pub fn parse(bytes: &[u8], out: &mut Vec<Sample>) -> u64 {
    let u16_at = |i: usize| {
        bytes
            .get(i..i + 2)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
    };
    let u32_at = |i: usize| {
        bytes
            .get(i..i + 4)
            .map(|b| u32::from_ne_bytes(b.try_into().unwrap_or_default()))
    };
    let u64_at = |i: usize| {
        bytes
            .get(i..i + 8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or_default()))
    };
    let mut lost = 0u64;
    let mut i = 0;
    while let (Some(kind), Some(misc), Some(size)) = (u32_at(i), u16_at(i + 4), u16_at(i + 6)) {
        let size = size as usize;
        if size < 8 || i + size > bytes.len() {
            break;
        }
        let body = i + 8;
        if kind == perf::PERF_RECORD_SAMPLE && size >= 32 {
            if let (Some(ip), Some(tid), Some(time)) =
                (u64_at(body), u32_at(body + 12), u64_at(body + 16))
            {
                out.push(Sample {
                    time_ns: time,
                    tid: tid as i32,
                    ip,
                    user: misc & 7 == MISC_USER,
                });
            }
        } else if kind == perf::PERF_RECORD_LOST && size >= 24 {
            lost = lost.saturating_add(u64_at(body + 8).unwrap_or(0));
        }
        i += size;
    }
    lost
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u32, misc: u16, body: &[u64]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(&misc.to_ne_bytes());
        v.extend_from_slice(&((8 + 8 * body.len()) as u16).to_ne_bytes());
        for b in body {
            v.extend_from_slice(&b.to_ne_bytes());
        }
        v
    }

    #[test]
    fn samples_and_lost_records_are_read_and_a_torn_one_ends_the_parse() {
        let pid_tid = |pid: u32, tid: u32| (pid as u64) | ((tid as u64) << 32);
        let mut bytes = record(perf::PERF_RECORD_SAMPLE, 2, &[0x4000, pid_tid(7, 9), 1000]);
        bytes.extend(record(perf::PERF_RECORD_LOST, 0, &[1, 5]));
        bytes.extend(record(
            perf::PERF_RECORD_SAMPLE,
            1,
            &[0xffff_8000, pid_tid(7, 8), 2000],
        ));
        // Another kind of record is stepped over.
        bytes.extend(record(3, 0, &[0, 0, 0]));
        let torn = record(perf::PERF_RECORD_SAMPLE, 2, &[1, 2, 3]);
        bytes.extend_from_slice(&torn[..20]);
        let mut out = Vec::new();
        assert_eq!(parse(&bytes, &mut out), 5);
        assert_eq!(
            out,
            vec![
                Sample {
                    time_ns: 1000,
                    tid: 9,
                    ip: 0x4000,
                    user: true
                },
                Sample {
                    time_ns: 2000,
                    tid: 8,
                    ip: 0xffff_8000,
                    user: false
                },
            ]
        );
        // A zero-sized header cannot loop forever.
        let mut zero = vec![0u8; 16];
        zero[0] = 9;
        assert_eq!(parse(&zero, &mut out), 0);
    }
}
