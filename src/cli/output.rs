//! Shared output path of every command: JSON to a file (atomic) and/or stdout, the human
//! summary to stdout (or stderr when stdout carries JSON), nothing with --quiet.
//!
//! Every measuring command ends the same way (docs/ARCHITECTURE.md §1, §6): it starts a
//! [`Started`] before measuring, fills a [`Measured`] afterwards and hands it to [`finish`],
//! which owns the envelope, the warnings, the writing and the exit code.

use super::Global;
use crate::error::{Error, Result, EXIT_CANNOT_MEASURE, EXIT_THRESHOLD};
use crate::results::{write_atomic, Body, ResultDoc, Status};
use std::io::Write;
use std::path::Path;

/// Write to stdout, treating a closed pipe (`xrunlab ... --json | head`) as the reader's
/// choice rather than an error: the result file, if any, is already written.
pub fn stdout(text: &str) {
    if HUMAN_TO_STDERR.load(std::sync::atomic::Ordering::Relaxed) {
        return stderr(text);
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

/// Set by `-o -`: standard output carries the result alone, so what would be printed
/// beside it goes to stderr, as with `--json`.
static HUMAN_TO_STDERR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `-o -` (docs/ARCHITECTURE.md §1): the result on standard output, through the writer's own
/// descriptor as `-o /dev/stdout`; everything else printed goes to stderr.
pub fn result_to_stdout() {
    HUMAN_TO_STDERR.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether an output path is `-`, standard output.
pub fn is_stdout(p: &Path) -> bool {
    p.as_os_str() == "-"
}

/// Where a "… written to X" line says the output went: `-` is standard output, which is
/// what the user should read, not a file named "-".
pub fn shown(p: &Path) -> String {
    if is_stdout(p) {
        "standard output".to_string()
    } else {
        p.display().to_string()
    }
}

/// Human text to stdout, each line kept to 80 columns (`report::text::style::fit`).
pub fn human(text: &str) {
    stdout(&crate::report::text::style::fit(text));
}

/// Colour the answers when stdout is a terminal and `NO_COLOR` (no-color.org) is unset or
/// empty.
pub fn init_colour() {
    use std::io::IsTerminal;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    crate::report::text::style::set_colour(!no_color && std::io::stdout().is_terminal());
    // A wider terminal says so in COLUMNS (exported by the user or a script): tables use
    // it; unset, or narrower than 80, they keep to the 80 columns any terminal shows.
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&n| n > crate::report::text::style::WIDTH)
    {
        crate::report::text::style::set_width(n.min(1000));
    }
}

/// Like [`stdout`], for stderr.
pub fn stderr(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
}

/// Say each warning on stderr, one `xrunlab: warning:` line each.
/// Each warning at most once per process: a command that measures in several parts (a
/// suite's pre-flight and its own lines, `tune --measure`'s before and after) says a
/// condition of the machine once, not once per part.
pub fn warn<'a>(warnings: impl IntoIterator<Item = &'a String>) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    let lines: String = warnings
        .into_iter()
        .filter(|w| {
            let new = !said.contains(w);
            if new {
                said.push((*w).clone());
            }
            new
        })
        .map(|w| {
            let line = crate::report::text::style::wrap(&format!("xrunlab: warning: {w}"), 2);
            format!("{line}\n")
        })
        .collect();
    stderr(&lines);
}

/// On a machine a `tune` journal says is tuned with an audio cpuset, every CPU but the
/// audio ones is all that is left outside it: join it (before any CPU list is resolved), so
/// the real-time threads run where the profile put them. Said once on stderr.
pub fn join_tuned_cpuset(g: &super::Global) {
    use crate::system::{tune, Root};
    let root = Root::default();
    let journal = tune::default_journal(&root);
    let Some(cs) = tune::applied_cpuset(&root, &journal) else {
        return;
    };
    let line = match tune::enter_audio_cpuset(&root, &journal) {
        None => format!(
            "xrunlab: a tune profile is applied ({}): measuring inside its audio cpuset, CPU {}\n",
            journal.display(),
            crate::rt::affinity::format_cpu_list(&cs.audio_cpus)
        ),
        Some(why) => format!("xrunlab: a tune profile is applied: {why}\n"),
    };
    if !g.quiet {
        stderr(&line);
    }
}

pub use crate::measure::session::Started;

/// A measurement session for a command: its progress on the terminal (none when `quiet`)
/// counting `total` steps, the environment captured now with `stress_labels`, and what the
/// session must say at once printed on stderr.
pub fn session(
    quiet: bool,
    total: u64,
    stress_labels: Vec<String>,
) -> crate::measure::session::Session<'static> {
    crate::measure::session::Session::start(
        Box::new(Saying(crate::progress::for_terminal(quiet, total))),
        stress_labels,
    )
}

/// A progress (bar or silence) that also says its lines on stderr, --quiet or not: they are
/// what the user acts on ("ready for 20 triggers", "forensics: off: …"), not decoration.
pub struct Saying(pub Box<dyn crate::progress::Progress>);

impl crate::progress::Progress for Saying {
    fn set_total(&self, total: u64) {
        self.0.set_total(total)
    }
    fn set_position(&self, done: u64) {
        self.0.set_position(done)
    }
    fn set_message(&self, msg: &str) {
        self.0.set_message(msg)
    }
    fn set_unit(&self, unit: crate::progress::Unit) {
        self.0.set_unit(unit)
    }
    fn finish(&self) {
        self.0.finish()
    }
    fn say(&self, line: &str) {
        stderr(&format!("{line}\n"));
    }
    fn shows(&self) -> bool {
        self.0.shows()
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
    /// The measurement is whole but an output it was asked for is not (a trace a full disk
    /// cut short): exit 3, an I/O error's code (§1), with this line on stderr.
    OutputLost(String),
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
    /// What stderr says when the result is partial (status not complete; always exit 3).
    pub partial: String,
    /// Print the warnings on stderr (`check` shows the same conditions as its table rows).
    pub show_warnings: bool,
    /// What else is written of the final document (`--export FORMAT=PATH`), after the result.
    pub also: Option<AlsoWrite>,
    /// A computation, not a measurement (`rtl --model`, the sim driver, `--sim-latency`):
    /// the machine's conditions (a VM, the governor, RT throttling…) say nothing about its
    /// figures, so they are neither warned about nor put in its warnings.
    pub computed: bool,
}

/// A writer of the final result document in more forms (`ExportArgs::writer`).
pub type AlsoWrite = Box<dyn FnOnce(&ResultDoc, Option<&Path>) -> Result<()>>;

impl Measured {
    pub fn new(body: Body, status: Status, started: Started, human: String) -> Self {
        let partial = format!(
            "xrunlab: {} interrupted; partial result reported\n",
            body.kind()
        );
        Measured {
            body,
            status,
            started,
            warnings: Vec::new(),
            human,
            verdict: Verdict::Pass,
            partial,
            show_warnings: true,
            also: None,
            computed: false,
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

    /// Also write the final document with `w` (the `--export`s).
    pub fn also(mut self, w: AlsoWrite) -> Self {
        self.also = Some(w);
        self
    }

    /// Mark a computation ([`Measured::computed`]).
    pub fn computed(mut self, yes: bool) -> Self {
        self.computed = yes;
        self
    }

    pub fn partial(mut self, line: impl Into<String>) -> Self {
        self.partial = line.into();
        self
    }
}

/// Write the result as the global options ask, say its warnings once, and return the exit code.
pub fn finish(m: Measured, g: &Global) -> Result<u8> {
    let mut doc = ResultDoc::new(m.body, m.status, m.started.at, m.started.env);
    if m.computed {
        // What ran beside it (`--stress`) is the computation's own condition: kept.
        let mut env = doc.environment.clone();
        env.stress.clear();
        let machine = env.warnings();
        doc.warnings.retain(|w| !machine.contains(w));
    }
    // The environment's warnings come first; a measurement repeating one adds nothing.
    for w in m.warnings {
        if !doc.warnings.contains(&w) {
            doc.warnings.push(w);
        }
    }
    // A failed write is reported after the warnings: what was printed is the whole result.
    let mut written = emit(&doc, g, &m.human);
    if let Some(also) = m.also {
        written = written.and(also(&doc, g.output.as_deref()));
    }
    // An output lost is said once, as the error it is, whatever else fails.
    let lost = match &m.verdict {
        Verdict::OutputLost(line) => Some(line.as_str()),
        _ => None,
    };
    if m.show_warnings && !g.quiet {
        // A warning the summary already shows (a stress record's) is not repeated.
        warn(
            doc.warnings
                .iter()
                .filter(|w| !m.human.contains(w.as_str()))
                .filter(|w| !lost.is_some_and(|l| l.contains(w.as_str()))),
        );
    }
    if let Err(e) = written {
        stderr(lost.unwrap_or(""));
        return Err(e);
    }
    if m.status != Status::Complete {
        stderr(&m.partial);
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
        Verdict::NothingMeasured(line) | Verdict::OutputLost(line) => {
            stderr(&line);
            EXIT_CANNOT_MEASURE
        }
    })
}

/// Emit a finished (or partial) result as the global options ask. The JSON document and the
/// summary are printed even when the file cannot be written (a full disk, a directory removed
/// while measuring), so that hours of measurement are not lost; that failure is then exit 3.
pub fn emit(doc: &ResultDoc, g: &Global, human: &str) -> Result<()> {
    // The file and stdout carry the same bytes: the JSON exporter's.
    let json = (g.output.is_some() || g.json).then(|| crate::report::export::Json::document(doc));
    let json = json.as_deref().unwrap_or_default();
    let written = match &g.output {
        Some(path) => write_atomic(path, json.as_bytes()).map(|_| Some(path)),
        None => Ok(None),
    };
    if g.json {
        stdout(json);
    }
    if !g.quiet {
        let human = crate::report::text::style::fit(human);
        if g.json {
            stderr(&human);
        } else {
            stdout(&human);
        }
        if let Ok(Some(path)) = &written {
            let line = format!("result written to {}\n", shown(path));
            if g.json {
                stderr(&line);
            } else {
                stdout(&line);
            }
        }
    }
    match written {
        Ok(_) => Ok(()),
        // The usage was checked before measuring (preflight): what fails now is the machine.
        Err(e) => Err(Error::cannot_measure(if g.json || !g.quiet {
            format!("{e}; the result was printed but not saved")
        } else {
            format!("{e}; the result was not saved")
        })),
    }
}

/// Check, before anything is measured, that every file a command will write can be written
/// and that none of them is one of its inputs or another output: a mistake found after an
/// hour of measuring loses the hour, and an output written over an input destroys it.
/// `outputs` and `inputs` are (option, path) pairs; the option names the path in errors.
pub fn preflight(outputs: &[(&str, &Path)], inputs: &[(&str, &Path)]) -> Result<()> {
    let inputs_ids: Vec<(&str, &Path, FileId)> =
        inputs.iter().map(|&(o, p)| (o, p, FileId::of(p))).collect();
    let mut seen: Vec<(&str, &Path, FileId)> = Vec::new();
    for &(opt, path) in outputs {
        let shown = path.display();
        let text = path.as_os_str().to_string_lossy();
        if is_stdout(path) {
            if let Some((other, ..)) = seen.iter().find(|(_, p, _)| is_stdout(p)) {
                return Err(Error::usage(format!(
                    "{opt} - and {other} - both write to standard output: give one of them a file"
                )));
            }
            seen.push((opt, path, FileId::of(path)));
            continue;
        }
        if text.is_empty() {
            return Err(Error::usage(format!("{opt}: empty file name")));
        }
        if path.is_dir() {
            return Err(Error::usage(format!(
                "{opt} {shown} is a directory: give a file name inside it"
            )));
        }
        if let Some(named) = text.strip_suffix('/') {
            // `-o FILE/` or `-o NEWDIR/`: the '/' asks for a directory that is not there.
            let what = match std::fs::metadata(named) {
                Ok(_) => "is not a directory",
                Err(_) => "does not exist",
            };
            return Err(Error::usage(format!(
                "{opt} {shown} ends in '/', but {named} {what}: give a file name"
            )));
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let refuse = |why: String| Err(Error::usage(format!("{opt} {shown}: {why}")));
        // A device or a pipe (`-o /dev/null`) is written in place, not renamed over, and
        // several outputs may share it; one another user may have planted is refused now,
        // before anything is measured, as the writer would refuse it at the end.
        if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
            crate::results::check_target(path)?;
            if !writable(path) {
                return refuse("is not writable".into());
            }
            continue;
        } else {
            match std::fs::metadata(dir) {
                Err(_) => return refuse(format!("directory {} does not exist", dir.display())),
                Ok(m) if !m.is_dir() => {
                    return refuse(format!("{} is not a directory", dir.display()))
                }
                Ok(_) if !writable(dir) => {
                    return refuse(format!("directory {} is not writable", dir.display()))
                }
                Ok(_) => {}
            }
        }
        let id = FileId::of(path);
        let clash = seen
            .iter()
            .map(|(o, p, i)| ("another output", *o, *p, i))
            .chain(inputs_ids.iter().map(|(o, p, i)| ("an input", *o, *p, i)))
            .find(|(.., i)| **i == id);
        if let Some((what, other_opt, other, _)) = clash {
            return refuse(format!(
                "is the same file as {what}, {other_opt} {}: choose another file",
                other.display()
            ));
        }
        seen.push((opt, path, id));
    }
    Ok(())
}

/// What two paths must share to be the same file: (device, inode) for a file that exists, so
/// that symbolic and hard links are seen through; the canonical directory and the name for one
/// that does not exist yet.
#[derive(Debug, PartialEq, Eq)]
enum FileId {
    Inode(u64, u64),
    Path(std::path::PathBuf),
}

impl FileId {
    fn of(path: &Path) -> FileId {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::metadata(path) {
            return FileId::Inode(m.dev(), m.ino());
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        FileId::Path(dir.join(path.file_name().unwrap_or_default()))
    }
}

/// True when this process may write `path`, or create files in it when it is a directory
/// (access(2) sees root's override and read-only mounts alike).
fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    let mode = if path.is_dir() {
        libc::W_OK | libc::X_OK
    } else {
        libc::W_OK
    };
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    unsafe { libc::access(c.as_ptr(), mode) == 0 }
}
