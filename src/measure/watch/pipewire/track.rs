//! From the profiler's cycles to what a watch records (docs/methods.md "Watch"): each
//! node's wake-up delay (awake − signal) and busy time (finish − awake) in every cycle, the
//! cycle's headroom (its deadline minus the time the last node finished), and its xruns.
//!
//! A cycle is an xrun when the driver's xrun counter rose or a node had not finished when
//! the profiler sampled it (PipeWire samples a cycle when the graph completes, or when the
//! next cycle starts first). The late node is the one still running (it ran long) or, if
//! none was, the one signalled but not yet running (it woke late); nodes not yet triggered
//! wait on those and are never blamed. Its busy time is known once it finishes: its block
//! in a later cycle still carries that cycle's signal time, now with its finish time, so an
//! xrun is held until then (or until the node was signalled again, its finish then unknown).
//! PipeWire before 0.3.72 has no per-node xrun counter; this works on 0.3.65.

use crate::driver::pipewire::pod::{Block, Sample, AWAKE, FINISHED, TRIGGERED};
use crate::measure::watch::clients::{ClientTiming, LateClient, Timing};
use crate::measure::watch::cycles::{BusyHistogram, CycleTimeline, HeadroomAcc, Lane, BINS};
use crate::measure::watch::sizes::{OtherSizes, SizesAcc};
use crate::measure::watch::types::NodeRun;
use hdrhistogram::Histogram;

/// How many cycles an xrun waits for its late node to finish before it is reported with
/// its busy time unknown (about a second at 256/48000).
const WAIT_CYCLES: u32 = 200;

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 2).expect("static bounds")
}

struct Node {
    id: u32,
    name: String,
    busy: Histogram<u64>,
    wake: Histogram<u64>,
    bins: [u64; BINS],
    xruns_late: u64,
}

impl Node {
    fn usual(&self) -> (u64, u64) {
        let m = |h: &Histogram<u64>| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(0.5)
            }
        };
        (m(&self.wake), m(&self.busy))
    }

    fn timing(h: &Histogram<u64>) -> Timing {
        if h.is_empty() {
            return Timing::default();
        }
        Timing {
            count: h.len(),
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            max: h.max(),
        }
    }
}

/// An xrun as the tracker found it (times absolute, CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub deadline_ns: u64,
    pub position: u64,
    pub frames: u64,
    pub dsp_load_pct: f64,
    pub late: Option<LateClient>,
    /// How far past the deadline the late node finished.
    pub late_by_ns: Option<u64>,
    /// The late node's times in this cycle (`--forensics` explains that run).
    pub node_run: Option<NodeRun>,
    lanes: Vec<Lane>,
    start_ns: u64,
    period_ns: u64,
    /// The late node (id, signal, awake) while its finish is awaited.
    waiting: Option<(u32, u64, u64)>,
    /// The last cycle start that found it still running.
    still_running_ns: u64,
    age: u32,
}

/// The cycles so far.
pub struct Tracker {
    nodes: Vec<Node>,
    xrun_counts: Vec<(u32, u64)>,
    headroom: HeadroomAcc,
    sizes: SizesAcc,
    pub period_ns: u64,
    pub rate: u32,
    pub frames: u32,
    pub cpu_load: f64,
    pub cycles: u64,
    open: Vec<Found>,
    /// Xruns complete, for the watcher to take.
    pub ready: Vec<Found>,
    /// Driver xruns counted beyond the cycles sampled (samples the profiler dropped).
    pub lost: u64,
    worst: Option<(u64, u64, Vec<Lane>, u64)>,
    last_nsec: u64,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            nodes: Vec::new(),
            xrun_counts: Vec::new(),
            headroom: HeadroomAcc::default(),
            sizes: SizesAcc::default(),
            period_ns: 0,
            rate: 0,
            frames: 0,
            cpu_load: 0.0,
            cycles: 0,
            open: Vec::new(),
            ready: Vec::new(),
            lost: 0,
            worst: None,
            last_nsec: 0,
        }
    }
}

/// Whether a block's times are this cycle's (a node not run this cycle keeps old ones).
fn fresh(b: &Block, start: u64, period: u64) -> bool {
    b.signal > 0 && b.signal + period / 4 >= start
}

impl Tracker {
    fn node(&mut self, b: &Block) -> &mut Node {
        let i = match self
            .nodes
            .iter()
            .position(|n| n.id == b.id && n.name == b.name)
        {
            Some(i) => i,
            None => {
                self.nodes.push(Node {
                    id: b.id,
                    name: b.name.clone(),
                    busy: hist(),
                    wake: hist(),
                    bins: [0; BINS],
                    xruns_late: 0,
                });
                self.nodes.len() - 1
            }
        };
        &mut self.nodes[i]
    }

    /// Its busy time in the cycle.
    fn record(&mut self, b: &Block, period: u64) -> u64 {
        let (wake, busy) = (b.awake - b.signal, b.finish - b.awake);
        let n = self.node(b);
        let _ = n.wake.record(wake.max(1));
        let _ = n.busy.record(busy.max(1));
        let bin = (busy as u128 * BINS as u128 / period.max(1) as u128) as usize;
        n.bins[bin.min(BINS - 1)] += 1;
        busy
    }

    /// One sampled cycle.
    pub fn feed(&mut self, s: &Sample) {
        let period = s.period_ns();
        if period == 0 {
            return;
        }
        // PipeWire 0.3.65 emits an incomplete cycle twice.
        if s.nsec != 0 && s.nsec == self.last_nsec {
            return;
        }
        self.last_nsec = s.nsec;
        self.cycles += 1;
        self.period_ns = period;
        self.rate = s.rate();
        self.frames = s.duration as u32;
        self.cpu_load = s.cpu_load;
        self.resolve(s);
        let mut start = if s.nsec > 0 { s.nsec } else { s.driver.signal };
        let mut end = 0;
        let mut unfinished: Vec<&Block> = Vec::new();
        // A cycle sampled incomplete is sampled when the next one starts: the clock is the
        // new cycle's, the nodes' times the unfinished one's.
        for b in s.followers.iter().filter(|b| !b.is_async) {
            if matches!(b.status, TRIGGERED | AWAKE) && b.signal + 2 * period >= start {
                unfinished.push(b);
            }
        }
        if !unfinished.is_empty() && unfinished.iter().all(|b| b.signal < start) {
            start = start.saturating_sub(period);
        }
        let deadline = start + period;
        let mut busy = 0u64;
        for b in s.followers.iter().filter(|b| !b.is_async) {
            if b.status == FINISHED
                && fresh(b, start, period)
                && b.awake >= b.signal
                && b.finish >= b.awake
            {
                busy = busy.saturating_add(self.record(b, period));
                end = end.max(b.finish);
            }
        }
        let rose = self.counter(s.driver.id, s.xrun_count);
        let elapsed = end.max(start) - start;
        if unfinished.is_empty() && !rose {
            let spare = (end <= deadline).then(|| deadline - end.max(start));
            self.headroom.add(spare, period);
            self.sizes.add(start, elapsed, busy, period);
            return;
        }
        self.headroom.add(None, period);
        // The cycles after a node that is still running are missed because of it: one xrun.
        let mut absorbed = false;
        for f in self.open.iter_mut() {
            if unfinished
                .iter()
                .any(|b| f.waiting.is_some_and(|w| w.0 == b.id))
            {
                f.still_running_ns = s.nsec;
                absorbed = true;
            }
        }
        if absorbed {
            // The graph is still on the late node's work: none of its own this cycle.
            self.sizes.add(start, 0, 0, period);
            return;
        }
        // Unfinished: past the period at least; the late node's finish patches it.
        let elapsed = if unfinished.is_empty() {
            elapsed
        } else {
            elapsed.max(period + 1)
        };
        self.sizes.add(start, elapsed, busy, period);
        self.found(s, start, period, end, &unfinished);
    }

    /// Whether the driver's xrun counter rose; more than one per sample is counted lost.
    fn counter(&mut self, driver: u32, count: u64) -> bool {
        match self.xrun_counts.iter_mut().find(|(d, _)| *d == driver) {
            Some((_, last)) => {
                let rose = count > *last;
                self.lost += count.saturating_sub(*last).saturating_sub(1);
                *last = count;
                rose
            }
            None => {
                self.xrun_counts.push((driver, count));
                false
            }
        }
    }

    /// The cycle's record before its late node is known.
    fn found_record(&self, s: &Sample, start: u64, period: u64) -> Found {
        let mut lanes = vec![lane(&s.driver, start)];
        lanes.extend(
            s.followers
                .iter()
                .filter(|b| fresh(b, start, period))
                .map(|b| lane(b, start)),
        );
        Found {
            deadline_ns: start + period,
            position: s.position,
            frames: s.duration,
            dsp_load_pct: s.cpu_load * 100.0,
            late: None,
            late_by_ns: None,
            node_run: None,
            lanes,
            start_ns: start,
            period_ns: period,
            waiting: None,
            still_running_ns: s.nsec,
            age: 0,
        }
    }

    /// How far a finished node was past its own usual figures, and whether its wake-up
    /// delay (rather than its busy time) was the larger excess.
    fn excess(&mut self, b: &Block) -> (u64, bool) {
        let (uw, ub) = self.node(b).usual();
        let woke = (b.awake - b.signal.min(b.awake)).saturating_sub(uw);
        let ran = (b.finish - b.awake).saturating_sub(ub);
        (woke.max(ran), woke > ran)
    }

    /// `b`, finished, is the cycle's late node.
    fn blame_finished(&mut self, f: &mut Found, b: &Block, ex: u64, woke_late: bool) {
        f.node_run = Some(NodeRun {
            signal_ns: b.signal,
            awake_ns: Some(b.awake),
            finish_ns: Some(b.finish),
            prev_finish_ns: None,
            deadline_ns: f.deadline_ns,
        });
        let (uw, ub) = self.node(b).usual();
        self.node(b).xruns_late += 1;
        f.late = Some(LateClient {
            name: b.name.clone(),
            tid: 0,
            // Its process is known once `--forensics` finds its thread.
            process: String::new(),
            pid: 0,
            wake_delay_ns: b.awake - b.signal.min(b.awake),
            busy_ns: b.finish - b.awake,
            run_ns: b.finish - b.awake,
            usual_wake_delay_ns: uw,
            usual_busy_ns: ub,
            usual_run_ns: ub,
            excess_ns: ex,
            woke_late,
            culprit: None,
            culprit_ns: 0,
            span_ns: None,
            inside: None,
            class: None,
        });
        for l in &mut f.lanes {
            l.late = l.name == b.name;
        }
    }

    fn found(&mut self, s: &Sample, start: u64, period: u64, end: u64, unfinished: &[&Block]) {
        let running = unfinished
            .iter()
            .filter(|b| b.status == AWAKE)
            .min_by_key(|b| b.awake);
        let deadline = start + period;
        // A node signalled after the deadline did not make this cycle late: its signal is a
        // later one (a filter-chain's capture node triggers its playback node once its
        // plugins ran, so the playback node shows signalled after a long capture run).
        let woken = unfinished
            .iter()
            .filter(|b| b.signal <= deadline)
            .min_by_key(|b| b.signal);
        // A node that has finished since, but was running at this cycle's start or at its
        // deadline, ran long: the nodes still waiting were held by it when they share its
        // thread (PipeWire's data thread runs every node inside the daemon: a filter-chain's
        // capture node runs its plugins and then triggers its playback node, which shows
        // signalled, not run) or wait on it downstream. Its run may have begun in the cycle
        // before (a cycle sampled when the next one starts). It is the late node unless one is
        // still running now.
        let own_deadline = |b: &Block| if b.awake < start { start } else { deadline };
        let ran_past = s
            .followers
            .iter()
            .filter(|b| {
                !b.is_async
                    && b.status == FINISHED
                    && b.signal > 0
                    && b.signal <= b.awake
                    && b.awake + period >= start
                    && b.awake < deadline
                    && b.finish > own_deadline(b)
            })
            .min_by_key(|b| b.awake);
        if let (None, Some(b)) = (running, ran_past) {
            let mut f = self.found_record(s, start, period);
            let (ex, woke_late) = self.excess(b);
            f.late_by_ns = Some(b.finish - own_deadline(b));
            self.blame_finished(&mut f, b, ex, woke_late);
            self.done(f);
            return;
        }
        let mut f = self.found_record(s, start, period);
        if let Some(b) = running.or(woken) {
            f.waiting = Some((b.id, b.signal, b.awake));
            f.node_run = Some(NodeRun {
                signal_ns: b.signal,
                awake_ns: (b.status == AWAKE && b.awake >= b.signal).then_some(b.awake),
                finish_ns: None,
                // A node not yet running still shows its previous cycle's finish (0.3.65
                // has already overwritten that cycle's awake).
                prev_finish_ns: (b.status == TRIGGERED
                    && b.finish > 0
                    && b.finish >= b.prev_signal
                    && b.finish <= b.signal)
                    .then_some(b.finish),
                deadline_ns: start + period,
            });
            let (uw, ub) = self.node(b).usual();
            // Not yet awake at the deadline: it woke at least that long after its signal
            // (the true delay once it is seen running, or from the trace).
            let (wake, excess) = if b.status == AWAKE {
                (b.awake - b.signal.min(b.awake), 0)
            } else {
                let w = (start + period).saturating_sub(b.signal);
                (w, w.saturating_sub(uw))
            };
            f.late = Some(LateClient {
                name: b.name.clone(),
                tid: 0,
                // Its process is known once `--forensics` finds its thread.
                process: String::new(),
                pid: 0,
                wake_delay_ns: wake,
                busy_ns: 0,
                run_ns: 0,
                usual_wake_delay_ns: uw,
                usual_busy_ns: ub,
                usual_run_ns: ub,
                excess_ns: excess,
                woke_late: b.status == TRIGGERED,
                culprit: None,
                culprit_ns: 0,
                span_ns: None,
                inside: None,
                class: None,
            });
            for l in &mut f.lanes {
                if l.name == b.name {
                    l.late = true;
                    l.finish_ns = None;
                }
            }
            self.open.push(f);
            return;
        }
        // All finished, the counter rose: the graph finished past its deadline; the late
        // node is the one past its own usual figures the most.
        f.late_by_ns = (end > start + period).then(|| end - start - period);
        let mut best: Option<(&Block, u64, bool)> = None;
        for b in s
            .followers
            .iter()
            .filter(|b| fresh(b, start, period) && b.status == FINISHED && b.finish >= b.awake)
        {
            let (ex, woke_late) = self.excess(b);
            if ex >= period / 20 && best.is_none_or(|x| ex > x.1) {
                best = Some((b, ex, woke_late));
            }
        }
        if let Some((b, ex, woke_late)) = best {
            self.blame_finished(&mut f, b, ex, woke_late);
        }
        self.done(f);
    }

    /// Complete the xruns whose late node has since finished (or was signalled again).
    fn resolve(&mut self, s: &Sample) {
        let mut i = 0;
        while i < self.open.len() {
            let f = &mut self.open[i];
            f.age += 1;
            let (id, signal, awake) = f.waiting.expect("open xruns wait");
            let b = s.followers.iter().find(|b| b.id == id);
            // Its finish: seen directly when it was not signalled again meanwhile; else
            // 0.3.65 has overwritten it, and it lies between the last cycle start that found
            // the node running and its next wake-up: the former is reported, a lower bound
            // within one period (docs/methods.md "Watch").
            let still = f.still_running_ns;
            let end = b.and_then(|b| {
                if b.signal == signal && b.status == FINISHED && b.finish >= b.awake.max(signal) {
                    Some((b.awake, b.finish))
                } else if b.status == FINISHED && awake >= signal && awake > 0 && b.awake > awake {
                    Some((awake, still.clamp(awake, b.awake)))
                } else {
                    None
                }
            });
            // A node not yet running at the deadline that has since been signalled again and
            // finished: its late run is over, its times overwritten. Waiting longer would take
            // its next xrun for this one.
            let overwritten =
                b.is_some_and(|b| b.signal > signal && b.status == FINISHED && awake < signal);
            let gone = b.is_none() || f.age > WAIT_CYCLES || overwritten;
            if end.is_none() && !gone {
                i += 1;
                continue;
            }
            let mut f = self.open.remove(i);
            if let (Some((a, fin)), Some(b0)) = (end, b) {
                let b = Block {
                    signal,
                    awake: a,
                    finish: fin,
                    ..b0.clone()
                };
                let busy = self.record(&b, f.period_ns);
                self.sizes.patch(f.start_ns, b.finish, busy);
                let wake = b.awake - b.signal;
                let n = self.node(&b);
                n.xruns_late += 1;
                if let Some(l) = f.late.as_mut() {
                    l.wake_delay_ns = wake;
                    l.busy_ns = busy;
                    l.run_ns = busy;
                    let (ew, eb) = (
                        wake.saturating_sub(l.usual_wake_delay_ns),
                        busy.saturating_sub(l.usual_busy_ns),
                    );
                    l.excess_ns = ew.max(eb);
                    l.woke_late = ew > eb;
                }
                f.late_by_ns = Some(b.finish.saturating_sub(f.deadline_ns));
                if let Some(n) = f.node_run.as_mut() {
                    n.awake_ns = Some(b.awake);
                    n.finish_ns = Some(b.finish);
                }
                for l in f.lanes.iter_mut().filter(|l| l.late) {
                    l.awake_ns = b.awake as i64 - f.start_ns as i64;
                    l.finish_ns = Some(b.finish as i64 - f.start_ns as i64);
                }
            } else if let Some(b) = b.cloned() {
                self.node(&b).xruns_late += 1;
            }
            f.waiting = None;
            self.done(f);
        }
    }

    fn done(&mut self, f: Found) {
        let key = f.late_by_ns.unwrap_or(0);
        if self.worst.as_ref().is_none_or(|w| key > w.0) {
            self.worst = Some((key, f.deadline_ns, f.lanes.clone(), f.period_ns));
        }
        self.ready.push(f);
    }

    /// Xruns still waiting for their late node, reported as they are (the watch ends).
    pub fn flush(&mut self) {
        for mut f in std::mem::take(&mut self.open) {
            f.waiting = None;
            self.done(f);
        }
    }

    /// Each node's timing over the watch.
    pub fn timings(&self) -> Vec<ClientTiming> {
        self.nodes
            .iter()
            .map(|n| ClientTiming {
                name: n.name.clone(),
                pid: 0,
                tid: 0,
                process: String::new(),
                named_by: super::super::names::NamedBy::Node,
                busy_ns: Node::timing(&n.busy),
                run_ns: Node::timing(&n.busy),
                wake_delay_ns: Node::timing(&n.wake),
                xruns_late: n.xruns_late,
            })
            .collect()
    }

    pub fn busy_histograms(&self) -> Vec<BusyHistogram> {
        self.nodes
            .iter()
            .map(|n| BusyHistogram {
                name: n.name.clone(),
                bins: n.bins.to_vec(),
                period_ns: self.period_ns,
            })
            .collect()
    }

    pub fn headroom(&self) -> crate::measure::watch::cycles::Headroom {
        self.headroom.result()
    }

    /// The other buffer sizes, every cycle so far judged.
    pub fn other_sizes(&mut self) -> Option<OtherSizes> {
        self.sizes.gap();
        self.sizes.result(self.frames, self.rate)
    }

    /// The worst xrun's cycle: its deadline (to find its index) and its lanes.
    pub fn worst(&self) -> Option<(u64, CycleTimeline)> {
        self.worst.as_ref().map(|(_, at, lanes, p)| {
            (
                *at,
                CycleTimeline {
                    xrun: 0,
                    period_ns: *p,
                    lanes: lanes.clone(),
                },
            )
        })
    }
}

fn lane(b: &Block, start: u64) -> Lane {
    let rel = |t: u64| t as i64 - start as i64;
    Lane {
        name: b.name.clone(),
        signal_ns: rel(b.signal),
        awake_ns: rel(b.awake),
        finish_ns: (b.status == FINISHED && b.finish >= b.awake).then(|| rel(b.finish)),
        late: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 5_333_333;
    const US: u64 = 1_000;

    fn block(id: u32, name: &str, signal: u64, awake: u64, finish: u64, status: i32) -> Block {
        Block {
            id,
            name: name.into(),
            signal,
            awake,
            finish,
            status,
            ..Block::default()
        }
    }

    fn sample(nsec: u64, followers: Vec<Block>) -> Sample {
        Sample {
            nsec,
            rate_num: 1,
            rate_denom: 48_000,
            duration: 256,
            driver: block(30, "null_sink", nsec, nsec, nsec + 20 * US, FINISHED),
            followers,
            ..Sample::default()
        }
    }

    /// A daemon-side chain: `cap` (a filter-chain's capture node, which runs the plugins)
    /// and `play` (its playback node), both quick, for `n` cycles from `t0`.
    fn quiet(t: &mut Tracker, t0: u64, n: u64) {
        for k in 0..n {
            let c = t0 + k * P;
            t.feed(&sample(
                c,
                vec![
                    block(34, "play", c + US, c + 2 * US, c + 3 * US, FINISHED),
                    block(33, "cap", c + 4 * US, c + 5 * US, c + 8 * US, FINISHED),
                ],
            ));
        }
    }

    #[test]
    fn a_run_that_spilled_into_the_next_cycle_is_blamed_not_the_node_it_triggered() {
        let mut t = Tracker::default();
        let t0 = 1_000_000_000;
        quiet(&mut t, t0, 50);
        // Cycle c1: `cap` runs its plugins for 9 ms, then triggers `play`; the profiler
        // samples the cycle when the next one (c2) starts, with `play` signalled by that
        // trigger (after c2's start) and not yet run.
        let c1 = t0 + 50 * P;
        let c2 = c1 + P;
        t.feed(&sample(
            c2,
            vec![
                block(
                    34,
                    "play",
                    c1 + 9_000 * US,
                    c1 - P + 2 * US,
                    c1 - P + 3 * US,
                    TRIGGERED,
                ),
                block(
                    33,
                    "cap",
                    c1 + 4 * US,
                    c1 + 5 * US,
                    c1 + 9_000 * US,
                    FINISHED,
                ),
            ],
        ));
        t.flush();
        assert_eq!(t.ready.len(), 1, "one xrun");
        let l = t.ready[0].late.as_ref().expect("a late node");
        assert_eq!(l.name, "cap");
        assert!(!l.woke_late, "{l:?}");
        assert_eq!(l.busy_ns, 9_000 * US - 5 * US);
        let n = t.ready[0].node_run.unwrap();
        assert_eq!(
            (n.awake_ns, n.finish_ns),
            (Some(c1 + 5 * US), Some(c1 + 9_000 * US))
        );
        // Late by its finish past the start of the cycle it delayed.
        assert_eq!(t.ready[0].late_by_ns, Some(c1 + 9_000 * US - c2));
    }

    #[test]
    fn a_node_signalled_in_time_but_not_run_still_woke_late() {
        let mut t = Tracker::default();
        let t0 = 1_000_000_000;
        quiet(&mut t, t0, 50);
        // Another process's node: signalled early in the cycle, still not awake when the
        // next cycle starts; every other node finished in time.
        let c1 = t0 + 50 * P;
        t.feed(&sample(
            c1 + P,
            vec![
                block(34, "play", c1 + US, c1 + 2 * US, c1 + 3 * US, FINISHED),
                block(
                    33,
                    "cap",
                    c1 + 4 * US,
                    c1 - P + 5 * US,
                    c1 - P + 8 * US,
                    TRIGGERED,
                ),
            ],
        ));
        let open = &t.open;
        assert_eq!(open.len(), 1, "held until its finish is seen");
        let l = open[0].late.as_ref().unwrap();
        assert_eq!(l.name, "cap");
        assert!(l.woke_late);
    }
}
