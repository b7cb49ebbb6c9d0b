//! The streaming body: tokens leave as their deadlines pass, one line per HTTP chunk, as the
//! real server flushes every object. Only tokens the schedule puts at the same instant (a
//! zero-latency profile) share a chunk, so throughput does not cost one chunk per token. A
//! stream that fell behind still yields one chunk per token, but hyper gathers the chunks it
//! is handed in a row into one `writev`.

use crate::faults::{FaultKind, FaultRule, Trigger};
use crate::generation::Running;
use crate::trace::Outcome;
use crate::wire::Wire;
use axum::body::Bytes;
use bytes::{BufMut, BytesMut};
use futures::Stream;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Coalesce simultaneous tokens up to this many bytes per chunk.
const MAX_CHUNK: usize = 16 * 1024;

/// Chunks are cut from a buffer of this size (one allocation per ~20 token lines, not one
/// each, and no growth by reallocation); with 1,000 streams, 2 MB.
const BUF_BLOCK: usize = 2048;

/// A paced token stream in one wire format. Dropping it (the client went away) frees the slot
/// and the runner at once.
#[derive(Debug)]
pub(crate) struct TokenBody {
    run: Running,
    wire: Wire,
    first: Option<Bytes>,
    done: bool,
    /// A mid-stream fault not yet struck.
    fault: Option<FaultRule>,
    started: Instant,
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
    /// An injected disconnect waits for this pause first, so hyper flushes what was sent.
    disconnecting: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Where the next chunks are written; each is split off and frozen.
    out: BytesMut,
}

impl TokenBody {
    /// A body whose first chunk (the first token, already emitted) is `first`.
    pub(crate) fn new(run: Running, wire: Wire, first: Bytes, done: bool, fault: Option<FaultRule>) -> Self {
        let fault = fault.filter(|f| !matches!(f.kind, FaultKind::HttpError | FaultKind::SlowHeaders));
        TokenBody {
            run,
            wire,
            first: Some(first),
            done,
            fault,
            started: Instant::now(),
            stall: None,
            disconnecting: None,
            out: BytesMut::new(),
        }
    }

    /// Whether the pending fault strikes now.
    fn fault_due(&self) -> bool {
        self.fault.as_ref().is_some_and(|f| match f.trigger() {
            Trigger::AfterTokens(n) => self.run.emitted() as u64 >= n,
            Trigger::AfterTime(d) => self.started.elapsed() >= d,
        })
    }
}

/// Appends the final lines of a finished generation.
pub(crate) fn write_finish(run: &mut Running, wire: &Wire, out: &mut BytesMut) {
    let now = Instant::now();
    let metrics = run.metrics(now);
    let ids = if matches!(wire, Wire::Generate { context: Some(_), .. }) { run.output_ids() } else { Vec::new() };
    if let Wire::Generate { context: Some(c), note: Some(n), .. } = wire {
        n.remember(&[c.as_slice(), &ids].concat(), &run.emitted_text());
    }
    let (created_at, created_unix) = run.created(now);
    let called = run.text.calls.iter().any(|c| c.end < run.emitted());
    wire.finish(out, run.done_reason(), called, &created_at, created_unix, &metrics, &ids);
    run.finish(Outcome::Done, None);
}

/// Appends what token `i`, emitted at `at`, sends: its line, or for the last token of a tool
/// call the call's chunk, or nothing for the other tokens of a call (the real server's tool
/// parser holds them back). Returns whether anything was written.
pub(crate) fn write_token(run: &mut Running, wire: &Wire, out: &mut BytesMut, i: usize, at: Instant) -> bool {
    let first = !run.wrote_chunk;
    let lp = run.logprob(i);
    if let Some(call) = run.text.call_ending_at(i) {
        let (created_at, created_unix) = run.created(at);
        wire.tool_calls(out, std::slice::from_ref(call), &created_at, created_unix, first, lp.as_ref());
    } else if run.text.hidden(i) {
        // Nothing of its own; its log probability still goes out when it was asked for.
        let Some(lp) = lp else { return false };
        if !wire.logprob_only(out, &run.created(at).0, first, &lp) {
            return false;
        }
    } else if i < run.text.thinking {
        let (created_at, created_unix) = run.created(at);
        if !wire.thinking(out, run.piece(i), &created_at, created_unix, first, lp.as_ref()) {
            return false;
        }
    } else {
        let (created_at, created_unix) = run.created(at);
        wire.token(out, run.piece(i), &created_at, created_unix, first, lp.as_ref());
    }
    run.wrote_chunk = true;
    true
}

/// The error a body yields to make hyper drop the connection mid-body.
fn injected_disconnect() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "sim-ollama: injected disconnect")
}

impl Stream for TokenBody {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(first) = this.first.take() {
            return Poll::Ready(Some(Ok(first)));
        }
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(pause) = this.disconnecting.as_mut() {
            if pause.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.disconnecting = None;
            this.done = true;
            return Poll::Ready(Some(Err(injected_disconnect())));
        }
        if let Some(sleep) = this.stall.as_mut() {
            match sleep.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) => this.stall = None,
            }
        }
        let mut buf = std::mem::take(&mut this.out);
        if buf.capacity() < BUF_BLOCK / 2 {
            buf.reserve(BUF_BLOCK);
        }
        if this.fault_due() {
            let Some(f) = this.fault.take() else {
                return Poll::Ready(None);
            };
            let what = f.describe();
            match f.kind {
                FaultKind::ErrorLine => {
                    this.wire.error(&mut buf, &f.message_or_default());
                    this.run.finish(Outcome::Error, Some(format!("{} (injected: {what})", f.message_or_default())));
                    this.done = true;
                    return Poll::Ready(Some(Ok(buf.freeze())));
                }
                FaultKind::Disconnect => {
                    this.run.finish(Outcome::Error, Some(format!("connection dropped (injected: {what})")));
                    // Pause so that the tokens already written reach the client, then drop.
                    let mut pause = Box::pin(tokio::time::sleep(Duration::from_millis(5)));
                    if pause.as_mut().poll(cx).is_pending() {
                        this.disconnecting = Some(pause);
                        return Poll::Pending;
                    }
                    this.done = true;
                    return Poll::Ready(Some(Err(injected_disconnect())));
                }
                FaultKind::Truncate => {
                    this.run.finish(Outcome::Error, Some(format!("stream ended without done (injected: {what})")));
                    this.done = true;
                    return Poll::Ready(None);
                }
                FaultKind::MalformedLine => {
                    buf.put_slice(b"{\"model\":\"");
                    buf.put_slice(b"broken\n");
                }
                FaultKind::Stall => {
                    // Forever when no duration is given: until the client gives up.
                    let d = f.duration_ms.map_or(Duration::from_secs(365 * 24 * 3600), Duration::from_millis);
                    this.run.delay(d);
                    let mut sleep = Box::pin(tokio::time::sleep(d));
                    if sleep.as_mut().poll(cx).is_pending() {
                        this.stall = Some(sleep);
                        return Poll::Pending;
                    }
                }
                FaultKind::HttpError | FaultKind::SlowHeaders => {}
            }
        }
        // Whether the loop ended waiting for the pacer (which then wakes this task).
        let mut waiting = false;
        loop {
            match this.run.poll_token(cx) {
                Poll::Ready(Some(t)) => {
                    let wrote = write_token(&mut this.run, &this.wire, &mut buf, t.index, t.at);
                    let full = buf.len() >= MAX_CHUNK || !this.run.next_is_simultaneous();
                    if this.fault_due() || (wrote && full) {
                        break;
                    }
                }
                Poll::Ready(None) => {
                    write_finish(&mut this.run, &this.wire, &mut buf);
                    this.done = true;
                    break;
                }
                Poll::Pending => {
                    waiting = true;
                    break;
                }
            }
        }
        let chunk = (!buf.is_empty()).then(|| buf.split().freeze());
        this.out = buf;
        match chunk {
            Some(c) => Poll::Ready(Some(Ok(c))),
            None => {
                // Stopped on a token that writes nothing (inside a tool call) with nothing
                // armed to wake this task: poll again at once (a fault may be due).
                if !waiting {
                    cx.waker().wake_by_ref();
                }
                Poll::Pending
            }
        }
    }
}
