//! The text format of `trace_pipe` into compact events. Lines look like
//!
//! ```text
//!   xrl-burst-1234   [001] d..2.   812.345678: sched_switch: prev_comm=… prev_pid=1234 …
//! CPU:1 [LOST 17 EVENTS]
//! ```
//!
//! The text format prints times in whole microseconds: attribution is exact to 1 µs, far
//! below an audio period. Comms may hold spaces, dashes and brackets, so fields are cut at the
//! key that follows them, never at whitespace.

use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `prev_runnable`: the previous task was preempted (state R), not sleeping;
    /// `prev_blocked`: it sleeps uninterruptibly (state D: waiting for I/O, a page read in).
    Switch {
        prev_pid: i32,
        prev_prio: i32,
        prev_runnable: bool,
        prev_blocked: bool,
        next_pid: i32,
        next_prio: i32,
    },
    /// `prio`: the woken task's, as the kernel numbers it.
    Waking {
        pid: i32,
        prio: i32,
        target_cpu: u16,
    },
    Wakeup {
        pid: i32,
        target_cpu: u16,
    },
    Migrate {
        pid: i32,
        dest_cpu: u16,
    },
    IrqEntry {
        irq: i32,
    },
    IrqExit {
        irq: i32,
    },
    SoftirqEntry {
        vec: u8,
    },
    SoftirqExit {
        vec: u8,
    },
    /// An hrtimer callback runs in the timer interrupt (no irq_handler event for it).
    TimerEntry {
        function: u32,
    },
    TimerExit,
    /// The kernel lost events on this CPU just before this point.
    Lost {
        count: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub ts_ns: u64,
    pub cpu: u16,
    /// The task current on `cpu` when the event was recorded (`common_pid`; 0 is the idle
    /// task, -1 unknown): it shows a switch the kernel did not trace (see
    /// `attribute::segments`).
    pub pid: i32,
    pub kind: Kind,
}

pub const SOFTIRQ_NAMES: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// The events and the names they refer to (comms by pid, IRQ action names, timer functions).
#[derive(Debug, Default, Clone)]
pub struct Trace {
    pub events: Vec<Event>,
    pub comms: HashMap<i32, String>,
    pub irq_names: HashMap<i32, String>,
    pub functions: Vec<String>,
    /// Lines that were not understood (other events, a truncated read).
    pub skipped_lines: u64,
    /// Events the kernel reported lost, per CPU (from `[LOST N EVENTS]` and the stats files).
    pub lost: HashMap<u16, u64>,
    /// CPU a `LOST` line announced, waiting for that CPU's next event to get a time.
    pending_lost: HashMap<u16, u64>,
}

fn num<T: std::str::FromStr>(s: &str, key: &str) -> Option<T> {
    let at = find_key(s, key)?;
    let v = &s[at..];
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '-'))
        .unwrap_or(v.len());
    v[..end].parse().ok()
}

/// Byte offset of the value of `key=` where the key starts a field (after a space or at 0).
fn find_key(s: &str, key: &str) -> Option<usize> {
    // No allocation: the reader parses some 10^5 lines a second.
    let b = s.as_bytes();
    let mut from = 0;
    while let Some(i) = s[from..].find(key) {
        let at = from + i;
        let eq = at + key.len();
        if (at == 0 || b[at - 1] == b' ') && b.get(eq) == Some(&b'=') {
            return Some(eq + 1);
        }
        from = at + 1;
    }
    None
}

/// The text between `key=` and ` next=` (a comm may hold spaces).
fn text_until<'a>(s: &'a str, key: &str, next: &str) -> Option<&'a str> {
    let at = find_key(s, key)?;
    let rest = &s[at..];
    let b = rest.as_bytes();
    let mut from = 0;
    while let Some(i) = rest[from..].find(next) {
        let k = from + i;
        if k > 0 && b[k - 1] == b' ' && b.get(k + next.len()) == Some(&b'=') {
            return Some(&rest[..k - 1]);
        }
        from = k + 1;
    }
    None
}

impl Trace {
    pub fn function_id(&mut self, f: &str) -> u32 {
        match self.functions.iter().position(|x| x == f) {
            Some(i) => i as u32,
            None => {
                self.functions.push(f.to_string());
                (self.functions.len() - 1) as u32
            }
        }
    }

    /// Add every complete line of `text`.
    pub fn push_text(&mut self, text: &str) {
        for line in text.lines() {
            self.push_line(line);
        }
    }

    pub fn push_line(&mut self, line: &str) {
        if self.parse(line).is_none() && !line.trim().is_empty() && !line.starts_with('#') {
            self.skipped_lines += 1;
        }
    }

    fn parse(&mut self, line: &str) -> Option<()> {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("CPU:") {
            // "CPU:1 [LOST 17 EVENTS]"
            let (cpu, rest) = rest.split_once(' ')?;
            let cpu: u16 = cpu.parse().ok()?;
            let n: u64 = rest
                .trim()
                .strip_prefix("[LOST ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            *self.pending_lost.entry(cpu).or_default() += n;
            *self.lost.entry(cpu).or_default() += n;
            return Some(());
        }
        // The CPU field: " [NNN] " after "comm-pid", found from the left so a comm holding
        // brackets does not fool it (the pid before it is digits after a dash).
        let mut search = 0;
        let (cpu, pid, after) = loop {
            let i = search + line[search..].find(" [")?;
            let rest = &line[i + 2..];
            let close = rest.find(']')?;
            let head = line[..i].trim_end();
            let pid = head
                .rsplit_once('-')
                .filter(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|(_, p)| p.parse::<i32>().ok());
            if let Some(pid) = pid {
                if close > 0 && rest[..close].bytes().all(|b| b.is_ascii_digit()) {
                    break (rest[..close].parse::<u16>().ok()?, pid, &rest[close + 1..]);
                }
            }
            search = i + 1;
        };
        let mut toks = after.split_whitespace();
        // Flags ("d..2.") are optional (options/irq-info); the time ends with ':'.
        let mut ts_tok = toks.next()?;
        if !ts_tok.ends_with(':') {
            ts_tok = toks.next()?;
        }
        let ts_ns = parse_ts(ts_tok.strip_suffix(':')?)?;
        let rest = after[after.find(ts_tok)? + ts_tok.len()..].trim_start();
        let (name, fields) = rest
            .split_once(": ")
            .unwrap_or((rest.trim_end_matches(':'), ""));
        let kind = match name {
            "sched_switch" => {
                let prev_comm = text_until(fields, "prev_comm", "prev_pid")?;
                let next_comm = text_until(fields, "next_comm", "next_pid")?;
                let prev_pid = num(fields, "prev_pid")?;
                let next_pid = num(fields, "next_pid")?;
                let state = find_key(fields, "prev_state").map(|i| &fields[i..])?;
                self.note_comm(prev_pid, prev_comm);
                self.note_comm(next_pid, next_comm);
                Kind::Switch {
                    prev_pid,
                    prev_prio: num(fields, "prev_prio")?,
                    prev_runnable: state.starts_with('R'),
                    prev_blocked: state.starts_with('D'),
                    next_pid,
                    next_prio: num(fields, "next_prio")?,
                }
            }
            "sched_waking" | "sched_wakeup" => {
                let pid = num(fields, "pid")?;
                let comm = text_until(fields, "comm", "pid")?;
                self.note_comm(pid, comm);
                let target_cpu = num(fields, "target_cpu")?;
                if name == "sched_waking" {
                    Kind::Waking {
                        pid,
                        prio: num(fields, "prio")?,
                        target_cpu,
                    }
                } else {
                    Kind::Wakeup { pid, target_cpu }
                }
            }
            "sched_migrate_task" => Kind::Migrate {
                pid: num(fields, "pid")?,
                dest_cpu: num(fields, "dest_cpu")?,
            },
            "irq_handler_entry" => {
                let irq = num(fields, "irq")?;
                if let Some(i) = find_key(fields, "name") {
                    self.irq_names
                        .insert(irq, fields[i..].trim_end().to_string());
                }
                Kind::IrqEntry { irq }
            }
            "irq_handler_exit" => Kind::IrqExit {
                irq: num(fields, "irq")?,
            },
            "softirq_entry" | "softirq_exit" => {
                let vec = num(fields, "vec")?;
                if name == "softirq_entry" {
                    Kind::SoftirqEntry { vec }
                } else {
                    Kind::SoftirqExit { vec }
                }
            }
            "hrtimer_expire_entry" => {
                let f = find_key(fields, "function")
                    .map(|i| fields[i..].split_whitespace().next().unwrap_or(""))
                    .unwrap_or("");
                // "hrtimer_wakeup/0x0" → "hrtimer_wakeup"
                let f = f.split('/').next().unwrap_or(f).to_string();
                Kind::TimerEntry {
                    function: self.function_id(&f),
                }
            }
            "hrtimer_expire_exit" => Kind::TimerExit,
            _ => return None,
        };
        if let Some(count) = self.pending_lost.remove(&cpu) {
            self.events.push(Event {
                ts_ns,
                cpu,
                pid: -1,
                kind: Kind::Lost { count },
            });
        }
        self.events.push(Event {
            ts_ns,
            cpu,
            pid,
            kind,
        });
        Some(())
    }

    pub(crate) fn note_comm(&mut self, pid: i32, comm: &str) {
        if pid != 0 && self.comms.get(&pid).map(String::as_str) != Some(comm) {
            self.comms.insert(pid, comm.to_string());
        }
    }

    pub(crate) fn push_event(&mut self, e: Event) {
        self.events.push(e);
    }

    /// Add `n` events the kernel counted lost on `cpu` that no `LOST` line announced.
    pub fn add_lost(&mut self, cpu: u16, n: u64) {
        let seen = self.lost.get(&cpu).copied().unwrap_or(0);
        if n > seen {
            self.lost.insert(cpu, n);
        }
    }

    pub fn lost_total(&self) -> u64 {
        self.lost.values().sum()
    }
}

/// The switches into `of`'s threads that the kernel did not trace, as `Switch` events.
///
/// Every event names the task current on its CPU (`common_pid`), so a task seen running
/// where the CPU's last switch put another one was switched in unseen. Some kernels never
/// trace a CPU's switch out of its idle task (seen on a 6.18 Firecracker guest: CPU 1 had
/// not one `prev_comm=swapper/1` while CPU 0 had hundreds), and a thread that wakes there
/// then seems to run from its first seen switch to every later sleep. The unseen switch
/// is placed just after the CPU's previous event, or at the task's wake-up when that came
/// later: the earliest it can have been. The task it replaced is taken to have slept.
pub fn untraced_switch_ins(events: &[Event], of: &[i32]) -> Vec<Event> {
    let mut wakings: HashMap<i32, Vec<(u64, i32)>> = HashMap::new();
    let mut per_cpu: HashMap<u16, Vec<&Event>> = HashMap::new();
    for e in events {
        if let Kind::Waking { pid, prio, .. } = e.kind {
            if of.contains(&pid) {
                wakings.entry(pid).or_default().push((e.ts_ns, prio));
            }
        }
        per_cpu.entry(e.cpu).or_default().push(e);
    }
    for w in wakings.values_mut() {
        w.sort_unstable();
    }
    let mut out = Vec::new();
    for (_, mut evs) in per_cpu {
        evs.sort_by_key(|e| e.ts_ns);
        let (mut current, mut last): (Option<i32>, Option<u64>) = (None, None);
        for e in evs {
            let names_task = e.pid >= 0 && !matches!(e.kind, Kind::Lost { .. });
            if let (true, Some(cur), Some(t)) = (names_task, current, last) {
                if cur != e.pid && (of.contains(&cur) || of.contains(&e.pid)) {
                    let woke = wakings.get(&e.pid).and_then(|w| {
                        let i = w.partition_point(|x| x.0 <= e.ts_ns);
                        i.checked_sub(1).map(|i| w[i])
                    });
                    // Strictly after the previous event (it saw `cur` running), at most at
                    // this one.
                    let at = (t + 1).max(woke.map_or(0, |w| w.0)).min(e.ts_ns);
                    out.push(Event {
                        ts_ns: at,
                        cpu: e.cpu,
                        pid: cur,
                        kind: Kind::Switch {
                            prev_pid: cur,
                            prev_prio: 120,
                            prev_runnable: false,
                            prev_blocked: false,
                            next_pid: e.pid,
                            next_prio: woke.map_or(120, |w| w.1),
                        },
                    });
                }
            }
            match e.kind {
                Kind::Lost { .. } => current = None,
                Kind::Switch { next_pid, .. } => current = Some(next_pid),
                _ if names_task => current = Some(e.pid),
                _ => {}
            }
            last = Some(e.ts_ns);
        }
    }
    out
}

impl Trace {
    /// `e` as a line of the kernel's text format (ns times), which [`Trace::push_line`]
    /// reads back as the same event: windows' events are dumped this way to become fixtures.
    pub fn text_line(&self, e: &Event) -> String {
        let comm = |pid: i32| match pid {
            0 => "<idle>".to_string(),
            p => self
                .comms
                .get(&p)
                .cloned()
                .unwrap_or_else(|| "<...>".into()),
        };
        let head = format!(
            "{:>16}-{:<7} [{:03}] d..2. {}.{:09}: ",
            comm(e.pid),
            e.pid,
            e.cpu,
            e.ts_ns / 1_000_000_000,
            e.ts_ns % 1_000_000_000
        );
        let name_of = |pid: i32| match pid {
            0 => format!("swapper/{}", e.cpu),
            p => comm(p),
        };
        let body = match e.kind {
            Kind::Lost { count } => return format!("CPU:{} [LOST {count} EVENTS]", e.cpu),
            Kind::Switch {
                prev_pid,
                prev_prio,
                prev_runnable,
                prev_blocked,
                next_pid,
                next_prio,
            } => format!(
                "sched_switch: prev_comm={} prev_pid={prev_pid} prev_prio={prev_prio} prev_state={} ==> next_comm={} next_pid={next_pid} next_prio={next_prio}",
                name_of(prev_pid),
                match (prev_runnable, prev_blocked) {
                    (true, _) => "R",
                    (false, true) => "D",
                    (false, false) => "S",
                },
                name_of(next_pid)
            ),
            Kind::Waking {
                pid,
                prio,
                target_cpu,
            } => format!(
                "sched_waking: comm={} pid={pid} prio={prio} target_cpu={target_cpu:03}",
                comm(pid)
            ),
            Kind::Wakeup { pid, target_cpu } => format!(
                "sched_wakeup: comm={} pid={pid} prio=0 target_cpu={target_cpu:03}",
                comm(pid)
            ),
            Kind::Migrate { pid, dest_cpu } => format!(
                "sched_migrate_task: comm={} pid={pid} prio=0 orig_cpu={} dest_cpu={dest_cpu}",
                comm(pid),
                e.cpu
            ),
            Kind::IrqEntry { irq } => format!(
                "irq_handler_entry: irq={irq} name={}",
                self.irq_names.get(&irq).map_or("?", String::as_str)
            ),
            Kind::IrqExit { irq } => format!("irq_handler_exit: irq={irq} ret=handled"),
            Kind::SoftirqEntry { vec } => format!(
                "softirq_entry: vec={vec} [action={}]",
                SOFTIRQ_NAMES.get(vec as usize).unwrap_or(&"?")
            ),
            Kind::SoftirqExit { vec } => format!(
                "softirq_exit: vec={vec} [action={}]",
                SOFTIRQ_NAMES.get(vec as usize).unwrap_or(&"?")
            ),
            Kind::TimerEntry { function } => format!(
                "hrtimer_expire_entry: hrtimer=0 function={} now=0",
                self.functions
                    .get(function as usize)
                    .map_or("?", String::as_str)
            ),
            Kind::TimerExit => "hrtimer_expire_exit: hrtimer=0".into(),
        };
        head + &body
    }
}

/// "812.345678" (seconds, microseconds — or nanoseconds with 9 digits) → ns.
pub fn parse_ts(s: &str) -> Option<u64> {
    let (sec, frac) = s.split_once('.')?;
    let sec: u64 = sec.trim().parse().ok()?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let f: u64 = frac.parse().ok()?;
    Some(sec * 1_000_000_000 + f * 10u64.pow(9 - frac.len() as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_switch_with_spaces_and_dashes_in_comms() {
        let mut t = Trace::default();
        t.push_line("  Web Content-a-77   [001] d..2.   812.345678: sched_switch: prev_comm=Web Content-a prev_pid=77 prev_prio=120 prev_state=R+ ==> next_comm=my [x]-1 next_pid=88 next_prio=19");
        assert_eq!(t.skipped_lines, 0);
        assert_eq!(
            t.events[0],
            Event {
                ts_ns: 812_345_678_000,
                cpu: 1,
                pid: 77,
                kind: Kind::Switch {
                    prev_pid: 77,
                    prev_prio: 120,
                    prev_runnable: true,
                    prev_blocked: false,
                    next_pid: 88,
                    next_prio: 19
                }
            }
        );
        assert_eq!(t.comms[&77], "Web Content-a");
        assert_eq!(t.comms[&88], "my [x]-1");
    }

    #[test]
    fn parses_irq_softirq_timer_waking_and_lost() {
        let mut t = Trace::default();
        t.push_text(
            "          <idle>-0       [000] d.h1.   10.000001: irq_handler_entry: irq=24 name=virtio0-input.0\n\
             CPU:0 [LOST 5 EVENTS]\n\
             <idle>-0 [000] d.h1. 10.000002: irq_handler_exit: irq=24 ret=handled\n\
             <idle>-0 [000] ..s1. 10.000003: softirq_entry: vec=3 [action=NET_RX]\n\
             <idle>-0 [000] d.h2. 10.000004: hrtimer_expire_entry: hrtimer=0000000012 function=hrtimer_wakeup/0x0 now=10000004000\n\
             <idle>-0 [000] d.h3. 10.000005: sched_waking: comm=xrunlab-rt pid=5 prio=19 target_cpu=000\n\
             <idle>-0 [000] d.h1. 10.000006: hrtimer_expire_exit: hrtimer=0000000012\n\
             something else entirely\n",
        );
        assert_eq!(t.irq_names[&24], "virtio0-input.0");
        assert_eq!(t.lost[&0], 5);
        assert_eq!(t.skipped_lines, 1);
        let kinds: Vec<Kind> = t.events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds[1], Kind::Lost { count: 5 });
        assert_eq!(kinds[3], Kind::SoftirqEntry { vec: 3 });
        assert_eq!(kinds[4], Kind::TimerEntry { function: 0 });
        assert_eq!(t.functions[0], "hrtimer_wakeup");
        assert_eq!(
            kinds[5],
            Kind::Waking {
                pid: 5,
                prio: 19,
                target_cpu: 0
            }
        );
    }

    #[test]
    fn an_event_written_as_text_reads_back_the_same() {
        let mut t = Trace::default();
        t.push_text(
            "  Web Content-a-77   [001] d..2.   812.345678: sched_switch: prev_comm=Web Content-a prev_pid=77 prev_prio=120 prev_state=R+ ==> next_comm=swapper/1 next_pid=0 next_prio=120\n\
             <idle>-0 [001] d.h1. 812.400001: irq_handler_entry: irq=24 name=virtio0-input.0\n\
             <idle>-0 [001] d.h1. 812.400002: irq_handler_exit: irq=24 ret=handled\n\
             CPU:1 [LOST 5 EVENTS]\n\
             <idle>-0 [001] ..s1. 812.400003: softirq_entry: vec=3 [action=NET_RX]\n\
             <idle>-0 [001] ..s1. 812.400004: softirq_exit: vec=3 [action=NET_RX]\n\
             <idle>-0 [001] d.h2. 812.400005: hrtimer_expire_entry: hrtimer=0000000012 function=hrtimer_wakeup/0x0 now=10000004000\n\
             <idle>-0 [001] d.h3. 812.400006: sched_waking: comm=xrunlab-rt pid=5 prio=19 target_cpu=001\n\
             <idle>-0 [001] d.h1. 812.400007: hrtimer_expire_exit: hrtimer=0000000012\n\
             xrunlab-rt-5 [001] d..2. 812.400009: sched_switch: prev_comm=xrunlab-rt prev_pid=5 prev_prio=19 prev_state=S ==> next_comm=Web Content-a next_pid=77 next_prio=120\n",
        );
        assert_eq!(t.skipped_lines, 0);
        let text: String = t.events.iter().map(|e| t.text_line(e) + "\n").collect();
        let mut back = Trace::default();
        back.push_text(&text);
        assert_eq!(back.skipped_lines, 0, "{text}");
        assert_eq!(back.events, t.events, "{text}");
        assert_eq!(back.comms, t.comms);
        assert_eq!(back.functions, t.functions);
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_ts("1.5"), Some(1_500_000_000));
        assert_eq!(parse_ts("12.000001"), Some(12_000_001_000));
        assert_eq!(parse_ts("12.000000001"), Some(12_000_000_001));
        assert_eq!(parse_ts("12"), None);
        assert_eq!(parse_ts("x.1"), None);
    }
}
