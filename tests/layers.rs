//! The layers of docs/ARCHITECTURE.md §2 stay acyclic: no file under `src/` names a module of a
//! higher layer, whether in a `use` line or inline in code (`crate::engine::probe::X`,
//! `super::super::results::Status`); no files of one module name each other in a circle; clap
//! and printing stay in `src/cli/` and `main.rs`. The checker reads the sources as text: comments and
//! string literals are blanked first, so a doc comment or a message that mentions a path does
//! not count.

use std::collections::BTreeSet;
use std::path::Path;

/// The layers, lowest first. A module may import from its own layer and from any below it.
///
/// Data flows driver → engine → measurements → results → report, with suite and cli on top;
/// below the driver sit the toolboxes. Where the order is a choice:
/// - `error` is below `common` (common's functions return its `Result`), and `common` imports
///   nothing else from the crate.
/// - `units` (parsing and printing what users type) sits above `common` because
///   `AudioPeriod::period_ns` uses its conversion, and below `rt` because `rt::policy` parses
///   with it.
/// - `stress` is a toolbox beside `system` and `dsp`: the engine and the measurements start
///   stressors, and stressors know nothing of the engine.
/// - `results` is above `measure`: a result document embeds every measurement's config and
///   result types, and `system::Environment`.
/// - `suite` is above `report`: it ends by writing the report; the report renders a suite
///   manifest, whose types therefore live in `results::suite`.
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["common"],
    &["units"],
    &["rt", "progress"],
    &["system", "dsp", "stress", "trace"],
    &["driver"],
    &["engine"],
    &["measure"],
    &["results"],
    &["report"],
    &["suite"],
    &["cli"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// One import of a higher layer.
#[derive(Debug, PartialEq)]
struct Violation {
    file: String,
    line: usize,
    from: String,
    to: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (a, b) = (layer_of(&self.from), layer_of(&self.to));
        write!(
            f,
            "src/{}:{} → crate::{}: `{}` (layer {}) must not import `{}` (layer {}, higher)",
            self.file,
            self.line,
            self.to,
            self.from,
            a.map_or("?".into(), |l| l.to_string()),
            self.to,
            b.map_or("?".into(), |l| l.to_string()),
        )
    }
}

/// The source with comments, string and char literals replaced by spaces (newlines kept, so
/// line numbers stay right).
fn blank(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let keep_lines = |s: &[char], out: &mut String| {
        for &ch in s {
            out.push(if ch == '\n' { '\n' } else { ' ' });
        }
    };
    let mut i = 0;
    while i < c.len() {
        let rest = &c[i..];
        if rest.starts_with(&['/', '/']) {
            let end = rest.iter().position(|&x| x == '\n').unwrap_or(rest.len());
            keep_lines(&rest[..end], &mut out);
            i += end;
        } else if rest.starts_with(&['/', '*']) {
            // Block comments nest in Rust.
            let (mut depth, mut j) = (0usize, 0usize);
            while j < rest.len() {
                if rest[j..].starts_with(&['/', '*']) {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with(&['*', '/']) {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            keep_lines(&rest[..j], &mut out);
            i += j;
        } else if (rest[0] == 'r' || rest.starts_with(&['b', 'r']))
            && (i == 0 || !is_ident(c[i - 1]))
            && raw_string_len(rest).is_some()
        {
            let n = raw_string_len(rest).unwrap();
            keep_lines(&rest[..n], &mut out);
            i += n;
        } else if rest[0] == '"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != '"' {
                j += if rest[j] == '\\' { 2 } else { 1 };
            }
            let n = (j + 1).min(rest.len());
            keep_lines(&rest[..n], &mut out);
            i += n;
        } else if rest[0] == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a): only the former is
            // blanked.
            let n = if rest.get(1) == Some(&'\\') {
                rest.iter().skip(3).position(|&x| x == '\'').map(|p| p + 4)
            } else if rest.get(2) == Some(&'\'') {
                Some(3)
            } else {
                None
            };
            let n = n.unwrap_or(1);
            if n == 1 {
                out.push('\'');
            } else {
                keep_lines(&rest[..n], &mut out);
            }
            i += n;
        } else {
            out.push(rest[0]);
            i += 1;
        }
    }
    out
}

/// Length of a raw string literal (`r"…"`, `r#"…"#`, `br"…"`) starting at `s[0]`.
fn raw_string_len(s: &[char]) -> Option<usize> {
    let mut j = if s[0] == 'b' { 2 } else { 1 };
    let mut hashes = 0;
    while s.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if s.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < s.len() {
        if s[j] == '"' && (1..=hashes).all(|h| s.get(j + h) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(s.len())
}

fn is_ident(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_'
}

/// Tokens of blanked source: identifiers, `::` and single punctuation, each with its line.
fn tokens(src: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut line = 1;
    let c: Vec<char> = src.chars().collect();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if is_ident(ch) {
            let s: String = c[i..].iter().take_while(|&&x| is_ident(x)).collect();
            i += s.chars().count();
            out.push((s, line));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(("::".into(), line));
            i += 2;
        } else {
            out.push((ch.to_string(), line));
            i += 1;
        }
    }
    out
}

/// The module path of a file under `src/`: `driver/mod.rs` → [driver], `engine/run.rs` →
/// [engine, run], `units.rs` → [units].
fn module_path(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts.last().map(String::as_str) == Some("mod") {
        parts.pop();
    }
    parts
}

/// Every module path that `file` (relative to `src/`) names from the crate root, with the
/// line it names it on: `crate::a::b`, `super::…` and `self::…` resolved against the file's
/// module (inline `mod x { … }` included), a group `{a::b, c}` giving one path per item. A
/// path runs to its last `::`-joined identifier, so it may end in an item (`a::b::Item`).
fn paths(file: &str, src: &str) -> Vec<(usize, Vec<String>)> {
    let toks = tokens(&blank(src));
    let base = module_path(file);
    let mut found = Vec::new();
    // Inline modules deepen the path `super` and `self` start from: each one's name and the
    // brace depth at which it opened.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let t = |k: usize| toks.get(k).map_or("", |x| x.0.as_str());
    // The `::`-joined identifiers from k on.
    let chain = |mut k: usize| {
        let mut segs = Vec::new();
        while toks.get(k).is_some_and(|x| x.0.starts_with(is_ident)) && t(k) != "as" {
            segs.push(t(k).to_string());
            if t(k + 1) != "::" {
                break;
            }
            k += 2;
        }
        segs
    };
    let mut k = 0;
    while k < toks.len() {
        match t(k) {
            "{" => {
                depth += 1;
                k += 1;
                continue;
            }
            "}" => {
                if inline.last().is_some_and(|m| m.1 == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                k += 1;
                continue;
            }
            "mod" if t(k + 2) == "{" => {
                inline.push((t(k + 1).to_string(), depth + 1));
                k += 1;
                continue;
            }
            _ => {}
        }
        let prev_is_colons = k > 0 && t(k - 1) == "::";
        let here = || {
            let mut m = base.clone();
            m.extend(inline.iter().map(|i| i.0.clone()));
            m
        };
        let start = if prev_is_colons || t(k + 1) != "::" {
            None
        } else if t(k) == "crate" {
            Some((Vec::new(), k + 2))
        } else if t(k) == "self" {
            Some((here(), k + 2))
        } else if t(k) == "super" {
            let mut m = here();
            let mut j = k;
            while t(j) == "super" && t(j + 1) == "::" {
                m.pop();
                j += 2;
            }
            Some((m, j))
        } else {
            None
        };
        let Some((prefix, j)) = start else {
            k += 1;
            continue;
        };
        let line = toks[k].1;
        let mut head = prefix;
        let rest = chain(j);
        let mut m = j + 2 * rest.len();
        head.extend(rest);
        if t(m.saturating_sub(1)) == "::" && t(m) == "{" {
            // A group: one path per top-level item, on the item's own line.
            let mut d = 0usize;
            let mut item_start = true;
            while m < toks.len() {
                match t(m) {
                    "{" => {
                        d += 1;
                        if d == 1 {
                            item_start = true;
                        }
                    }
                    "}" => {
                        d -= 1;
                        if d == 0 {
                            break;
                        }
                    }
                    "," if d == 1 => item_start = true,
                    _ if d == 1 && item_start => {
                        item_start = false;
                        let mut p = head.clone();
                        p.extend(chain(m));
                        found.push((toks[m].1, p));
                    }
                    _ => {}
                }
                m += 1;
            }
        } else {
            found.push((line, head));
        }
        k = m.max(k + 1);
    }
    found
}

/// Every top-level module that `file` (relative to `src/`) names, with the line it names it on.
fn imports(file: &str, src: &str) -> Vec<(usize, String)> {
    let own = module_path(file);
    paths(file, src)
        .into_iter()
        .filter_map(|(line, p)| Some((line, p.first()?.clone())))
        .filter(|(_, m)| layer_of(m).is_some() && *m != own[0])
        .collect()
}

/// The upward imports in one file.
fn check(file: &str, src: &str) -> Vec<Violation> {
    let from = module_path(file)[0].clone();
    let Some(own) = layer_of(&from) else {
        return Vec::new();
    };
    imports(file, src)
        .into_iter()
        .filter(|(_, to)| layer_of(to).is_some_and(|l| l > own))
        .map(|(line, to)| Violation {
            file: file.to_string(),
            line,
            from: from.clone(),
            to,
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_layer_imports_a_higher_one() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut unplaced = BTreeSet::new();
    let mut violations = Vec::new();
    for p in &files {
        let rel = p
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        // The crate root and the binary wire every module together.
        if rel == "lib.rs" || rel == "main.rs" {
            continue;
        }
        let top = module_path(&rel)[0].clone();
        if layer_of(&top).is_none() {
            unplaced.insert(top);
            continue;
        }
        let text = std::fs::read_to_string(p).unwrap();
        violations.extend(check(&rel, &text));
    }
    assert!(
        unplaced.is_empty(),
        "top-level modules missing from LAYERS in tests/layers.rs: {unplaced:?}"
    );
    assert!(
        violations.is_empty(),
        "{} upward import(s) (docs/ARCHITECTURE.md §2; shared vocabulary belongs in \
         crate::common):\n{}",
        violations.len(),
        violations
            .iter()
            .map(|v| format!("  {v}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// `common` is the leaf every layer may use: it imports only `crate::error`.
#[test]
fn common_imports_only_error() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("common"), &mut files);
    assert!(!files.is_empty());
    for p in files {
        let rel = p
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        for (line, m) in imports(&rel, &std::fs::read_to_string(&p).unwrap()) {
            assert!(
                m == "error" || m == "common",
                "src/{rel}:{line} → crate::{m}: common may import only crate::error"
            );
        }
    }
}

#[test]
fn the_checker_finds_upward_imports_and_ignores_comments_and_strings() {
    let src = r##"
//! Doc: use crate::cli::Cli;
/// crate::report::load
use crate::error::Result;
use crate::{common::Status, engine::probe::CycleRecord};
/* use crate::suite::Manifest; /* nested */ crate::cli */
fn f<'a>(x: &'a str) -> char {
    let _ = "crate::results::Status";
    let _ = r#"crate::measure::stats"#;
    let _ = crate::measure::sched::run;
    let c = '"';
    let _ = ['\'', '\\', '\u{22}', b'"' as char];
    let _ = crate::results::Status::Complete;
    c
}
mod tests {
    use super::super::super::report::table;
    use super::*;
}
"##;
    let v = check("driver/x.rs", src);
    let got: Vec<(usize, &str)> = v.iter().map(|v| (v.line, v.to.as_str())).collect();
    assert_eq!(
        got,
        vec![
            (5, "engine"),
            (10, "measure"),
            (13, "results"),
            (17, "report")
        ],
        "{v:#?}"
    );
    assert!(v[0]
        .to_string()
        .contains("src/driver/x.rs:5 → crate::engine"));
    // A group over several lines names each module on its own line, nested groups included.
    let group = "use crate::{\n    error::Result,\n    rt::{clock, Policy},\n    cli::Cli,\n};\n";
    let v = check("system/x.rs", group);
    assert_eq!(
        v.iter()
            .map(|v| (v.line, v.to.as_str()))
            .collect::<Vec<_>>(),
        vec![(4, "cli")]
    );
    // Downward and same-layer imports pass; so does `super` inside the file's own module.
    let ok = "use crate::{common, rt::clock};\nuse super::signal::InputSource;\n";
    assert!(check("driver/sim.rs", ok).is_empty());
    // From a nested file `super::super` reaches the crate root.
    let nested = "use super::super::cli::Cli;\n";
    assert_eq!(
        check("report/html/run.rs", nested).len(),
        0,
        "climbs to report only"
    );
    assert_eq!(
        check("report/html/run.rs", "use super::super::super::cli::Cli;\n").len(),
        1
    );
}

/// The children of the module at `module` that `files` (path under `src/`, text) name from
/// within each other: child → (child, file, line) for every file of a child (`x.rs`, or
/// anything under `x/`) naming another child of the same module. The module's own `mod.rs`
/// is its parent, not a child: it wires them, and they use what it re-exports.
type Edges = std::collections::BTreeMap<String, Vec<(String, String, usize)>>;

fn sibling_edges(module: &[String], files: &[(String, String)]) -> Edges {
    let children: BTreeSet<String> = files
        .iter()
        .filter_map(|(f, _)| {
            let p = module_path(f);
            (p.len() > module.len() && p.starts_with(module)).then(|| p[module.len()].clone())
        })
        .collect();
    let mut edges = Edges::new();
    for (f, text) in files {
        let p = module_path(f);
        if p.len() <= module.len() || !p.starts_with(module) {
            continue;
        }
        let from = &p[module.len()];
        for (line, target) in paths(f, text) {
            if target.len() > module.len() && target.starts_with(module) {
                let to = &target[module.len()];
                if to != from && children.contains(to) {
                    edges
                        .entry(from.clone())
                        .or_default()
                        .push((to.clone(), f.clone(), line));
                }
            }
        }
    }
    edges
}

/// Every import circle between the children of `module`, each as `a → b → a` with where
/// each step is named; one per circle (from its smallest child).
fn circles(module: &[String], files: &[(String, String)]) -> Vec<String> {
    let edges = sibling_edges(module, files);
    let mut out = Vec::new();
    // Depth-first from each child, keeping only circles that start at their smallest child
    // so each is reported once.
    fn walk(
        edges: &Edges,
        start: &str,
        path: &mut Vec<(String, String, usize)>,
        seen: &mut BTreeSet<String>,
        out: &mut Vec<String>,
    ) {
        let at = path.last().map_or(start.to_string(), |s| s.0.clone());
        let mut next: Vec<&(String, String, usize)> =
            edges.get(&at).into_iter().flatten().collect();
        next.sort();
        next.dedup_by(|a, b| a.0 == b.0);
        for e in next {
            if e.0 == start {
                let mut s = start.to_string();
                let mut at_steps = Vec::new();
                for step in path.iter().chain(std::iter::once(e)) {
                    s.push_str(&format!(" → {}", step.0));
                    at_steps.push(format!("src/{}:{}", step.1, step.2));
                }
                out.push(format!("{s} ({})", at_steps.join(", ")));
            } else if e.0.as_str() > start && seen.insert(e.0.clone()) {
                path.push(e.clone());
                walk(edges, start, path, seen, out);
                path.pop();
                seen.remove(&e.0);
            }
        }
    }
    for start in edges.keys() {
        walk(
            &edges,
            start,
            &mut Vec::new(),
            &mut BTreeSet::new(),
            &mut out,
        );
    }
    let name = module.join("::");
    out.into_iter().map(|c| format!("{name}: {c}")).collect()
}

/// What only the command line may do, in a file outside `src/cli/` and `main.rs`: name
/// clap (its derives and attributes come with it) or print (`println!`, `eprintln!`,
/// `print!`, `eprint!`, `dbg!`): the library returns what it has to say.
fn cli_only(file: &str, src: &str) -> Vec<String> {
    const PRINTS: &[&str] = &["println", "eprintln", "print", "eprint", "dbg"];
    const CLAP_ATTRS: &[&str] = &["arg", "command", "clap", "value"];
    let toks = tokens(&blank(src));
    let t = |k: usize| toks.get(k).map_or("", |x| x.0.as_str());
    let mut out = Vec::new();
    for (k, (tok, line)) in toks.iter().enumerate() {
        let what = if tok == "clap" && t(k + 1) == "::" {
            Some("clap".to_string())
        } else if PRINTS.contains(&tok.as_str()) && t(k + 1) == "!" {
            Some(format!("{tok}!"))
        } else if CLAP_ATTRS.contains(&tok.as_str())
            && t(k + 1) == "("
            && k >= 2
            && t(k - 1) == "["
            && t(k - 2) == "#"
        {
            Some(format!("#[{tok}(…)]"))
        } else {
            None
        };
        if let Some(w) = what {
            out.push(format!("src/{file}:{line}: {w}"));
        }
    }
    out
}

/// Every file under `src/` as (path relative to `src/`, text), sorted.
fn sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
        .iter()
        .map(|p| {
            let rel = p
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (rel, std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

/// The violations of the two checks below, over the whole of `src/`.
fn module_circles_and_cli_only() -> (Vec<String>, Vec<String>) {
    let files = sources();
    let modules: BTreeSet<Vec<String>> = files
        .iter()
        .filter(|(f, _)| f.ends_with("/mod.rs"))
        .map(|(f, _)| module_path(f))
        .collect();
    let circles = modules.iter().flat_map(|m| circles(m, &files)).collect();
    let stray = files
        .iter()
        .filter(|(f, _)| !f.starts_with("cli/") && f != "main.rs")
        .flat_map(|(f, text)| cli_only(f, text))
        .collect();
    (circles, stray)
}

#[test]
fn no_circle_inside_a_module_and_clap_and_printing_only_in_cli() {
    let (circles, stray) = module_circles_and_cli_only();
    assert!(
        circles.is_empty(),
        "{} import circle(s) between the files of one module (docs/ARCHITECTURE.md §2):\n  {}",
        circles.len(),
        circles.join("\n  ")
    );
    assert!(
        stray.is_empty(),
        "clap or printing outside src/cli/ and main.rs (the library returns what it has to \
         say):\n  {}",
        stray.join("\n  ")
    );
}

#[test]
fn the_checker_finds_circles_inside_a_module() {
    let f = |p: &str, s: &str| (p.to_string(), s.to_string());
    let report = vec!["report".to_string()];
    let files = vec![
        // The parent re-exports its children and they use it: no circle.
        f(
            "report/mod.rs",
            "pub mod a;\npub mod b;\npub use a::A;\nuse self::c::C;\n",
        ),
        f(
            "report/a.rs",
            "use super::A;\n// use super::c;\nfn f() { super::b::g() }\n",
        ),
        f(
            "report/b.rs",
            "use crate::report::{c::C, Item};\nconst S: &str = \"super::a\";\n",
        ),
        f(
            "report/c/mod.rs",
            "mod tests {\n    use super::super::a::A;\n}\n",
        ),
        // One step only: d → b is no circle.
        f("report/d.rs", "use super::b;\n"),
        // Another module's files are not this module's children.
        f("results/x.rs", "use crate::report::a;\n"),
    ];
    let got = circles(&report, &files);
    assert_eq!(
        got,
        vec!["report: a → b → c → a (src/report/a.rs:3, src/report/b.rs:1, src/report/c/mod.rs:2)"],
        "{got:#?}"
    );
    // Two children naming each other.
    let two = vec![
        f("report/table.rs", "fn t() { super::verdict::v() }\n"),
        f(
            "report/verdict.rs",
            "use super::table::{span, rate_cell};\n",
        ),
    ];
    assert_eq!(circles(&report, &two).len(), 1);
    assert!(circles(&report, &two[..1]).is_empty());
}

#[test]
fn the_checker_finds_clap_and_printing_outside_cli() {
    let src = r##"
//! println!("docs may say it");
use clap::Args;
#[derive(Debug, clap::ValueEnum)]
enum E { A }
#[derive(Args)]
struct S {
    #[arg(long)]
    x: u32,
}
fn f() {
    let _ = "eprintln!(no)";
    /* dbg!(no) */
    eprintln!("yes");
    std::println!("yes");
    let _ = dbg!(1);
    let _ = format!("{}", 1);
    write!(s, "not printing");
}
"##;
    let got = cli_only("stress/x.rs", src);
    assert_eq!(
        got,
        vec![
            "src/stress/x.rs:3: clap",
            "src/stress/x.rs:4: clap",
            "src/stress/x.rs:8: #[arg(…)]",
            "src/stress/x.rs:14: eprintln!",
            "src/stress/x.rs:15: println!",
            "src/stress/x.rs:16: dbg!",
        ]
    );
}

/// The longest a file of `src/` and a function in it may be (issue 28: split along meaning
/// beyond that).
const MAX_FILE_LINES: usize = 1000;
const MAX_FN_LINES: usize = 150;

/// Each function of `src` longer than `MAX_FN_LINES` lines, from its `fn` line to its closing
/// brace, read on the blanked text so braces in strings and comments do not count; and the
/// file itself when it is over `MAX_FILE_LINES`.
fn oversized(file: &str, src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lines = src.lines().count();
    if lines > MAX_FILE_LINES {
        out.push(format!("src/{file}: {lines} lines"));
    }
    let b: Vec<char> = blank(src).chars().collect();
    let line_at = |i: usize| b[..i].iter().filter(|&&c| c == '\n').count() + 1;
    let mut i = 0;
    while i + 3 <= b.len() {
        let word = b[i] == 'f'
            && b[i + 1] == 'n'
            && b[i + 2].is_whitespace()
            && (i == 0 || !is_ident(b[i - 1]));
        if !word {
            i += 1;
            continue;
        }
        let name: String = b[i + 2..]
            .iter()
            .skip_while(|c| c.is_whitespace())
            .take_while(|&&c| is_ident(c))
            .collect();
        // The body starts at the first `{` before any `;` (a declaration has none).
        let mut j = i + 2;
        while j < b.len() && b[j] != '{' && b[j] != ';' {
            j += 1;
        }
        if j >= b.len() || b[j] == ';' {
            i = j;
            continue;
        }
        let mut depth = 0usize;
        let mut k = j;
        while k < b.len() {
            match b[k] {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            k += 1;
        }
        let (first, last) = (line_at(i), line_at(k.min(b.len() - 1)));
        if last - first + 1 > MAX_FN_LINES {
            out.push(format!(
                "src/{file}:{first}: fn {name} is {} lines",
                last - first + 1
            ));
        }
        // Nested functions are inside this one's lines: measured with it.
        i = k;
    }
    out
}

#[test]
fn no_file_over_1000_lines_and_no_function_over_150() {
    let found: Vec<String> = sources()
        .iter()
        .flat_map(|(f, s)| oversized(f, s))
        .collect();
    assert!(
        found.is_empty(),
        "split these along meaning:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_size_checker_measures_functions_and_ignores_braces_in_strings() {
    let body = "    let x = 1;\n".repeat(MAX_FN_LINES - 2);
    let fits = format!("fn ok() {{\n{body}}}\n");
    assert!(oversized("a.rs", &fits).is_empty());
    let long = format!("pub(crate) fn long(a: u8) -> u8 {{\n{body}    a\n}}\n");
    assert_eq!(
        oversized("a.rs", &long),
        vec![format!("src/a.rs:1: fn long is {} lines", MAX_FN_LINES + 1)]
    );
    // A brace in a string, a char or a comment does not end or open a body; a declaration
    // without a body is not a function to measure.
    let tricky = format!(
        "trait T {{ fn decl(&self); }}\nfn s() {{\n    let _ = \"}}\";\n    let _ = '}}'; // }}\n{body}}}\n"
    );
    assert_eq!(
        oversized("t.rs", &tricky),
        vec![format!("src/t.rs:2: fn s is {} lines", MAX_FN_LINES + 2)]
    );
    let file = "\n".repeat(MAX_FILE_LINES + 1);
    assert_eq!(
        oversized("f.rs", &file),
        vec![format!("src/f.rs: {} lines", MAX_FILE_LINES + 1)]
    );
}

/// The test binaries that count heap operations on every thread (`common::counting::
/// on_all_threads`, directly or through `common::plugin_noalloc`) and hold more than one
/// test: a second test running beside the counting one would count its allocations there.
fn shared_counting(files: &[(String, String)]) -> Vec<String> {
    files
        .iter()
        .filter(|(_, src)| {
            let b = blank(src);
            b.contains("on_all_threads") || b.contains("plugin_noalloc")
        })
        .filter_map(|(name, src)| {
            let tests = blank(src).matches("#[test]").count();
            (tests > 1).then(|| format!("tests/{name}: {tests} tests"))
        })
        .collect()
}

#[test]
fn a_binary_that_counts_every_threads_allocations_holds_one_test() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    let found = shared_counting(&files);
    assert!(
        found.is_empty(),
        "merge the tests, or count on armed threads only:\n{}",
        found.join("\n")
    );
    // The checker itself: two tests beside the counting are found, one is not, and a
    // mention in a comment is not counting.
    let two = "use common::counting::on_all_threads;\n#[test]\nfn a() {}\n#[test]\nfn b() {}\n";
    let one = "use common::plugin_noalloc;\n#[test]\nfn a() {}\n";
    let comment = "// on_all_threads\n#[test]\nfn a() {}\n#[test]\nfn b() {}\n";
    let fixtures = [("two.rs", two), ("one.rs", one), ("c.rs", comment)]
        .map(|(n, s)| (n.to_string(), s.to_string()));
    assert_eq!(shared_counting(&fixtures), vec!["tests/two.rs: 2 tests"]);
}
