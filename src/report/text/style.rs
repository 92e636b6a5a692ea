//! The house style of terminal text: tables, number cells and the line naming the machine.

use crate::system::Environment;
use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, CellAlignment, ContentArrangement, Table};

/// A table with the house style: compact borders, wrapped to the terminal when there is one.
pub fn new_table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.iter().map(Cell::new));
    if t.width().is_none() {
        // Not a terminal: keep lines readable in logs.
        t.set_width(140);
    }
    t
}

/// A right-aligned cell for numbers.
pub fn num(s: impl ToString) -> Cell {
    Cell::new(s.to_string()).set_alignment(CellAlignment::Right)
}

/// One line naming the machine a check or measurement describes.
pub fn system_line(env: &Environment) -> String {
    let mut parts = vec![format!(
        "{}: Linux {} ({})",
        if env.hostname.is_empty() {
            "?"
        } else {
            &env.hostname
        },
        env.kernel,
        env.kernel_version
    )];
    let mut cpus = format!("{} CPUs", env.cpus.count);
    if !env.cpus.model.is_empty() {
        cpus.push_str(&format!(" ({})", env.cpus.model));
    }
    parts.push(cpus);
    if let Some(v) = &env.virtualization {
        parts.push(format!("virtualised: {v}"));
    }
    if let Some(st) = env.hypervisor_steal {
        parts.push(format!(
            "{:.1} % stolen by the host ({:.0} ms)",
            st.share_pct, st.stolen_ms
        ));
    }
    if let Some(c) = &env.container {
        parts.push(format!("container: {c}"));
    }
    parts.join(", ")
}

/// µs with one decimal, the unit cyclictest users read.
pub fn us(ns: impl Into<f64>) -> String {
    format!("{:.1}", ns.into() / 1e3)
}

/// Whether terminal text is coloured: the CLI turns it on for a terminal without `NO_COLOR`;
/// off, every text is plain (files, pipes, golden tests).
static COLOUR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn set_colour(on: bool) {
    COLOUR.store(on, std::sync::atomic::Ordering::Relaxed);
}

pub fn colour() -> bool {
    COLOUR.load(std::sync::atomic::Ordering::Relaxed)
}

/// `s` in bold green, yellow or red by `tone` when colour is on, else as it is.
pub fn paint(s: &str, tone: crate::report::answer::Tone) -> String {
    use crate::report::answer::Tone;
    if !colour() {
        return s.to_string();
    }
    let code = match tone {
        Tone::Ok => "1;32",
        Tone::Warn => "1;33",
        Tone::Fail => "1;31",
    };
    format!("\x1b[{code}m{s}\x1b[0m")
}

/// The width terminal summaries keep to: any terminal shows 80 columns.
pub const WIDTH: usize = 80;

/// `text` wrapped at spaces to [`WIDTH`], later lines indented by `indent` spaces; a word
/// longer than a line (a path, a command's argument) stays whole on its own line, so no
/// number or argument is ever split.
pub fn wrap(text: &str, indent: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    let pad = " ".repeat(indent);
    let lead = text.len() - text.trim_start_matches(' ').len();
    line.push_str(&text[..lead]);
    // A unit stays with its number: "8133.9 µs" is one word to the wrapping.
    let mut words: Vec<String> = Vec::new();
    for w in text.split(' ').filter(|w| !w.is_empty()) {
        let unit = ["ns", "µs", "ms", "s", "min", "h", "%", "Hz", "kHz", "MiB"]
            .contains(&w.trim_end_matches([',', ';', ')', '.', ':']));
        match words.last_mut() {
            Some(prev) if unit && prev.ends_with(|c: char| c.is_ascii_digit()) => {
                prev.push(' ');
                prev.push_str(w);
            }
            _ => words.push(w.to_string()),
        }
    }
    for word in &words {
        let word = word.as_str();
        let len = line.chars().count();
        if line.trim_start().chars().count() > 0 && len + 1 + word.chars().count() > WIDTH {
            out.push_str(&line);
            out.push('\n');
            line = pad.clone();
        } else if line.chars().any(|c| c != ' ') && !line.ends_with(' ') {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out
}
