//! The per-cycle CSV trace (`--trace`).

use crate::common::output::Output;
use crate::common::{Cause, CycleRecord};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Per-cycle CSV trace. A write that fails (a full disk) does not end the run: the trace is
/// only a copy of records the run folds anyway, so its summaries, xruns and causes stay whole
/// and comparable with other runs of the same duration, where stopping would turn a disk
/// problem into a shorter, "interrupted" measurement. The trace is cut at its last complete
/// line instead ([`TraceWriter::abandon`]) and the result says where.
pub struct TraceWriter {
    /// Over a duplicate of `out`'s descriptor, so that `out` stays ours to cut and commit
    /// even when the writer's last flush fails.
    w: csv::Writer<std::io::BufWriter<std::fs::File>>,
    /// A new file renamed over the name at the end (never a write through a link planted
    /// there), or a device or descriptor the user named (docs/ARCHITECTURE.md §2 "Writing").
    out: Output,
    path: PathBuf,
    header_done: bool,
}

impl TraceWriter {
    pub fn create(path: &Path) -> Result<Self> {
        let out = Output::create(path)?;
        let f = out
            .file()
            .try_clone()
            .map_err(|e| Error::io(format!("trace file {}", path.display()), e))?;
        Ok(TraceWriter {
            w: csv::Writer::from_writer(std::io::BufWriter::with_capacity(1 << 20, f)),
            out,
            path: path.to_path_buf(),
            header_done: false,
        })
    }

    fn io(&self, e: impl std::fmt::Display) -> Error {
        Error::io(
            format!("writing trace {}", self.path.display()),
            std::io::Error::other(e.to_string()),
        )
    }

    /// Give the trace up after `e`, a failed write: drop the writer (what it still holds may
    /// or may not reach the disk), then cut a new file at its last complete line and put it
    /// at the name, or drop it when not even the header is whole. Returns what became of it,
    /// for the result's `trace_error` and warnings.
    pub fn abandon(self, e: &Error) -> String {
        let TraceWriter { w, out, .. } = self;
        drop(w);
        if !out.is_new_file() {
            return format!("{e}; the cycles after that are not in the trace (the run went on)");
        }
        match cut_at_last_line(out.file()) {
            Ok(Some(last)) => {
                if let Err(c) = out.commit() {
                    return format!("{e}; saving the trace cut at its last complete line failed too: {c}");
                }
                match last.split(',').next().and_then(|c| c.parse::<u64>().ok()) {
                    Some(cycle) => format!(
                        "{e}; the trace was cut at its last complete line, cycle {cycle} (the run went on without it)"
                    ),
                    None => format!(
                        "{e}; the trace was cut after its header: it holds no cycle (the run went on without it)"
                    ),
                }
            }
            // Dropping `out` removes the new file; the name keeps what it had.
            Ok(None) => format!(
                "{e} before the trace's first line was whole; it was not saved (the run went on without it)"
            ),
            Err(c) => format!(
                "{e}; cutting the trace at its last complete line failed ({c}): it was not saved"
            ),
        }
    }

    pub fn write(&mut self, r: &CycleRecord) -> Result<()> {
        let nt = r.threads as usize;
        let ntr = r.tracks as usize;
        if !self.header_done {
            let mut h: Vec<String> = [
                "cycle",
                "t_ideal_ns",
                "release_ns",
                "wake_ns",
                "end_ns",
                "deadline_ns",
                "wake_latency_ns",
                "wall_ns",
                "cpu_ns",
                "crit_cpu_ns",
                "interference_ns",
                "end_time_ns",
                "driver_period_ns",
                "skipped_before",
                "xrun",
                "cause",
                "crit_thread",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            h.extend((0..nt).map(|i| format!("thread{i}_cpu_ns")));
            for i in 0..ntr {
                h.push(format!("track{i}_start_ns"));
                h.push(format!("track{i}_end_ns"));
            }
            h.extend((0..ntr).map(|i| format!("track{i}_thread")));
            self.w.write_record(&h).map_err(|e| self.io(e))?;
            self.header_done = true;
        }
        let mut row: Vec<String> = vec![
            r.cycle.to_string(),
            r.t_ideal_ns.to_string(),
            r.release_ns.to_string(),
            r.wake_ns.to_string(),
            r.end_ns.to_string(),
            r.deadline_ns.to_string(),
            r.wake_latency_ns().to_string(),
            r.wall_ns().to_string(),
            r.cpu_ns.to_string(),
            r.crit_cpu_ns.to_string(),
            r.interference_ns().to_string(),
            r.end_time_ns().to_string(),
            r.driver_period_ns.to_string(),
            r.skipped_before.to_string(),
            (r.xrun as u8).to_string(),
            r.cause.map(Cause::as_str).unwrap_or("").to_string(),
            r.crit_thread.to_string(),
        ];
        row.extend(r.thread_cpu_ns[..nt].iter().map(|v| v.to_string()));
        for i in 0..ntr {
            row.push(r.track_start_ns[i].to_string());
            row.push(r.track_end_ns[i].to_string());
        }
        row.extend(r.track_thread[..ntr].iter().map(|v| v.to_string()));
        self.w.write_record(&row).map_err(|e| self.io(e))
    }

    /// Write out what is buffered; `Err` says what became of a trace whose last write
    /// failed ([`TraceWriter::abandon`]).
    pub fn finish(mut self) -> Result<(), String> {
        match self.w.flush() {
            Ok(()) => {
                let e = |c: Error| format!("{c}; the trace was not saved");
                let TraceWriter { w, out, .. } = self;
                drop(w);
                out.commit().map_err(e)
            }
            Err(e) => {
                let e = self.io(e);
                Err(self.abandon(&e))
            }
        }
    }
}

/// Cut `file` after its last newline and return that last complete line (without its
/// newline); `None` when the file holds no newline at all (it is left as it is). Only the
/// tail is read: a line is far shorter than the chunk.
pub fn cut_at_last_line(file: &std::fs::File) -> std::io::Result<Option<String>> {
    use std::os::unix::fs::FileExt;
    const CHUNK: u64 = 1 << 16;
    let len = file.metadata()?.len();
    let mut end = len;
    // The newline that ends the last complete line, searched from the end backwards.
    let mut buf = vec![0u8; CHUNK as usize];
    let cut = loop {
        if end == 0 {
            return Ok(None);
        }
        let start = end.saturating_sub(CHUNK);
        let n = (end - start) as usize;
        file.read_exact_at(&mut buf[..n], start)?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b == b'\n') {
            break start + i as u64 + 1;
        }
        end = start;
    };
    file.set_len(cut)?;
    // The line before the cut: from the newline before it (or the start).
    let from = cut.saturating_sub(CHUNK).min(cut - 1);
    let n = (cut - 1 - from) as usize;
    file.read_exact_at(&mut buf[..n], from)?;
    let line = &buf[..n];
    let line = match line.iter().rposition(|&b| b == b'\n') {
        Some(i) => &line[i + 1..],
        None => line,
    };
    Ok(Some(String::from_utf8_lossy(line).into_owned()))
}
