//! `--driver jack`: the engine as a JACK client. The sound time is the cycle start the
//! server reports plus the playback latency of our output port (the server's own figure
//! for "written now, heard then").

use super::config::{EventConfig, EventRun};
use super::gpio::GpioLine;
use super::handler::{build_handler, drain, Discard, Onset};
use super::trials::{run_trials, trials_from, xruns_during_trials};
use super::Setting;
use crate::common::ns_of_frames;
use crate::driver::jack::JackClient;
use crate::driver::{Device, DriverKind};
use crate::error::Result;
use crate::progress::Progress;
use std::sync::atomic::Ordering;

/// A second, passive client that looks at the graph: physical playback ports and the
/// playback latency our port gets once connected.
struct JackProbe {
    client: jack::Client,
}

impl JackProbe {
    fn open(cfg: &crate::driver::jack::JackConfig) -> Result<JackProbe> {
        // Opened before any engine thread exists: connect sets the server name in the
        // environment, where libjack reads it.
        let client = crate::driver::jack::connect(cfg, "xrunlab-event-probe")?;
        Ok(JackProbe { client })
    }

    fn physical_playback(&self) -> Vec<String> {
        self.client.ports(
            None,
            Some("32 bit float mono audio"),
            jack::PortFlags::IS_INPUT | jack::PortFlags::IS_PHYSICAL,
        )
    }

    /// Playback latency of our port connected to `target` (or of `target` itself when ours
    /// cannot be found), and the port it was read from.
    fn playback_latency(&self, target: &str, our_client: &str) -> Option<([u32; 2], String)> {
        let t = self.client.port_by_name(target)?;
        let ours = t
            .get_connections()
            .into_iter()
            .find(|c| c.starts_with(&format!("{our_client}:")));
        let (port, name) = match ours.and_then(|n| self.client.port_by_name(&n).map(|p| (p, n))) {
            Some(x) => x,
            None => (t, target.to_string()),
        };
        let (lo, hi) = port.get_latency_range(jack::LatencyType::Playback);
        Some(([lo, hi], name))
    }
}

/// One setting as a JACK client: the period is set on the server for a grid row, the output
/// goes to the physical playback ports unless told otherwise.
pub(super) fn run(
    cfg: &EventConfig,
    s: &Setting,
    gpio: Option<&GpioLine>,
    progress: &dyn Progress,
) -> Result<EventRun> {
    let mut jc = cfg.jack.clone().unwrap_or_default();
    if s.grid_buffer.is_some() {
        // Grid: the period is set on the server for this row; the client puts the
        // server's own size back when the row ends (JackClient restores what it set).
        jc.set_buffer = true;
        jc.buffer_requested = s.period_frames;
    }
    let probe = JackProbe::open(&jc)?;
    let mut warnings = Vec::new();
    if jc.connect_out.is_empty() {
        jc.connect_out = probe.physical_playback().into_iter().take(2).collect();
        if jc.connect_out.is_empty() {
            warnings.push(
                "the JACK server has no physical playback port: the latency counts no output path (port latency 0)"
                    .to_string(),
            );
        }
    }
    let client = JackClient::open(&jc, jc.buffer_requested, None)?;
    let p = client.params();
    let (rate, frames, period_ns) = (p.rate, p.frames, p.period_ns());
    let (handler, mut rx, sh, monitor) =
        build_handler(cfg.chain(s.scenario), rate, frames, cfg.policy)?;
    let _mlock = crate::rt::memory::MemoryLock::acquire_if(cfg.mlock)?;
    // Read once the process thread runs and again after the trials: the server may have
    // recomputed latencies after our connection. Our client name may have been made unique
    // by the server; the probe finds our port among the target's connections by the name
    // we asked for.
    let mut seen: Vec<Option<([u32; 2], String)>> = Vec::with_capacity(2);
    let mut look = || {
        seen.push(
            jc.connect_out
                .first()
                .and_then(|p| probe.playback_latency(p, &jc.client_name)),
        )
    };
    let done = run_trials(
        cfg,
        s,
        gpio,
        progress,
        client,
        (handler, &sh, monitor),
        Discard,
        &mut look,
    )?;
    let times = &done.times;
    warnings.extend(done.warnings.iter().cloned());
    let latency_at_start = seen.first().cloned().flatten();
    let latency_at_end = seen.get(1).cloned().flatten();
    let latency = latency_at_end.clone().or(latency_at_start.clone());
    if latency_at_start.as_ref().map(|l| l.0) != latency_at_end.as_ref().map(|l| l.0) {
        warnings.push(format!(
            "the playback latency changed during the run ({:?} → {:?}); the last value is used",
            latency_at_start.map(|l| l.0),
            latency_at_end.map(|l| l.0)
        ));
    }
    let port_lat = latency.as_ref().map(|l| l.0[1]).unwrap_or(0) as u64;
    let onsets = drain(&mut rx);
    let t_sound =
        |o: &Onset| Some(o.t_ideal_ns + ns_of_frames(port_lat + o.onset_frame as u64, rate));
    let trials = trials_from(&times.te, &onsets, &t_sound, &|_| None);
    // None when the watchdog had to abandon a stuck client.
    let report = done.report.clone().into_jack();
    // Server xruns while the trials ran (activation and teardown can cause their own).
    let t0 = sh.t0_ns.load(Ordering::Relaxed);
    let server_xruns = xruns_during_trials(
        &times.te,
        &trials,
        period_ns,
        report
            .iter()
            .flat_map(|r| &r.server_xrun_events)
            .map(|e| t0 + e.at_ns),
    );
    Ok(EventRun {
        playback_latency_frames: latency.as_ref().map(|l| l.0),
        playback_latency_port: latency.map(|l| l.1),
        server_xruns: Some(server_xruns),
        jack: report,
        ..done.event_run(s, (DriverKind::Jack, p, None), port_lat, trials, warnings)
    })
}
