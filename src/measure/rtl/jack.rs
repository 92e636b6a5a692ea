//! `xrunlab rtl --driver jack`: the RTL estimator as a JACK client, on a loop closed inside
//! the graph (our `out_1` → our `in_1`) or through ports the user names (hardware:
//! `--out system:playback_1 --in system:capture_1`).
//!
//! Beside the measured delay it reports what the server *declares* for the same path, the
//! way jack_iodelay does: the playback latency range downstream of our output plus the
//! capture latency range upstream of our input, as the server propagates them to our own
//! ports once connected. Their difference is the extra latency the backend's `-I`/`-O`
//! arguments should declare (split evenly between them, as jack_iodelay suggests).
//!
//! A loop closed inside the graph has no port latency at all, yet it delays by one period:
//! the graph has a cycle, and the server runs the connection that closes it as a feedback
//! connection, whose reader gets what the writer wrote in the previous cycle. That period
//! is part of the declared path here (`graph_periods`); jack_iodelay does not know about
//! it and reports the whole period as "extra loopback latency". Through hardware ports no
//! cycle exists inside the graph, and the server's port latencies already hold its periods.

use super::handler::{run_loop, LoopRun, LoopSpec, NoSink};
use super::{Estimator, RtlConfig, RtlOutcome};
use crate::common::Status;
use crate::driver::jack::{JackClient, JackReport};
use crate::engine::harness::{show_progress, Harness, Supervisor};
use crate::error::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What the JACK loop was, what the server declares for it, and what it measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RtlJack {
    /// The loop is our output connected straight to our input inside the graph.
    pub self_loop: bool,
    /// The port our output feeds, and the port that feeds our input.
    pub out_port: String,
    pub in_port: String,
    /// Playback latency range [min, max] the server declares downstream of our output,
    /// frames (read from our `out_1` once connected: what jack_iodelay reads).
    pub playback_latency_frames: [u32; 2],
    /// Capture latency range [min, max] upstream of our input, frames.
    pub capture_latency_frames: [u32; 2],
    /// Periods the graph adds on top: 1 when the loop closes inside the graph (a feedback
    /// connection), 0 through hardware ports.
    pub graph_periods: u32,
    /// playback max + capture max + graph_periods · buffer.
    pub declared_frames: u64,
    /// measured − declared: the latency the server does not know about.
    pub extra_frames: Option<f64>,
    /// What to give the backend's `-I` and `-O` each: half the extra, rounded (0 when the
    /// server already declares at least what was measured; none for a loop inside the
    /// graph, which has no backend).
    pub io_arg_frames: Option<u64>,
    /// jack_iodelay's "extra loopback latency": measured − capture max − playback max (it
    /// does not count the graph's feedback period).
    pub iodelay_extra_frames: Option<f64>,
    /// Server xrun notifications whose cycles were excluded after the run.
    pub server_xruns_excluded: u64,
    /// The client's own report: server, version, xruns and their matching, connections.
    pub driver: JackReport,
}

fn latency(client: &jack::Client, port: &str, mode: jack::LatencyType) -> [u32; 2] {
    client
        .port_by_name(port)
        .map(|p| {
            let (a, b) = p.get_latency_range(mode);
            [a, b]
        })
        .unwrap_or([0, 0])
}

/// A port the loop uses must exist and point the right way; a typo is a usage error.
fn check_port(client: &jack::Client, name: &str, want_input: bool) -> Result<jack::PortFlags> {
    let p = client.port_by_name(name).ok_or_else(|| {
        Error::usage(format!(
            "no JACK port '{name}' on this server (list them with jack_lsp)"
        ))
    })?;
    let flags = p.flags();
    if flags.contains(jack::PortFlags::IS_INPUT) != want_input {
        return Err(Error::usage(format!(
            "'{name}' is an {} port: --out needs an input (playback) port, --in an output (capture) port",
            if want_input { "output" } else { "input" }
        )));
    }
    Ok(flags)
}

/// The loop's part in the harness: once our ports run, close the self-loop and read what
/// the server declares for the path (before the watchdog starts: reading waits for the
/// server to propagate the latencies).
struct Ports<'a> {
    probe: &'a jack::Client,
    self_loop: bool,
    our_out: &'a str,
    our_in: &'a str,
    connect_error: Option<String>,
    declared: Option<([u32; 2], [u32; 2])>,
}

impl Supervisor for Ports<'_> {
    fn on_threads(&mut self, _tids: &[libc::pid_t]) {
        let (probe, our_out, our_in) = (self.probe, self.our_out, self.our_in);
        if self.self_loop {
            if let Err(e) = probe.connect_ports_by_name(our_out, our_in) {
                self.connect_error = Some(format!("cannot connect {our_out} → {our_in}: {e}"));
                return;
            }
        }
        // The server propagates latencies after a connection changes the graph: read until
        // two reads 50 ms apart agree.
        let read = || {
            (
                latency(probe, our_out, jack::LatencyType::Playback),
                latency(probe, our_in, jack::LatencyType::Capture),
            )
        };
        let mut last = read();
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(50));
            let now = read();
            if now == last {
                break;
            }
            last = now;
        }
        self.declared = Some(last);
    }

    /// A loop that could not be closed ends at once (the harness stops the client).
    fn supervise(&mut self, ended: &dyn Fn() -> bool, h: &Harness<'_>) {
        if self.connect_error.is_none() {
            show_progress(ended, h)
        }
    }
}

/// Measure the loop. `est` was built for the client's rate.
pub(super) fn run(
    cfg: &RtlConfig,
    mut client: JackClient,
    est: Estimator,
    progress: &dyn crate::progress::Progress,
) -> Result<LoopRun> {
    let jc = cfg.jack.clone().unwrap_or_default();
    let frames = client.frames;
    let rate = client.rate;
    let name = client.client_name().to_string();
    let (our_in, our_out) = (format!("{name}:in_1"), format!("{name}:out_1"));
    let self_loop = jc.connect_in.is_empty() && jc.connect_out.is_empty();
    // A second, passive client reads port flags and latencies while ours runs (and closes
    // the self-loop once our ports exist).
    let probe = crate::driver::jack::connect(&jc, &format!("{}-probe", jc.client_name))?;
    let graph_periods = if self_loop {
        1
    } else {
        let out = check_port(&probe, &jc.connect_out[0], true)?;
        let inp = check_port(&probe, &jc.connect_in[0], false)?;
        let hw = |f: jack::PortFlags| {
            f.intersects(jack::PortFlags::IS_PHYSICAL | jack::PortFlags::IS_TERMINAL)
        };
        if hw(out) && hw(inp) {
            0
        } else {
            1
        }
    };

    // Our input ports are the loop's input, connected or not yet.
    client.capture_input();
    let source =
        crate::driver::signal::Generator::new(crate::driver::signal::SignalKind::Silence, rate, 0);
    let mut ports = Ports {
        probe: &probe,
        self_loop,
        our_out: &our_out,
        our_in: &our_in,
        connect_error: None,
        declared: None,
    };
    let spec = LoopSpec {
        est,
        late_loses_output: true,
        message: "rtl (jack loop)",
    };
    let looped = run_loop(cfg, client, spec, source, NoSink, progress, &mut ports)?;
    if let Some(e) = ports.connect_error {
        return Err(Error::cannot_measure(e));
    }
    // A loop that never ran a cycle has no latencies worth reading.
    let declared = ports.declared.filter(|_| looped.cycles > 0);
    let mut report = looped.report.clone().into_jack().unwrap_or_default();
    let param_change = report.param_change.is_some();
    let mut warnings = Vec::new();
    if self_loop && declared.is_some() {
        report.connections.push(format!("{our_out} -> {our_in}"));
    }
    let mut run = looped.into_run(Vec::new());
    // The client dropped the handler with a dead server (or a stuck cycle).
    // Server xrun notifications arrive late and off the cycle: exclude the windows around
    // the cycle each was matched to (two periods before it too, for the notification lag).
    // Those after the estimate converged came while the client only waited to stop.
    let mut server_excluded = 0;
    if let Some(e) = run.est.as_mut() {
        let b = frames as u64;
        for ev in &report.server_xrun_events {
            let c = ev
                .cycle
                .unwrap_or(crate::common::frames_of_ns(ev.at_ns, rate) / b);
            server_excluded +=
                e.disturb_before_convergence(c.saturating_sub(2) * b, (c + 1) * b) as u64;
        }
    }
    let measured = run
        .est
        .as_ref()
        .map(|e| e.result())
        .filter(|m| m.outcome == RtlOutcome::Measured)
        .and_then(|m| m.delay_frames);
    let (playback, capture) = declared.unwrap_or(([0, 0], [0, 0]));
    if declared.is_none() {
        warnings.push("the loop never ran a cycle: no port latencies were read".into());
    }
    let declared_frames =
        playback[1] as u64 + capture[1] as u64 + graph_periods as u64 * frames as u64;
    let extra = measured.map(|d| d - declared_frames as f64);
    if extra.is_some_and(|x| x < -0.5) {
        warnings.push(format!(
            "the server declares {declared_frames} frames for this loop, more than measured"
        ));
    }
    // A buffer-size or rate change stops the run short of its estimate (the report's
    // warning says which).
    if param_change && run.status == Status::Complete {
        run.status = Status::Interrupted;
    }
    if run.est.is_none() && run.watchdog.is_none() {
        warnings.push("the loop's state was lost with the JACK client: no measurement".into());
    }
    run.warnings.extend(warnings);
    run.jack = Some(RtlJack {
        self_loop,
        out_port: if self_loop {
            our_in.clone()
        } else {
            jc.connect_out[0].clone()
        },
        in_port: if self_loop {
            our_out.clone()
        } else {
            jc.connect_in[0].clone()
        },
        playback_latency_frames: playback,
        capture_latency_frames: capture,
        graph_periods,
        declared_frames,
        extra_frames: extra,
        // A loop inside the graph has no backend to declare anything for.
        io_arg_frames: extra
            .filter(|_| !self_loop)
            .map(|x| (x.round().max(0.0) as u64) / 2),
        iodelay_extra_frames: measured.map(|d| d - playback[1] as f64 - capture[1] as f64),
        server_xruns_excluded: server_excluded,
        driver: report,
    });
    Ok(run)
}
