//! The `jack` driver: the engine as a client of a JACK server (jackd2, or PipeWire through
//! `pw-jack`). The server owns the loop; its process thread is the engine's thread 0.
//!
//! Timeline. `t_ideal(k)` is the cycle start the server reports (`jack_get_cycle_times`:
//! `current_usecs`), the deadline is the next cycle start it predicts (`next_usecs`; or
//! t_ideal + P when that prediction is more than P/8 off: a DLL re-locking after a stall
//! predicted periods of 0.2–41 ms here, which would judge a normal cycle late or excuse a
//! late one), and
//! `wake` is CLOCK_MONOTONIC read first thing in the callback, so wake-up latency, end time
//! and DSP load mean what they mean on the `virtual` driver.
//!
//! What "cycle start" means differs between servers. jackd2's `current_usecs` is the
//! prediction of its delay-locked loop (filter coefficient 0.01) for this cycle's wake-up,
//! i.e. a smoothed ideal period interrupt — close to docs/ARCHITECTURE.md's `t_ideal` — while the
//! driver's actual wake is hidden; PipeWire's is its driver timer's time. A client can
//! therefore wake *before* jackd2's cycle start when the server's own timer is late. So the
//! callback also reads `jack_frames_since_cycle_start` (the real start, to one frame) and
//! uses JACK's µs timestamp only when it lies inside that bracket; otherwise t_ideal is the
//! bracket's middle and the deadline t_ideal + P (counted in `cycle_start_from_frames`).
//!
//! JACK's microsecond clock is not always CLOCK_MONOTONIC: jackd2 1.9.21 (Debian 12) reads
//! CLOCK_MONOTONIC_RAW (measured here: 239 ms apart after a day of NTP slewing, and drifting
//! by the slew rate), while pipewire-jack's `jack_get_time` is CLOCK_MONOTONIC (offset
//! within ±3 µs). So the driver measures the offset between `jack_get_time()` and
//! CLOCK_MONOTONIC every 100 ms on its non-real-time thread and the process callback adds
//! the latest value; offsets under 50 µs are read jitter and are not applied. The report
//! carries the mean and the largest offset seen.
//!
//! Cycle index k comes from the server's frame counter (`current_frames`), so cycles the
//! server ran without us (we were late and it skipped us) show up as skipped periods.
//!
//! Server xruns arrive on JACK's notification thread. The callback stores only a counter and
//! a timestamp; the process thread notices the new count after its cycle and copies its
//! short history of cycles into a preallocated slot. Matching that history with the server
//! xrun (which cycle, what cause) happens after the run, off the real-time path.

mod buffer;
mod latency;
pub mod names;
mod process;
mod report;
mod run;

pub use buffer::JackControl;
pub use latency::{port_latency_range, ENGINE_LATENCY_FRAMES};
pub use report::{JackLoad, JackReport, ServerXrun};

use crate::error::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The one message for every way of failing to reach a server.
pub const NO_SERVER: &str = "no JACK server running: start jackd, or run under pw-jack";

/// `--driver jack` options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JackConfig {
    /// Server name (`--server`); None = $JACK_DEFAULT_SERVER or "default".
    pub server: Option<String>,
    pub client_name: String,
    /// Ports to connect to our inputs (in order: in_1, in_2, …).
    pub connect_in: Vec<String>,
    /// Ports our outputs feed (out_1, out_2, …).
    pub connect_out: Vec<String>,
    /// Apply a differing `--buffer` with jack_set_buffer_size instead of refusing.
    pub set_buffer: bool,
    /// `--buffer` / `--rate` as the user gave them; None = take the server's.
    #[serde(default)]
    pub buffer_requested: Option<u32>,
    #[serde(default)]
    pub rate_requested: Option<u32>,
}

impl Default for JackConfig {
    fn default() -> Self {
        JackConfig {
            server: None,
            client_name: "xrunlab".into(),
            connect_in: Vec::new(),
            connect_out: Vec::new(),
            set_buffer: false,
            buffer_requested: None,
            rate_requested: None,
        }
    }
}

impl JackConfig {
    /// Parse `--connect in=PORT,…,out=PORT,…` into this config.
    pub fn parse_connect(&mut self, spec: &str) -> Result<()> {
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item.split_once('=') {
                Some(("in", p)) if !p.is_empty() => self.connect_in.push(p.to_string()),
                Some(("out", p)) if !p.is_empty() => self.connect_out.push(p.to_string()),
                _ => {
                    return Err(Error::usage(format!(
                        "--connect: `{item}` is not in=PORT or out=PORT"
                    )))
                }
            }
        }
        if self.connect_in.len() > CHANNELS || self.connect_out.len() > CHANNELS {
            return Err(Error::usage(format!(
                "--connect: at most {CHANNELS} in= and {CHANNELS} out= ports (the engine is stereo)"
            )));
        }
        Ok(())
    }
}

const CHANNELS: usize = 2;

/// An open (not yet active) client: the server's buffer size and rate are known, so the
/// engine can be built for them before the first cycle.
pub struct JackClient {
    client: jack::Client,
    cfg: JackConfig,
    pub rate: u32,
    pub frames: u32,
    buffer_set_from: Option<u32>,
    /// Holds the size `--set-buffer` changed, to put the original back after the run.
    control: Option<JackControl>,
    library_version: String,
    server: String,
    /// The handler reads our input ports even when nothing is connected to them yet
    /// (see [`JackClient::capture_input`]).
    capture_input: bool,
}

/// Version string of the loaded libjack, and which server it speaks to.
pub(crate) fn library_identity() -> (String, String) {
    // SAFETY: RTLD_NOLOAD only returns the libjack the jack crate already loaded (or null);
    // jack_get_version_string takes no arguments and returns a static NUL-terminated string
    // in both jackd2's and PipeWire's libjack.
    let version = unsafe {
        let h = libc::dlopen(
            c"libjack.so.0".as_ptr(),
            libc::RTLD_LAZY | libc::RTLD_NOLOAD,
        );
        let mut v = String::new();
        if !h.is_null() {
            let f = libc::dlsym(h, c"jack_get_version_string".as_ptr());
            if !f.is_null() {
                // SAFETY: the symbol is libjack's `const char *jack_get_version_string(void)`,
                // so this is its exact C signature.
                let f: unsafe extern "C" fn() -> *const libc::c_char = std::mem::transmute(f);
                let p = f();
                if !p.is_null() {
                    v = std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned();
                }
            }
            libc::dlclose(h);
        }
        v
    };
    let server = if version.to_ascii_lowercase().contains("pipewire") {
        "pipewire"
    } else {
        "jackd2"
    };
    (version, server.to_string())
}

/// libjack's messages, to stderr (never stdout, which may carry `--json`), without the one
/// jackd2's libjack prints for every external client: the jack crate always registers a
/// thread-init callback, and libjack reports that its message-buffer thread cannot run it,
/// which is not an error of ours (a grid of trials would print it once per trial).
// SAFETY: registered as libjack's error/info callback, which always passes null or a
// NUL-terminated string valid for the call; null is checked first.
unsafe extern "C" fn jack_message(msg: *const libc::c_char) {
    if msg.is_null() {
        return;
    }
    // SAFETY: libjack passes a NUL-terminated string valid for the call.
    let m = unsafe { std::ffi::CStr::from_ptr(msg) }.to_bytes();
    if m.starts_with(b"JackMessageBuffer::SetInitCallback") {
        return;
    }
    // While this thread opens a client the lines are held: a failed open ends in our own
    // error, and libjack's half-dozen lines about sockets and shared memory before it are
    // noise to a user who has simply not started a server.
    if OPENING.with(|o| o.get()) {
        HELD.with(|h| h.borrow_mut().push(String::from_utf8_lossy(m).into_owned()));
        return;
    }
    // The raw syscall, not libc::write: jackd2's libjack stops its threads with
    // pthread_cancel (on deactivate and close), and a cancellation taken at write(), a
    // cancellation point, would unwind through this Rust frame — the crate's own handler
    // catches that unwind and glibc aborts the process ("FATAL: exception not rethrown":
    // seen once in a load grid under the crate's default handler, which prints with
    // eprintln!). syscall() is no cancellation point and takes no lock on libjack's
    // real-time threads.
    libjack_line(m);
}

/// One of libjack's lines on stderr, where libjack's own logger would have put it: the
/// library forwards what libjack says, it says nothing of its own here.
fn libjack_line(m: &[u8]) {
    // SAFETY: write(2) on stderr with valid buffers.
    unsafe {
        libc::syscall(libc::SYS_write, 2, m.as_ptr(), m.len());
        libc::syscall(libc::SYS_write, 2, b"\n".as_ptr(), 1usize);
    }
}

thread_local! {
    static OPENING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static HELD: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether a server answers on `cfg`'s server name (a client opened and closed at once,
/// never starting a server): a multi-backend command's check before it measures anything.
pub fn probe(cfg: &JackConfig) -> Result<()> {
    connect(cfg, "xrunlab-probe").map(drop)
}

/// Open a client named `name` on the configured server, never starting one. Every client
/// and probe of ours opens here, so all get the same logger, server name and errors.
pub(crate) fn connect(cfg: &JackConfig, name: &str) -> Result<jack::Client> {
    static LOGGER: std::sync::Once = std::sync::Once::new();
    // Without libjack the crate's function table panics on first use; Client::new below
    // reports the missing library instead.
    if jack::jack_sys::library().is_ok() {
        LOGGER.call_once(|| {
            jack::set_logger(jack::LoggerType::Custom {
                info: jack_message,
                error: jack_message,
            })
        });
    }
    if cfg.set_buffer && std::env::var_os("PIPEWIRE_PROPS").is_none() {
        // pipewire-jack applies jack_set_buffer_size to the calling client's own node only
        // (node.force-quantum, effective while it is active) unless the client has
        // jack.global-buffer-size, which jack.conf gives only to jack_bufsize. A buffer size
        // is a server setting here, as on jackd2: ask for the global one (the settings
        // metadata's clock.force-quantum). jackd2 ignores the variable. Written before any
        // client of ours exists, while the process is still single-threaded.
        std::env::set_var("PIPEWIRE_PROPS", "{ jack.global-buffer-size = true }");
    }
    // Before libjack sees any of them (`names`): also what the CLI checked, since every
    // client of ours opens here.
    names::check_opened_client(name)?;
    match &cfg.server {
        Some(s) => names::check_server(s, "--server")?,
        None => names::check_environment()?,
    }
    if let Some(s) = &cfg.server {
        // The crate has no way to pass JackServerName; libjack reads this variable at
        // open time. Only written when it differs: `load` opens a client per trial while
        // its stress threads run, and an unchanged environment is one nobody races on.
        if std::env::var_os("JACK_DEFAULT_SERVER").as_deref() != Some(s.as_ref()) {
            std::env::set_var("JACK_DEFAULT_SERVER", s);
        }
    }
    OPENING.with(|o| o.set(true));
    let opened = jack::Client::new(name, jack::ClientOptions::NO_START_SERVER);
    OPENING.with(|o| o.set(false));
    let held = HELD.with(|h| std::mem::take(&mut *h.borrow_mut()));
    match opened {
        Ok((client, _status)) => {
            // Held while opening: said now that the open succeeded and they are news.
            for m in &held {
                libjack_line(m.as_bytes());
            }
            Ok(client)
        }
        Err(jack::Error::LibraryError(m)) => Err(Error::no_server(format!(
            "{NO_SERVER} (libjack could not be loaded: {m})"
        ))),
        Err(_) => Err(Error::no_server(match held.first() {
            Some(why) => format!("{NO_SERVER} (libjack: {why})"),
            None => NO_SERVER.to_string(),
        })),
    }
}

impl JackClient {
    /// Connect to the server. `requested_frames` / `requested_rate` are the user's explicit
    /// `--buffer` / `--rate` (None = take the server's).
    pub fn open(
        cfg: &JackConfig,
        requested_frames: Option<u32>,
        requested_rate: Option<u32>,
    ) -> Result<JackClient> {
        let client = connect(cfg, &cfg.client_name)?;
        let (library_version, server) = library_identity();
        let rate = client.sample_rate();
        let mut frames = client.buffer_size();
        if let Some(r) = requested_rate {
            if r != rate {
                return Err(Error::usage(format!(
                    "--rate {r}: the JACK server runs at {rate} Hz (omit --rate, or restart the server at {r})"
                )));
            }
        }
        let mut buffer_set_from = None;
        let mut control = None;
        if let Some(want) = requested_frames {
            if want != frames {
                if !cfg.set_buffer {
                    return Err(Error::usage(format!(
                        "--buffer {want}: the JACK server's buffer size is {frames} (omit --buffer, or add --set-buffer to change the server's)"
                    )));
                }
                // Through a control client, which puts the original size back when the
                // run ends, fails or is interrupted (it restores on drop).
                let mut c = JackControl::open(cfg)?;
                c.set_frames(want)?;
                control = Some(c);
                buffer_set_from = Some(frames);
                frames = want;
            }
        }
        Ok(JackClient {
            client,
            cfg: cfg.clone(),
            rate,
            frames,
            buffer_set_from,
            control,
            library_version,
            server,
            capture_input: false,
        })
    }

    /// Hand the handler our input ports as its input instead of the InputSource, even
    /// without `--connect in=`: a loop measurement whose connection is made once the
    /// client runs (`rtl`'s self-loop).
    pub fn capture_input(&mut self) {
        self.capture_input = true;
    }

    /// The latency range of any port in the graph (ours or another client's), by its full
    /// name; see [`port_latency_range`].
    pub fn port_latency_range(&self, port: &str, mode: jack::LatencyType) -> Result<(u32, u32)> {
        port_latency_range(&self.client, port, mode)
    }

    pub fn server(&self) -> &str {
        &self.server
    }
}

impl JackClient {
    /// The name the server gave this client (it renames a taken one), so a caller can
    /// address the ports `run` registers (`NAME:in_1`, `NAME:out_1`, …).
    pub fn client_name(&self) -> &str {
        self.client.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_spec_parses_and_rejects() {
        let mut c = JackConfig::default();
        c.parse_connect("in=system:capture_1,in=system:capture_2,out=system:playback_1")
            .unwrap();
        assert_eq!(c.connect_in, ["system:capture_1", "system:capture_2"]);
        assert_eq!(c.connect_out, ["system:playback_1"]);
        let mut c = JackConfig::default();
        assert!(c.parse_connect("system:capture_1").is_err());
        assert!(c.parse_connect("in=a,in=b,in=c").is_err());
    }
}
