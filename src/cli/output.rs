//! Shared output path of every command: JSON to a file (atomic) and/or stdout, the human
//! summary to stdout (or stderr when stdout carries JSON), nothing with --quiet.
//!
//! Every measuring command ends the same way (docs/ARCHITECTURE.md §1, §6): it starts a
//! [`Started`] before measuring, fills a [`Measured`] afterwards and hands it to [`finish`],
//! which owns the envelope, the warnings, the writing and the exit code.

use super::Global;
use crate::error::{Result, EXIT_CANNOT_MEASURE, EXIT_THRESHOLD};
use crate::results::{write_json_atomic, Body, ResultDoc, Status};
use crate::system::Environment;
use std::io::Write;

/// Write to stdout, treating a closed pipe (`xrunlab ... --json | head`) as the reader's
/// choice rather than an error: the result file, if any, is already written.
pub fn stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

/// Like [`stdout`], for stderr.
pub fn stderr(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
}

/// When a measurement started and the environment it started in, captured before measuring so
/// that the result's stolen time (environment.hypervisor_steal) covers the whole run.
pub struct Started {
    pub at: String,
    pub env: Environment,
}

impl Started {
    /// Now, on this machine; `stress` names the load that runs beside the measurement (the
    /// environment's own "measured under stress" warning comes from it).
    pub fn now(stress: Vec<String>) -> Self {
        let at = crate::rt::clock::wall_clock_rfc3339();
        let mut env = Environment::capture();
        env.stress = stress;
        Started { at, env }
    }
}

/// How a complete result ends the process (a partial one always exits 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Exit 0.
    Pass,
    /// A `--fail-*` threshold was crossed: exit 1.
    ThresholdCrossed,
    /// The run completed but measured nothing usable: exit 3, with this line on stderr
    /// (none when empty: the summary already says why).
    NothingMeasured(String),
}

/// What a measuring command hands to [`finish`].
pub struct Measured {
    pub body: Body,
    pub status: Status,
    pub started: Started,
    /// The measurement's own warnings; the environment's are added by the envelope.
    pub warnings: Vec<String>,
    /// The human summary.
    pub human: String,
    pub verdict: Verdict,
    /// What stderr says when the result is partial (status not complete); None when a partial
    /// result is the command's ordinary end (exit 0, e.g. `stress` stopped with Ctrl-C).
    pub partial: Option<String>,
    /// Print the warnings on stderr (`check` shows the same conditions as its table rows).
    pub show_warnings: bool,
}

impl Measured {
    pub fn new(body: Body, status: Status, started: Started, human: String) -> Self {
        let partial = Some(format!(
            "xrunlab: {} interrupted; partial result reported\n",
            body.kind()
        ));
        Measured {
            body,
            status,
            started,
            warnings: Vec::new(),
            human,
            verdict: Verdict::Pass,
            partial,
            show_warnings: true,
        }
    }

    pub fn warnings(mut self, w: impl IntoIterator<Item = String>) -> Self {
        self.warnings.extend(w);
        self
    }

    pub fn verdict(mut self, v: Verdict) -> Self {
        self.verdict = v;
        self
    }

    /// Exit 1 when `crossed`.
    pub fn threshold(self, crossed: bool) -> Self {
        self.verdict(if crossed {
            Verdict::ThresholdCrossed
        } else {
            Verdict::Pass
        })
    }

    pub fn partial(mut self, line: impl Into<String>) -> Self {
        self.partial = Some(line.into());
        self
    }
}

/// Write the result as the global options ask, say its warnings once, and return the exit code.
pub fn finish(m: Measured, g: &Global) -> Result<u8> {
    let mut doc = ResultDoc::new(m.body, m.status, m.started.at, m.started.env);
    // The environment's warnings come first; a measurement repeating one adds nothing.
    for w in m.warnings {
        if !doc.warnings.contains(&w) {
            doc.warnings.push(w);
        }
    }
    emit(&doc, g, &m.human)?;
    if m.show_warnings && !g.quiet {
        // A warning the summary already shows (a stress record's) is not repeated.
        let lines: String = doc
            .warnings
            .iter()
            .filter(|w| !m.human.contains(w.as_str()))
            .map(|w| format!("xrunlab: warning: {w}\n"))
            .collect();
        stderr(&lines);
    }
    if m.status != Status::Complete {
        let Some(line) = m.partial else {
            return Ok(0);
        };
        stderr(&line);
        if m.status == Status::Watchdog {
            // A thread stuck in a plugin cannot be joined; leaving the process ends it.
            let _ = std::io::stdout().flush();
            let _ = std::io::stderr().flush();
            std::process::exit(EXIT_CANNOT_MEASURE as i32);
        }
        return Ok(EXIT_CANNOT_MEASURE);
    }
    Ok(match m.verdict {
        Verdict::Pass => 0,
        Verdict::ThresholdCrossed => EXIT_THRESHOLD,
        Verdict::NothingMeasured(line) => {
            stderr(&line);
            EXIT_CANNOT_MEASURE
        }
    })
}

/// Emit a finished (or partial) result as the global options ask.
pub fn emit(doc: &ResultDoc, g: &Global, human: &str) -> Result<()> {
    if let Some(path) = &g.output {
        write_json_atomic(path, doc)?;
    }
    if g.json {
        stdout(&format!("{}\n", doc.to_json()));
    }
    if !g.quiet {
        if g.json {
            stderr(human);
        } else {
            stdout(human);
        }
        if let Some(path) = &g.output {
            let line = format!("result written to {}\n", path.display());
            if g.json {
                stderr(&line);
            } else {
                stdout(&line);
            }
        }
    }
    Ok(())
}
