//! The endpoint over loopback sockets. Time bounds here are generous (seconds where the
//! work takes milliseconds): they tell a server that waits on a client from one that does
//! not, not how fast it is.

use super::*;
use std::io::Read;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};

const TEXT: &str = "xrunlab_watch_xruns_total 3\n";

fn page(body: &(dyn Fn() -> Option<String> + Sync)) -> Page<'_> {
    Page {
        path: "/metrics",
        content_type: "text/plain; version=0.0.4; charset=utf-8",
        not_ready: "the watch has not attached to a server yet",
        body,
    }
}

fn ready() -> impl Fn() -> Option<String> + Sync {
    || Some(TEXT.to_string())
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    // A test that finds a server waiting on a client fails here rather than hanging.
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// What the server sends back to `req` until it closes (an error: what came before it).
fn ask(addr: SocketAddr, req: &[u8]) -> String {
    let mut s = connect(addr);
    let _ = s.write_all(req);
    read_all(&mut s)
}

fn read_all(s: &mut TcpStream) -> String {
    let mut r = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        r.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&r).into_owned()
}

fn scrape(addr: SocketAddr) -> (String, Duration) {
    let t = Instant::now();
    let r = ask(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    (r, t.elapsed())
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
fn serves_the_page_and_refuses_the_rest_over_a_socket() {
    let ep = Endpoint::bind("127.0.0.1:0").unwrap();
    let addr = ep.local_addr();
    let on = AtomicBool::new(false);
    let body = || on.load(Ordering::Relaxed).then(|| TEXT.to_string());
    let (early, ok, head, post, half) = ep.serve_while(&page(&body), || {
        let early = scrape(addr).0;
        on.store(true, Ordering::Relaxed);
        // A client that half-closes after its request line is still answered.
        let mut s = connect(addr);
        s.write_all(b"GET /metrics HTTP/1.0\r\n").unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        (
            early,
            scrape(addr).0,
            ask(addr, b"HEAD /metrics HTTP/1.0\r\n\r\n"),
            ask(addr, b"POST /metrics HTTP/1.1\r\n\r\n"),
            read_all(&mut s),
        )
    });
    assert!(early.starts_with("HTTP/1.1 503 "), "{early}");
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(ok.ends_with(&format!("\r\n\r\n{TEXT}")), "{ok}");
    assert!(
        head.starts_with("HTTP/1.1 200 OK") && head.ends_with("\r\n\r\n"),
        "{head}"
    );
    assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
    assert!(
        half.starts_with("HTTP/1.1 200 OK") && half.ends_with(TEXT),
        "{half}"
    );
    // Stopped with the work: nothing listens any more.
    assert!(TcpStream::connect(addr).is_err());
}

#[test]
fn oversized_request_lines_and_heads_get_a_4xx_and_are_closed() {
    let ep = Endpoint::bind("127.0.0.1:0").unwrap();
    let addr = ep.local_addr();
    let body = ready();
    let (line, head, unended) = ep.serve_while(&page(&body), || {
        let line = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(4 * http::MAX_LINE));
        let mut head = b"GET /metrics HTTP/1.1\r\n".to_vec();
        for i in 0..2000 {
            head.extend_from_slice(format!("X-Pad-{i}: 0123456789\r\n").as_bytes());
        }
        head.extend_from_slice(b"\r\n");
        // A request line that never ends, sent as fast as the server takes it.
        let mut s = connect(addr);
        let unended = std::thread::spawn(move || {
            let chunk = [b'x'; 1000];
            for _ in 0..1000 {
                if s.write_all(&chunk).is_err() {
                    break;
                }
            }
            read_all(&mut s)
        });
        (
            ask(addr, line.as_bytes()),
            ask(addr, &head),
            unended.join().unwrap(),
        )
    });
    assert!(line.starts_with("HTTP/1.1 414 "), "{line}");
    assert!(head.starts_with("HTTP/1.1 431 "), "{head}");
    assert!(!head.contains(TEXT) && !line.contains(TEXT));
    // Refused at its limit; what the client still sends is read and dropped (until the
    // deadline at most) so that closing does not reset the refusal away.
    assert!(unended.starts_with("HTTP/1.1 414 "), "{unended}");
}

/// Clients that send one byte at a time: each holds a connection until its deadline only.
fn slow_clients(addr: SocketAddr, n: usize, stop: &AtomicBool) -> Vec<(Duration, String)> {
    let start = Instant::now();
    let mut open: Vec<(TcpStream, Option<Duration>, Vec<u8>)> = (0..n)
        .map(|_| {
            let s = connect(addr);
            s.set_nonblocking(true).unwrap();
            (s, None, Vec::new())
        })
        .collect();
    let req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n";
    let mut sent = 0;
    // Bounded: 20 s at most, far past every deadline.
    while !stop.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(20) {
        for (s, closed, got) in open.iter_mut().filter(|c| c.1.is_none()) {
            let _ = s.write(&req[sent % req.len()..][..1]);
            let mut buf = [0u8; 512];
            match s.read(&mut buf) {
                Ok(0) => *closed = Some(start.elapsed()),
                Ok(k) => got.extend_from_slice(&buf[..k]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => *closed = Some(start.elapsed()),
            }
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(250));
    }
    open.into_iter()
        .map(|(_, c, got)| {
            let got = String::from_utf8_lossy(&got).into_owned();
            (c.unwrap_or(Duration::MAX), got)
        })
        .collect()
}

#[test]
fn slow_clients_do_not_delay_a_scrape_and_are_cut_off_at_their_deadline() {
    let ep = Endpoint::bind("127.0.0.1:0").unwrap();
    let addr = ep.local_addr();
    let deadline = ep.deadline;
    let body = ready();
    let stop = AtomicBool::new(false);
    let (scrapes, slow) = ep.serve_while(&page(&body), || {
        std::thread::scope(|s| {
            let slow = s.spawn(|| slow_clients(addr, 10, &stop));
            std::thread::sleep(Duration::from_millis(300));
            let scrapes: Vec<_> = (0..5)
                .map(|_| {
                    std::thread::sleep(Duration::from_millis(100));
                    scrape(addr)
                })
                .collect();
            // Past every slow client's deadline, they must all be closed by now.
            std::thread::sleep(deadline + Duration::from_secs(1));
            stop.store(true, Ordering::Relaxed);
            (scrapes, slow.join().unwrap())
        })
    });
    for (r, took) in scrapes {
        assert!(r.starts_with("HTTP/1.1 200 OK") && r.ends_with(TEXT), "{r}");
        assert!(
            took < deadline,
            "a scrape beside 10 slow clients took {took:?}"
        );
    }
    for (closed, got) in slow {
        assert!(closed < Duration::MAX, "a slow client is still open: {got}");
        assert!(got.is_empty() || got.starts_with("HTTP/1.1 408 "), "{got}");
    }
}

#[test]
fn two_hundred_idle_connections_leave_scrapes_answered_and_the_stop_prompt() {
    let ep = Endpoint::bind("127.0.0.1:0").unwrap();
    let addr = ep.local_addr();
    let body = ready();
    let mut idle = Vec::new();
    let (scrapes, stopping) = ep.serve_while(&page(&body), || {
        for i in 0..200 {
            let mut s = connect(addr);
            if i % 2 == 0 {
                s.write_all(b"GET /metr").unwrap();
            }
            idle.push(s);
        }
        let scrapes: Vec<_> = (0..5).map(|_| scrape(addr)).collect();
        (scrapes, Instant::now())
    });
    let stopped = stopping.elapsed();
    for (r, took) in scrapes {
        assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
        assert!(
            took < DEADLINE,
            "a scrape beside 200 idle connections took {took:?}"
        );
    }
    // The idle connections did not hold the stop, and are closed by it.
    assert!(
        stopped < Duration::from_secs(5),
        "the stop took {stopped:?}"
    );
    for s in &mut idle {
        assert!(!read_all(s).contains("200 OK"));
    }
}

#[test]
fn connections_past_the_cap_are_closed_at_once() {
    let mut ep = Endpoint::bind("127.0.0.1:0").unwrap();
    ep.cap = 4;
    let addr = ep.local_addr();
    let body = ready();
    let (excess, freed) = ep.serve_while(&page(&body), || {
        let held: Vec<_> = (0..4).map(|_| connect(addr)).collect();
        // Accepted in order, so the 5th is the one past the cap.
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        let excess = (scrape(addr).0, t.elapsed());
        drop(held);
        std::thread::sleep(Duration::from_millis(200));
        (excess, scrape(addr).0)
    });
    assert!(!excess.0.contains("200 OK"), "{}", excess.0);
    assert!(
        excess.1 < DEADLINE,
        "closed after {:?}, not at once",
        excess.1
    );
    assert!(freed.starts_with("HTTP/1.1 200 OK"), "{freed}");
}
