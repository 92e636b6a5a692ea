//! Where triggers come from: an internal timer with a random phase, a key press (Enter on
//! stdin) or a UDP datagram. Each source blocks its (non-real-time) caller until the next
//! trigger and returns `None` at its end (stdin closed, interrupted).

use crate::driver::signal::Rng;
use crate::error::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::os::fd::AsFd;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TriggerKind {
    /// A thread sleeps a random time (uniform over two periods, after a 2 ms pause) and
    /// triggers: the trigger phase within the period is uniformly random.
    Internal,
    /// Enter on standard input.
    Stdin,
    /// Any datagram on this UDP port (of every local address).
    Udp { port: u16 },
}

impl std::str::FromStr for TriggerKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "internal" => Ok(TriggerKind::Internal),
            "stdin" => Ok(TriggerKind::Stdin),
            t => match t.strip_prefix("udp:").map(|p| p.parse::<u16>()) {
                Some(Ok(port)) if port > 0 => Ok(TriggerKind::Udp { port }),
                _ => Err(Error::usage(format!(
                    "bad --trigger '{s}': use internal, stdin or udp:PORT"
                ))),
            },
        }
    }
}

impl std::fmt::Display for TriggerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TriggerKind::Internal => f.write_str("internal"),
            TriggerKind::Stdin => f.write_str("stdin"),
            TriggerKind::Udp { port } => write!(f, "udp:{port}"),
        }
    }
}

/// An opened trigger source.
pub enum Source {
    Internal { rng: Rng, span_ns: u64 },
    Stdin,
    Udp(std::net::UdpSocket),
}

const PAUSE_NS: u64 = 2_000_000;

impl Source {
    /// Open the source; `period_ns` sets the internal trigger's random span. A UDP port that
    /// cannot be bound is an environment problem (exit 3).
    pub fn open(kind: TriggerKind, period_ns: u64, seed: u64) -> Result<Source> {
        Ok(match kind {
            TriggerKind::Internal => Source::Internal {
                rng: Rng::new(seed),
                span_ns: 2 * period_ns.max(1),
            },
            TriggerKind::Stdin => Source::Stdin,
            TriggerKind::Udp { port } => {
                let s = std::net::UdpSocket::bind(("0.0.0.0", port)).map_err(|e| {
                    Error::cannot_measure(format!("--trigger udp:{port}: cannot bind: {e}"))
                })?;
                s.set_read_timeout(Some(std::time::Duration::from_millis(100)))
                    .map_err(|e| Error::io("UDP read timeout", e))?;
                Source::Udp(s)
            }
        })
    }

    /// Block until the next trigger; returns its time te (CLOCK_MONOTONIC, read in this
    /// thread right when the trigger is known), or None when the source ended or `stop`
    /// was asked for.
    pub fn wait(&mut self, stop: &dyn Fn() -> bool) -> Option<u64> {
        use crate::rt::clock::{monotonic_ns, sleep_until_ns};
        match self {
            Source::Internal { rng, span_ns } => {
                let wake = monotonic_ns() + PAUSE_NS + (rng.next_f64() * *span_ns as f64) as u64;
                sleep_until_ns(wake);
                (!stop()).then(monotonic_ns)
            }
            Source::Stdin => {
                let stdin = std::io::stdin();
                let mut byte = [0u8; 1];
                loop {
                    if stop() {
                        return None;
                    }
                    let mut fds = [nix::poll::PollFd::new(
                        stdin.as_fd(),
                        nix::poll::PollFlags::POLLIN,
                    )];
                    match nix::poll::poll(&mut fds, 100u16) {
                        Ok(0) => continue,
                        Ok(_) => {}
                        Err(nix::errno::Errno::EINTR) => continue,
                        Err(_) => return None,
                    }
                    match stdin.lock().read(&mut byte) {
                        Ok(0) => return None,
                        Ok(_) if byte[0] == b'\n' => return Some(monotonic_ns()),
                        Ok(_) => continue,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(_) => return None,
                    }
                }
            }
            Source::Udp(sock) => {
                let mut buf = [0u8; 2048];
                loop {
                    if stop() {
                        return None;
                    }
                    match sock.recv_from(&mut buf) {
                        Ok(_) => return Some(monotonic_ns()),
                        Err(e)
                            if matches!(
                                e.kind(),
                                std::io::ErrorKind::WouldBlock
                                    | std::io::ErrorKind::TimedOut
                                    | std::io::ErrorKind::Interrupted
                            ) =>
                        {
                            continue
                        }
                        Err(_) => return None,
                    }
                }
            }
        }
    }

    /// Drop whatever arrived while a trial was still sounding, so each trigger is timed on
    /// arrival rather than when the previous tone ended. Returns how many were dropped.
    pub fn drain(&mut self) -> u64 {
        let mut n = 0;
        match self {
            Source::Internal { .. } => {}
            Source::Stdin => {
                let stdin = std::io::stdin();
                let mut byte = [0u8; 1];
                loop {
                    let mut fds = [nix::poll::PollFd::new(
                        stdin.as_fd(),
                        nix::poll::PollFlags::POLLIN,
                    )];
                    if !matches!(nix::poll::poll(&mut fds, 0u16), Ok(k) if k > 0) {
                        break;
                    }
                    match stdin.lock().read(&mut byte) {
                        Ok(1) if byte[0] == b'\n' => n += 1,
                        Ok(1) => {}
                        _ => break,
                    }
                }
            }
            Source::Udp(sock) => {
                let mut buf = [0u8; 2048];
                let _ = sock.set_nonblocking(true);
                while sock.recv_from(&mut buf).is_ok() {
                    n += 1;
                }
                let _ = sock.set_nonblocking(false);
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigger_kinds_parse() {
        assert_eq!(
            "internal".parse::<TriggerKind>().unwrap(),
            TriggerKind::Internal
        );
        assert_eq!("stdin".parse::<TriggerKind>().unwrap(), TriggerKind::Stdin);
        assert_eq!(
            "udp:9000".parse::<TriggerKind>().unwrap(),
            TriggerKind::Udp { port: 9000 }
        );
        for bad in ["udp:", "udp:0", "udp:70000", "key", ""] {
            assert!(bad.parse::<TriggerKind>().is_err(), "{bad}");
        }
    }
}
