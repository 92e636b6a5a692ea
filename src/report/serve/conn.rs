//! One connection of the endpoint: read the head, write the response, then read what the
//! client still sends until it closes, so that closing does not reset the response away.
//! Every step is one non-blocking call; the deadline ends whatever step it finds.

use super::http::{self, Page, Scan};
use nix::poll::PollFlags;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Instant;

enum Phase {
    Reading,
    Writing,
    Draining,
}

pub struct Conn {
    s: TcpStream,
    until: Instant,
    phase: Phase,
    head: Vec<u8>,
    out: Vec<u8>,
    sent: usize,
}

impl Conn {
    pub fn new(s: TcpStream, until: Instant) -> Conn {
        Conn {
            s,
            until,
            phase: Phase::Reading,
            head: Vec::new(),
            out: Vec::new(),
            sent: 0,
        }
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.s.as_fd()
    }

    pub fn until(&self) -> Instant {
        self.until
    }

    pub fn interest(&self) -> PollFlags {
        match self.phase {
            Phase::Writing => PollFlags::POLLOUT,
            Phase::Reading | Phase::Draining => PollFlags::POLLIN,
        }
    }

    /// True when the deadline has passed and the connection is closed. A client that has
    /// not finished its request is told so in one try.
    pub fn expire(&mut self, now: Instant) -> bool {
        if now < self.until {
            return false;
        }
        if matches!(self.phase, Phase::Reading) {
            let _ = self
                .s
                .write(&http::error("408 Request Timeout", "request timeout\n"));
        }
        let _ = self.s.shutdown(Shutdown::Both);
        true
    }

    /// Do what the socket is ready for; false when the connection is done and closed.
    pub fn advance(&mut self, page: &Page) -> bool {
        match self.phase {
            Phase::Reading => self.read(page),
            Phase::Writing => self.write(),
            Phase::Draining => self.drain(),
        }
    }

    pub fn shut(self) {
        let _ = self.s.shutdown(Shutdown::Both);
    }

    fn read(&mut self, page: &Page) -> bool {
        let mut buf = [0u8; 1024];
        // Never more than one byte past the limit, so the head's memory is bounded.
        let room = (http::MAX_HEAD + 1 - self.head.len()).min(buf.len());
        match self.s.read(&mut buf[..room]) {
            // EOF: a client that half-closed after its request is answered; one that sent
            // nothing is gone.
            Ok(0) if self.head.is_empty() => return false,
            Ok(0) => self.out = http::respond(&self.head, page),
            Ok(n) => {
                self.head.extend_from_slice(&buf[..n]);
                match http::scan(&self.head) {
                    Scan::More => return true,
                    Scan::Head(n) => self.out = http::respond(&self.head[..n], page),
                    Scan::TooLarge(status) => {
                        self.out = http::error(status, "request too large for a scrape\n")
                    }
                }
            }
            Err(e) => return retry(&e),
        }
        self.head = Vec::new();
        self.phase = Phase::Writing;
        self.write()
    }

    fn write(&mut self) -> bool {
        while self.sent < self.out.len() {
            match self.s.write(&self.out[self.sent..]) {
                Ok(0) => return false,
                Ok(n) => self.sent += n,
                Err(e) => return retry(&e),
            }
        }
        self.out = Vec::new();
        if self.s.shutdown(Shutdown::Write).is_err() {
            return false;
        }
        self.phase = Phase::Draining;
        self.drain()
    }

    fn drain(&mut self) -> bool {
        let mut buf = [0u8; 1024];
        // A bounded share per round: a client that keeps sending must not keep the thread.
        for _ in 0..16 {
            match self.s.read(&mut buf) {
                Ok(0) => return false,
                Ok(_) => {}
                Err(e) => return retry(&e),
            }
        }
        true
    }
}

/// Whether the step only has to wait for the socket.
fn retry(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted)
}
