//! `watch --metrics ADDR`: a live document over HTTP, for a Prometheus server to scrape.
//!
//! Written on std's sockets and `poll(2)` rather than an HTTP crate: it answers one path,
//! `GET` (and `HEAD`) only, one response per connection (`Connection: close`), which is what
//! a scraper needs, with no dependency to keep current. The listener is bound by
//! [`Endpoint::bind`] before the watch attaches, so a port in use or an address that is not
//! this machine's is a usage error (exit 2) before anything is measured.
//!
//! It may face a network (`--metrics 0.0.0.0:PORT`), so no client can hold it
//! (docs/ARCHITECTURE.md §2 `report`): one normal-priority thread serves every connection
//! at once over non-blocking sockets; each connection has [`DEADLINE`] from accept to its
//! response written, whatever it sends or reads, and is closed then; at most [`MAX_CONNS`]
//! are open (fewer when the file limit is low), and one more is closed as soon as it is
//! accepted; a request head is read up to [`http::MAX_HEAD`] bytes. When the watch ends the
//! thread is woken at once, shuts every open connection down and closes the listener, so
//! the watch's end never waits on a client.

mod conn;
pub mod http;

use crate::error::{Error, Result};
use conn::Conn;
pub use http::Page;
use nix::poll::{PollFd, PollFlags};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// From accept to the response written: a scrape takes milliseconds, and Prometheus' own
/// scrape timeout is 10 s by default.
pub const DEADLINE: Duration = Duration::from_secs(2);
/// Open connections at most: a scraper needs one; this leaves room for a flood of a few
/// hundred idle ones, each of which its deadline ends, without running out of descriptors.
pub const MAX_CONNS: usize = 512;
/// Accepts in one round at most, so that a connection flood cannot starve the rest.
const ACCEPTS_PER_ROUND: usize = 64;
/// After the process ran out of descriptors, accepting waits this long.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// The longest poll: nothing depends on it (the stop wakes the thread), it bounds a surprise.
const MAX_WAIT: Duration = Duration::from_secs(1);

/// `--metrics` as typed: a port alone is on loopback (metrics are not published beyond the
/// machine unless asked), else `HOST:PORT` or `[IPv6]:PORT`.
pub fn parse_addr(s: &str) -> Result<SocketAddr> {
    let bad = || {
        Error::usage(format!(
            "--metrics {s}: expected PORT, HOST:PORT or [IPv6]:PORT (e.g. 9543, 127.0.0.1:9543 or 0.0.0.0:9543)"
        ))
    };
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    // A host name: only when it carries a port, so that a lone name is not looked up.
    if !s.contains(':') || s.len() > 300 {
        return Err(bad());
    }
    s.to_socket_addrs()
        .map_err(|_| bad())?
        .next()
        .ok_or_else(bad)
}

/// The bound listener and its limits.
#[derive(Debug)]
pub struct Endpoint {
    listener: TcpListener,
    addr: SocketAddr,
    deadline: Duration,
    cap: usize,
}

impl Endpoint {
    /// Bind `--metrics ADDR` now: every reason it cannot serve there is a usage error.
    pub fn bind(s: &str) -> Result<Endpoint> {
        let asked = parse_addr(s)?;
        let listener = TcpListener::bind(asked).map_err(|e| {
            use std::io::ErrorKind as K;
            let why = match e.kind() {
                K::AddrInUse => "the port is in use by another program; pick another port".into(),
                K::PermissionDenied => {
                    "ports below 1024 need root or CAP_NET_BIND_SERVICE; pick a port above 1023"
                        .into()
                }
                K::AddrNotAvailable => "not an address of this machine".into(),
                _ => e.to_string(),
            };
            Error::usage(format!("--metrics {asked}: {why}"))
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io(format!("--metrics {asked}"), e))?;
        let addr = listener.local_addr().unwrap_or(asked);
        Ok(Endpoint {
            listener,
            addr,
            deadline: DEADLINE,
            cap: conn_cap(),
        })
    }

    /// Where it listens (the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve `page` on a thread of its own while `work` runs on the caller's. When `work`
    /// returns, the thread is woken, every connection shut down and the port closed, and
    /// then `work`'s value is returned: no client delays it.
    pub fn serve_while<R>(self, page: &Page, work: impl FnOnce() -> R) -> R {
        let Ok((mut wake, woken)) = UnixStream::pair() else {
            // Without a way to stop the thread, serve nothing rather than block the end.
            return work();
        };
        std::thread::scope(|s| {
            let server = std::thread::Builder::new()
                .name("xrl-metrics".into())
                .spawn_scoped(s, || self.serve(&woken, page));
            let r = work();
            // The byte wakes the poll; should it fail, closing our end (POLLHUP) does too.
            let _ = wake.write_all(&[1]);
            drop(wake);
            if let Ok(h) = server {
                let _ = h.join();
            }
            r
        })
    }

    fn serve(&self, stop: &UnixStream, page: &Page) {
        let mut conns: Vec<Conn> = Vec::new();
        let mut accept_after = Instant::now();
        loop {
            let now = Instant::now();
            conns.retain_mut(|c| !c.expire(now));
            let wait = conns
                .iter()
                .map(|c| c.until().saturating_duration_since(now))
                .chain([MAX_WAIT, accept_after.saturating_duration_since(now)])
                .filter(|d| !d.is_zero())
                .min()
                .unwrap_or(MAX_WAIT);
            let listen = if now >= accept_after {
                PollFlags::POLLIN
            } else {
                PollFlags::empty()
            };
            let mut fds = Vec::with_capacity(conns.len() + 2);
            fds.push(PollFd::new(stop.as_fd(), PollFlags::POLLIN));
            fds.push(PollFd::new(self.listener.as_fd(), listen));
            fds.extend(conns.iter().map(|c| PollFd::new(c.fd(), c.interest())));
            // Rounded up, so that a deadline has passed when the poll times out.
            let ms = u16::try_from(wait.as_millis() + 1).unwrap_or(u16::MAX);
            match nix::poll::poll(&mut fds, ms) {
                Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
                Ok(_) => {}
                // Not expected with valid descriptors; do not spin if it happens.
                Err(_) => {
                    std::thread::sleep(ACCEPT_BACKOFF);
                    continue;
                }
            }
            let ready: Vec<bool> = fds
                .iter()
                .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
                .collect();
            drop(fds);
            if ready[0] {
                break;
            }
            let mut i = 2;
            conns.retain_mut(|c| {
                let go = ready[i];
                i += 1;
                !go || c.advance(page)
            });
            if ready[1] {
                accept_after = self.accept(&mut conns);
            }
        }
        for c in conns {
            c.shut();
        }
        // The listener closes when the Endpoint is dropped, as serve_while returns.
    }

    /// Take the waiting connections; when the file limit was hit, when to try again.
    fn accept(&self, conns: &mut Vec<Conn>) -> Instant {
        for _ in 0..ACCEPTS_PER_ROUND {
            match self.listener.accept() {
                Ok((s, _)) if conns.len() >= self.cap => {
                    let _ = s.shutdown(std::net::Shutdown::Both);
                }
                Ok((s, _)) => {
                    if s.set_nonblocking(true).is_ok() {
                        conns.push(Conn::new(s, Instant::now() + self.deadline));
                    }
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    return Instant::now() + ACCEPT_BACKOFF;
                }
                // WouldBlock: none left; ECONNABORTED and the like: that client is gone.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => {}
            }
        }
        Instant::now()
    }
}

/// [`MAX_CONNS`], or half the descriptors the process may open when that is fewer: the
/// watch needs its own.
fn conn_cap() -> usize {
    use nix::sys::resource::{getrlimit, Resource};
    let soft = getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| soft);
    usize::try_from(soft / 2).map_or(MAX_CONNS, |n| n.clamp(8, MAX_CONNS))
}

#[cfg(test)]
mod tests;
