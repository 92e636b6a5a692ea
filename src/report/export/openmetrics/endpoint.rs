//! `watch --metrics ADDR`: the live metrics over HTTP, for a Prometheus server to scrape.
//!
//! Written on std's `TcpListener` rather than an HTTP crate: it answers one path, `GET` (and
//! `HEAD`) only, one response per connection (`Connection: close`), which is what a scraper
//! needs, in about a hundred lines and no dependency to keep current. The listener is bound
//! by [`Endpoint::bind`] before the watch attaches, so a port in use or an address that is
//! not this machine's is a usage error (exit 2) before anything is measured; it serves on its
//! own normal-priority thread while the watch runs and stops with it.

use crate::error::{Error, Result};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The Prometheus text format's media type (what the textfile holds too).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The one path served.
pub const PATH: &str = "/metrics";

/// A request head larger than this is not a scraper's.
const MAX_HEAD: usize = 8192;
/// A client that sends nothing, or does not read, holds the single serving thread no longer
/// than this: one scrape interval is seconds, and nothing else waits on this thread.
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the accept loop looks whether the watch has ended.
const STOP_POLL_MS: u16 = 100;

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

/// The bound listener.
#[derive(Debug)]
pub struct Endpoint {
    listener: TcpListener,
    addr: SocketAddr,
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
        Ok(Endpoint { listener, addr })
    }

    /// Where it listens (the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve `body` (None: not ready yet, 503) on a thread of its own while `work` runs on
    /// the caller's; the thread is stopped and joined, and the port closed, before this
    /// returns `work`'s value.
    pub fn serve_while<R>(
        self,
        body: &(dyn Fn() -> Option<String> + Sync),
        work: impl FnOnce() -> R,
    ) -> R {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let server = std::thread::Builder::new()
                .name("xrl-metrics".into())
                .spawn_scoped(s, || self.serve(&stop, body));
            let r = work();
            stop.store(true, Ordering::Relaxed);
            if let Ok(h) = server {
                let _ = h.join();
            }
            r
        })
    }

    fn serve(&self, stop: &AtomicBool, body: &(dyn Fn() -> Option<String> + Sync)) {
        while !stop.load(Ordering::Relaxed) {
            let mut fds = [nix::poll::PollFd::new(
                self.listener.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            match nix::poll::poll(&mut fds, STOP_POLL_MS) {
                Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
                Ok(_) => {}
                // Not expected on a bound listener; do not spin if it happens.
                Err(_) => std::thread::sleep(Duration::from_millis(u64::from(STOP_POLL_MS))),
            }
            while let Ok((stream, _)) = self.listener.accept() {
                // A client that breaks off mid-response is its own problem.
                let _ = answer(stream, body);
                if stop.load(Ordering::Relaxed) {
                    return;
                }
            }
        }
    }
}

/// One request, one response.
fn answer(mut s: TcpStream, body: &dyn Fn() -> Option<String>) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let head = read_head(&mut s)?;
    let (status, ctype, text, head_only) = respond(&head, body);
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n",
        text.len()
    );
    if status.starts_with("405") {
        out.push_str("Allow: GET, HEAD\r\n");
    }
    out.push_str("\r\n");
    if !head_only {
        out.push_str(&text);
    }
    s.write_all(out.as_bytes())?;
    s.flush()?;
    let _ = s.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// The request head (up to the blank line), or as much as came before the limit or timeout.
fn read_head(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while head.len() < MAX_HEAD {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            break;
        }
    }
    Ok(head)
}

/// Status line, content type, body, and whether only the head is sent.
fn respond(
    head: &[u8],
    body: &dyn Fn() -> Option<String>,
) -> (&'static str, &'static str, String, bool) {
    const PLAIN: &str = "text/plain; charset=utf-8";
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (words.next(), words.next(), words.next())
    else {
        return ("400 Bad Request", PLAIN, "bad request\n".into(), false);
    };
    if !version.starts_with("HTTP/") {
        return ("400 Bad Request", PLAIN, "bad request\n".into(), false);
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => {
            let t = "xrunlab serves GET /metrics only\n".into();
            return ("405 Method Not Allowed", PLAIN, t, false);
        }
    };
    let path = target.split(['?', '#']).next().unwrap_or_default();
    if path != PATH {
        let t = "not found: xrunlab watch serves /metrics\n".into();
        return ("404 Not Found", PLAIN, t, head_only);
    }
    match body() {
        Some(t) => ("200 OK", CONTENT_TYPE, t, head_only),
        None => {
            let t = "the watch has not attached to a server yet\n".into();
            ("503 Service Unavailable", PLAIN, t, head_only)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, req: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut r = String::new();
        s.read_to_string(&mut r).unwrap();
        r
    }

    #[test]
    fn a_port_alone_is_loopback_and_bad_addresses_are_usage_errors() {
        assert_eq!(parse_addr("9543").unwrap().to_string(), "127.0.0.1:9543");
        assert_eq!(parse_addr("0.0.0.0:80").unwrap().to_string(), "0.0.0.0:80");
        assert_eq!(parse_addr("[::1]:9543").unwrap().to_string(), "[::1]:9543");
        for bad in ["", "localhost", "99999", "1.2.3.4", "a:b:c", "127.0.0.1:x"] {
            let e = parse_addr(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(e.to_string().contains("expected PORT"), "{e}");
        }
    }

    #[test]
    fn a_port_in_use_is_refused_with_the_reason() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let e = Endpoint::bind(&port.to_string()).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("in use"), "{e}");
    }

    #[test]
    fn serves_metrics_with_its_type_and_nothing_else() {
        let ep = Endpoint::bind("127.0.0.1:0").unwrap();
        let addr = ep.local_addr();
        let ready = AtomicBool::new(false);
        let body = || {
            ready
                .load(Ordering::Relaxed)
                .then(|| "xrunlab_watch_xruns_total 3\n".to_string())
        };
        let (early, ok, head, missing, post, junk) = ep.serve_while(&body, || {
            let early = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
            ready.store(true, Ordering::Relaxed);
            (
                early,
                get(addr, "GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n"),
                get(addr, "HEAD /metrics HTTP/1.0\r\n\r\n"),
                get(addr, "GET / HTTP/1.1\r\n\r\n"),
                get(addr, "POST /metrics HTTP/1.1\r\n\r\n"),
                get(addr, "\r\n\r\n"),
            )
        });
        assert!(early.starts_with("HTTP/1.1 503 "), "{early}");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains(&format!("Content-Type: {CONTENT_TYPE}\r\n")), "{ok}");
        let want = "xrunlab_watch_xruns_total 3\n";
        assert!(ok.contains(&format!("Content-Length: {}\r\n", want.len())), "{ok}");
        assert!(ok.ends_with("\r\n\r\nxrunlab_watch_xruns_total 3\n"), "{ok}");
        assert!(head.starts_with("HTTP/1.1 200 OK") && head.ends_with("\r\n\r\n"), "{head}");
        assert!(missing.starts_with("HTTP/1.1 404 "), "{missing}");
        assert!(post.starts_with("HTTP/1.1 405 ") && post.contains("Allow: GET"), "{post}");
        assert!(junk.starts_with("HTTP/1.1 400 "), "{junk}");
        // Stopped with the work: nothing listens any more.
        assert!(TcpStream::connect(addr).is_err());
    }
}
