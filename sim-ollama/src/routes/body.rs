//! The streaming body: tokens leave as their deadlines pass. When several are due at once
//! (a zero-latency profile, or a stream that fell behind) they are coalesced into one chunk,
//! so throughput does not cost one write per token; paced tokens go out one per chunk, as
//! the real server flushes every object.

use crate::generation::Running;
use crate::trace::Outcome;
use crate::wire::Wire;
use axum::body::Bytes;
use bytes::BytesMut;
use futures::Stream;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// Coalesce due tokens up to this many bytes per chunk.
const MAX_CHUNK: usize = 16 * 1024;

/// A paced token stream in one wire format. Dropping it (the client went away) frees the slot
/// and the runner at once.
#[derive(Debug)]
pub(crate) struct TokenBody {
    run: Running,
    wire: Wire,
    first: Option<Bytes>,
    done: bool,
}

impl TokenBody {
    /// A body whose first chunk (the first token, already emitted) is `first`.
    pub(crate) fn new(run: Running, wire: Wire, first: Bytes, done: bool) -> Self {
        TokenBody { run, wire, first: Some(first), done }
    }
}

/// Appends the final lines of a finished generation.
pub(crate) fn write_finish(run: &mut Running, wire: &Wire, out: &mut BytesMut) {
    let now = Instant::now();
    let metrics = run.metrics(now);
    let ids = if matches!(wire, Wire::Generate { context: Some(_), .. }) { run.output_ids() } else { Vec::new() };
    wire.finish(out, run.done_reason(), &run.created_at(now), run.created_unix(now), &metrics, &ids);
    run.finish(Outcome::Done, None);
}

/// Appends the line of token `i`, emitted at `at`.
pub(crate) fn write_token(run: &Running, wire: &Wire, out: &mut BytesMut, i: usize, at: Instant) {
    wire.token(out, run.piece(i), &run.created_at(at), run.created_unix(at), i == 0);
}

impl Stream for TokenBody {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(first) = this.first.take() {
            return Poll::Ready(Some(Ok(first)));
        }
        if this.done {
            return Poll::Ready(None);
        }
        let mut buf = BytesMut::new();
        loop {
            match this.run.poll_token(cx) {
                Poll::Ready(Some(t)) => {
                    write_token(&this.run, &this.wire, &mut buf, t.index, t.at);
                    if buf.len() >= MAX_CHUNK {
                        break;
                    }
                }
                Poll::Ready(None) => {
                    write_finish(&mut this.run, &this.wire, &mut buf);
                    this.done = true;
                    break;
                }
                Poll::Pending => break,
            }
        }
        if buf.is_empty() { Poll::Pending } else { Poll::Ready(Some(Ok(buf.freeze()))) }
    }
}
