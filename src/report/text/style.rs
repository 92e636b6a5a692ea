//! The house style of terminal text: tables, number cells and the line naming the machine.

use crate::system::Environment;
use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, CellAlignment, ContentArrangement, Table};

/// A table with the house style: compact borders, [`WIDTH`] columns wide on any terminal or
/// file. Built like a comfy-table (it derefs to one); printing it fits it (see [`Tab`]).
pub fn new_table(header: &[&str]) -> Tab {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.iter().map(Cell::new))
        .set_width(width() as u16);
    Tab(t)
}

/// A table that prints within [`WIDTH`] columns without ever splitting a word, a number from
/// its unit or a command: each column is kept at least as wide as its longest word and the
/// rest wraps at spaces; when the columns cannot all fit, a table of few rows is printed
/// turned (one row per column), and any other as one block per row of `header value` pairs.
/// One way for every table, so no summary has its own width logic.
#[derive(Debug, Clone)]
pub struct Tab(pub Table);

impl std::ops::Deref for Tab {
    type Target = Table;
    fn deref(&self) -> &Table {
        &self.0
    }
}

impl std::ops::DerefMut for Tab {
    fn deref_mut(&mut self) -> &mut Table {
        &mut self.0
    }
}

impl std::fmt::Display for Tab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&fit_table(&self.0))
    }
}

/// The cells of a table as text: the header (empty when none) and the rows, all `n` wide.
fn cells(t: &Table) -> (Vec<String>, Vec<Vec<String>>) {
    let row = |r: &comfy_table::Row| r.cell_iter().map(Cell::content).collect::<Vec<_>>();
    let header = t.header().map(row).unwrap_or_default();
    let rows: Vec<Vec<String>> = t.row_iter().map(row).collect();
    let n = rows
        .iter()
        .map(Vec::len)
        .chain([header.len()])
        .max()
        .unwrap_or(0);
    let pad = |mut v: Vec<String>| {
        v.resize(n, String::new());
        v
    };
    (pad(header), rows.into_iter().map(pad).collect())
}

/// The narrowest each column can be without splitting a word: its longest word.
fn min_widths(header: &[String], rows: &[Vec<String>]) -> Vec<usize> {
    let mut w = vec![0; header.len()];
    for r in std::iter::once(header).chain(rows.iter().map(Vec::as_slice)) {
        for (k, c) in r.iter().enumerate() {
            let longest = c.lines().flat_map(words).map(|x| x.chars().count());
            w[k] = w[k].max(longest.max().unwrap_or(0));
        }
    }
    w
}

/// Column widths within `room`: each at least its `min`, the room left shared out equally
/// among the columns that want more, a column taking no more than it wants.
fn share(min: &[usize], want: &[usize], room: usize) -> Vec<usize> {
    let mut w = min.to_vec();
    let mut left = room.saturating_sub(min.iter().sum());
    loop {
        let hungry: Vec<usize> = (0..w.len()).filter(|&k| w[k] < want[k]).collect();
        if hungry.is_empty() || left == 0 {
            return w;
        }
        let each = (left / hungry.len()).max(1);
        for k in hungry {
            let more = (want[k] - w[k]).min(each).min(left);
            w[k] += more;
            left -= more;
        }
    }
}

/// Whether columns this narrow fit in [`WIDTH`]: two borders, a space each side of a cell
/// and the (blank) rule between two cells.
fn fits(w: &[usize]) -> bool {
    w.iter().sum::<usize>() + 3 * w.len() < width()
}

fn fit_table(t: &Table) -> String {
    let (header, rows) = cells(t);
    let mut w = min_widths(&header, &rows);
    // A column its builder keeps unwrapped is as wide as its widest cell.
    for (k, col) in t.column_iter().enumerate() {
        if matches!(
            col.constraint(),
            Some(comfy_table::ColumnConstraint::ContentWidth)
        ) {
            let widest = rows
                .iter()
                .flat_map(|r| r[k].lines().map(|l| l.chars().count()));
            w[k] = w[k].max(widest.max().unwrap_or(0));
        }
    }
    if fits(&w) {
        let want = std::iter::once(&header)
            .chain(&rows)
            .fold(vec![0; w.len()], |mut m, r| {
                for (k, c) in r.iter().enumerate() {
                    let widest = c.lines().map(|l| l.chars().count()).max();
                    m[k] = m[k].max(widest.unwrap_or(0));
                }
                m
            });
        let mut t = t.clone();
        t.set_width(width() as u16);
        let room = width() - 3 * w.len() - 1;
        for (col, width) in t.column_iter_mut().zip(share(&w, &want, room)) {
            col.set_constraint(comfy_table::ColumnConstraint::Absolute(
                // comfy-table counts the padding in an absolute width.
                comfy_table::Width::Fixed(width as u16 + 2),
            ));
        }
        return t.to_string();
    }
    // Turned: the header down the first column, each row a column of its own.
    if rows.len() <= 6 && !header.is_empty() {
        let mut turned = Table::new();
        turned
            .load_preset(UTF8_BORDERS_ONLY)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(width() as u16)
            .set_header(
                std::iter::once(Cell::new(&header[0]))
                    .chain(rows.iter().map(|r| num(&r[0])))
                    .collect::<Vec<_>>(),
            );
        for (k, h) in header.iter().enumerate().skip(1) {
            turned.add_row(
                std::iter::once(Cell::new(h))
                    .chain(rows.iter().map(|r| num(&r[k])))
                    .collect::<Vec<_>>(),
            );
        }
        let (th, tr) = cells(&turned);
        if fits(&min_widths(&th, &tr)) {
            return fit_table(&turned);
        }
    }
    records(&header, &rows)
}

/// One block per row: its first cell, then `header value` pairs packed into lines, a pair
/// never split across two.
fn records(header: &[String], rows: &[Vec<String>]) -> String {
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::new();
    for r in rows {
        let Some((first, rest)) = r.split_first() else {
            continue;
        };
        let title = match header.first().map(|h| flat(h)) {
            Some(h) if !h.is_empty() => format!("{h} {}", flat(first)),
            _ => flat(first),
        };
        out.push_str(&wrap(&title, 2));
        out.push('\n');
        let cells = || {
            rest.iter()
                .zip(header.iter().skip(1))
                .filter(|(v, _)| !v.trim().is_empty())
        };
        let pairs = cells()
            .filter(|(v, _)| !v.trim().contains('\n'))
            .map(|(v, h)| match flat(h) {
                h if h.is_empty() => flat(v),
                h => format!("{h}: {}", flat(v)),
            });
        out.push_str(&pack(pairs, 2));
        // A cell of several lines (one finding each) keeps them: packed into one paragraph
        // they would run together.
        for (v, h) in cells().filter(|(v, _)| v.trim().contains('\n')) {
            let h = flat(h);
            if !h.is_empty() {
                out.push_str(&format!("  {h}:\n"));
            }
            for line in v.lines().filter(|l| !l.trim().is_empty()) {
                out.push_str(&wrap(&format!("    {}", flat(line)), 6));
                out.push('\n');
            }
        }
    }
    out
}

/// Items on lines of [`WIDTH`], indented by `indent`, separated by three spaces; an item
/// longer than a line is wrapped on its own.
fn pack(items: impl Iterator<Item = String>, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut out = String::new();
    let mut line = String::new();
    for item in items {
        let len = line.chars().count();
        if !line.is_empty() && len + 3 + item.chars().count() > width() {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if line.is_empty() {
            line = wrap(&format!("{pad}{item}"), indent + 2);
        } else {
            line.push_str("   ");
            line.push_str(&item);
        }
    }
    if !line.is_empty() {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Text whose lines keep to [`WIDTH`]: a longer line is wrapped, its continuation indented
/// two more than the line itself. Lines that fit are left exactly as they are.
pub fn fit(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (k, line) in text.split('\n').enumerate() {
        if k > 0 {
            out.push('\n');
        }
        if visible_width(line) <= width() {
            out.push_str(line);
        } else {
            let lead = line.len() - line.trim_start_matches(' ').len();
            out.push_str(&wrap(line, lead + 2));
        }
    }
    out
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

static WIDTH_NOW: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(WIDTH);

/// Render at another width than [`WIDTH`] (tests: the same text very wide must hold the same
/// numbers, or one was split).
pub fn set_width(columns: usize) {
    WIDTH_NOW.store(columns.max(20), std::sync::atomic::Ordering::Relaxed);
}

/// The width text is rendered at now.
pub fn width() -> usize {
    WIDTH_NOW.load(std::sync::atomic::Ordering::Relaxed)
}

/// The columns `s` takes on a terminal: its characters less the colour and bold escape
/// sequences (`ESC [ … m`) a coloured answer or a bold table row carries.
pub fn visible_width(s: &str) -> usize {
    let mut n = 0;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC '[' parameters, then one final byte in '@'..='~'.
            if chars.next() == Some('[') {
                for f in chars.by_ref() {
                    if ('@'..='~').contains(&f) {
                        break;
                    }
                }
            }
        } else {
            n += 1;
        }
    }
    n
}

/// A shell command on lines of [`WIDTH`], the first indented by `indent`, the rest two more:
/// broken only before an option (kept with its value) or `&&`, each line but the last ending
/// in ` \\`, so that what is copied still runs as one command.
pub fn command(cmd: &str, indent: usize) -> String {
    let mut groups: Vec<String> = Vec::new();
    for w in cmd.split_whitespace() {
        match groups.last_mut() {
            // A word joins the option before it (its value) or the words of the command.
            Some(g)
                if !w.starts_with('-') && w != "&&" && !(g.starts_with('-') && g.contains(' ')) =>
            {
                g.push(' ');
                g.push_str(w);
            }
            _ => groups.push(w.to_string()),
        }
    }
    let room = width().saturating_sub(2);
    let mut out = String::new();
    let mut line = " ".repeat(indent);
    let mut started = false;
    for g in groups {
        if started && line.chars().count() + 1 + g.chars().count() > room {
            out.push_str(&line);
            out.push_str(" \\\n");
            line = " ".repeat(indent + 2);
            started = false;
        }
        if started {
            line.push(' ');
        }
        line.push_str(&g);
        started = true;
    }
    out.push_str(&line);
    out
}

/// `text` wrapped at spaces to [`WIDTH`], later lines indented by `indent` spaces; a word
/// longer than a line (a path, a command's argument) stays whole on its own line, so no
/// number or argument is ever split.
pub fn wrap(text: &str, indent: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    let pad = " ".repeat(indent);
    let lead = text.len() - text.trim_start_matches(' ').len();
    line.push_str(&text[..lead]);
    // A word longer than any line (a plugin's whole parameter syntax) may break after its
    // commas, never inside a value.
    let pieces = spaced_words(text).into_iter().flat_map(|(gap, w)| {
        if w.chars().count() + indent <= width() || !w.contains(',') {
            return vec![(gap, w)];
        }
        w.split_inclusive(',')
            .enumerate()
            .map(|(k, p)| (if k == 0 { gap } else { 0 }, p.to_string()))
            .collect()
    });
    for (gap, word) in pieces {
        let len = visible_width(&line);
        let started = line.chars().any(|c| c != ' ');
        if started && len + gap + visible_width(&word) > width() {
            out.push_str(&line);
            out.push('\n');
            line = pad.clone();
        } else if started {
            // The spacing a line was written with (aligned columns) is kept.
            line.push_str(&" ".repeat(gap));
        }
        line.push_str(&word);
    }
    out.push_str(&line);
    out
}

/// The words of `text` as wrapping sees them: split at spaces, a unit kept with its number
/// ("8133.9 µs" is one word).
fn words(text: &str) -> Vec<String> {
    spaced_words(text).into_iter().map(|(_, w)| w).collect()
}

/// [`words`], each with the number of spaces before it.
fn spaced_words(text: &str) -> Vec<(usize, String)> {
    let mut words: Vec<(usize, String)> = Vec::new();
    let mut gap = 0;
    for w in text.split([' ', '\t']) {
        if w.is_empty() {
            gap += 1;
            continue;
        }
        let unit = ["ns", "µs", "ms", "s", "min", "h", "%", "Hz", "kHz", "MiB"]
            .contains(&w.trim_end_matches([',', ';', ')', '.', ':']));
        // A command in backticks is one word: on two lines it could not be copied.
        let open_quote = |p: &str| p.starts_with('`') && p.matches('`').count() == 1;
        match words.last_mut() {
            Some((_, prev)) if open_quote(prev) => {
                prev.push_str(&" ".repeat(gap + 1));
                prev.push_str(w);
            }
            Some((_, prev)) if unit && prev.ends_with(|c: char| c.is_ascii_digit()) => {
                prev.push_str(&" ".repeat(gap + 1));
                prev.push_str(w);
            }
            _ => words.push((gap + 1, w.to_string())),
        }
        gap = 0;
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coloured_line_that_fits_is_left_whole() {
        // 80 visible columns in bold green, as a painted answer's first line is.
        let line = format!("\x1b[1;32m{}\x1b[0m", ["word"; 16].join(" "));
        assert_eq!(visible_width(&line), 79);
        assert_eq!(fit(&line), line);
        // A bold table row: its cells' codes take no columns.
        let row = format!("│\x1b[1m {} \x1b[0m│", "x".repeat(76));
        assert_eq!((visible_width(&row), fit(&row)), (80, row.clone()));
        // Longer than the width: wrapped by what shows.
        let long = format!("\x1b[1m{}\x1b[0m", ["word"; 20].join(" "));
        assert!(
            fit(&long).lines().all(|l| visible_width(l) <= width()),
            "{long}"
        );
    }

    #[test]
    fn a_long_command_is_broken_before_an_option_and_still_pastes_as_one() {
        let cmd = "xrunlab latency --stress paper --audio-period 64@48000 --busy 50 \
                   --no-dma-latency --duration 12m -o lat-more.json && xrunlab verdict s";
        let cmd = cmd.split_whitespace().collect::<Vec<_>>().join(" ");
        let out = command(&cmd, 2);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines.len() >= 2, "{out}");
        assert!(lines.iter().all(|l| visible_width(l) <= width()), "{out}");
        for l in &lines[..lines.len() - 1] {
            assert!(l.ends_with(" \\"), "{out}");
        }
        // Every continuation starts with an option or `&&`; an option keeps its value.
        for l in &lines[1..] {
            let first = l.split_whitespace().next().unwrap();
            assert!(first.starts_with('-') || first == "&&", "{out}");
        }
        assert!(
            out.contains("--duration 12m") && out.contains("-o lat-more.json"),
            "{out}"
        );
        // What the shell reads: the same words.
        let joined = out.replace(" \\\n", " ");
        assert_eq!(joined.split_whitespace().collect::<Vec<_>>().join(" "), cmd);
        // A short one stays on its line.
        assert_eq!(command("xrunlab verdict s", 2), "  xrunlab verdict s");
    }
}
