//! The little HTTP a scraper speaks, bounded: where a request head ends, whether it is too
//! large to be a scraper's, and the whole response to it. Pure functions over bytes, so each
//! answer is tested without a socket.

/// A request line longer than this is not a scraper's (Prometheus sends about 30 bytes).
pub const MAX_LINE: usize = 1024;
/// A request head (line and headers) larger than this is not a scraper's (Prometheus sends
/// about 300 bytes).
pub const MAX_HEAD: usize = 8192;

/// One document served at one path.
pub struct Page<'a> {
    /// The one path answered (`/metrics`); a query string is ignored.
    pub path: &'static str,
    /// The document's media type.
    pub content_type: &'static str,
    /// Said with 503 while `body` has nothing yet.
    pub not_ready: &'static str,
    /// The document now, or None when there is none yet.
    pub body: &'a (dyn Fn() -> Option<String> + Sync),
}

/// What the bytes received so far are.
#[derive(Debug, PartialEq, Eq)]
pub enum Scan {
    /// The head has not ended yet and is within the limits: read on.
    More,
    /// The head ends after this many bytes.
    Head(usize),
    /// Over a limit: answer with this response and close.
    TooLarge(&'static str),
}

/// Where the head in `buf` ends (a blank line, CRLF or bare LF), or which limit it broke.
pub fn scan(buf: &[u8]) -> Scan {
    let line_end = buf.iter().position(|&b| b == b'\n');
    if line_end.map_or(buf.len(), |e| e + 1) > MAX_LINE {
        return Scan::TooLarge("414 URI Too Long");
    }
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
        .into_iter()
        .chain(buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2))
        .min();
    match end {
        Some(n) if n <= MAX_HEAD => Scan::Head(n),
        None if buf.len() <= MAX_HEAD => Scan::More,
        _ => Scan::TooLarge("431 Request Header Fields Too Large"),
    }
}

const PLAIN: &str = "text/plain; charset=utf-8";

/// The whole response to a request `head` (complete or cut short by the client's EOF).
pub fn respond(head: &[u8], page: &Page) -> Vec<u8> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let words: Vec<&str> = line.split_whitespace().collect();
    let &[method, target, version] = words.as_slice() else {
        return error("400 Bad Request", "bad request\n");
    };
    if !matches!(version, "HTTP/1.0" | "HTTP/1.1") {
        return error(
            "400 Bad Request",
            "bad request: HTTP/1.0 or HTTP/1.1 only\n",
        );
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => {
            let t = format!("xrunlab serves GET {} only\n", page.path);
            return response("405 Method Not Allowed", PLAIN, &t, false);
        }
    };
    let path = target.split(['?', '#']).next().unwrap_or_default();
    if path != page.path {
        let t = format!("not found: xrunlab watch serves {}\n", page.path);
        return response("404 Not Found", PLAIN, &t, head_only);
    }
    match (page.body)() {
        Some(t) => response("200 OK", page.content_type, &t, head_only),
        None => {
            let t = format!("{}\n", page.not_ready);
            response("503 Service Unavailable", PLAIN, &t, head_only)
        }
    }
}

/// A refusal with a one-line reason.
pub fn error(status: &str, text: &str) -> Vec<u8> {
    response(status, PLAIN, text, false)
}

fn response(status: &str, ctype: &str, text: &str, head_only: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n",
        text.len()
    );
    if status.starts_with("405") {
        out.push_str("Allow: GET, HEAD\r\n");
    }
    out.push_str("\r\n");
    if !head_only {
        out.push_str(text);
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(body: &(dyn Fn() -> Option<String> + Sync)) -> Page<'_> {
        Page {
            path: "/metrics",
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            not_ready: "not yet",
            body,
        }
    }

    fn answer(req: &str) -> String {
        let body = || Some("m 1\n".to_string());
        String::from_utf8(respond(req.as_bytes(), &page(&body))).unwrap()
    }

    #[test]
    fn a_head_ends_at_its_blank_line_whichever_line_ending() {
        assert_eq!(scan(b""), Scan::More);
        assert_eq!(scan(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"), Scan::More);
        assert_eq!(scan(b"GET / HTTP/1.1\r\n\r\nrest"), Scan::Head(18));
        assert_eq!(scan(b"GET / HTTP/1.0\n\n"), Scan::Head(16));
    }

    #[test]
    fn an_oversized_line_or_head_is_refused_before_it_ends() {
        let long_line = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_LINE));
        assert_eq!(
            scan(long_line.as_bytes()),
            Scan::TooLarge("414 URI Too Long")
        );
        // Refused as soon as the limit is passed, without waiting for the line to end.
        let unended = vec![b'a'; MAX_LINE + 1];
        assert_eq!(scan(&unended), Scan::TooLarge("414 URI Too Long"));
        assert_eq!(scan(&unended[..MAX_LINE]), Scan::More);
        let mut head = b"GET /metrics HTTP/1.1\r\n".to_vec();
        while head.len() <= MAX_HEAD {
            head.extend_from_slice(b"X-Pad: 0123456789012345678901234567890123456789\r\n");
        }
        let big = Scan::TooLarge("431 Request Header Fields Too Large");
        assert_eq!(scan(&head), big);
        head.extend_from_slice(b"\r\n");
        assert_eq!(scan(&head), big, "ended, but past the limit");
        // Just within the limit is a head.
        let mut fits = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
        fits.resize(MAX_HEAD - 4, b'a');
        fits.extend_from_slice(b"\r\n\r\n");
        assert_eq!(scan(&fits), Scan::Head(MAX_HEAD));
    }

    #[test]
    fn serves_the_page_with_its_type_and_length() {
        let ok = answer("GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
        assert!(ok.contains("Content-Length: 4\r\n") && ok.contains("Connection: close\r\n"));
        assert!(ok.ends_with("\r\n\r\nm 1\n"), "{ok}");
        let head = answer("HEAD /metrics HTTP/1.0\r\n\r\n");
        assert!(
            head.starts_with("HTTP/1.1 200 OK") && head.ends_with("\r\n\r\n"),
            "{head}"
        );
        assert!(head.contains("Content-Length: 4\r\n"), "{head}");
    }

    #[test]
    fn anything_else_gets_a_clear_4xx() {
        let cases = [
            ("GET / HTTP/1.1\r\n\r\n", "404 Not Found"),
            ("GET /metricsx HTTP/1.1\r\n\r\n", "404 Not Found"),
            ("POST /metrics HTTP/1.1\r\n\r\n", "405 Method Not Allowed"),
            ("DELETE /metrics HTTP/1.1\r\n\r\n", "405 Method Not Allowed"),
            ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "400 Bad Request"),
            ("GET /metrics HTTP/9\r\n\r\n", "400 Bad Request"),
            ("GET /metrics\r\n\r\n", "400 Bad Request"),
            ("GET /metrics HTTP/1.1 extra\r\n\r\n", "400 Bad Request"),
            ("\r\n\r\n", "400 Bad Request"),
            ("\u{1b}[2J\u{0}\u{7f} garbage\n\n", "400 Bad Request"),
        ];
        for (req, want) in cases {
            let r = answer(req);
            assert!(
                r.starts_with(&format!("HTTP/1.1 {want}\r\n")),
                "{req:?}: {r}"
            );
            assert!(!r.contains("m 1"), "{req:?} got the page: {r}");
        }
        assert!(answer("PUT /metrics HTTP/1.1\r\n\r\n").contains("Allow: GET, HEAD\r\n"));
        let raw = respond(b"GET /\xff\xfe HTTP/1.1\r\n\r\n", &page(&|| None));
        assert!(raw.starts_with(b"HTTP/1.1 404 "));
    }

    #[test]
    fn nothing_yet_is_503_saying_why() {
        let r = String::from_utf8(respond(b"GET /metrics HTTP/1.1\r\n\r\n", &page(&|| None)));
        let r = r.unwrap();
        assert!(
            r.starts_with("HTTP/1.1 503 ") && r.ends_with("not yet\n"),
            "{r}"
        );
    }
}
