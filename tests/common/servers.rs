//! Private audio servers for integration tests: a jackd2 dummy server and a PipeWire daemon
//! with its Dummy-Driver. Each test gets its own instance (unique name / runtime dir) so
//! tests can run in parallel with each other and with other people's servers, and each is
//! killed on Drop so a failing test leaves nothing behind.
//!
//! `start` returns an error string instead of panicking: callers pass `.ok()` through
//! `require()`, which turns "cannot start" into a skip on a developer box and into a
//! failure under CI.
#![allow(dead_code)]

use super::as_user;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static SEQ: AtomicU32 = AtomicU32::new(0);

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}{}x{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// SIGTERM, then SIGKILL if the server does not leave within `grace`. Whether it ended
/// cleanly (exit status 0) after the SIGTERM.
fn stop_child(child: &mut Child, grace: Duration) -> bool {
    if let Ok(Some(st)) = child.try_wait() {
        return st.success();
    }
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let t = Instant::now();
    while t.elapsed() < grace {
        if let Ok(Some(st)) = child.try_wait() {
            return st.success();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

fn read_log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// A JACK environment a child process (xrunlab, jack_lsp…) needs to reach the server.
pub trait AudioServer {
    /// Environment variables for clients of this server.
    fn client_env(&self) -> Vec<(String, String)>;
    /// Program prefix to run a JACK client against this server (`pw-jack` for PipeWire).
    fn wrapper(&self) -> Option<&'static str>;
    /// Set the server's variables in this process (for library-level tests that open a
    /// client in-process). Tests doing this must not share a server with other threads
    /// that expect different values.
    fn apply_env_to_self(&self) {
        for (k, v) in self.client_env() {
            std::env::set_var(k, v);
        }
    }
    /// The user the server runs as (uid, gid), when not this process's.
    fn user(&self) -> Option<(u32, u32)> {
        None
    }
    /// A command running `prog` as a client of this server (as its user).
    fn command(&self, prog: &Path) -> Command {
        let mut c = match self.wrapper() {
            Some(w) => {
                let mut c = Command::new(w);
                c.arg(prog);
                c
            }
            None => Command::new(prog),
        };
        for (k, v) in self.client_env() {
            c.env(k, v);
        }
        as_user(&mut c, self.user());
        c
    }
    /// Kill the server abruptly (as a crash would).
    fn kill_now(&mut self);
    fn log(&self) -> String;
}

pub struct JackdServer {
    pub name: String,
    pub rate: u32,
    pub frames: u32,
    user: Option<(u32, u32)>,
    killed: bool,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl JackdServer {
    /// Start `jackd -n NAME -d dummy -r RATE -p FRAMES` and wait until a client can
    /// connect (`jack_wait -w`), at most 10 s.
    pub fn start(rate: u32, frames: u32) -> Result<Self, String> {
        Self::start_named(&unique("xrl"), rate, frames)
    }

    /// As [`JackdServer::start`], under a given name: a server restarted under the name of
    /// one that stopped (what a client that follows its server sees).
    pub fn start_named(name: &str, rate: u32, frames: u32) -> Result<Self, String> {
        Self::start_with(name, None, rate, frames)
    }

    /// As [`JackdServer::start`], as another user (uid, gid): a user session's server,
    /// whose socket and shared memory are named by that user's id.
    pub fn start_as(user: (u32, u32), rate: u32, frames: u32) -> Result<Self, String> {
        Self::start_with(&unique("xrl"), Some(user), rate, frames)
    }

    fn start_with(
        name: &str,
        user: Option<(u32, u32)>,
        rate: u32,
        frames: u32,
    ) -> Result<Self, String> {
        let jackd = super::which("jackd").ok_or("jackd not installed (apt install jackd2)")?;
        let jack_wait = super::which("jack_wait").ok_or("jack_wait not installed")?;
        let name = name.to_string();
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let log = dir.path().join("jackd.log");
        let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let child = as_user(&mut Command::new(jackd), user)
            // Without D-Bus there is no device reservation service to ask; the dummy driver
            // needs no device anyway.
            .env("JACK_NO_AUDIO_RESERVATION", "1")
            .args(["-n", &name, "-d", "dummy", "-r", &rate.to_string()])
            .args(["-p", &frames.to_string()])
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(|e| e.to_string())?)
            .stderr(out)
            .spawn()
            .map_err(|e| format!("cannot spawn jackd: {e}"))?;
        let mut s = JackdServer {
            name,
            rate,
            frames,
            user,
            killed: false,
            child,
            log,
            _dir: dir,
        };
        let t = Instant::now();
        loop {
            if let Ok(Some(st)) = s.child.try_wait() {
                return Err(format!("jackd exited ({st}):\n{}", read_log(&s.log)));
            }
            let ok = as_user(&mut Command::new(&jack_wait), user)
                .args(["-c", "-s", &s.name])
                .env("JACK_NO_START_SERVER", "1")
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "running")
                .unwrap_or(false);
            if ok {
                return Ok(s);
            }
            if t.elapsed() > Duration::from_secs(10) {
                return Err(format!(
                    "jackd did not come up in 10 s:\n{}",
                    read_log(&s.log)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl AudioServer for JackdServer {
    fn client_env(&self) -> Vec<(String, String)> {
        vec![
            ("JACK_DEFAULT_SERVER".into(), self.name.clone()),
            // A test must never auto-start a default server behind our back.
            ("JACK_NO_START_SERVER".into(), "1".into()),
            ("JACK_NO_AUDIO_RESERVATION".into(), "1".into()),
        ]
    }
    fn wrapper(&self) -> Option<&'static str> {
        None
    }
    fn user(&self) -> Option<(u32, u32)> {
        self.user
    }
    fn kill_now(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.killed = true;
    }
    fn log(&self) -> String {
        read_log(&self.log)
    }
}

impl JackdServer {
    /// A killed jackd2 keeps its slot in the machine-wide server registry
    /// (/dev/shm/jack-shm-registry, 8 slots): a dead server's slot is only reclaimed by a
    /// new server of the same name. Eight crash tests with unique names would lock every
    /// jackd on the machine out ("Too many servers already active"), so start the name once
    /// more and let it exit cleanly, which frees the slot and its semaphores.
    fn reap(&self) {
        let Some(jackd) = super::which("jackd") else {
            return;
        };
        let Ok(mut c) = as_user(&mut Command::new(jackd), self.user)
            .env("JACK_NO_AUDIO_RESERVATION", "1")
            .args([
                "-n",
                &self.name,
                "-d",
                "dummy",
                "-r",
                &self.rate.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        else {
            return;
        };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            let up = super::which("jack_wait").is_some_and(|w| {
                as_user(&mut Command::new(w), self.user)
                    .args(["-c", "-s", &self.name])
                    .output()
                    .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "running")
            });
            if up || matches!(c.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        stop_child(&mut c, Duration::from_secs(3));
    }
}

impl Drop for JackdServer {
    fn drop(&mut self) {
        // jackd that dies on its way out (SIGPIPE from a client killed just before, seen
        // here) leaves its slot behind as a killed one does.
        let clean = stop_child(&mut self.child, Duration::from_secs(3));
        if self.killed || !clean {
            self.reap();
        }
        // A killed jackd leaves its named sockets and semaphores in /dev/shm.
        if let Ok(rd) = std::fs::read_dir("/dev/shm") {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.contains(&format!("_{}_", self.name))
                    || n.ends_with(&format!("_{}", self.name))
                {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

/// A private PipeWire daemon: its own XDG_RUNTIME_DIR (mode 0700), so it needs neither
/// D-Bus nor a session manager, and no other PipeWire on the machine can see it. With no
/// device nodes the graph is paced by PipeWire's Dummy-Driver.
pub struct PipeWireServer {
    pub runtime_dir: PathBuf,
    pub rate: u32,
    pub frames: u32,
    user: Option<(u32, u32)>,
    child: Child,
    /// WirePlumber in a D-Bus session of its own (its own process group), when asked.
    session: Option<Child>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// What a private PipeWire runs beside its defaults: a `pipewire.conf.d` drop-in (modules
/// such as a filter-chain, objects such as a null sink), the daemon's extra environment,
/// and WirePlumber to link the nodes it creates (`dbus-run-session -- wireplumber`, in the
/// daemon's runtime directory).
#[derive(Default)]
pub struct PipeWireExtra<'a> {
    pub conf: Option<&'a str>,
    pub env: Vec<(&'a str, String)>,
    pub session_manager: bool,
}

impl PipeWireServer {
    /// Start `pipewire`, force quantum and rate through the `settings` metadata, and wait
    /// until a JACK client under `pw-jack` sees the forced buffer size (at most 15 s).
    pub fn start(rate: u32, frames: u32) -> Result<Self, String> {
        Self::start_with(None, rate, frames, &PipeWireExtra::default())
    }

    /// As [`PipeWireServer::start`], with `extra` beside the defaults.
    pub fn start_extra(rate: u32, frames: u32, extra: &PipeWireExtra) -> Result<Self, String> {
        Self::start_with(None, rate, frames, extra)
    }

    /// As [`PipeWireServer::start`], as another user (uid, gid), its runtime directory
    /// owned by that user as a login's `/run/user/UID` is.
    pub fn start_as(user: (u32, u32), rate: u32, frames: u32) -> Result<Self, String> {
        Self::start_with(Some(user), rate, frames, &PipeWireExtra::default())
    }

    fn start_with(
        user: Option<(u32, u32)>,
        rate: u32,
        frames: u32,
        extra: &PipeWireExtra,
    ) -> Result<Self, String> {
        let pw = super::which("pipewire").ok_or("pipewire not installed (apt install pipewire)")?;
        super::which("pw-jack").ok_or("pw-jack not installed (apt install pipewire-jack)")?;
        super::which("pw-metadata").ok_or("pw-metadata not installed (pipewire-bin)")?;
        let bufsize = super::which("jack_bufsize").ok_or("jack_bufsize not installed")?;
        let dir = tempfile::Builder::new()
            .prefix("xrl-pw")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let runtime_dir = dir.path().join("run");
        std::fs::create_dir(&runtime_dir).map_err(|e| e.to_string())?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&runtime_dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| e.to_string())?;
        if let Some((uid, gid)) = user {
            // The user passes through the test's directory to its own runtime directory.
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711))
                .map_err(|e| e.to_string())?;
            std::os::unix::fs::chown(&runtime_dir, Some(uid), Some(gid))
                .map_err(|e| e.to_string())?;
        }
        let log = dir.path().join("pipewire.log");
        let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        // The drop-in goes where the daemon reads its user's configuration.
        let config_home = dir.path().join("config");
        if let Some(conf) = extra.conf {
            let d = config_home.join("pipewire/pipewire.conf.d");
            std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
            std::fs::write(d.join("xrunlab-test.conf"), conf).map_err(|e| e.to_string())?;
        }
        let child = as_user(&mut Command::new(pw), user)
            .env("XDG_RUNTIME_DIR", &runtime_dir)
            .env("XDG_CONFIG_HOME", &config_home)
            .envs(extra.env.iter().map(|(k, v)| (*k, v)))
            .env_remove("PIPEWIRE_REMOTE")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(|e| e.to_string())?)
            .stderr(out)
            .spawn()
            .map_err(|e| format!("cannot spawn pipewire: {e}"))?;
        let mut s = PipeWireServer {
            runtime_dir,
            rate,
            frames,
            user,
            child,
            session: None,
            log,
            _dir: dir,
        };
        if extra.session_manager {
            s.start_session_manager(&config_home)?;
        }
        let t = Instant::now();
        let mut forced = false;
        loop {
            if let Ok(Some(st)) = s.child.try_wait() {
                return Err(format!("pipewire exited ({st}):\n{}", read_log(&s.log)));
            }
            if !forced {
                forced = s.metadata("clock.force-rate", rate)
                    && s.metadata("clock.force-quantum", frames);
            }
            if forced {
                let out = s
                    .command(&bufsize)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .output();
                if let Ok(o) = out {
                    if String::from_utf8_lossy(&o.stdout).trim() == frames.to_string() {
                        return Ok(s);
                    }
                }
            }
            if t.elapsed() > Duration::from_secs(15) {
                return Err(format!(
                    "pipewire did not serve a {frames}-frame quantum in 15 s:\n{}",
                    read_log(&s.log)
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// WirePlumber, once the daemon's socket is there; its log beside the daemon's.
    fn start_session_manager(&mut self, config_home: &Path) -> Result<(), String> {
        let run =
            super::which("dbus-run-session").ok_or("dbus-run-session not installed (dbus)")?;
        super::which("wireplumber").ok_or("wireplumber not installed (apt install wireplumber)")?;
        let t = Instant::now();
        while !self.runtime_dir.join("pipewire-0").exists() {
            if t.elapsed() > Duration::from_secs(10) {
                return Err(format!(
                    "no pipewire-0 socket in 10 s:\n{}",
                    read_log(&self.log)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = self.log.with_file_name("wireplumber.log");
        let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        use std::os::unix::process::CommandExt;
        let child = as_user(&mut Command::new(run), self.user)
            .args(["--", "wireplumber"])
            .env("XDG_RUNTIME_DIR", &self.runtime_dir)
            .env("XDG_CONFIG_HOME", config_home)
            .env_remove("PIPEWIRE_REMOTE")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            // Its D-Bus daemon and WirePlumber stop with it (see Drop).
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(|e| e.to_string())?)
            .stderr(out)
            .spawn()
            .map_err(|e| format!("cannot spawn dbus-run-session -- wireplumber: {e}"))?;
        self.session = Some(child);
        Ok(())
    }

    /// Whether `pw-link -l` lists a link from an output port of node `from`.
    pub fn linked_from(&self, from: &str) -> bool {
        let o = as_user(&mut Command::new("pw-link"), self.user)
            .env("XDG_RUNTIME_DIR", &self.runtime_dir)
            .arg("-l")
            .stderr(Stdio::null())
            .output();
        let Ok(o) = o else { return false };
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let mut lines = text.lines().peekable();
        while let Some(l) = lines.next() {
            if l.starts_with(&format!("{from}:")) && lines.peek().is_some_and(|n| n.contains("|->"))
            {
                return true;
            }
        }
        false
    }

    fn metadata(&self, key: &str, value: u32) -> bool {
        as_user(&mut Command::new("pw-metadata"), self.user)
            .env("XDG_RUNTIME_DIR", &self.runtime_dir)
            .args(["-n", "settings", "0", key, &value.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }
}

impl AudioServer for PipeWireServer {
    fn client_env(&self) -> Vec<(String, String)> {
        vec![(
            "XDG_RUNTIME_DIR".into(),
            self.runtime_dir.to_string_lossy().into_owned(),
        )]
    }
    fn wrapper(&self) -> Option<&'static str> {
        Some("pw-jack")
    }
    fn user(&self) -> Option<(u32, u32)> {
        self.user
    }
    fn kill_now(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
    fn log(&self) -> String {
        read_log(&self.log)
    }
}

impl Drop for PipeWireServer {
    fn drop(&mut self) {
        if let Some(mut sm) = self.session.take() {
            // The D-Bus daemon and WirePlumber too: the group our child leads
            // (process_group(0)), whose id stays ours until stop_child reaps the leader.
            // SAFETY: plain kill(2).
            unsafe { libc::kill(-(sm.id() as libc::pid_t), libc::SIGTERM) };
            stop_child(&mut sm, Duration::from_secs(3));
        }
        stop_child(&mut self.child, Duration::from_secs(3));
    }
}

/// A private jackd dummy server, or None after `require` said why there is none (a skip
/// outside CI; under CI `require` fails the test).
pub fn require_jackd(rate: u32, frames: u32) -> Option<JackdServer> {
    let s = JackdServer::start(rate, frames);
    let ok = super::require(
        s.is_ok(),
        &format!("a jackd2 dummy server: {:?}", s.as_ref().err()),
    );
    ok.then(|| s.unwrap())
}

/// A private PipeWire daemon reached through pw-jack, or None as for [`require_jackd`].
pub fn require_pipewire(rate: u32, frames: u32) -> Option<PipeWireServer> {
    let s = PipeWireServer::start(rate, frames);
    let ok = super::require(
        s.is_ok(),
        &format!("a private PipeWire with pw-jack: {:?}", s.as_ref().err()),
    );
    ok.then(|| s.unwrap())
}
