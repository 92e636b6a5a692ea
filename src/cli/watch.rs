//! `xrunlab watch`: attach to the running JACK server and record every xrun until Ctrl-C,
//! `--duration` or the server going away (docs/methods.md "Watch").

use super::output::{self, Measured};
use super::Global;
use crate::error::{Error, Result};
use crate::measure::watch::{self, Event, Live, ServerKind, WatchConfig};
use crate::report::text::watch as text;
use crate::results::Body;
use clap::Args;
use std::io::Write;

/// Watch a live JACK session: every xrun with its time, cycle, driver delay and DSP load,
/// without adding work to the graph (a client with no ports and no process callback).
#[derive(Debug, Args)]
#[command(
    after_help = "Ends on Ctrl-C, after --duration, or when the server goes away (exit 3, the result written; \
--follow waits for it instead and records the gap). No server at all: exit 3, saying what was looked for.\n\n\
Examples:\n  xrunlab watch\n  xrunlab watch --server jack:studio --duration 2h -o watch.json\n  xrunlab watch --follow --json > watch.json\n  sudo xrunlab watch --forensics --duration 10m   # the late client of each xrun, and what took its CPU\n  pw-jack xrunlab watch --server jack --duration 10m"
)]
pub struct WatchArgs {
    /// The server: auto or jack (the JACK server libjack finds: jackd, or PipeWire's JACK
    /// graph under pw-jack), jack:NAME, or pipewire (its profiler: not built yet).
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
        Some(("jack", name)) if !name.is_empty() && !name.contains(['/', '\0']) => {
            Ok((ServerKind::Jack, Some(name.to_string())))
        }
        _ => Err(Error::usage(format!(
            "--server {s}: expected auto, jack, jack:NAME or pipewire"
        ))),
    }
}

pub fn run(a: WatchArgs, g: &Global) -> Result<u8> {
    let (server, server_name) = parse_server(&a.server)?;
    let duration_ns = a
        .duration
        .as_deref()
        .map(crate::units::parse_duration_ns)
        .transpose()?;
    if duration_ns == Some(0) {
        return super::usage("--duration must be positive");
    }
    let cfg = WatchConfig {
        server,
        server_name,
        duration_ns,
        follow: a.follow,
        forensics: a.forensics,
    };
    let mut session = output::session(g.quiet, 0, Vec::new()).with_forensics(
        a.forensics
            .then(crate::measure::session::ForensicsPlan::default),
    );
    let live = Live::default();
    let tty = crate::progress::wanted(g.quiet);
    let quiet = g.quiet;
    let mut on = |e: Event| say(e, tty, quiet);
    let outcome = watch::run(&cfg, &mut session, &live, &mut on)?;
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
