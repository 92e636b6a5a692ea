//! The driver contract every driver implements, JACK included (docs/ARCHITECTURE.md §4):
//!
//! 1. **open** with the asked [`DeviceParams`] → a [`Device`] that knows what it negotiated
//!    ([`Device::params`]) and what to warn about it ([`Device::warnings`]);
//! 2. **start** it with the cycle's [`Parts`] (handler, input source, output sink) and a
//!    [`RunSpec`] (length, stop flag, thread) → a [`Running`] device that exposes its
//!    real-time thread ([`Running::wait_rt_tid`]);
//! 3. **join** → one [`DriverOutcome`]: why it stopped, its counters, a driver-specific
//!    [`DriverReport`] that knows its own warnings, and the parts back.
//!
//! The loop drivers (virtual, sim, alsa) run their loop on the thread [`RunSpec::thread`]
//! describes, at its real-time policy; that thread is the real-time thread. JACK's server
//! owns the loop: its process thread runs the cycles and is known after the first one,
//! while the thread `RunSpec` describes only waits (never real time).

use super::alsa::{AlsaConfig, AlsaDriver, AlsaReport};
use super::jack::{JackClient, JackConfig, JackReport};
use super::signal::{InputSource, OutputSink};
use super::sim::{SimConfig, SimDriver};
use super::virtual_dev::VirtualDriver;
use super::{CycleHandler, DeviceParams, DriverKind, DriverStats, LoopDriver, StopReason};
use crate::error::Result;
use crate::rt::thread::{spawn_rt, RtThread, ThreadSpec};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a caller waits for a device's real-time thread to show itself: a JACK server
/// runs a new client's first cycle within milliseconds (PipeWire negotiates the graph first).
pub const RT_TID_WAIT: Duration = Duration::from_secs(3);

/// The bounds a cycle's parts need to move to the device thread, named once.
pub trait RtHandler: CycleHandler + Send + 'static {}
impl<T: CycleHandler + Send + 'static> RtHandler for T {}
/// See [`RtHandler`].
pub trait RtSource: InputSource + 'static {}
impl<T: InputSource + 'static> RtSource for T {}
/// See [`RtHandler`].
pub trait RtSink: OutputSink + 'static {}
impl<T: OutputSink + 'static> RtSink for T {}

/// What a cycle needs besides the device: they move to the device thread with the run and
/// come back in the outcome (unless the run was abandoned with a stuck thread).
pub struct Parts<H, I, O> {
    pub handler: H,
    pub source: I,
    pub sink: O,
}

/// How a started device runs.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Device periods to run before stopping with [`StopReason::Complete`].
    pub periods_total: u64,
    /// Set to stop early (a device also stops on SIGINT/SIGTERM).
    pub stop: Arc<AtomicBool>,
    /// The device thread: name, real-time policy and CPUs of the loop (virtual, sim, alsa);
    /// for JACK the waiting thread, whose policy is always SCHED_OTHER.
    pub thread: ThreadSpec,
}

/// A driver-specific account of the run, beside the counters every driver has.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum DriverReport {
    /// virtual and sim: nothing beyond [`DriverStats`].
    #[default]
    None,
    Jack(JackReport),
    Alsa(AlsaReport),
}

impl DriverReport {
    /// What the user should hear about the run from the driver's side.
    pub fn warnings(&self) -> Vec<String> {
        match self {
            DriverReport::None => Vec::new(),
            DriverReport::Jack(j) => j.warnings(),
            DriverReport::Alsa(a) => a.warnings(),
        }
    }

    /// The audio server went away during the run (the result's status is then
    /// `server_shutdown`).
    pub fn server_shutdown(&self) -> bool {
        matches!(self, DriverReport::Jack(j) if j.server_shutdown)
    }

    pub fn into_jack(self) -> Option<JackReport> {
        match self {
            DriverReport::Jack(j) => Some(j),
            _ => None,
        }
    }

    pub fn into_alsa(self) -> Option<AlsaReport> {
        match self {
            DriverReport::Alsa(a) => Some(a),
            _ => None,
        }
    }
}

/// What a joined device leaves: one shape for every driver.
pub struct DriverOutcome<T> {
    pub reason: StopReason,
    pub stats: DriverStats,
    pub report: DriverReport,
    /// The handler, source and sink; None when the driver could not get them back (a JACK
    /// client torn down with a stuck cycle, or one whose server died).
    pub parts: Option<T>,
}

/// An opened device: parameters negotiated, nothing running yet.
pub trait Device: Sized + Send + 'static {
    fn kind(&self) -> DriverKind;
    /// What the device accepted; build the graph for these.
    fn params(&self) -> DeviceParams;
    /// What opening has to say about the parameters (e.g. an ALSA device that accepted
    /// other values than asked).
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
    /// Start cycling `parts.handler` until `run.periods_total` periods elapsed, `run.stop`
    /// is set, a signal arrives or the device gives up. Errors are the device's refusals
    /// (a JACK client that cannot register or activate); once it runs, every end is an
    /// outcome.
    fn start<H: RtHandler, I: RtSource, O: RtSink>(
        self,
        parts: Parts<H, I, O>,
        run: RunSpec,
    ) -> Result<Running<Parts<H, I, O>>>;
}

/// A started device.
pub struct Running<T> {
    thread: RtThread<Result<DriverOutcome<T>>>,
    /// The thread that runs the cycles; 0 until known.
    rt_tid: Arc<AtomicI32>,
    stop: Arc<AtomicBool>,
    /// Whether `thread` runs the cycles (not a thread waiting on JACK's).
    owns_cycles: bool,
}

impl<T: Send + 'static> Running<T> {
    /// Run `body` (the device's loop and teardown) on the thread `spec` describes. The
    /// loop drivers' cycles run on that thread: it is the real-time thread.
    pub(crate) fn spawn(
        spec: ThreadSpec,
        stop: Arc<AtomicBool>,
        body: impl FnOnce() -> Result<DriverOutcome<T>> + Send + 'static,
    ) -> Result<Self> {
        let thread = spawn_rt(spec, body)?;
        let rt_tid = Arc::new(AtomicI32::new(thread.tid));
        Ok(Running {
            thread,
            rt_tid,
            stop,
            owns_cycles: true,
        })
    }

    /// `spawn` for a device whose cycles run on a thread it does not own (JACK's process
    /// thread): `body` stores that thread's tid into the cell it is given once it knows it.
    pub(crate) fn spawn_waiting(
        spec: ThreadSpec,
        stop: Arc<AtomicBool>,
        body: impl FnOnce(Arc<AtomicI32>) -> Result<DriverOutcome<T>> + Send + 'static,
    ) -> Result<Self> {
        let rt_tid = Arc::new(AtomicI32::new(0));
        let cell = rt_tid.clone();
        let thread = spawn_rt(spec, move || body(cell))?;
        Ok(Running {
            thread,
            rt_tid,
            stop,
            owns_cycles: false,
        })
    }
}

impl<T> Running<T> {
    /// The thread the device runs on (for JACK the waiting thread).
    pub fn thread_tid(&self) -> libc::pid_t {
        self.thread.tid
    }

    /// The timer slack of the thread that runs the cycles under SCHED_OTHER (None under a
    /// real-time policy, or when the cycles run on a server's thread, not ours).
    pub fn timer_slack_ns(&self) -> Option<u64> {
        self.thread.timer_slack_ns.filter(|_| self.owns_cycles)
    }

    /// The real-time thread that runs the cycles, once known.
    pub fn rt_tid(&self) -> Option<libc::pid_t> {
        match self.rt_tid.load(Ordering::SeqCst) {
            0 => None,
            t => Some(t),
        }
    }

    /// Wait up to `limit` for the real-time thread (JACK's process thread exists once the
    /// first cycle ran; the loop drivers' is there at once). A device that never ran a cycle
    /// in that time, or stopped before, gives its own thread instead: the caller always has
    /// a thread to guard and report.
    pub fn wait_rt_tid(&self, limit: Duration) -> libc::pid_t {
        let t = std::time::Instant::now();
        while self.rt_tid().is_none() && !self.is_finished() && t.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.rt_tid().unwrap_or(self.thread.tid)
    }

    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Ask the device to stop (it finishes the cycle in progress).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    pub fn stop_flag(&self) -> &Arc<AtomicBool> {
        &self.stop
    }

    /// Wait for the device to stop and take its outcome.
    pub fn join(self) -> Result<DriverOutcome<T>> {
        self.thread.join()
    }

    /// Leave a device whose thread is stuck (the watchdog's case, docs/ARCHITECTURE.md §5):
    /// it cannot be killed in-process, and the process exits after writing the result.
    pub fn abandon(self) {
        std::mem::forget(self.thread);
    }
}

/// Every loop driver (virtual, sim, alsa) is a device: its loop runs on the thread
/// `run.thread` describes, which is therefore the real-time thread.
impl<D: LoopDriver> Device for D {
    fn kind(&self) -> DriverKind {
        LoopDriver::kind(self)
    }

    fn params(&self) -> DeviceParams {
        LoopDriver::params(self)
    }

    fn warnings(&self) -> Vec<String> {
        LoopDriver::warnings(self)
    }

    fn start<H: RtHandler, I: RtSource, O: RtSink>(
        mut self,
        parts: Parts<H, I, O>,
        run: RunSpec,
    ) -> Result<Running<Parts<H, I, O>>> {
        self.set_periods_total(run.periods_total);
        let stop = run.stop.clone();
        let mut parts = parts;
        Running::spawn(run.thread, run.stop, move || {
            let (reason, stats) = self.run(
                &mut parts.handler,
                &stop,
                &mut parts.source,
                &mut parts.sink,
            );
            Ok(DriverOutcome {
                reason,
                stats,
                report: self.report(),
                parts: Some(parts),
            })
        })
    }
}

/// What opening a device of any kind may need besides the asked parameters.
#[derive(Debug, Clone, Default)]
pub struct DriverOptions {
    pub sim: SimConfig,
    /// The sim driver's latency draws.
    pub seed: u64,
    pub jack: Option<JackConfig>,
    pub alsa: Option<AlsaConfig>,
}

/// A device of the kind the caller chose at run time (one per run: the variants' sizes do
/// not matter).
#[allow(clippy::large_enum_variant)]
pub enum AnyDevice {
    Virtual(VirtualDriver),
    Sim(SimDriver),
    Jack(JackClient),
    Alsa(AlsaDriver),
}

impl AnyDevice {
    /// Open a `kind` device for `asked`. virtual and sim take the asked parameters as they
    /// are; JACK takes the server's (`opts.jack`'s requested buffer and rate are checked or
    /// applied); ALSA negotiates the closest the device accepts.
    pub fn open(kind: DriverKind, asked: DeviceParams, opts: &DriverOptions) -> Result<Self> {
        Ok(match kind {
            DriverKind::Virtual => AnyDevice::Virtual(VirtualDriver::new(asked, 0)),
            DriverKind::Sim => AnyDevice::Sim(SimDriver::new(asked, &opts.sim, opts.seed, 0)),
            DriverKind::Jack => {
                let jc = opts.jack.clone().unwrap_or_default();
                AnyDevice::Jack(JackClient::open(
                    &jc,
                    jc.buffer_requested,
                    jc.rate_requested,
                )?)
            }
            DriverKind::Alsa => {
                let ac = opts.alsa.clone().unwrap_or_default();
                AnyDevice::Alsa(AlsaDriver::open(&ac, asked)?)
            }
        })
    }
}

impl Device for AnyDevice {
    fn kind(&self) -> DriverKind {
        match self {
            AnyDevice::Virtual(d) => Device::kind(d),
            AnyDevice::Sim(d) => Device::kind(d),
            AnyDevice::Jack(d) => Device::kind(d),
            AnyDevice::Alsa(d) => Device::kind(d),
        }
    }

    fn params(&self) -> DeviceParams {
        match self {
            AnyDevice::Virtual(d) => Device::params(d),
            AnyDevice::Sim(d) => Device::params(d),
            AnyDevice::Jack(d) => Device::params(d),
            AnyDevice::Alsa(d) => Device::params(d),
        }
    }

    fn warnings(&self) -> Vec<String> {
        match self {
            AnyDevice::Virtual(d) => Device::warnings(d),
            AnyDevice::Sim(d) => Device::warnings(d),
            AnyDevice::Jack(d) => Device::warnings(d),
            AnyDevice::Alsa(d) => Device::warnings(d),
        }
    }

    fn start<H: RtHandler, I: RtSource, O: RtSink>(
        self,
        parts: Parts<H, I, O>,
        run: RunSpec,
    ) -> Result<Running<Parts<H, I, O>>> {
        match self {
            AnyDevice::Virtual(d) => d.start(parts, run),
            AnyDevice::Sim(d) => d.start(parts, run),
            AnyDevice::Jack(d) => d.start(parts, run),
            AnyDevice::Alsa(d) => d.start(parts, run),
        }
    }
}
