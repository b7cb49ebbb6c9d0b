//! Helpers shared by the workspace test binaries: the root package's library (`suite`),
//! compiled once and linked into each binary that names it.
//!
//! Panic policy: helpers panic with a sentence saying what failed; tests use `?` with
//! [`Result`].

use std::time::Duration;

/// Test result: `?` on any error.
pub type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A raw HTTP/1.1 response: status, headers (lower-case names, in order), de-chunked body.
#[derive(Debug, Clone)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }
    /// NDJSON lines as JSON values.
    pub fn lines(&self) -> Vec<serde_json::Value> {
        self.text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("line is not JSON ({e}): {l}")))
            .collect()
    }
}

/// Builds the bytes of a request with `Connection: close`.
pub fn request_bytes(method: &str, addr: &str, path: &str, body: Option<&str>, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in extra {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        r.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}", b.len()));
    } else {
        r.push_str("\r\n");
    }
    r.into_bytes()
}

/// Parses a complete raw response (read until the server closed the connection).
pub fn parse_response(raw: &[u8], head_only: bool) -> RawResponse {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let rest = &raw[split + 4..];
    let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if head_only {
        Vec::new()
    } else if chunked {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    RawResponse { status, headers, body }
}

/// Decodes a chunked body strictly: every size line must be hex (extensions after `;`
/// allowed), every chunk must be followed by CRLF, and the body must end with the zero chunk.
/// Anything else is a malformed response and fails the test (issue 10: a lenient decoder
/// accepted malformed sizes as the end of the body).
pub fn dechunk(b: &[u8]) -> Vec<u8> {
    chunks(b).concat()
}

/// The chunks of a chunked body, one `Vec` each, decoded as strictly as [`dechunk`].
pub fn chunks(mut b: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .unwrap_or_else(|| panic!("chunked body: a size line without CRLF: {:?}", String::from_utf8_lossy(b)));
        let line = String::from_utf8_lossy(&b[..eol]).into_owned();
        let digits = line.split(';').next().unwrap_or("").trim();
        let size =
            usize::from_str_radix(digits, 16).unwrap_or_else(|_| panic!("chunked body: malformed chunk size {line:?}"));
        b = &b[eol + 2..];
        if size == 0 {
            return out;
        }
        assert!(b.len() >= size + 2, "chunked body: a chunk of {size} bytes is cut short ({} left)", b.len());
        assert_eq!(&b[size..size + 2], b"\r\n", "chunked body: chunk data not followed by CRLF");
        out.push(b[..size].to_vec());
        b = &b[size + 2..];
    }
}

/// A blocking raw exchange over std's TcpStream: no async runtime at all.
pub fn raw_blocking(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
    extra: &[(&str, &str)],
) -> RawResponse {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(30))).ok();
    s.write_all(&request_bytes(method, &addr.to_string(), path, body, extra)).expect("request written");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("response read");
    parse_response(&raw, method == "HEAD")
}

/// Sends `body` as raw bytes (any bytes, valid UTF-8 or not) and reads the whole answer.
/// Returns an error, rather than panicking, when the server answered with no complete HTTP
/// response (it dropped the connection): a property test reports that as its failure.
pub fn raw_bytes_blocking(
    addr: std::net::SocketAddr,
    path: &str,
    body: &[u8],
) -> std::result::Result<RawResponse, String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).and_then(|()| s.write_all(body)).map_err(|e| format!("request not written: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("response not read: {e}"))?;
    if !raw.starts_with(b"HTTP/1.1 ") || !raw.windows(4).any(|w| w == b"\r\n\r\n") {
        return Err(format!(
            "no complete HTTP response (the connection was dropped?): {:?}",
            String::from_utf8_lossy(&raw)
        ));
    }
    Ok(parse_response(&raw, false))
}

/// The same exchange over any futures-io stream (smol's or async-std's TcpStream).
pub async fn raw_async<S>(
    mut s: S,
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> RawResponse
where
    S: futures::io::AsyncRead + futures::io::AsyncWrite + Unpin,
{
    use futures::io::{AsyncReadExt, AsyncWriteExt};
    s.write_all(&request_bytes(method, &addr.to_string(), path, body, &[])).await.expect("request written");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.expect("response read");
    parse_response(&raw, method == "HEAD")
}

/// Checks Ollama's `created_at` format: RFC 3339, UTC, 0-9 fractional digits, no trailing 0.
pub fn assert_created_at(s: &str) {
    let ok = s.len() >= 20
        && s.ends_with('Z')
        && s.as_bytes()[4] == b'-'
        && s.as_bytes()[10] == b'T'
        && match s[19..s.len() - 1].strip_prefix('.') {
            None => s.len() == 20,
            Some(frac) => {
                !frac.is_empty() && frac.len() <= 9 && frac.bytes().all(|b| b.is_ascii_digit()) && !frac.ends_with('0')
            }
        };
    assert!(ok, "created_at {s:?} is not in Go's RFC3339Nano UTC format");
}

/// insta settings that write snapshots to the workspace's `snapshots/`.
pub fn snapshot_settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s
}

/// Checks that an XML/SVG/HTML document's tags balance (void HTML elements and self-closing
/// tags aside); returns the first problem.
pub fn tags_balance(doc: &str, void: &[&str]) -> std::result::Result<(), String> {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = doc;
    while let Some(start) = rest.find('<') {
        let Some(end) = rest[start..].find('>') else { return Err("an unclosed '<'".into()) };
        let tag = &rest[start + 1..start + end];
        rest = &rest[start + end + 1..];
        if tag.starts_with('!') || tag.starts_with('?') || tag.ends_with('/') {
            continue;
        }
        let name: String = tag.trim_start_matches('/').chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
        if void.contains(&name.as_str()) {
            continue;
        }
        if tag.starts_with('/') {
            match stack.pop() {
                Some(open) if open == name => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
        } else {
            stack.push(name);
        }
    }
    if stack.is_empty() { Ok(()) } else { Err(format!("unclosed: {stack:?}")) }
}

/// The events of a named-event SSE stream (`event: NAME\ndata: JSON\n\n`, as the Anthropic
/// and Responses endpoints write them): (name, data), each data's `type` checked to be its name.
pub fn sse_events(text: &str) -> Vec<(String, serde_json::Value)> {
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (name, data) = e.split_once('\n').unwrap_or_else(|| panic!("an event: {e:?}"));
            let name = name.strip_prefix("event: ").unwrap_or_else(|| panic!("{name}")).to_string();
            let data: serde_json::Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], name.as_str(), "the data's type is the event's name");
            (name, data)
        })
        .collect()
}
