//! The shipped `xrunlab-watch.service` with the drop-in its own comment tells a user to
//! write (`systemctl edit xrunlab-watch`), read the way systemd reads them, so a test can
//! start the watch as the unit would: as the drop-in's user, with the environment and the
//! `ExecStartPre=` lines both give. This machine's PID 1 is not systemd, so the sandboxing
//! directives are not applied here: `systemd-analyze verify` checks those files, and this
//! checks what the drop-in promises, that the watch reaches the user's own server.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const UNIT: &str = "contrib/debian/xrunlab-watch.service";

/// The `[Service]` settings after the unit and then the drop-in: a list-valued key
/// (`ExecStartPre=`, `Environment=`) appends, and its empty assignment clears it, as
/// systemd does; any other key takes the last value.
#[derive(Debug, Default)]
pub struct Service {
    pub lists: BTreeMap<String, Vec<String>>,
    pub values: BTreeMap<String, String>,
}

const LISTS: &[&str] = &["ExecStartPre", "ExecStart", "Environment"];

impl Service {
    fn apply(&mut self, text: &str) {
        let mut in_service = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_service = line == "[Service]";
                continue;
            }
            if !in_service || line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            if LISTS.contains(&k) {
                let l = self.lists.entry(k.to_string()).or_default();
                if v.is_empty() {
                    l.clear();
                } else {
                    l.push(v.to_string());
                }
            } else {
                self.values.insert(k.to_string(), v.to_string());
            }
        }
    }

    /// `Environment=` assignments as (name, value).
    pub fn environment(&self) -> Vec<(String, String)> {
        self.lists
            .get("Environment")
            .into_iter()
            .flatten()
            .flat_map(|l| l.split_whitespace())
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

/// The unit's text, and the drop-in its comment shows (the indented lines after "for uid
/// 1000 (alice):", up to the next line of prose).
pub fn unit_and_drop_in() -> (String, String) {
    let unit = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(UNIT)).unwrap();
    let mut drop_in = String::new();
    let mut inside = false;
    for line in unit.lines() {
        if line.contains("systemctl edit xrunlab-watch") && line.ends_with(':') {
            inside = true;
            continue;
        }
        if inside {
            match line.strip_prefix("#   ") {
                Some(l) => {
                    drop_in.push_str(l);
                    drop_in.push('\n');
                }
                None => break,
            }
        }
    }
    assert!(
        drop_in.contains("[Service]") && drop_in.contains("User="),
        "no drop-in found in the unit's comment:\n{drop_in}"
    );
    (unit, drop_in)
}

/// The watch as the unit with its drop-in starts it, the drop-in's user and runtime
/// directory replaced by `user` and `runtime_dir`, its textfile directory by `textdir`,
/// `/usr/bin/xrunlab` by this build, and `args` as `/etc/default/xrunlab-watch`'s
/// `XRUNLAB_WATCH_ARGS`. `ExecStartPre=` lines run first (`+`: as root); the watch gets
/// only the unit's environment, as a service does. With `drop_in` false: the unit alone.
pub struct Started {
    pub output: Output,
    pub textfile: PathBuf,
}

pub fn run_watch(
    drop_in: bool,
    user: (&str, u32, u32),
    runtime_dir: &Path,
    textdir: &Path,
    args: &str,
) -> Started {
    let (unit, example) = unit_and_drop_in();
    // The example's user and uid are the comment's alice and 1000.
    let example = example
        .replace("/run/user/1000", &runtime_dir.to_string_lossy())
        .replace("alice", user.0);
    let mut s = Service::default();
    s.apply(&unit);
    if drop_in {
        s.apply(&example);
    }
    let bin = super::bin();
    let fix = |cmd: &str| {
        cmd.replace(
            "/var/lib/prometheus/node-exporter",
            &textdir.to_string_lossy(),
        )
        .replace("/usr/bin/xrunlab", &bin.to_string_lossy())
    };
    let mut env = s.environment();
    env.retain(|(k, _)| k != "XRUNLAB_WATCH_ARGS");
    env.push(("XRUNLAB_WATCH_ARGS".into(), args.into()));
    let run_as = s.values.get("User").map(|_| (user.1, user.2));
    for pre in s.lists.get("ExecStartPre").into_iter().flatten() {
        let (privileged, line) = match pre.strip_prefix('+') {
            Some(l) => (true, l),
            None => (false, pre.as_str()),
        };
        let line = fix(line);
        let words: Vec<&str> = line.split_whitespace().collect();
        let mut c = Command::new(words[0]);
        c.args(&words[1..]);
        if !privileged {
            super::as_user(&mut c, run_as);
        }
        let st = c.status().unwrap();
        assert!(st.success(), "ExecStartPre={pre} failed: {st}");
    }
    let start = s.lists.get("ExecStart").and_then(|l| l.last()).unwrap();
    let line = fix(start);
    // systemd splits `$VAR` at whitespace into words; `${VAR}` would stay one.
    let mut words: Vec<String> = Vec::new();
    for w in line.split_whitespace() {
        match w.strip_prefix('$') {
            Some(var) => words.extend(
                env.iter()
                    .filter(|(k, _)| k == var)
                    .flat_map(|(_, v)| v.split_whitespace().map(String::from)),
            ),
            None => words.push(w.to_string()),
        }
    }
    let mut c = Command::new(&words[0]);
    c.args(&words[1..])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null());
    super::as_user(&mut c, run_as);
    Started {
        output: c.output().unwrap(),
        textfile: textdir.join("xrunlab.prom"),
    }
}

/// `nobody`'s name, uid and gid (from /etc/passwd): a user with no session of its own,
/// standing for the comment's alice.
pub fn nobody() -> (String, u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let f: Vec<&str> = passwd
        .lines()
        .find(|l| l.starts_with("nobody:"))
        .expect("no user nobody in /etc/passwd")
        .split(':')
        .collect();
    (
        f[0].to_string(),
        f[2].parse().unwrap(),
        f[3].parse().unwrap(),
    )
}

/// The check both servers share: started as the unit with its drop-in starts it, as the
/// server's user (`runtime_dir` that user's), the watch reaches the server and its metrics
/// say so; the unit alone, as root, finds no server of that user's (exit 3, which the unit
/// restarts after 30 s, five times in 15 minutes at most).
pub fn drop_in_reaches(user: &(String, u32, u32), runtime_dir: &Path, server: &str) {
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    // The user passes through to the textfile directory the drop-in's ExecStartPre= makes.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let args = format!("--server {server} --duration 3s");
    let who = (user.0.as_str(), user.1, user.2);
    let textdir = dir.path().join("as-user");
    let w = run_watch(true, who, runtime_dir, &textdir, &args);
    let metrics = std::fs::read_to_string(&w.textfile).unwrap_or_default();
    assert!(
        w.output.status.success() && up(&metrics) == Some(true),
        "the watch as {} did not reach its server:\n{}\n{metrics}",
        user.0,
        super::show(&w.output)
    );
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&textdir).unwrap().uid(), user.1);
    // The unit alone runs as root, which has no such session.
    let textdir = dir.path().join("as-root");
    let w = run_watch(false, who, Path::new("/nonexistent"), &textdir, &args);
    let metrics = std::fs::read_to_string(&w.textfile).unwrap_or_default();
    assert!(
        w.output.status.code() == Some(3) && up(&metrics) != Some(true),
        "as root the watch reached {}'s server:\n{}\n{metrics}",
        user.0,
        super::show(&w.output)
    );
}

/// `xrunlab_watch_server_up`'s value in a metrics text, if there is one.
fn up(metrics: &str) -> Option<bool> {
    metrics
        .lines()
        .find(|l| l.starts_with("xrunlab_watch_server_up"))
        .and_then(|l| l.rsplit(' ').next())
        .map(|v| v.trim() == "1")
}
