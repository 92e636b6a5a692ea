//! `xrunlab watch`: attach to the running JACK server and record every xrun until Ctrl-C,
//! `--duration` or the server going away (docs/methods.md "Watch").

use super::output::{self, Measured};
use super::Global;
use crate::error::{Error, Result};
use crate::measure::watch::{self, Event, Live, ServerKind, WatchConfig};
use crate::report::export::openmetrics as om;
use crate::report::serve::{Endpoint, Page};
use crate::report::text::watch as text;
use crate::results::Body;
use clap::Args;
use std::io::Write;

/// Watch a live PipeWire or JACK session: every xrun with its time, cycle and DSP load, the
/// late node on PipeWire, without adding work to the graph (PipeWire: its profiler only;
/// JACK: a client with no ports and no process callback).
#[derive(Debug, Args)]
#[command(
    after_help = "Ends on Ctrl-C, after --duration, or when the server goes away (exit 3, the result written; \
--follow waits for it instead and records the gap). No server at all: exit 3, saying what was looked for.\n\n\
Examples:\n  xrunlab watch\n  xrunlab watch --server pipewire --duration 10m -o watch.json\n  xrunlab watch --server jack:studio --duration 2h -o watch.json\n  xrunlab watch --follow --json > watch.json\n  sudo xrunlab watch --forensics --duration 10m   # the late client of each xrun, the plugin inside it, what took its CPU\n  pw-jack xrunlab watch --server jack --duration 10m\n  xrunlab watch --follow --textfile /var/lib/prometheus/node-exporter   # for a node exporter\n  xrunlab watch --follow --metrics 9543   # Prometheus scrapes http://127.0.0.1:9543/metrics\n  xrunlab watch --metrics 0.0.0.0:9543   # reachable from other machines\n  xrunlab watch --duration 1h --export lava=watch.txt --export openmetrics=watch.prom"
)]
pub struct WatchArgs {
    /// The server: pipewire (its profiler: every node's timing, the late node of each xrun),
    /// jack (the JACK server libjack finds: jackd; under pw-jack, PipeWire's graph, read
    /// through its profiler, as libjack there reports no late client),
    /// jack:NAME, or auto (PipeWire if its daemon answers, else JACK).
    #[arg(long, value_name = "SERVER", default_value = "auto")]
    pub server: String,
    /// Stop after this long (e.g. 30s, 10m, 2h) [default: until Ctrl-C].
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// When the server goes away, wait for it to come back and go on (the gap is recorded).
    #[arg(long)]
    pub follow: bool,
    /// Trace the session's real-time threads (root and tracefs): each client's wake-up and
    /// busy time per cycle, the late client of every xrun and what ran on its CPU instead.
    #[arg(long)]
    pub forensics: bool,
    /// With --forensics, sample each client thread every this much of its own CPU time, to
    /// name the plugin (or host code, library, kernel) that held the late client's thread;
    /// 0 turns sampling off. Each sample interrupts the thread (about 15 µs in a KVM
    /// guest, far less on bare metal): 1 ms costs about 1.5 % of its time.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "1ms",
        requires = "forensics"
    )]
    pub sample_every: String,
    /// Keep DIR/xrunlab.prom current with the live counters (Prometheus text, renamed into
    /// place), for a node exporter's textfile collector (/var/lib/prometheus/node-exporter).
    #[arg(long, value_name = "DIR")]
    pub textfile: Option<std::path::PathBuf>,
    /// How often --textfile is refreshed.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "15s",
        requires = "textfile"
    )]
    pub interval: String,
    /// Serve the live counters at http://ADDR/metrics while watching, for a Prometheus
    /// server to scrape: PORT (on 127.0.0.1), HOST:PORT or [IPv6]:PORT.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    #[command(flatten)]
    pub export: super::export_args::ExportArgs,
}

/// `--textfile`: the live counters written every interval, and once more at the end.
struct Textfile {
    dir: std::path::PathBuf,
    every_ns: u64,
    last_ns: u64,
    server: (String, String),
    failed: bool,
}

impl Textfile {
    fn write(&mut self, l: &watch::LiveSnapshot) {
        let text = om::watch_live_text(l, &self.server.0, &self.server.1);
        match om::write_textfile(&self.dir, &text) {
            Ok(_) => self.failed = false,
            // Said once per failing stretch: a full disk must not flood the terminal.
            Err(e) if !self.failed => {
                self.failed = true;
                output::stderr(&format!("xrunlab: --textfile: {e}\n"));
            }
            Err(_) => {}
        }
    }

    fn tick(&mut self, l: &watch::LiveSnapshot) {
        let now = crate::rt::clock::monotonic_ns();
        if now.saturating_sub(self.last_ns) >= self.every_ns {
            self.last_ns = now;
            self.write(l);
        }
    }
}

/// `--server` as typed: its kind and, for `jack:NAME`, the name.
fn parse_server(s: &str) -> Result<(ServerKind, Option<String>)> {
    match s.split_once(':') {
        None => match s {
            "auto" => Ok((ServerKind::Auto, None)),
            "jack" => Ok((ServerKind::Jack, None)),
            "pipewire" => Ok((ServerKind::Pipewire, None)),
            _ => Err(Error::usage(format!(
                "--server {s}: expected auto, jack, jack:NAME or pipewire"
            ))),
        },
        Some(("jack", name)) if !name.is_empty() => {
            crate::driver::jack::names::check_server(name, &format!("--server jack:{name}"))?;
            Ok((ServerKind::Jack, Some(name.to_string())))
        }
        _ => Err(Error::usage(format!(
            "--server {s}: expected auto, jack, jack:NAME or pipewire"
        ))),
    }
}

pub fn run(a: WatchArgs, g: &Global) -> Result<u8> {
    let (server, server_name) = parse_server(&a.server)?;
    if server_name.is_none() && server != ServerKind::Pipewire {
        crate::driver::jack::names::check_environment()?;
    }
    let duration_ns = a
        .duration
        .as_deref()
        .map(crate::units::parse_duration_ns)
        .transpose()?;
    if duration_ns == Some(0) {
        return super::usage("--duration must be positive");
    }
    let sample_ns = match a.sample_every.trim() {
        "0" => 0,
        s => crate::units::parse_duration_ns(s)?,
    };
    if sample_ns != 0 && !(10_000..=100_000_000).contains(&sample_ns) {
        return super::usage(format!(
            "--sample-every {}: between 10us and 100ms, or 0 for no sampling",
            a.sample_every
        ));
    }
    let every_ns = crate::units::parse_duration_ns(&a.interval)?;
    if every_ns == 0 {
        return super::usage("--interval must be positive");
    }
    if let Some(dir) = &a.textfile {
        if !dir.is_dir() {
            return super::usage(format!(
                "--textfile {}: not a directory (the node exporter's is /var/lib/prometheus/node-exporter)",
                dir.display()
            ));
        }
        crate::results::check_target_derived(&dir.join(om::TEXTFILE))?;
        output::preflight(&[("--textfile", &dir.join(om::TEXTFILE))], &[])?;
    }
    a.export.check_single_result()?;
    a.export.preflight(&[])?;
    // Bound before attaching: a port in use is exit 2 before anything is watched.
    let endpoint = a.metrics.as_deref().map(Endpoint::bind).transpose()?;
    let mut textfile = a.textfile.clone().map(|dir| Textfile {
        dir,
        every_ns,
        last_ns: 0,
        server: (String::new(), String::new()),
        failed: false,
    });
    let cfg = WatchConfig {
        server,
        server_name,
        duration_ns,
        follow: a.follow,
        forensics: a.forensics,
        sample_ns: if a.forensics { sample_ns } else { 0 },
    };
    let mut session = output::session(g.quiet, 0, Vec::new()).with_forensics(
        a.forensics
            .then(crate::measure::session::ForensicsPlan::default),
    );
    let live = Live::default();
    let tty = crate::progress::wanted(g.quiet);
    let quiet = g.quiet;
    // The server's labels for --metrics, set once attached (None: 503 until then).
    let attached: std::sync::Mutex<Option<(String, String)>> = Default::default();
    let url = endpoint
        .as_ref()
        .map(|e| format!("http://{}{}", e.local_addr(), om::PATH));
    let mut on = |e: Event| {
        let mut announce = None;
        if let Event::Attached(s) | Event::ServerBack(s, _) = &e {
            if let Ok(mut l) = attached.lock() {
                announce = url.as_ref().filter(|_| l.is_none() && !quiet);
                *l = Some((s.kind.clone(), s.name.clone()));
            }
        }
        if let Some(t) = textfile.as_mut() {
            match &e {
                Event::Attached(s) | Event::ServerBack(s, _) => {
                    t.server = (s.kind.clone(), s.name.clone());
                    t.write(&live.snapshot());
                }
                Event::Tick(l) => t.tick(l),
                Event::Xrun(..) | Event::Late(..) | Event::Lost(_) | Event::ServerGone { .. } => {}
            }
        }
        say(e, tty, quiet);
        if let Some(u) = announce {
            output::stderr(&format!("live metrics at {u}\n"));
        }
    };
    let outcome = match endpoint {
        Some(ep) => {
            let body = || {
                let l = attached.lock().ok()?.clone()?;
                Some(om::watch_live_text(&live.snapshot(), &l.0, &l.1))
            };
            let page = Page {
                path: om::PATH,
                content_type: om::CONTENT_TYPE,
                not_ready: "the watch has not attached to a server yet",
                body: &body,
            };
            ep.serve_while(&page, || watch::run(&cfg, &mut session, &live, &mut on))
        }
        None => watch::run(&cfg, &mut session, &live, &mut on),
    }?;
    if let Some(t) = textfile.as_mut() {
        t.write(&live.snapshot());
    }
    if tty {
        // Clear the status line before the summary.
        output::stderr("\r\x1b[2K");
    }
    let human = text::summary(&outcome.config, &outcome.results, outcome.status);
    let status = outcome.status;
    let body = Body::Watch {
        config: outcome.config,
        results: Box::new(outcome.results),
    };
    let partial = match status {
        crate::common::Status::ServerShutdown => {
            "xrunlab: the server went away; the watch until then is reported\n"
        }
        _ => "xrunlab: watch interrupted; what was seen until then is reported\n",
    };
    output::finish(
        Measured::new(body, status, session.into_started(), human)
            .warnings(outcome.warnings)
            .also(a.export.writer())
            .partial(partial),
        g,
    )
}

/// Print what the watch says as it goes: xrun lines and server changes on stderr (stdout
/// may carry `--json`), the status line only on a terminal.
fn say(e: Event, tty: bool, quiet: bool) {
    let line = match e {
        Event::Attached(s) => format!(
            "watching {} '{}' at {}/{}: Ctrl-C ends the watch",
            s.kind, s.name, s.frames, s.rate
        ),
        Event::Xrun(x, s) => text::xrun_line(x, s),
        Event::Late(i, l) => text::late_line(i, l),
        Event::Lost(n) => format!("{n} xrun notification(s) lost (counted)"),
        Event::ServerGone { follow: true } => "the server went away: waiting for it".into(),
        Event::ServerGone { follow: false } => "the server went away: the watch ends".into(),
        Event::ServerBack(s, gap) => format!(
            "the server is back after {} ({} at {}/{})",
            crate::units::format_ns(gap),
            s.kind,
            s.frames,
            s.rate
        ),
        Event::Tick(l) => {
            if tty {
                output::stderr(&format!("\r\x1b[2K{}", text::status_line(&l)));
                let _ = std::io::stderr().flush();
            }
            return;
        }
    };
    if quiet {
        return;
    }
    if tty {
        output::stderr("\r\x1b[2K");
    }
    output::stderr(&format!("{line}\n"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_values_parse_or_are_refused() {
        assert_eq!(parse_server("auto").unwrap(), (ServerKind::Auto, None));
        assert_eq!(
            parse_server("jack:studio").unwrap(),
            (ServerKind::Jack, Some("studio".into()))
        );
        assert_eq!(parse_server("pipewire").unwrap().0, ServerKind::Pipewire);
        for bad in ["", "jack:", "alsa", "pipewire:x", "jack:a/b"] {
            assert_eq!(parse_server(bad).unwrap_err().exit_code(), 2, "{bad}");
        }
    }
}
