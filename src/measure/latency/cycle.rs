//! The measuring loop of `latency`, cyclictest's, and its summary: the plan a config
//! becomes, one thread per CPU sleeping to absolute targets (or its simulated timeline), and
//! the fold of every thread's histogram, series and spikes into the result.

use super::*;

/// A validated plan: the config's optional fields resolved.
#[derive(Debug, Clone, Copy)]
pub(super) struct Plan {
    interval_ns: u64,
    /// Stop after the wake-up whose target is this far from the start (duration mode).
    end_offset_ns: Option<u64>,
    /// Stop after this many wake-ups (loops mode).
    loops: Option<u64>,
    hist_buckets: usize,
    audio_period_ns: Option<u64>,
    series_len: usize,
    expected_ns: u64,
    /// `--forensics`: keep the wake-ups later than this (and each thread's maximum).
    spikes_above_ns: Option<u64>,
    /// `--busy`: clock time to compute after each wake-up, holds not counted (0: sleep at
    /// once).
    busy_ns: u64,
}

pub(super) fn plan(cfg: &LatencyConfig) -> Result<(Plan, Policy)> {
    let policy = cfg
        .policy
        .ok_or_else(|| Error::usage("a latency measurement needs a scheduling policy"))?;
    policy.validate()?;
    let interval_ns = cfg
        .interval_ns
        .ok_or_else(|| Error::usage("a latency measurement needs an interval"))?;
    if !(1_000..=clock::NS_PER_S).contains(&interval_ns) {
        return Err(Error::usage(format!(
            "interval {} is outside 1us..1s",
            format_ns(interval_ns)
        )));
    }
    let expected_ns = match (cfg.duration_ns, cfg.loops) {
        (Some(_), Some(_)) => {
            return Err(Error::usage(
                "--duration and --loops exclude each other: give one",
            ))
        }
        (None, None) => return Err(Error::usage("give a run length: --duration or --loops")),
        (Some(d), None) => {
            if d < interval_ns {
                return Err(Error::usage(format!(
                    "duration {} is shorter than one interval ({})",
                    format_ns(d),
                    format_ns(interval_ns)
                )));
            }
            d
        }
        (None, Some(0)) => return Err(Error::usage("--loops must be at least 1")),
        (None, Some(l)) => l.saturating_mul(interval_ns),
    };
    if expected_ns > MAX_RUN_NS {
        return Err(Error::usage(format!(
            "run length {} is above the 7-day limit; split the run",
            format_ns(expected_ns)
        )));
    }
    if !(1_000..=MAX_HIST_MAX_NS).contains(&cfg.hist_max_ns) {
        return Err(Error::usage(format!(
            "--hist-max {} is outside 1us..1s",
            format_ns(cfg.hist_max_ns)
        )));
    }
    let busy_ns = match cfg.busy_pct {
        None => 0,
        Some(pct) if pct > 0.0 && pct <= MAX_BUSY_PCT => (interval_ns as f64 * pct / 100.0) as u64,
        Some(pct) => {
            return Err(Error::usage(format!(
                "--busy {pct}: give a share of the interval above 0 and at most {MAX_BUSY_PCT} %"
            )))
        }
    };
    let seconds = expected_ns.div_ceil(clock::NS_PER_S) as usize;
    // In loops mode skipped periods stretch the run beyond loops × interval; leave room.
    let series_len = if cfg.loops.is_some() {
        seconds + seconds / 2 + 2
    } else {
        seconds
    };
    Ok((
        Plan {
            interval_ns,
            end_offset_ns: cfg.duration_ns,
            loops: cfg.loops,
            hist_buckets: (cfg.hist_max_ns / 1_000) as usize,
            audio_period_ns: cfg.audio_period.map(|p| p.period_ns()),
            series_len: series_len.max(1),
            expected_ns,
            spikes_above_ns: None,
            busy_ns,
        },
        policy,
    ))
}

#[derive(Debug, Clone, Copy)]
struct SecondAgg {
    count: u32,
    min: u64,
    max: u64,
    sum: u64,
}

const EMPTY_SECOND: SecondAgg = SecondAgg {
    count: 0,
    min: u64::MAX,
    max: 0,
    sum: 0,
};

/// Everything one measuring thread writes, allocated before it starts.
pub(super) struct ThreadState {
    cpu: usize,
    hdr: Histogram,
    hist_us: Vec<u64>,
    overflow_cycles: Vec<u64>,
    series: Vec<SecondAgg>,
    series_truncated: bool,
    count: u64,
    min: u64,
    max: u64,
    sum: u128,
    max_cycle: u64,
    max_at_ns: u64,
    overflows: u64,
    missed: u64,
    audio_late: u64,
    /// Offset of the last wake-up from the start.
    last_ns: u64,
    /// The thread's id, read by itself.
    tid: i32,
    /// `--forensics`: (cycle, target, wake) of wake-ups above the threshold (capacity
    /// reserved up front), and of the maximum.
    spikes: Vec<(u64, u64, u64)>,
    max_abs: (u64, u64, u64),
    /// `--busy`: each held compute's held total, the wall time spent computing.
    busy_hdr: Histogram,
    busy_wall_ns: u64,
}

/// Read the clock (`read`) from `from` until `work_ns` of it passed in gaps shorter than
/// [`BUSY_GAP_NS`]; the longer gaps are holds. Returns the last read and the holds' total.
#[inline]
fn compute(from: u64, work_ns: u64, mut read: impl FnMut() -> u64) -> (u64, u64) {
    let (mut last, mut done, mut held) = (from, 0, 0);
    while done < work_ns {
        let now = read();
        let gap = now.saturating_sub(last);
        if gap >= BUSY_GAP_NS {
            held += gap;
        } else {
            done += gap;
        }
        last = now;
    }
    (last, held)
}

impl ThreadState {
    pub(super) fn new(cpu: usize, p: &Plan) -> Self {
        ThreadState {
            cpu,
            hdr: stats::new_ns_histogram(),
            hist_us: vec![0; p.hist_buckets],
            overflow_cycles: Vec::with_capacity(MAX_OVERFLOW_CYCLES.min(p.hist_buckets)),
            series: vec![EMPTY_SECOND; p.series_len],
            series_truncated: false,
            count: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
            max_cycle: 0,
            max_at_ns: 0,
            overflows: 0,
            missed: 0,
            audio_late: 0,
            last_ns: 0,
            tid: 0,
            spikes: Vec::with_capacity(if p.spikes_above_ns.is_some() {
                MAX_SPIKES
            } else {
                0
            }),
            max_abs: (0, 0, 0),
            busy_hdr: stats::new_ns_histogram(),
            busy_wall_ns: 0,
        }
    }

    /// Compute for `work_ns` of clock time from `from`, as an engine's cycle does; a gap of
    /// at least [`BUSY_GAP_NS`] between two reads is a hold, which lengthens the compute
    /// as it lengthens an engine's instead of eating into it. The compute's held total is
    /// recorded once: the host's holds come in bursts (several 100 µs holds in one 267 µs
    /// compute), and an engine's cycle misses on the sum; counted one by one, holds beyond
    /// 400 µs were a third to a half as many as such totals on this project's guest
    /// (docs/methods.md). Returns the clock at its end.
    #[inline]
    fn busy(&mut self, from: u64, work_ns: u64) -> u64 {
        let (last, held) = compute(from, work_ns, clock::monotonic_ns);
        if held > 0 {
            stats::record_clamped(&mut self.busy_hdr, held);
        }
        self.busy_wall_ns += last - from;
        last
    }

    /// Account one wake-up. `offset_ns` is the target's distance from the start.
    #[inline]
    fn record(&mut self, lat: u64, wake_offset_ns: u64, target_offset_ns: u64, p: &Plan) {
        let cycle = self.count;
        self.count += 1;
        self.sum += lat as u128;
        if lat < self.min {
            self.min = lat;
        }
        if lat > self.max || cycle == 0 {
            self.max = lat;
            self.max_cycle = cycle;
            self.max_at_ns = wake_offset_ns;
        }
        stats::record_clamped(&mut self.hdr, lat);
        // Cyclictest truncates to whole µs; its bucket k holds [k, k+1) µs.
        let us = (lat / 1_000) as usize;
        if us < self.hist_us.len() {
            self.hist_us[us] += 1;
        } else {
            self.overflows += 1;
            // The capacity was reserved up front, so this push never reallocates.
            if self.overflow_cycles.len() < self.overflow_cycles.capacity() {
                self.overflow_cycles.push(cycle);
            }
        }
        if let Some(ap) = p.audio_period_ns {
            if lat > ap {
                self.audio_late += 1;
            }
        }
        let sec = (target_offset_ns.saturating_sub(1) / clock::NS_PER_S) as usize;
        match self.series.get_mut(sec) {
            Some(s) => {
                s.count += 1;
                s.sum += lat;
                s.min = s.min.min(lat);
                s.max = s.max.max(lat);
            }
            None => self.series_truncated = true,
        }
        self.last_ns = wake_offset_ns;
    }

    /// The target after the one at `target_off`, for a wake-up at `now_off`.
    #[inline]
    fn next_target(&mut self, target_off: u64, now_off: u64, p: &Plan) -> u64 {
        let mut next = target_off + p.interval_ns;
        if now_off > next {
            // Woke after the next target too: those periods are gone. Count them and
            // resume at the first target still ahead, as cyclictest does silently.
            let skipped = (now_off - next).div_ceil(p.interval_ns);
            // Periods after the end of a timed run were never part of it.
            self.missed += match p.end_offset_ns {
                Some(end) if next > end => 0,
                Some(end) => skipped.min((end - next) / p.interval_ns + 1),
                None => skipped,
            };
            next += skipped * p.interval_ns;
        }
        next
    }
}

/// The measuring loop of one thread. Runs with the RT policy: no allocation, no I/O.
fn run_thread(
    mut st: ThreadState,
    p: Plan,
    start: Arc<AtomicU64>,
    phase_ns: u64,
    live: Arc<super::live::Live>,
) -> ThreadState {
    // Wait for the release (or an abort) without spinning: a spinning FIFO thread could
    // starve the spawner on a small machine.
    let t0 = loop {
        match start.load(Ordering::Acquire) {
            NOT_RELEASED => {
                if interrupt::requested() {
                    return st;
                }
                clock::sleep_until_ns(clock::monotonic_ns() + 1_000_000);
            }
            ABORT => return st,
            t => break t + phase_ns,
        }
    };
    // SAFETY: gettid has no preconditions and does not allocate.
    st.tid = unsafe { libc::gettid() };
    clock::sleep_until_ns(t0);
    let mut target_off = p.interval_ns;
    loop {
        if let Some(end) = p.end_offset_ns {
            if target_off > end {
                break;
            }
        }
        if let Some(l) = p.loops {
            if st.count >= l {
                break;
            }
        }
        if interrupt::requested() {
            break;
        }
        let target = t0 + target_off;
        clock::sleep_until_ns(target);
        let now = clock::monotonic_ns();
        if now < target {
            // Only an interrupted sleep returns early.
            break;
        }
        st.record(now - target, now - t0, target_off, &p);
        live.record(now - target);
        if let Some(th) = p.spikes_above_ns {
            let cycle = st.count - 1;
            // Capacity reserved up front: these pushes never reallocate.
            if now - target > th && st.spikes.len() < st.spikes.capacity() {
                st.spikes.push((cycle, target, now));
            }
            if st.max_cycle == cycle {
                st.max_abs = (cycle, target, now);
            }
        }
        let now = if p.busy_ns > 0 {
            st.busy(now, p.busy_ns)
        } else {
            now
        };
        target_off = st.next_target(target_off, now - t0, &p);
    }
    st
}

/// The loop of [`run_thread`] on a simulated timeline: each wake-up is `target + L`, L drawn
/// from the sim driver's latency model, so a model and the measurement it stands for go
/// through the same bookkeeping (missed periods, buckets, series).
pub(super) fn simulate_thread(
    mut st: ThreadState,
    p: &Plan,
    sampler: &mut crate::driver::sim::Sampler,
) -> ThreadState {
    let mut target_off = p.interval_ns;
    loop {
        if p.end_offset_ns.is_some_and(|end| target_off > end)
            || p.loops.is_some_and(|l| st.count >= l)
            || interrupt::requested()
        {
            break;
        }
        let lat = sampler.draw();
        let now_off = target_off + lat;
        st.record(lat, now_off, target_off, p);
        // The sim's model has delays at wake-ups only: its compute meets no hold.
        st.busy_wall_ns += p.busy_ns;
        target_off = st.next_target(target_off, now_off + p.busy_ns, p);
    }
    st
}

/// [`measure`], keeping the wake-ups later than `spikes_above_ns` and each CPU's maximum
/// (`LatencyResult::spikes`) for forensics.
pub(super) fn measure_keeping(
    cfg: &LatencyConfig,
    progress: &dyn Progress,
    spikes_above_ns: Option<u64>,
) -> Result<LatencyResult> {
    let (mut p, policy) = plan(cfg)?;
    p.spikes_above_ns = spikes_above_ns;
    let cpus = if cfg.cpus.is_empty() {
        affinity::allowed_cpus()?
    } else {
        cfg.cpus.clone()
    };
    if cpus.is_empty() {
        return Err(Error::cannot_measure("no CPU is available to this process"));
    }
    // Held until the end of this function: dropping them restores the system.
    let _mlock = if cfg.mlock.unwrap_or(true) {
        Some(rt::memory::MemoryLock::acquire()?)
    } else {
        None
    };
    let _dma = if cfg.dma_latency.unwrap_or(true) {
        Some(rt::dma_latency::DmaLatencyGuard::acquire(0)?)
    } else {
        None
    };

    let start = Arc::new(AtomicU64::new(NOT_RELEASED));
    let mut threads = Vec::with_capacity(cpus.len());
    let lives: Vec<Arc<super::live::Live>> = cpus.iter().map(|_| Arc::default()).collect();
    for (i, &cpu) in cpus.iter().enumerate() {
        let st = ThreadState::new(cpu, &p);
        let live = lives[i].clone();
        // Spread the threads' wake-ups evenly over one interval. Cyclictest's threads get
        // arbitrary phases from their start times; a common phase would make every CPU take
        // its timer interrupt at the same instant, which on a VM adds hypervisor contention
        // that cyclictest never sees, and would bias the comparison.
        let phase_ns = i as u64 * p.interval_ns / cpus.len() as u64;
        let s = start.clone();
        let spec = rt::thread::ThreadSpec {
            name: format!("xr-lat-{cpu}"),
            policy,
            // The kernel refuses to pin a DEADLINE task to fewer CPUs than its root domain;
            // those threads run unpinned and `cpu` is then only their number.
            cpus: if matches!(policy, Policy::Deadline { .. }) {
                Vec::new()
            } else {
                vec![cpu]
            },
        };
        match rt::thread::spawn_rt(spec, move || run_thread(st, p, s, phase_ns, live)) {
            Ok(t) => threads.push(t),
            Err(e) => {
                start.store(ABORT, Ordering::Release);
                for t in threads {
                    t.join();
                }
                return Err(e);
            }
        }
    }

    let total_s = p.expected_ns.div_ceil(clock::NS_PER_S);
    progress.set_unit(crate::progress::Unit::Seconds);
    progress.set_total(total_s);
    progress.set_message("latency");
    let t0 = clock::monotonic_ns() + START_LEAD_NS;
    start.store(t0, Ordering::Release);
    while !threads.iter().all(|t| t.is_finished()) {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = clock::monotonic_ns();
        progress.set_position((now.saturating_sub(t0) / clock::NS_PER_S).min(total_s));
        if progress.shows() {
            progress.set_message(&super::live::line(&cpus, &lives));
        }
    }
    progress.finish();
    let slack = threads.iter().filter_map(|t| t.timer_slack_ns).max();
    let states: Vec<ThreadState> = threads.into_iter().map(|t| t.join()).collect();
    let interrupted = interrupt::requested();
    let mut r = summarise(states, &p, interrupted, cfg.fail_above.as_ref());
    r.timer_slack_ns = slack;
    Ok(r)
}

/// A summary with exact extremes, its percentiles kept within them: HDR reports a bucket's
/// highest equivalent value, which can lie above the true maximum.
pub(crate) fn exact_summary(h: &Histogram, min: u64, max: u64, sum: u128) -> Summary {
    Summary::of(h).with_exact(min, max, sum)
}

/// The HDR buckets of the wake-ups at or above `from_ns`, whose count is `overflows`. The
/// bucket holding `from_ns` also holds values below it, which the µs histogram has: it gets
/// only the remainder, so the counts add up to `overflows` exactly.
fn overflow_buckets(h: &Histogram, from_ns: u64, overflows: u64) -> Vec<(u64, u64)> {
    if overflows == 0 {
        return Vec::new();
    }
    let mut out: Vec<(u64, u64)> = h
        .iter_recorded()
        .filter(|v| v.value_iterated_to() >= from_ns)
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect();
    // Only the lowest bucket can hold values on both sides of the bound.
    if out
        .first()
        .is_some_and(|b| h.lowest_equivalent(b.0) < from_ns)
    {
        let above: u64 = out[1..].iter().map(|b| b.1).sum();
        out[0].1 = overflows.saturating_sub(above);
    }
    out.retain(|b| b.1 > 0);
    out
}

pub(super) fn summarise(
    states: Vec<ThreadState>,
    p: &Plan,
    interrupted: bool,
    fail: Option<&FailAbove>,
) -> LatencyResult {
    let elapsed_ns = states.iter().map(|s| s.last_ns).max().unwrap_or(0);
    let hours = elapsed_ns as f64 / 3.6e12;
    let per_hour = |n: u64| if hours > 0.0 { n as f64 / hours } else { 0.0 };
    let mut all = stats::new_ns_histogram();
    let (mut count, mut sum, mut min, mut max) = (0u64, 0u128, u64::MAX, 0u64);
    let mut overall_max: Option<(u64, usize, u64, u64)> = None;
    let (mut overflows, mut missed, mut late) = (0u64, 0u64, 0u64);
    let mut per_cpu = Vec::with_capacity(states.len());
    let mut spikes = Vec::new();
    for st in states {
        let spike = |&(cycle, target_ns, wake_ns): &(u64, u64, u64)| Spike {
            cpu: st.cpu,
            tid: st.tid,
            cycle,
            target_ns,
            wake_ns,
        };
        spikes.extend(st.spikes.iter().map(spike));
        if p.spikes_above_ns.is_some()
            && st.max_abs.1 > 0
            && !st.spikes.iter().any(|s| s.0 == st.max_abs.0)
        {
            spikes.push(spike(&st.max_abs));
        }
        // Cannot fail: both histograms have the same bounds.
        let _ = all.add(&st.hdr);
        count += st.count;
        sum += st.sum;
        overflows += st.overflows;
        missed += st.missed;
        late += st.audio_late;
        if st.count > 0 {
            min = min.min(st.min);
            if overall_max.is_none_or(|(m, ..)| st.max > m) {
                overall_max = Some((st.max, st.cpu, st.max_cycle, st.max_at_ns));
            }
            max = max.max(st.max);
        }
        let summary = exact_summary(&st.hdr, st.min, st.max, st.sum);
        let nonzero = st.hist_us.iter().filter(|&&n| n > 0).count();
        let mut histogram_us = Vec::with_capacity(nonzero);
        histogram_us.extend(
            st.hist_us
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(k, &n)| (k as u64, n)),
        );
        let overflow_ns = overflow_buckets(&st.hdr, (p.hist_buckets * 1_000) as u64, st.overflows);
        let series = st
            .series
            .iter()
            .enumerate()
            .filter(|(_, s)| s.count > 0)
            .map(|(i, s)| SeriesPoint {
                t_s: i as u32,
                count: s.count,
                min_ns: s.min,
                mean_ns: s.sum as f64 / s.count as f64,
                max_ns: s.max,
            })
            .collect();
        let has = st.count > 0;
        let busy = (p.busy_ns > 0).then(|| {
            // 2 % steps: predict's thresholds lie hundreds of µs apart, and a fine HDR list
            // of every interrupt would run to thousands of entries.
            let steps = || {
                st.busy_hdr
                    .iter_log(BUSY_GAP_NS, BUSY_STEP)
                    .filter(|v| v.count_since_last_iteration() > 0)
                    .map(|v| (v.value_iterated_to(), v.count_since_last_iteration()))
            };
            // Sized first: one allocation however many holds a longer run meets.
            let mut holds_ns = Vec::with_capacity(steps().count());
            holds_ns.extend(steps());
            BusyHolds {
                busy_ns: st.busy_wall_ns,
                holds: st.busy_hdr.len(),
                gap_min_ns: BUSY_GAP_NS,
                holds_ns,
                max_ns: st.busy_hdr.max(),
            }
        });
        per_cpu.push(CpuLatency {
            cpu: st.cpu,
            stats: LatencyStats {
                summary,
                max_cycle: has.then_some(st.max_cycle),
                max_at_ns: has.then_some(st.max_at_ns),
                max_cpu: None,
                overflows: st.overflows,
                missed_periods: Some(st.missed),
                audio_late: p.audio_period_ns.map(|_| st.audio_late),
                audio_late_per_hour: p.audio_period_ns.map(|_| per_hour(st.audio_late)),
            },
            histogram_us,
            overflow_cycles: st.overflow_cycles,
            overflow_ns,
            series,
            series_truncated: st.series_truncated,
            busy,
        });
    }
    let overall = LatencyStats {
        summary: exact_summary(&all, min, max, sum),
        max_cycle: overall_max.map(|m| m.2),
        max_at_ns: overall_max.map(|m| m.3),
        max_cpu: overall_max.map(|m| m.1),
        overflows,
        missed_periods: Some(missed),
        audio_late: p.audio_period_ns.map(|_| late),
        audio_late_per_hour: p.audio_period_ns.map(|_| per_hour(late)),
    };
    debug_assert_eq!(overall.summary.count, count);
    let mut r = LatencyResult {
        elapsed_ns,
        per_cpu,
        overall,
        fail_above: None,
        interrupted,
        stress: None,
        baseline: None,
        spikes,
        forensics: None,
        timer_slack_ns: None,
    };
    r.fail_above = fail.map(|f| r.evaluate(f));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_plan(hist_buckets: usize, series_len: usize) -> Plan {
        Plan {
            interval_ns: 200_000,
            end_offset_ns: None,
            loops: Some(10),
            hist_buckets,
            audio_period_ns: Some(1_333_333),
            series_len,
            expected_ns: 2_000_000,
            spikes_above_ns: None,
            busy_ns: 0,
        }
    }

    #[test]
    fn fail_above_parses_percentiles() {
        let f: FailAbove = "50us".parse().unwrap();
        assert_eq!((f.threshold_ns, f.percentile.as_str()), (50_000, "max"));
        let f: FailAbove = "1ms@p99.9".parse().unwrap();
        assert_eq!(
            (f.threshold_ns, f.percentile.as_str()),
            (1_000_000, "p99_9")
        );
        let f: FailAbove = "1ms@99".parse().unwrap();
        assert_eq!(f.percentile, "p99");
        for bad in ["50", "50us@p42", "x@max", "50us@"] {
            assert!(bad.parse::<FailAbove>().is_err(), "{bad}");
        }
    }

    #[test]
    fn record_buckets_like_cyclictest_and_counts_overflows() {
        let p = test_plan(4, 2);
        let mut st = ThreadState::new(0, &p);
        for (i, lat) in [999u64, 1_000, 3_999, 4_000, 2_000_000]
            .into_iter()
            .enumerate()
        {
            st.record(
                lat,
                i as u64 * 1_000_000_000,
                i as u64 * 1_000_000_000 + 1,
                &p,
            );
        }
        assert_eq!(st.hist_us, vec![1, 1, 0, 1]);
        assert_eq!(st.overflows, 2);
        assert_eq!(st.overflow_cycles, vec![3, 4]);
        assert_eq!((st.min, st.max, st.max_cycle), (999, 2_000_000, 4));
        assert_eq!(st.audio_late, 1);
        // Five seconds of targets into a two-second series.
        assert!(st.series_truncated);
        assert_eq!(st.series[0].count, 1);
    }

    #[test]
    fn summarise_merges_cpus_and_finds_the_overall_max() {
        let p = test_plan(400, 1);
        let mut a = ThreadState::new(0, &p);
        let mut b = ThreadState::new(1, &p);
        for i in 0..100u64 {
            a.record(10_000 + i, i * 200_000, (i + 1) * 200_000, &p);
            b.record(20_000 + i, i * 200_000, (i + 1) * 200_000, &p);
        }
        b.record(5_000_000, 123, 20_200_000, &p);
        let r = summarise(vec![a, b], &p, false, Some(&"1ms".parse().unwrap()));
        assert_eq!(r.overall.summary.count, 201);
        assert_eq!(r.overall.summary.min, 10_000);
        assert_eq!(r.overall.summary.max, 5_000_000);
        assert_eq!(r.overall.max_cpu, Some(1));
        assert_eq!(r.overall.max_cycle, Some(100));
        assert_eq!(r.per_cpu[1].stats.overflows, 1);
        assert_eq!(r.per_cpu[0].histogram_us, vec![(10, 100)]);
        assert_eq!(r.per_cpu[0].series.len(), 1);
        assert!(r.fail_above.unwrap().crossed);
    }

    #[test]
    fn simulate_draws_the_model_through_the_measurements_bookkeeping() {
        use crate::driver::sim::LatencyModel;
        let cfg = LatencyConfig {
            duration_ns: None,
            loops: Some(1000),
            cpus: vec![0, 1],
            ..LatencyConfig::default()
        };
        let r = simulate(&cfg, &LatencyModel::Constant { ns: 450_000 }, 1).unwrap();
        assert_eq!(r.per_cpu.len(), 2);
        for c in &r.per_cpu {
            assert_eq!(c.stats.summary.count, 1000);
            assert_eq!(c.stats.overflows, 1000);
            assert!(c.histogram_us.is_empty());
            // 450 µs late passes the next two targets (200 and 400 µs on): two missed each.
            assert_eq!(c.stats.missed_periods, Some(2000));
            let [(v, 1000)] = c.overflow_ns[..] else {
                panic!("{:?}", c.overflow_ns)
            };
            assert!((450_000..=450_450).contains(&v), "{v}");
        }
        let m = LatencyModel::parse("normal:30us,10us").unwrap();
        let (a, b) = (
            simulate(&cfg, &m, 7).unwrap(),
            simulate(&cfg, &m, 7).unwrap(),
        );
        assert_eq!(a, b, "deterministic for a seed");
        assert_ne!(a.per_cpu[0].histogram_us, a.per_cpu[1].histogram_us);
    }

    #[test]
    fn busy_computes_after_each_wake_up_and_counts_only_long_gaps_as_holds() {
        use crate::driver::sim::LatencyModel;
        // On the sim: 30 µs late, then 180 µs of compute, ends 10 µs after the next target:
        // each wake-up after the first then loses the period the compute ran into.
        let cfg = LatencyConfig {
            duration_ns: None,
            loops: Some(100),
            cpus: vec![0],
            busy_pct: Some(90.0),
            ..LatencyConfig::default()
        };
        let r = simulate(&cfg, &LatencyModel::Constant { ns: 30_000 }, 1).unwrap();
        let c = &r.per_cpu[0];
        let b = c.busy.as_ref().expect("--busy records its holds");
        assert_eq!((b.busy_ns, b.holds, b.max_ns), (100 * 180_000, 0, 0));
        assert_eq!(c.stats.missed_periods, Some(100));
        let plain = simulate(
            &LatencyConfig {
                busy_pct: None,
                ..cfg.clone()
            },
            &LatencyModel::Constant { ns: 30_000 },
            1,
        )
        .unwrap();
        assert_eq!(plain.per_cpu[0].busy, None);
        assert_eq!(plain.per_cpu[0].stats.missed_periods, Some(0));
        for pct in [0.0, -1.0, 95.0, f64::NAN] {
            let bad = LatencyConfig {
                busy_pct: Some(pct),
                ..cfg.clone()
            };
            assert_eq!(
                plan(&bad).unwrap_err().exit_code(),
                crate::error::EXIT_USAGE,
                "{pct}"
            );
        }
        // On the clock: the compute is 2 ms of short gaps; whatever held the thread longer
        // than a hold's minimum lengthened it instead, and was recorded.
        let p = test_plan(4, 1);
        let mut st = ThreadState::new(0, &p);
        let from = clock::monotonic_ns();
        let end = st.busy(from, 2_000_000);
        assert_eq!(st.busy_wall_ns, end - from);
        let held = st.busy_hdr.mean() * st.busy_hdr.len() as f64;
        let worked = st.busy_wall_ns as f64 - held;
        assert!(
            (2_000_000.0 - held * 0.002..2_000_000.0 + BUSY_GAP_NS as f64 + held * 0.002)
                .contains(&worked),
            "{worked} ns of work besides {} holds",
            st.busy_hdr.len()
        );
        assert!(st.busy_hdr.is_empty() || st.busy_hdr.min() >= BUSY_GAP_NS);
        // One compute, one held total, however many holds it met.
        assert!(st.busy_hdr.len() <= 1);
    }

    #[test]
    fn a_computes_holds_add_up_and_short_gaps_are_its_work() {
        // 5 µs reads, two holds of 100 µs and one of 10 µs (the minimum) within 50 µs of work.
        let steps = [5, 5, 100, 5, 5, 100, 5, 10, 5, 5, 5, 5, 5, 5, 5, 5];
        let mut t = 1_000;
        let mut reads = steps.iter().map(|&us| {
            t += us * 1_000;
            t
        });
        let (end, held) = compute(1_000, 50_000, || reads.next().unwrap());
        assert_eq!(held, 210_000);
        assert_eq!(end - 1_000, 260_000);
        // Nothing to do: no read.
        assert_eq!(compute(7, 0, || unreachable!()), (7, 0));
    }

    #[test]
    fn plan_rejects_bad_configs() {
        let ok = LatencyConfig::default();
        assert!(plan(&ok).is_ok());
        for cfg in [
            LatencyConfig {
                loops: Some(5),
                ..ok.clone()
            },
            LatencyConfig {
                duration_ns: None,
                ..ok.clone()
            },
            LatencyConfig {
                interval_ns: Some(10),
                ..ok.clone()
            },
            LatencyConfig {
                hist_max_ns: 10,
                ..ok.clone()
            },
            LatencyConfig {
                duration_ns: Some(MAX_RUN_NS + 1),
                ..ok.clone()
            },
        ] {
            assert_eq!(
                plan(&cfg).unwrap_err().exit_code(),
                crate::error::EXIT_USAGE
            );
        }
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        // Everything `record` + `summarise` derive, against a brute-force sort of the same data.
        #[test]
        fn stats_match_brute_force(lats in prop::collection::vec(0u64..600_000, 1..3000)) {
            let mut p = Plan {
                interval_ns: 200_000,
                end_offset_ns: None,
                loops: None,
                hist_buckets: 400,
                audio_period_ns: Some(100_000),
                series_len: 1,
                expected_ns: 0,
                spikes_above_ns: None,
                busy_ns: 0,
            };
            p.series_len = lats.len() * 200_000 / 1_000_000_000 + 1;
            let mut st = ThreadState::new(3, &p);
            for (i, &l) in lats.iter().enumerate() {
                let off = (i as u64 + 1) * p.interval_ns;
                st.record(l, off + l, off, &p);
            }
            let r = summarise(vec![st], &p, false, None);
            let c = &r.per_cpu[0];
            let mut v = lats.clone();
            v.sort_unstable();
            let s = &c.stats.summary;
            prop_assert_eq!(s.count, v.len() as u64);
            prop_assert_eq!(s.min, v[0]);
            prop_assert_eq!(s.max, *v.last().unwrap());
            let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
            prop_assert!((s.mean - mean).abs() < 1e-6 * mean.max(1.0));
            for (q, got) in [(50.0, s.p50), (90.0, s.p90), (99.0, s.p99), (99.9, s.p99_9)] {
                let rank = ((q / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
                let want = v[rank - 1];
                let tol = (want as f64 * 0.001).max(1.0);
                prop_assert!((got as f64 - want as f64).abs() <= tol, "p{}: got {}, want {}", q, got, want);
            }
            // The cyclictest-format buckets: whole µs, rounded down; the rest overflows.
            let mut buckets = std::collections::BTreeMap::new();
            for &x in &v {
                if x < 400_000 {
                    *buckets.entry(x / 1000).or_insert(0u64) += 1;
                }
            }
            let want: Vec<(u64, u64)> = buckets.into_iter().collect();
            prop_assert_eq!(&c.histogram_us, &want);
            prop_assert_eq!(c.stats.overflows, v.iter().filter(|&&x| x >= 400_000).count() as u64);
            // The overflows' HDR buckets, expanded, are the overflows sorted: each at or
            // above its value, within the histogram's 0.1 %.
            let expanded: Vec<u64> = c
                .overflow_ns
                .iter()
                .flat_map(|&(b, n)| std::iter::repeat_n(b, n as usize))
                .collect();
            let over: Vec<u64> = v.iter().copied().filter(|&x| x >= 400_000).collect();
            prop_assert_eq!(expanded.len(), over.len());
            for (b, x) in expanded.iter().zip(&over) {
                prop_assert!(*b >= *x && (*b - *x) as f64 <= *x as f64 * 0.001 + 1.0, "{} for {}", b, x);
            }
            prop_assert_eq!(c.stats.audio_late, Some(v.iter().filter(|&&x| x > 100_000).count() as u64));
            let max_at = lats.iter().position(|&x| x == s.max).unwrap() as u64;
            prop_assert_eq!(c.stats.max_cycle, Some(max_at));
            let series_total: u32 = c.series.iter().map(|p| p.count).sum();
            prop_assert_eq!(series_total as u64, s.count);
        }
    }
}
