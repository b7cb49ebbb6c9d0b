//! HTTP clients that stream one Ollama call and time every token as it arrives. Several
//! stacks, because how a runtime reaches the network is part of what is measured:
//!
//! - `Reqwest`: reqwest on the caller's tokio runtime (tokio variants, and async-std through
//!   `async-compat`).
//! - `HyperSmol`: hyper 1 over smol's `TcpStream` (`smol-hyper`), no tokio at all; with
//!   `read_cap`, the socket is read 1 KB at a time (the `smol-1kb` variant).
//! - `Bridge`: the study's bridge: the whole call is spawned on a global tokio runtime and its
//!   handle awaited from any executor; with `accumulate`, bytes are held until 1 KB has
//!   arrived, like the study's `BytesStream1KB`.
//! - `OneConnection`: every call of every agent goes over one HTTP/1.1 connection per
//!   instance (a control: a pool of one).
//!
//! About 660 lines, 140 of them its tests: one concept, a call streamed and timed, over
//! each HTTP stack the variants need.

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use serde::Deserialize;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// What one streamed call measured.
#[derive(Debug, Clone)]
pub struct CallRecord {
    /// Request sent (just before the first byte is written).
    pub sent: Instant,
    /// Response headers received.
    pub headers: Option<Instant>,
    /// Arrival of every token (non-empty content), in order.
    pub tokens: Vec<Instant>,
    /// Arrival of the first token of reasoning (`thinking`), when the model reasoned first:
    /// `tokens` then starts at the first token of the answer.
    pub first_thinking: Option<Instant>,
    /// Last byte (or the error).
    pub end: Instant,
    /// `eval_count` of the final object.
    pub eval_count: Option<u64>,
    /// `eval_duration` of the final object, ns.
    pub eval_duration_ns: Option<u64>,
    /// `load_duration` of the final object, ns.
    pub load_duration_ns: Option<u64>,
    /// `prompt_eval_count` of the final object.
    pub prompt_eval_count: Option<u64>,
    /// `prompt_eval_duration` of the final object, ns: the server's prompt evaluation, which a
    /// slot's prompt cache shortens.
    pub prompt_eval_duration_ns: Option<u64>,
    /// `done_reason` of the final object (`stop`, `length`, ...).
    pub done_reason: Option<String>,
    /// The answer length the scenario asked for (`num_predict`), when the call is one whose
    /// length it sets (not the tool-calling turn of a round trip). A shorter answer the server
    /// ended itself (`done_reason` `stop`) did less work than the scenario: see
    /// `verdict::ended_early`.
    pub expected_tokens: Option<u64>,
    /// The `message.tool_calls` the answer carried (a JSON array), if any.
    pub tool_calls: Option<serde_json::Value>,
    /// The answer's text, as streamed (a multi-turn agent sends it back with its history).
    pub content: String,
    /// The local address of the connection that carried it, when the HTTP stack tells: calls
    /// on one HTTP/1.1 connection go over it one after another, whatever the client's timings
    /// say (`verdict::calls_overlap`).
    pub conn: Option<std::net::SocketAddr>,
    /// HTTP status.
    pub status: Option<u16>,
    /// What went wrong, if anything: an HTTP error, an `{"error"}` line, a broken or
    /// truncated stream, a malformed line, a timeout.
    pub error: Option<String>,
    /// The local work the scenario put before this call (the agent's work after its previous
    /// call, or the tool before a tool result), wall time: what the judge takes as the agent's
    /// own work in the gap before it (`JudgeOptions::known_local_work`).
    pub local_before: Duration,
}

impl CallRecord {
    pub(crate) fn new(sent: Instant) -> Self {
        CallRecord {
            sent,
            headers: None,
            tokens: Vec::new(),
            first_thinking: None,
            end: sent,
            eval_count: None,
            eval_duration_ns: None,
            load_duration_ns: None,
            prompt_eval_count: None,
            prompt_eval_duration_ns: None,
            done_reason: None,
            expected_tokens: None,
            tool_calls: None,
            content: String::new(),
            conn: None,
            status: None,
            error: None,
            local_before: Duration::ZERO,
        }
    }

    fn fail(mut self, e: impl std::fmt::Display) -> Self {
        self.end = Instant::now();
        if self.error.is_none() {
            self.error = Some(e.to_string());
        }
        self
    }
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(default, borrow)]
    response: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    message: Option<MessageLine<'a>>,
    #[serde(default)]
    done: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    eval_count: Option<u64>,
    #[serde(default)]
    eval_duration: Option<u64>,
    #[serde(default)]
    load_duration: Option<u64>,
    #[serde(default)]
    prompt_eval_count: Option<u64>,
    #[serde(default)]
    prompt_eval_duration: Option<u64>,
    #[serde(default)]
    done_reason: Option<String>,
}

#[derive(Deserialize)]
struct MessageLine<'a> {
    #[serde(default, borrow)]
    content: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<serde_json::Value>,
}

/// Splits NDJSON into lines and records what each says.
#[derive(Debug, Default)]
struct Lines {
    buf: Vec<u8>,
    done: bool,
    /// The blocking control's time blocked past its due so far: taken off the next tokens'
    /// blocks, so that the executor is blocked its `per_token` per token on average whatever
    /// the machine's wake-up latency (on a loaded machine a sleep of 2 ms wakes late by as
    /// much again, and the control's cost, summed over every token, followed the load).
    blocked_over: Duration,
}

impl Lines {
    /// Feeds bytes that arrived at `at`; `per_token` runs after each token (the blocking
    /// control's hook).
    fn feed(&mut self, rec: &mut CallRecord, bytes: &[u8], at: Instant, per_token: Option<Duration>) {
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(pos) = self.buf[start..].iter().position(|b| *b == b'\n') {
            let line = &self.buf[start..start + pos];
            start += pos + 1;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Line<'_>>(line) {
                Ok(l) => {
                    if let Some(e) = l.error {
                        rec.error.get_or_insert(format!("error line in the stream: {e}"));
                        self.done = true;
                        continue;
                    }
                    let content = l.response.as_deref().or(l.message.as_ref().and_then(|m| m.content.as_deref()));
                    let calls = l.message.as_ref().and_then(|m| m.tool_calls.as_ref()).filter(|c| !c.is_null());
                    let thinking = l.thinking.as_deref().or(l.message.as_ref().and_then(|m| m.thinking.as_deref()));
                    if thinking.is_some_and(|t| !t.is_empty()) {
                        rec.first_thinking.get_or_insert(at);
                    }
                    if let Some(calls) = calls {
                        // A tool call is the answer's first output: it counts as an arrival
                        // (TTFT), and its calls are kept for the round trip.
                        match rec.tool_calls.as_mut().and_then(|v| v.as_array_mut()) {
                            Some(all) => all.extend(calls.as_array().cloned().unwrap_or_default()),
                            None => rec.tool_calls = Some(calls.clone()),
                        }
                        rec.tokens.push(at);
                    } else if let Some(c) = content.filter(|c| !c.is_empty()) {
                        rec.tokens.push(at);
                        rec.content.push_str(c);
                        if let Some(d) = per_token {
                            // The blocking control: "processing" each token with a blocking
                            // sleep inside async code.
                            let due = d.saturating_sub(self.blocked_over);
                            let from = Instant::now();
                            block_for(due);
                            self.blocked_over = (self.blocked_over + from.elapsed()).saturating_sub(d);
                        }
                    }
                    if l.done {
                        self.done = true;
                        rec.eval_count = l.eval_count;
                        rec.eval_duration_ns = l.eval_duration;
                        rec.load_duration_ns = l.load_duration;
                        rec.prompt_eval_count = l.prompt_eval_count;
                        rec.prompt_eval_duration_ns = l.prompt_eval_duration;
                        rec.done_reason = l.done_reason;
                    }
                }
                Err(e) => {
                    rec.error.get_or_insert(format!("malformed line in the stream: {e}"));
                }
            }
        }
        self.buf.drain(..start);
    }

    fn finish(&self, rec: CallRecord) -> CallRecord {
        let mut rec = rec;
        rec.end = Instant::now();
        if !self.done && rec.error.is_none() {
            rec.error = Some("the stream ended without a final done object".into());
        }
        rec
    }
}

/// Options of one call.
#[derive(Debug, Clone)]
pub(crate) struct CallOpts {
    /// Blocking sleep after each token (the `ctl-blocking-sleep` control).
    pub per_token_block: Option<Duration>,
    /// Agent label sent as `X-Agent`.
    pub agent: String,
    /// Give up on the call after this long.
    pub timeout: Duration,
}

/// An HTTP stack.
#[derive(Debug, Clone)]
pub(crate) enum Stack {
    /// reqwest on the caller's tokio runtime.
    Reqwest(reqwest::Client),
    /// hyper over smol's TcpStream; `read_cap` limits each socket read.
    HyperSmol {
        /// Bytes per read (1024 for the 1 KB variant).
        read_cap: Option<usize>,
    },
    /// The study's bridge to a global tokio runtime; `accumulate` holds bytes until that many
    /// have arrived.
    Bridge {
        /// The client, used on the bridge runtime.
        client: reqwest::Client,
        /// Accumulation threshold in bytes (1024 for the study's 1 KB stream).
        accumulate: Option<usize>,
    },
    /// One HTTP/1.1 connection per instance shared by every call (a control).
    OneConnection(Arc<OneConnection>),
}

/// The study's bridge: a global multi-thread tokio runtime with 2 workers.
static BRIDGE: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("harness-bridge")
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("the bridge runtime could not start: {e}"))
});

/// Runs `f` on the bridge runtime and waits for it from any executor.
pub(crate) fn bridge<F>(f: F) -> impl std::future::Future<Output = F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let h = BRIDGE.spawn(f);
    async move { h.await.unwrap_or_else(|e| panic!("a bridged call panicked: {e}")) }
}

fn split_url(url: &str) -> (String, String) {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    match rest.split_once('/') {
        Some((host, path)) => (host.to_string(), format!("/{path}")),
        None => (rest.to_string(), "/".to_string()),
    }
}

impl Stack {
    /// Streams one call. Never panics on a bad server: every failure is in `error`.
    pub(crate) async fn call(&self, url: &str, body: Vec<u8>, opts: &CallOpts) -> CallRecord {
        match self {
            Stack::Reqwest(c) => with_timeout_tokio(opts.timeout, reqwest_call(c, url, body, opts, None)).await,
            Stack::HyperSmol { read_cap } => {
                let rec = hyper_smol_call(url, body, opts, *read_cap);
                futures::pin_mut!(rec);
                let timer = async_io::Timer::after(opts.timeout);
                match futures::future::select(rec, timer).await {
                    futures::future::Either::Left((r, _)) => r,
                    futures::future::Either::Right(_) => CallRecord::new(Instant::now()).fail("timed out"),
                }
            }
            Stack::Bridge { client, accumulate } => {
                let (c, u, o, acc) = (client.clone(), url.to_string(), opts.clone(), *accumulate);
                bridge(async move { with_timeout_tokio(o.timeout, reqwest_call(&c, &u, body, &o, acc)).await }).await
            }
            Stack::OneConnection(pool) => with_timeout_tokio(opts.timeout, pool.call(url, body, opts)).await,
        }
    }
}

async fn with_timeout_tokio(d: Duration, f: impl std::future::Future<Output = CallRecord>) -> CallRecord {
    let start = Instant::now();
    match tokio::time::timeout(d, f).await {
        Ok(r) => r,
        Err(_) => CallRecord::new(start).fail(format!("timed out after {:.1} s", d.as_secs_f64())),
    }
}

async fn reqwest_call(
    client: &reqwest::Client,
    url: &str,
    body: Vec<u8>,
    opts: &CallOpts,
    accumulate: Option<usize>,
) -> CallRecord {
    let sent = Instant::now();
    let rec = CallRecord::new(sent);
    let resp = match client
        .post(url)
        .header("content-type", "application/json")
        .header("x-agent", &opts.agent)
        .body(body)
        .send()
        .await
    {
        Ok(r) => r,
        Err(e) => return rec.fail(format!("request {}", describe_error(&e))),
    };
    let mut rec = rec;
    rec.headers = Some(Instant::now());
    rec.conn = resp.extensions().get::<hyper_util::client::legacy::connect::HttpInfo>().map(|i| i.local_addr());
    rec.status = Some(resp.status().as_u16());
    if !resp.status().is_success() {
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        return rec.fail(format!("HTTP {}: {}", status.as_u16(), text.trim()));
    }
    let mut lines = Lines::default();
    let mut stream = resp.bytes_stream();
    let mut held: Vec<u8> = Vec::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(b) => match accumulate {
                Some(n) => {
                    held.extend_from_slice(&b);
                    if held.len() >= n {
                        lines.feed(&mut rec, &held, Instant::now(), opts.per_token_block);
                        held.clear();
                    }
                }
                None => lines.feed(&mut rec, &b, Instant::now(), opts.per_token_block),
            },
            Err(e) => return rec.fail(format!("the stream broke: {e}")),
        }
    }
    if !held.is_empty() {
        lines.feed(&mut rec, &held, Instant::now(), opts.per_token_block);
    }
    lines.finish(rec)
}

/// Reads at most `cap` bytes per call from the wrapped stream.
#[derive(Debug)]
struct CapRead<S> {
    inner: S,
    cap: usize,
}

impl<S: futures::io::AsyncRead + Unpin> futures::io::AsyncRead for CapRead<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<std::io::Result<usize>> {
        let n = buf.len().min(self.cap);
        Pin::new(&mut self.inner).poll_read(cx, &mut buf[..n])
    }
}

impl<S: futures::io::AsyncWrite + Unpin> futures::io::AsyncWrite for CapRead<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_close(cx)
    }
}

fn request(url: &str, body: Vec<u8>, agent: &str) -> Result<hyper::Request<Full<Bytes>>, String> {
    let (host, path) = split_url(url);
    hyper::Request::post(path)
        .header("host", host)
        .header("content-type", "application/json")
        .header("x-agent", agent)
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())
}

/// Sends one request on a hyper connection and streams the response.
async fn hyper_exchange<B>(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    req: hyper::Request<Full<Bytes>>,
    rec: CallRecord,
    opts: &CallOpts,
) -> CallRecord
where
    B: Sized,
{
    let mut rec = rec;
    let resp = match sender.send_request(req).await {
        Ok(r) => r,
        Err(e) => return rec.fail(format!("request failed: {e}")),
    };
    rec.headers = Some(Instant::now());
    rec.status = Some(resp.status().as_u16());
    let ok = resp.status().is_success();
    let mut body = resp.into_body();
    let mut lines = Lines::default();
    let mut raw = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => {
                if let Ok(d) = f.into_data() {
                    if ok {
                        lines.feed(&mut rec, &d, Instant::now(), opts.per_token_block);
                    } else {
                        raw.extend_from_slice(&d);
                    }
                }
            }
            Err(e) => return rec.fail(format!("the stream broke: {e}")),
        }
    }
    if !ok {
        let status = rec.status.unwrap_or(0);
        return rec.fail(format!("HTTP {status}: {}", String::from_utf8_lossy(&raw).trim()));
    }
    lines.finish(rec)
}

async fn hyper_smol_call(url: &str, body: Vec<u8>, opts: &CallOpts, read_cap: Option<usize>) -> CallRecord {
    let sent = Instant::now();
    let mut rec = CallRecord::new(sent);
    let (host, _) = split_url(url);
    let stream = match smol::net::TcpStream::connect(host.as_str()).await {
        Ok(s) => s,
        Err(e) => return rec.fail(format!("cannot connect to {host}: {e}")),
    };
    let _ = stream.set_nodelay(true);
    rec.conn = stream.local_addr().ok();
    let io = smol_hyper::rt::FuturesIo::new(CapRead { inner: stream, cap: read_cap.unwrap_or(usize::MAX) });
    let (mut sender, conn) = match hyper::client::conn::http1::handshake::<_, Full<Bytes>>(io).await {
        Ok(x) => x,
        Err(e) => return rec.fail(format!("HTTP handshake failed: {e}")),
    };
    let conn_task = smol::spawn(async move {
        let _ = conn.await;
    });
    let req = match request(url, body, &opts.agent) {
        Ok(r) => r,
        Err(e) => return rec.fail(e),
    };
    let rec = hyper_exchange::<()>(&mut sender, req, rec, opts).await;
    drop(sender);
    conn_task.cancel().await;
    rec
}

/// One HTTP/1.1 connection per instance, shared by every call behind a lock: calls on one
/// instance go one at a time, whatever the runtime does.
#[derive(Debug, Default)]
pub(crate) struct OneConnection {
    conns: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Connection>>>>>,
}

/// An open connection: its sender and its local address.
type Connection = (hyper::client::conn::http1::SendRequest<Full<Bytes>>, Option<std::net::SocketAddr>);

impl OneConnection {
    async fn call(&self, url: &str, body: Vec<u8>, opts: &CallOpts) -> CallRecord {
        let (host, _) = split_url(url);
        let slot = {
            let mut m = self.conns.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(m.entry(host.clone()).or_default())
        };
        let sent = Instant::now();
        let mut rec = CallRecord::new(sent);
        let mut guard = slot.lock().await;
        let reusable = guard.as_ref().is_some_and(|(s, _)| !s.is_closed());
        if !reusable {
            let stream = match tokio::net::TcpStream::connect(host.as_str()).await {
                Ok(s) => s,
                Err(e) => return rec.fail(format!("cannot connect to {host}: {e}")),
            };
            let _ = stream.set_nodelay(true);
            let local = stream.local_addr().ok();
            let (sender, conn) =
                match hyper::client::conn::http1::handshake::<_, Full<Bytes>>(hyper_util::rt::TokioIo::new(stream))
                    .await
                {
                    Ok(x) => x,
                    Err(e) => return rec.fail(format!("HTTP handshake failed: {e}")),
                };
            tokio::spawn(async move {
                let _ = conn.await;
            });
            *guard = Some((sender, local));
        }
        let Some((sender, local)) = guard.as_mut() else { return rec.fail("no connection") };
        rec.conn = *local;
        if sender.ready().await.is_err() {
            *guard = None;
            return rec.fail("the connection closed");
        }
        let req = match request(url, body, &opts.agent) {
            Ok(r) => r,
            Err(e) => return rec.fail(e),
        };
        hyper_exchange::<()>(sender, req, rec, opts).await
    }
}

/// A model's name as `/api/tags` and `/api/ps` list it: with its tag (`:latest` where it has
/// none).
pub(crate) fn tagged(model: &str) -> String {
    if model.contains(':') { model.to_string() } else { format!("{model}:latest") }
}

/// Checks that every live endpoint answers and has the model: the first words of every
/// command that measures live servers (matrix, calibrate, record).
pub(crate) fn check_live(endpoints: &[String], model: &str) -> Result<(), String> {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().map_err(|e| e.to_string())?;
    let want = tagged(model);
    for url in endpoints {
        let (client, u) = (client.clone(), format!("{url}/api/tags"));
        let r = bridge_blocking(async move {
            let resp = client.get(&u).send().await.map_err(|e| format!("cannot reach {u}: {}", describe_error(&e)))?;
            if !resp.status().is_success() {
                return Err(format!("{u} answered HTTP {}", resp.status().as_u16()));
            }
            resp.json::<serde_json::Value>().await.map_err(|e| format!("{u} did not answer like Ollama: {e}"))
        })?;
        let has = r["models"]
            .as_array()
            .is_some_and(|m| m.iter().any(|x| x["name"].as_str().is_some_and(|n| n.eq_ignore_ascii_case(&want))));
        if !has {
            return Err(format!("{url} does not have the model {want} (pull it first: ollama pull {model})"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_record_tokens_errors_and_the_final_object() {
        let t = Instant::now();
        let mut rec = CallRecord::new(t);
        let mut l = Lines::default();
        l.feed(&mut rec, b"{\"response\":\"a\",\"done\":false}\n{\"message\":{\"content\":\"b\"},\"do", t, None);
        assert_eq!(rec.tokens.len(), 1);
        l.feed(&mut rec, b"ne\":false}\n{\"response\":\"\",\"done\":true,\"eval_count\":2}\n", t, None);
        assert_eq!(rec.tokens.len(), 2);
        let rec = l.finish(rec);
        assert_eq!((rec.eval_count, rec.error), (Some(2), None));

        let mut rec = CallRecord::new(t);
        let mut l = Lines::default();
        l.feed(&mut rec, b"{\"response\":\"a\",\"done\":false}\n{\"error\":\"boom\"}\n", t, None);
        assert_eq!(l.finish(rec).error.as_deref(), Some("error line in the stream: boom"));

        let mut rec = CallRecord::new(t);
        let mut l = Lines::default();
        l.feed(&mut rec, b"{\"response\":\"a\",\"done\":false}\n", t, None);
        assert!(l.finish(rec).error.unwrap().contains("without a final done"));
    }

    #[test]
    fn urls_split_into_host_and_path() {
        assert_eq!(split_url("http://127.0.0.1:5/api/chat"), ("127.0.0.1:5".to_string(), "/api/chat".to_string()));
    }
}

/// Runs `f` on the bridge runtime from a thread that is not in any async context.
pub(crate) fn bridge_blocking<F>(f: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    futures::executor::block_on(bridge(f))
}

/// A live endpoint as a base URL: `http://host:port`, `host:port`, `:port` or `host` (the
/// forms `OLLAMA_HOST` takes; port 11434 by default), without a trailing slash.
pub fn endpoint_url(e: &str) -> Result<String, String> {
    let t = e.trim().trim_end_matches('/');
    if t.is_empty() {
        return Err("an empty endpoint".into());
    }
    if let Some(rest) = t.strip_prefix("https://") {
        return Err(format!("{e}: https is not supported (the harness talks plain HTTP to {rest})"));
    }
    let rest = t.strip_prefix("http://").unwrap_or(t);
    if rest.contains('/') {
        return Err(format!("{e}: give the server's base URL, without a path"));
    }
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') || h.ends_with(']') => {
            (h, p.parse::<u16>().map_err(|_| format!("{e}: {p:?} is not a port"))?)
        }
        _ => (rest, 11434),
    };
    let host = if host.is_empty() { "127.0.0.1" } else { host };
    Ok(format!("http://{host}:{port}"))
}

/// An error with its whole cause chain, and what kind of failure it was (refused, timed out),
/// instead of reqwest's bare "error sending request for url (...)".
pub(crate) fn describe_error(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_body() || e.is_decode() {
        "the answer broke off"
    } else {
        "failed"
    };
    let mut chain = vec![e.to_string()];
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        if chain.last() != Some(&text) {
            chain.push(text);
        }
        source = s.source();
    }
    format!("{kind}: {}", chain.join(": "))
}

/// Blocks the thread for `d`, precisely: `std::thread::sleep` overshoots by the OS timer's
/// slack (tens of microseconds to a millisecond), which at short token gaps would make the
/// blocking control's cost depend on the machine rather than on the token rate; so it sleeps
/// all but the last 200 µs and spins the rest. Either way the executor thread is blocked.
fn block_for(d: Duration) {
    let until = Instant::now() + d;
    if let Some(coarse) = d.checked_sub(Duration::from_micros(200)) {
        std::thread::sleep(coarse);
    }
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// What a whole NDJSON stream said, however its bytes were split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedStream {
    /// Tokens (lines with non-empty content).
    pub tokens: usize,
    /// `eval_count` of the final object.
    pub eval_count: Option<u64>,
    /// The first problem seen.
    pub error: Option<String>,
}

/// Parses a stream delivered in `chunks`, as every client stack does.
pub fn parse_stream<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> ParsedStream {
    let now = Instant::now();
    let mut rec = CallRecord::new(now);
    let mut lines = Lines::default();
    for c in chunks {
        lines.feed(&mut rec, c, now, None);
    }
    let rec = lines.finish(rec);
    ParsedStream { tokens: rec.tokens.len(), eval_count: rec.eval_count, error: rec.error }
}

#[cfg(test)]
mod endpoint_tests {
    use super::*;

    #[test]
    fn endpoints_take_the_forms_ollama_host_takes() {
        // Issue 14: `127.0.0.1:11500` failed with "builder error".
        assert_eq!(endpoint_url("127.0.0.1:11500").unwrap(), "http://127.0.0.1:11500");
        assert_eq!(endpoint_url("http://127.0.0.1:11500/").unwrap(), "http://127.0.0.1:11500");
        assert_eq!(endpoint_url("localhost").unwrap(), "http://localhost:11434");
        assert_eq!(endpoint_url(":9000").unwrap(), "http://127.0.0.1:9000");
        assert_eq!(endpoint_url("[::1]:7").unwrap(), "http://[::1]:7");
        assert!(endpoint_url("127.0.0.1:http").unwrap_err().contains("not a port"));
        assert!(endpoint_url("https://x:1").unwrap_err().contains("https"));
        assert!(endpoint_url("http://x:1/api").unwrap_err().contains("without a path"));
    }
}
