//! `/v1/messages` (Anthropic) as the real server writes it: the middleware turns every chat
//! chunk into Anthropic events (`anthropic.StreamConverter.Process`, anthropic/anthropic.go
//! v0.33.0-rc2 749-981), each written as `event: NAME\ndata: JSON\n\n` (`writeSSE`,
//! middleware/anthropic.go 836-849): `message_start` with the first chunk, a `thinking` block,
//! a `text` block, one `tool_use` block per call (`input_json_delta` with the whole
//! arguments), then `message_delta` (stop reason and usage) and `message_stop`.

use super::metrics::Metrics;
use crate::gojson::{to_go_json, write_go_json, write_json_str};
use crate::tokens::DoneReason;
use crate::tools::ToolCall;
use bytes::{BufMut, BytesMut};
use std::cell::Cell;

/// Which blocks a stream has opened and closed (the converter's state).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Blocks {
    started: bool,
    index: u32,
    thinking_started: bool,
    thinking_done: bool,
    text_started: bool,
    tool_calls: bool,
}

/// One `/v1/messages` stream.
#[derive(Debug, Clone)]
pub(crate) struct Stream {
    pub(crate) id: String,
    pub(crate) model: String,
    /// `message_start` carries an estimate of the input tokens: the real converter has no
    /// count before the last chunk and uses `EstimateInputTokens` (characters / 4).
    pub(crate) input_estimate: u64,
    pub(crate) blocks: Cell<Blocks>,
}

/// `stop_reason` (`mapStopReason`, anthropic/anthropic.go 699-716).
pub(crate) fn stop_reason(reason: DoneReason, tool_calls: bool) -> &'static str {
    match (tool_calls, reason) {
        (true, _) => "tool_use",
        (false, DoneReason::Stop) => "end_turn",
        (false, DoneReason::Length) => "max_tokens",
    }
}

fn event(out: &mut BytesMut, name: &str, data: impl FnOnce(&mut BytesMut)) {
    out.put_slice(b"event: ");
    out.put_slice(name.as_bytes());
    out.put_slice(b"\ndata: ");
    data(out);
    out.put_slice(b"\n\n");
}

fn block_stop(out: &mut BytesMut, index: u32) {
    event(out, "content_block_stop", |o| {
        o.put_slice(b"{\"type\":\"content_block_stop\",\"index\":");
        o.put_slice(index.to_string().as_bytes());
        o.put_u8(b'}');
    });
}

fn block_start(out: &mut BytesMut, index: u32, block: &[u8]) {
    event(out, "content_block_start", |o| {
        o.put_slice(b"{\"type\":\"content_block_start\",\"index\":");
        o.put_slice(index.to_string().as_bytes());
        o.put_slice(b",\"content_block\":");
        o.put_slice(block);
        o.put_u8(b'}');
    });
}

fn delta(out: &mut BytesMut, index: u32, kind: &str, field: &str, value: &str) {
    event(out, "content_block_delta", |o| {
        o.put_slice(b"{\"type\":\"content_block_delta\",\"index\":");
        o.put_slice(index.to_string().as_bytes());
        o.put_slice(b",\"delta\":{\"type\":\"");
        o.put_slice(kind.as_bytes());
        o.put_slice(b"\",\"");
        o.put_slice(field.as_bytes());
        o.put_slice(b"\":");
        write_json_str(o, value);
        o.put_slice(b"}}");
    });
}

impl Stream {
    fn start(&self, out: &mut BytesMut, b: &mut Blocks) {
        if std::mem::replace(&mut b.started, true) {
            return;
        }
        event(out, "message_start", |o| {
            o.put_slice(b"{\"type\":\"message_start\",\"message\":{\"id\":");
            write_json_str(o, &self.id);
            o.put_slice(b",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
            write_json_str(o, &self.model);
            o.put_slice(b",\"content\":[],\"usage\":{\"input_tokens\":");
            o.put_slice(self.input_estimate.to_string().as_bytes());
            o.put_slice(b",\"output_tokens\":0}}}");
        });
    }

    /// A token of reasoning: the thinking block, opened on the first.
    pub(crate) fn thinking(&self, out: &mut BytesMut, piece: &str) {
        let mut b = self.blocks.get();
        self.start(out, &mut b);
        if !b.thinking_done {
            if b.text_started {
                block_stop(out, b.index);
                b.index += 1;
                b.text_started = false;
            }
            if !std::mem::replace(&mut b.thinking_started, true) {
                block_start(out, b.index, br#"{"type":"thinking","thinking":""}"#);
            }
            delta(out, b.index, "thinking_delta", "thinking", piece);
        }
        self.blocks.set(b);
    }

    fn close_thinking(out: &mut BytesMut, b: &mut Blocks) {
        if b.thinking_started && !b.thinking_done {
            b.thinking_done = true;
            block_stop(out, b.index);
            b.index += 1;
        }
    }

    /// A token of the answer: the text block, opened on the first (closing the reasoning).
    pub(crate) fn text(&self, out: &mut BytesMut, piece: &str) {
        let mut b = self.blocks.get();
        self.start(out, &mut b);
        Self::close_thinking(out, &mut b);
        if !std::mem::replace(&mut b.text_started, true) {
            block_start(out, b.index, br#"{"type":"text","text":""}"#);
        }
        delta(out, b.index, "text_delta", "text", piece);
        self.blocks.set(b);
    }

    /// Tool calls: a `tool_use` block each, its arguments in one `input_json_delta`.
    pub(crate) fn tool_calls(&self, out: &mut BytesMut, calls: &[ToolCall]) {
        let mut b = self.blocks.get();
        self.start(out, &mut b);
        for c in calls {
            Self::close_thinking(out, &mut b);
            if b.text_started {
                block_stop(out, b.index);
                b.index += 1;
                b.text_started = false;
            }
            let mut head = BytesMut::new();
            head.put_slice(b"{\"type\":\"tool_use\",\"id\":");
            write_json_str(&mut head, &c.id);
            head.put_slice(b",\"name\":");
            write_json_str(&mut head, &c.name);
            head.put_slice(b",\"input\":{}}");
            block_start(out, b.index, &head);
            let args = String::from_utf8(to_go_json(&c.arguments)).unwrap_or_default();
            delta(out, b.index, "input_json_delta", "partial_json", &args);
            block_stop(out, b.index);
            b.index += 1;
            b.tool_calls = true;
        }
        self.blocks.set(b);
    }

    /// The end: the open block closed, `message_delta` with the stop reason and the usage
    /// (the final chunk's counts), `message_stop`.
    pub(crate) fn finish(&self, out: &mut BytesMut, reason: DoneReason, metrics: &Metrics) {
        let mut b = self.blocks.get();
        self.start(out, &mut b);
        if b.text_started || (b.thinking_started && !b.thinking_done) {
            block_stop(out, b.index);
        }
        event(out, "message_delta", |o| {
            o.put_slice(b"{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"");
            o.put_slice(stop_reason(reason, b.tool_calls).as_bytes());
            o.put_slice(b"\"},\"usage\":");
            write_go_json(
                &mut o.writer(),
                &Usage { input_tokens: metrics.prompt_eval_count, output_tokens: metrics.eval_count },
            );
            o.put_u8(b'}');
        });
        event(out, "message_stop", |o| o.put_slice(br#"{"type":"message_stop"}"#));
        self.blocks.set(b);
    }
}

/// Anthropic `usage`.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(crate) struct Usage {
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
}
