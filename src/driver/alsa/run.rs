//! The RT loop: wait for a period of space, place the cycle in time, run it, write it,
//! and recover from ALSA xruns.

use super::device::{alsa_text, AlsaDevice, Negotiated};
use super::period::{deinterleave, interleave, read_period, write_period, Sample};
use super::report::{AlsaReport, DelayAcc};
use super::{AlsaAccess, AlsaDriver, AlsaStream, AlsaXrun, AlsaXrunKind, WriteDelay};
use crate::common::cycle::{Cause, CycleRecord};
use crate::driver::signal::{InputSource, OutputSink};
use crate::driver::{AudioIo, CycleHandler, CycleTiming, DriverStats, StopReason, TimeBase};
use crate::rt::clock::monotonic_ns;
use ::alsa::pcm::{State, Status, IO};
use std::sync::atomic::{AtomicBool, Ordering};

/// Per-run state of the loop, kept out of the generic function so it is written once.
struct Loop {
    rate: u64,
    period: u64,
    period_ns: u64,
    periods: u64,
    wait_ms: u32,
    next_k: u64,
    prev_t_ideal: u64,
    prev_end: u64,
    prev_wake: u64,
    first_t_ideal: u64,
    /// Set by a recovery: the next cycle counts the periods lost since `prev_t_ideal`.
    recovered: bool,
    last: Option<(u64, bool, Option<Cause>)>,
    stats: DriverStats,
}

impl Loop {
    fn new(n: &Negotiated) -> Loop {
        let period_ns = n.period as u64 * 1_000_000_000 / n.rate as u64;
        Loop {
            rate: n.rate as u64,
            period: n.period as u64,
            period_ns,
            periods: n.periods as u64,
            // A device that frees no period for 10 periods (at least 1 s) has stalled.
            wait_ms: ((10 * period_ns / 1_000_000) as u32).max(1000),
            next_k: 0,
            prev_t_ideal: 0,
            prev_end: 0,
            prev_wake: 0,
            first_t_ideal: 0,
            recovered: false,
            last: None,
            stats: DriverStats::default(),
        }
    }

    /// The cycle's t_ideal from a (time, avail) pair read together: the latest period was
    /// freed (avail − period) frames before that time. Returns (t_ideal, clamped, whether
    /// the device's timestamp was usable).
    fn t_ideal(&self, dev: &AlsaDevice, st: &Status, wake: u64, avail: u64) -> (u64, bool, bool) {
        let stamp = ts_ns(st.get_htstamp());
        let usable = dev.monotonic_tstamps
            && stamp != 0
            && stamp <= wake + 1_000_000
            && stamp + 1_000_000_000 >= wake;
        let base = if usable { stamp } else { wake };
        let back = (avail - self.period) * 1_000_000_000 / self.rate;
        let raw = base.saturating_sub(back);
        let t_ideal = raw.min(wake).max(self.prev_t_ideal);
        let clamped = raw.min(wake) < self.prev_t_ideal;
        (t_ideal, clamped, usable)
    }

    /// Device periods lost while stopped by a recovery, in whole periods.
    fn skipped_since_recovery(&self, t_ideal: u64) -> u64 {
        if self.recovered && self.stats.cycles > 0 {
            let gap = t_ideal.saturating_sub(self.prev_t_ideal);
            ((gap + self.period_ns / 2) / self.period_ns).saturating_sub(1)
        } else {
            0
        }
    }

    /// The run's last periods passed while the device was stopped: they are skipped.
    fn run_out(&mut self, total: u64) {
        self.stats.skipped_periods += total - self.next_k;
        self.next_k = total;
        self.stats.periods_elapsed = total;
    }

    /// Cycle `k`'s timing: the deadline is the ALSA underrun time, n − 1 periods on.
    fn timing(&self, k: u64, t_ideal: u64, wake: u64, skipped: u64) -> CycleTiming {
        CycleTiming {
            cycle: k,
            t_ideal_ns: t_ideal,
            release_ns: t_ideal.max(self.prev_end),
            wake_ns: wake,
            deadline_ns: t_ideal + (self.periods - 1) * self.period_ns,
            prev_wake_ns: self.prev_wake,
            skipped_before: skipped as u32,
            time: TimeBase::Real,
        }
    }

    /// Count cycle `k`, run at `t_ideal` after `skipped` lost periods.
    fn count(&mut self, k: u64, t_ideal: u64, wake: u64, skipped: u64, rec: &CycleRecord) {
        self.stats.cycles += 1;
        self.stats.skipped_periods += skipped;
        self.stats.xruns += rec.xrun as u64;
        self.stats.periods_elapsed = k + 1;
        self.next_k = k + 1;
        self.prev_t_ideal = t_ideal;
        self.prev_end = rec.end_ns;
        self.prev_wake = wake;
        self.last = Some((k, rec.xrun, rec.cause));
    }
}

/// The delays read after each write, summed on the driver thread without allocating.
struct Delays {
    play: DelayAcc,
    cap: DelayAcc,
    looped: DelayAcc,
    loop_last: Option<i64>,
}

impl Delays {
    const EMPTY: Delays = Delays {
        play: DelayAcc::EMPTY,
        cap: DelayAcc::EMPTY,
        looped: DelayAcc::EMPTY,
        loop_last: None,
    };

    /// Both delays back to back, so the pair describes one instant; the playback delay also
    /// goes to the handler's `WriteDelay` as cycle `k`'s.
    fn read(&mut self, dev: &AlsaDevice, write_delay: Option<&WriteDelay>, k: u64) {
        let play_delay = dev.play.delay();
        let cap_delay = dev.cap.as_ref().map(|c| c.delay());
        #[allow(clippy::unnecessary_cast)] // Frames is a C long: 32 bits on some targets
        if let (Ok(p), Some(Ok(c))) = (&play_delay, &cap_delay) {
            self.cap.add(*c as i64);
            self.looped.add(*p as i64 + *c as i64);
            self.loop_last = Some(*p as i64 + *c as i64);
        }
        if let Ok(d) = play_delay {
            #[allow(clippy::unnecessary_cast)] // Frames is a C long: 32 bits on some targets
            let d = d as i64;
            self.play.add(d);
            if let Some(w) = write_delay {
                w.delay_frames.store(d, Ordering::Relaxed);
                w.at_ns.store(monotonic_ns(), Ordering::Relaxed);
                w.cycle1.store(k + 1, Ordering::Relaxed);
            }
        }
    }

    fn finish(&self, report: &mut AlsaReport, rate: u64) {
        if let Some(d) = self.play.finish(rate) {
            report.delay_frames = d;
        }
        report.capture_delay_frames = self.cap.finish(rate);
        report.loop_delay_frames = self.looped.finish(rate);
        report.loop_delay_last_frames = self.loop_last;
    }
}

/// The errno an xrun or suspended state stands for (what a read or write would return).
fn state_errno(state: State) -> Option<i32> {
    match state {
        State::XRun => Some(libc::EPIPE),
        State::Suspended => Some(libc::ESTRPIPE),
        _ => None,
    }
}

fn ts_ns(t: libc::timespec) -> u64 {
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The xrun an errno stands for: `EPIPE` (xrun) or `ESTRPIPE` (suspend).
fn xrun_kind(errno: i32, capture: bool) -> Option<AlsaXrunKind> {
    match errno {
        libc::EPIPE if capture => Some(AlsaXrunKind::Overrun),
        libc::EPIPE => Some(AlsaXrunKind::Underrun),
        libc::ESTRPIPE => Some(AlsaXrunKind::Suspend),
        _ => None,
    }
}

impl AlsaDriver {
    pub(super) fn run_typed<S: Sample>(
        &mut self,
        h: &mut dyn CycleHandler,
        stop: &AtomicBool,
        source: &mut dyn InputSource,
        sink: &mut dyn OutputSink,
    ) -> (StopReason, DriverStats) {
        let dev = &self.dev;
        let report = &mut self.report;
        let n = dev.neg;
        let ch = n.channels as usize;
        let f = n.period as usize;
        let (pio, cio) = match io_handles::<S>(dev) {
            Ok(io) => io,
            Err(e) => {
                report.error = Some(e);
                return (StopReason::Stopped, DriverStats::default());
            }
        };
        let silence = vec![S::ZERO; f * ch];
        let mut pbuf = vec![S::ZERO; f * ch];
        let mut cbuf = vec![S::ZERO; f * ch];
        let (mut in_l, mut in_r) = (vec![0f32; f], vec![0f32; f]);
        let (mut out_l, mut out_r) = (vec![0f32; f], vec![0f32; f]);
        let mut lp = Loop::new(&n);
        let mut delays = Delays::EMPTY;
        let from_capture = self.capture_input && cio.is_some();
        report.capture_input = from_capture;
        let write_delay = self.write_delay.clone();
        let access = dev.cfg.access;
        if let Err(e) = start(dev, &pio, &silence, ch, access, lp.periods) {
            report.error = Some(format!("cannot start: {}", alsa_text(&e)));
            return (StopReason::Stopped, lp.stats);
        }
        let reason = 'run: loop {
            if lp.next_k >= self.periods_total {
                break StopReason::Complete;
            }
            if stop.load(Ordering::Relaxed) || crate::rt::interrupt::requested() {
                break StopReason::Stopped;
            }
            match dev.play.wait(Some(lp.wait_ms)) {
                Ok(true) => {}
                Ok(false) => {
                    report.stalled = true;
                    break StopReason::Stopped;
                }
                Err(e) if e.errno() == libc::EINTR => continue,
                Err(e) => {
                    if !recover(dev, &pio, &silence, ch, &mut lp, report, e.errno(), false) {
                        break StopReason::Stopped;
                    }
                    continue;
                }
            }
            let wake = monotonic_ns();
            let st = match dev.play.status() {
                Ok(s) => s,
                Err(e) => {
                    report.error = Some(format!("status: {}", alsa_text(&e)));
                    break StopReason::Stopped;
                }
            };
            if let Some(errno) = state_errno(st.get_state()) {
                if !recover(dev, &pio, &silence, ch, &mut lp, report, errno, false) {
                    break StopReason::Stopped;
                }
                continue;
            }
            let avail = st.get_avail().max(0) as u64;
            if avail < lp.period {
                // Woken without a full period of space (a plugin's early poll): wait again.
                continue;
            }
            let (t_ideal, clamped, usable) = lp.t_ideal(dev, &st, wake, avail);
            let skipped = lp.skipped_since_recovery(t_ideal);
            let k = lp.next_k + skipped;
            if lp.recovered {
                if let Some(x) = report.xrun_events.last_mut() {
                    x.resumed_cycle.get_or_insert(k);
                }
            }
            lp.recovered = false;
            if k >= self.periods_total {
                lp.run_out(self.periods_total);
                break StopReason::Complete;
            }
            if lp.stats.cycles == 0 {
                lp.first_t_ideal = t_ideal;
            }
            let timing = lp.timing(k, t_ideal, wake, skipped);
            if let Some(cio) = &cio {
                // Duplex: the captured period is read to keep the linked stream flowing;
                // the engine processes the --input signal so the output stays checkable,
                // unless a loop measurement asked for the capture (`capture_input`).
                if let Err(e) = read_period(dev.cap.as_ref().unwrap(), cio, &mut cbuf, ch, access) {
                    if !recover(dev, &pio, &silence, ch, &mut lp, report, e.errno(), true) {
                        break 'run StopReason::Stopped;
                    }
                    continue;
                }
            }
            let frame = k * lp.period;
            if from_capture {
                deinterleave(&cbuf, &mut in_l, &mut in_r, ch);
            } else {
                source.fill(frame, &mut in_l, &mut in_r);
            }
            let rec: CycleRecord = {
                let mut io = AudioIo {
                    in_l: &in_l,
                    in_r: &in_r,
                    out_l: &mut out_l,
                    out_r: &mut out_r,
                };
                h.process_cycle(&mut io, &timing)
            };
            sink.consume(frame, &out_l, &out_r, !rec.xrun);
            interleave(&out_l, &out_r, &mut pbuf, ch);
            lp.count(k, t_ideal, wake, skipped, &rec);
            report.clamped_cycles += clamped as u64;
            if usable {
                report.tstamp_cycles += 1;
            } else {
                report.wake_estimate_cycles += 1;
            }
            if let Err(e) = write_period(&dev.play, &pio, &pbuf, ch, access) {
                if !recover(dev, &pio, &silence, ch, &mut lp, report, e.errno(), false) {
                    break StopReason::Stopped;
                }
                continue;
            }
            delays.read(dev, write_delay.as_deref(), k);
        };
        delays.finish(report, lp.rate);
        lp.stats.sink = sink.stats();
        (reason, lp.stats)
    }
}

/// The PCMs' I/O handles, made once before the loop: io_checked reads the hw params through a
/// malloc.
#[allow(clippy::type_complexity)]
fn io_handles<S: Sample>(
    dev: &AlsaDevice,
) -> std::result::Result<(IO<'_, S>, Option<IO<'_, S>>), String> {
    let pio =
        (dev.play.io_checked::<S>()).map_err(|e| format!("playback I/O: {}", alsa_text(&e)))?;
    let cio = (dev.cap.as_ref().map(|c| c.io_checked::<S>()).transpose())
        .map_err(|e| format!("capture I/O: {}", alsa_text(&e)))?;
    Ok((pio, cio))
}

/// Pre-fill playback with `periods` silent periods and start (capture follows through the
/// link, or is started here).
fn start<S: Sample>(
    dev: &AlsaDevice,
    pio: &IO<'_, S>,
    silence: &[S],
    ch: usize,
    access: AlsaAccess,
    periods: u64,
) -> std::result::Result<(), ::alsa::Error> {
    dev.play.prepare()?;
    if let (Some(c), false) = (&dev.cap, dev.linked) {
        c.prepare()?;
    }
    for _ in 0..periods {
        write_period(&dev.play, pio, silence, ch, access)?;
    }
    dev.play.start()?;
    if let (Some(c), false) = (&dev.cap, dev.linked) {
        c.start()?;
    }
    Ok(())
}

/// Recover from the error `errno` of a wait/read/write; false when it is not an xrun or
/// recovery failed (the run then stops with the error in the report).
#[allow(clippy::too_many_arguments)]
fn recover<S: Sample>(
    dev: &AlsaDevice,
    pio: &IO<'_, S>,
    silence: &[S],
    ch: usize,
    lp: &mut Loop,
    report: &mut AlsaReport,
    errno: i32,
    capture: bool,
) -> bool {
    let Some(kind) = xrun_kind(errno, capture) else {
        report.error = Some(format!(
            "{}: {}",
            if capture { "capture" } else { "playback" },
            nix::errno::Errno::from_raw(errno).desc()
        ));
        return false;
    };
    let t = monotonic_ns();
    let pcm = match (capture, &dev.cap) {
        (true, Some(c)) => c,
        _ => &dev.play,
    };
    #[allow(clippy::unnecessary_cast)] // Frames is a C long: 32 bits on some targets
    let delay = pcm.status().map(|s| s.get_delay() as i64).unwrap_or(0);
    // Stop both streams and start them afresh (prepare, pre-fill, start) rather than
    // snd_pcm_recover one: an unlinked capture stream keeps running otherwise, and the
    // pre-fill would block on a playback buffer that is still full. Prepare also brings a
    // suspended device back.
    let _ = dev.play.drop();
    if let (Some(c), false) = (&dev.cap, dev.linked) {
        let _ = c.drop();
    }
    let ok = start(dev, pio, silence, ch, dev.cfg.access, lp.periods).is_ok();
    report.xruns_recovered += 1;
    if report.xrun_events.len() < report.xrun_events.capacity() {
        let (after, engine_xrun, cause) = match lp.last {
            Some((k, x, c)) => (Some(k), x, c),
            None => (None, false, None),
        };
        report.xrun_events.push(AlsaXrun {
            after_cycle: after,
            at_ns: t.saturating_sub(lp.first_t_ideal),
            stream: if capture {
                AlsaStream::Capture
            } else {
                AlsaStream::Playback
            },
            kind,
            delay_frames: delay,
            recovery_ns: monotonic_ns() - t,
            engine_xrun,
            cause,
            resumed_cycle: None,
        });
    }
    lp.recovered = true;
    if !ok {
        report.error = Some(format!("could not recover from an {}", kind.as_str()));
    }
    ok
}
