//! The binary reader: per-CPU `trace_pipe_raw` pages decoded with the events' `format`
//! files. The kernel copies ring-buffer pages instead of printing text, so reading costs the
//! measured CPUs far less than `trace_pipe` (scripts/bench-forensics), and times are whole ns.
//!
//! A page is `u64 timestamp`, `u64 commit` (data length; bit 31: events were lost before this
//! page, bit 30: their count is stored after the data), then events, each a `u32` header
//! (type_len: 5 bits, time delta: 27 bits): type 29 padding, 30 a time extension, 31 an
//! absolute time, 0 data whose length follows, 1..28 data of type_len × 4 bytes.

use super::parse::{Event, Kind, Trace};
use std::collections::HashMap;
use std::path::Path;

const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;
const COMMIT_MASK: u64 = 0xf_ffff;

/// Field offsets of one event, from its format file.
#[derive(Debug, Clone, Default)]
pub struct Format {
    pub id: u16,
    pub name: String,
    fields: HashMap<String, (usize, usize)>,
}

impl Format {
    pub fn parse(text: &str) -> Option<Format> {
        let mut f = Format::default();
        for line in text.lines() {
            let l = line.trim();
            if let Some(n) = l.strip_prefix("name:") {
                f.name = n.trim().to_string();
            } else if let Some(id) = l.strip_prefix("ID:") {
                f.id = id.trim().parse().ok()?;
            } else if let Some(rest) = l.strip_prefix("field:") {
                let mut parts = rest.split(';');
                let decl = parts.next()?.trim();
                let name = decl.rsplit(' ').next()?.split('[').next()?.to_string();
                let mut off = None;
                let mut size = None;
                for p in parts {
                    let p = p.trim();
                    if let Some(v) = p.strip_prefix("offset:") {
                        off = v.parse().ok();
                    } else if let Some(v) = p.strip_prefix("size:") {
                        size = v.parse().ok();
                    }
                }
                f.fields.insert(name, (off?, size?));
            }
        }
        (f.id != 0).then_some(f)
    }

    fn int(&self, data: &[u8], field: &str) -> Option<i64> {
        let &(o, s) = self.fields.get(field)?;
        let b = data.get(o..o + s)?;
        Some(match s {
            1 => b[0] as i64,
            2 => i16::from_ne_bytes([b[0], b[1]]) as i64,
            4 => i32::from_ne_bytes(b.try_into().ok()?) as i64,
            8 => i64::from_ne_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }

    fn text<'a>(&self, data: &'a [u8], field: &str) -> Option<&'a str> {
        let &(o, s) = self.fields.get(field)?;
        let b = if s == 4 && !self.name.is_empty() && self.is_data_loc(field) {
            // __data_loc: offset in the low 16 bits, length in the high 16.
            let loc = u32::from_ne_bytes(data.get(o..o + 4)?.try_into().ok()?);
            let (off, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
            data.get(off..off + len)?
        } else {
            data.get(o..o + s)?
        };
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        std::str::from_utf8(&b[..end]).ok()
    }

    fn is_data_loc(&self, field: &str) -> bool {
        field == "name" && self.name == "irq_handler_entry"
    }
}

/// The formats of the traced events, by id.
#[derive(Debug, Clone, Default)]
pub struct Formats {
    by_id: HashMap<u16, Format>,
}

impl Formats {
    pub fn load(instance: &Path, events: &[(&str, &str)]) -> Formats {
        let mut by_id = HashMap::new();
        for (g, e) in events {
            let p = instance.join("events").join(g).join(e).join("format");
            if let Some(f) = std::fs::read_to_string(p)
                .ok()
                .and_then(|t| Format::parse(&t))
            {
                by_id.insert(f.id, f);
            }
        }
        Formats { by_id }
    }

    pub fn insert(&mut self, f: Format) {
        self.by_id.insert(f.id, f);
    }
}

fn u32_at(p: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(p.get(o..o + 4)?.try_into().ok()?))
}
fn u64_at(p: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(p.get(o..o + 8)?.try_into().ok()?))
}

/// Bytes of `page` that hold something: the header, the events up to the commit, and the
/// missed-events count stored after them (the rest of a page read from the kernel is zero).
pub fn page_used(page: &[u8]) -> usize {
    let Some(commit) = u64_at(page, 8) else {
        return page.len();
    };
    let len = 16 + (commit & COMMIT_MASK) as usize;
    let stored = if commit & MISSED_STORED != 0 { 8 } else { 0 };
    (len + stored).min(page.len())
}

/// Decode one page of `cpu` into `trace`; hrtimer functions are kept as addresses
/// (`0x…`) until [`resolve_functions`].
pub fn decode_page(page: &[u8], cpu: u16, fm: &Formats, trace: &mut Trace) {
    let (Some(mut ts), Some(commit)) = (u64_at(page, 0), u64_at(page, 8)) else {
        return;
    };
    let len = (commit & COMMIT_MASK) as usize;
    let data_end = (16 + len).min(page.len());
    let mut lost = if commit & MISSED_EVENTS != 0 {
        Some(if commit & MISSED_STORED != 0 {
            u64_at(page, 16 + len).unwrap_or(1).max(1)
        } else {
            1
        })
    } else {
        None
    };
    let mut off = 16;
    while off + 4 <= data_end {
        let Some(h) = u32_at(page, off) else { break };
        off += 4;
        let (type_len, delta) = (h & 31, (h >> 5) as u64);
        let payload = match type_len {
            29 => {
                if delta == 0 {
                    break;
                }
                ts += delta;
                let Some(n) = u32_at(page, off) else { break };
                off += n as usize;
                continue;
            }
            30 => {
                let Some(x) = u32_at(page, off) else { break };
                off += 4;
                ts += ((x as u64) << 27) + delta;
                continue;
            }
            31 => {
                let Some(x) = u32_at(page, off) else { break };
                off += 4;
                ts = (ts & !((1u64 << 59) - 1)) | (((x as u64) << 27) | delta);
                continue;
            }
            0 => {
                let Some(n) = u32_at(page, off) else { break };
                let n = n as usize;
                let p = page.get(off + 4..off + n.max(4));
                off += n.max(4);
                ts += delta;
                p
            }
            k => {
                let n = k as usize * 4;
                let p = page.get(off..off + n);
                off += n;
                ts += delta;
                p
            }
        };
        let Some(data) = payload else { break };
        if let Some(n) = lost.take() {
            trace.push_event(Event {
                ts_ns: ts,
                cpu,
                pid: -1,
                kind: Kind::Lost { count: n },
            });
            *trace.lost.entry(cpu).or_default() += n;
        }
        let Some(id) = data.get(0..2).map(|b| u16::from_ne_bytes([b[0], b[1]])) else {
            continue;
        };
        let Some(f) = fm.by_id.get(&id) else { continue };
        if let Some(kind) = decode(f, data, trace) {
            trace.push_event(Event {
                ts_ns: ts,
                cpu,
                pid: f.int(data, "common_pid").map_or(-1, |p| p as i32),
                kind,
            });
        } else {
            trace.skipped_lines += 1;
        }
    }
}

fn decode(f: &Format, d: &[u8], t: &mut Trace) -> Option<Kind> {
    let i = |k: &str| f.int(d, k);
    Some(match f.name.as_str() {
        "sched_switch" => {
            let (prev_pid, next_pid) = (i("prev_pid")? as i32, i("next_pid")? as i32);
            if let Some(c) = f.text(d, "prev_comm") {
                t.note_comm(prev_pid, c);
            }
            if let Some(c) = f.text(d, "next_comm") {
                t.note_comm(next_pid, c);
            }
            Kind::Switch {
                prev_pid,
                prev_prio: i("prev_prio")? as i32,
                // TASK_RUNNING is 0; TASK_REPORT_MAX (preempted) shows as "R+" in text;
                // TASK_UNINTERRUPTIBLE (D) is 2.
                prev_runnable: i("prev_state")? & 0xff == 0,
                prev_blocked: i("prev_state")? & 0xff == 2,
                next_pid,
                next_prio: i("next_prio")? as i32,
            }
        }
        "sched_waking" => {
            let pid = i("pid")? as i32;
            if let Some(c) = f.text(d, "comm") {
                t.note_comm(pid, c);
            }
            Kind::Waking {
                pid,
                prio: i("prio")? as i32,
                target_cpu: i("target_cpu")? as u16,
            }
        }
        "sched_migrate_task" => Kind::Migrate {
            pid: i("pid")? as i32,
            dest_cpu: i("dest_cpu")? as u16,
        },
        "irq_handler_entry" => {
            let irq = i("irq")? as i32;
            if let std::collections::hash_map::Entry::Vacant(v) = t.irq_names.entry(irq) {
                if let Some(n) = f.text(d, "name") {
                    v.insert(n.to_string());
                }
            }
            Kind::IrqEntry { irq }
        }
        "irq_handler_exit" => Kind::IrqExit {
            irq: i("irq")? as i32,
        },
        "softirq_entry" => Kind::SoftirqEntry {
            vec: i("vec")? as u8,
        },
        "softirq_exit" => Kind::SoftirqExit {
            vec: i("vec")? as u8,
        },
        "hrtimer_expire_entry" => {
            let a = i("function")? as u64;
            Kind::TimerEntry {
                function: t.function_id(&format!("{a:#x}")),
            }
        }
        "hrtimer_expire_exit" => Kind::TimerExit,
        _ => return None,
    })
}

/// Replace the `0x…` addresses of hrtimer functions by their names from /proc/kallsyms.
pub fn resolve_functions(trace: &mut Trace) {
    if trace.functions.is_empty() {
        return;
    }
    let wanted: HashMap<u64, usize> = trace
        .functions
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            u64::from_str_radix(f.strip_prefix("0x")?, 16)
                .ok()
                .map(|a| (a, i))
        })
        .collect();
    let Ok(syms) = std::fs::read_to_string("/proc/kallsyms") else {
        return;
    };
    for l in syms.lines() {
        let mut p = l.split_whitespace();
        let (Some(a), Some(_), Some(name)) = (p.next(), p.next(), p.next()) else {
            continue;
        };
        if let Some(&i) = u64::from_str_radix(a, 16).ok().and_then(|a| wanted.get(&a)) {
            trace.functions[i] = name.to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH_FMT: &str = "name: sched_switch\nID: 372\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\
\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n";

    fn switch(prev: (&str, i32, i32, i64), next: (&str, i32, i32)) -> Vec<u8> {
        let mut d = vec![0u8; 64];
        d[0..2].copy_from_slice(&372u16.to_ne_bytes());
        d[8..8 + prev.0.len()].copy_from_slice(prev.0.as_bytes());
        d[24..28].copy_from_slice(&prev.1.to_ne_bytes());
        d[28..32].copy_from_slice(&prev.2.to_ne_bytes());
        d[32..40].copy_from_slice(&prev.3.to_ne_bytes());
        d[40..40 + next.0.len()].copy_from_slice(next.0.as_bytes());
        d[56..60].copy_from_slice(&next.1.to_ne_bytes());
        d[60..64].copy_from_slice(&next.2.to_ne_bytes());
        d
    }

    #[test]
    fn a_page_is_used_up_to_its_commit_and_stored_count() {
        let mut page = vec![0u8; 4096];
        page[8..16].copy_from_slice(&100u64.to_ne_bytes());
        assert_eq!(page_used(&page), 116);
        page[8..16].copy_from_slice(&(100 | MISSED_EVENTS | MISSED_STORED).to_ne_bytes());
        assert_eq!(page_used(&page), 124);
        page[8..16].copy_from_slice(&(100 | MISSED_EVENTS).to_ne_bytes());
        assert_eq!(page_used(&page), 116);
        assert_eq!(page_used(&page[..8]), 8);
    }

    #[test]
    fn decodes_a_page_with_deltas_an_extension_and_lost_events() {
        let mut fm = Formats::default();
        fm.insert(Format::parse(SWITCH_FMT).unwrap());
        let mut data = Vec::new();
        // Event 1: 64 bytes of data = type_len 16, delta 100 ns.
        data.extend_from_slice(&(16u32 | (100 << 5)).to_ne_bytes());
        data.extend(switch(("xrunlab-rt", 500, 19, 1), ("swapper/1", 0, 120)));
        // A time extension of 2^27 + 5 ns.
        data.extend_from_slice(&(30u32 | (5 << 5)).to_ne_bytes());
        data.extend_from_slice(&1u32.to_ne_bytes());
        // Event 2, long form (type_len 0, length word includes itself).
        data.extend_from_slice(&(7u32 << 5).to_ne_bytes());
        data.extend_from_slice(&68u32.to_ne_bytes());
        data.extend(switch(("swapper/1", 0, 120, 0), ("xrl-burst", 700, 9)));
        let mut page = Vec::new();
        page.extend_from_slice(&1_000_000u64.to_ne_bytes());
        page.extend_from_slice(&(data.len() as u64 | MISSED_EVENTS | MISSED_STORED).to_ne_bytes());
        page.extend(&data);
        page.extend_from_slice(&40u64.to_ne_bytes());
        page.resize(4096, 0);
        let mut t = Trace::default();
        decode_page(&page, 1, &fm, &mut t);
        assert_eq!(t.lost[&1], 40);
        let ev: Vec<(u64, Kind)> = t.events.iter().map(|e| (e.ts_ns, e.kind)).collect();
        assert_eq!(ev[0], (1_000_100, Kind::Lost { count: 40 }));
        assert_eq!(
            ev[1],
            (
                1_000_100,
                Kind::Switch {
                    prev_pid: 500,
                    prev_prio: 19,
                    prev_runnable: false,
                    prev_blocked: false,
                    next_pid: 0,
                    next_prio: 120
                }
            )
        );
        assert_eq!(ev[2].0, 1_000_100 + (1 << 27) + 5 + 7);
        assert!(matches!(
            ev[2].1,
            Kind::Switch {
                next_pid: 700,
                prev_runnable: true,
                ..
            }
        ));
        assert_eq!(t.comms[&700], "xrl-burst");
        assert_eq!(t.comms[&500], "xrunlab-rt");
    }

    /// The formats of the traced events as this kernel (6.18, x86_64) prints them.
    fn kernel_formats() -> Formats {
        let mut fm = Formats::default();
        for t in [
            include_str!("../../tests/fixtures/trace/raw/sched_switch.format"),
            include_str!("../../tests/fixtures/trace/raw/sched_waking.format"),
            include_str!("../../tests/fixtures/trace/raw/irq_handler_entry.format"),
            include_str!("../../tests/fixtures/trace/raw/irq_handler_exit.format"),
            include_str!("../../tests/fixtures/trace/raw/softirq_entry.format"),
            include_str!("../../tests/fixtures/trace/raw/softirq_exit.format"),
            include_str!("../../tests/fixtures/trace/raw/hrtimer_expire_entry.format"),
            include_str!("../../tests/fixtures/trace/raw/hrtimer_expire_exit.format"),
        ] {
            fm.insert(Format::parse(t).expect("a format file"));
        }
        fm
    }

    /// An event without what only one reader knows: hrtimer functions are addresses in the
    /// pages and names in the text.
    fn comparable(k: Kind) -> Kind {
        match k {
            Kind::TimerEntry { .. } => Kind::TimerEntry { function: 0 },
            k => k,
        }
    }

    /// One CPU's real ring buffer read twice (tests/fixtures/trace/raw/README.md): first as
    /// the kernel's text (`trace`, which does not consume), then as pages
    /// (`trace_pipe_raw`). Every event decodes to what the kernel printed, at the same µs.
    #[test]
    fn decodes_real_pages_as_the_kernel_prints_them() {
        let fm = kernel_formats();
        let pages = include_bytes!("../../tests/fixtures/trace/raw/cpu1.pages");
        let mut raw = Trace::default();
        for p in pages.chunks(4096) {
            decode_page(p, 1, &fm, &mut raw);
        }
        let mut text = Trace::default();
        text.push_text(include_str!("../../tests/fixtures/trace/raw/cpu1.txt"));
        assert_eq!(text.skipped_lines, 0);
        assert_eq!(raw.skipped_lines, 0);
        assert!(text.events.len() > 500, "{} events", text.events.len());
        for (i, (r, t)) in raw.events.iter().zip(&text.events).enumerate() {
            assert!(
                r.ts_ns.abs_diff(t.ts_ns) <= 500
                    && r.pid == t.pid
                    && comparable(r.kind) == comparable(t.kind),
                "event {i}: pages {r:?}, text {t:?}"
            );
        }
        assert_eq!(raw.events.len(), text.events.len());
        assert_eq!(raw.comms, text.comms);
        assert_eq!(raw.irq_names, text.irq_names);
    }
}
