//! Wire formats: the per-token lines of every streaming format (native NDJSON for generate and chat, OpenAI SSE for chat
//! completions and completions).

pub(crate) mod anthropic;
mod metrics;
pub(crate) mod responses;

pub(crate) use metrics::Metrics;

use crate::gojson::{to_go_json, write_go_json, write_json_str};
use crate::logprob::Logprob;
use crate::tokens::DoneReason;
use crate::tools::ToolCall;
use bytes::BytesMut;
use serde::Serialize;

use bytes::BufMut;

/// The final object of `/api/generate`.
#[derive(Debug, Serialize)]
pub(crate) struct GenerateFinal<'a> {
    pub(crate) model: &'a str,
    pub(crate) created_at: &'a str,
    pub(crate) response: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(crate) thinking: &'a str,
    pub(crate) done: bool,
    pub(crate) done_reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) context: Option<&'a [u32]>,
    #[serde(flatten)]
    pub(crate) metrics: &'a Metrics,
    /// Last, as `api.GenerateResponse` orders it (api/types.go v0.33.0-rc2 891-930).
    #[serde(skip_serializing_if = "<[Logprob]>::is_empty")]
    pub(crate) logprobs: &'a [Logprob],
}

/// An assistant message.
#[derive(Debug, Serialize)]
pub(crate) struct Message<'a> {
    pub(crate) role: &'a str,
    pub(crate) content: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(crate) thinking: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tool_calls: Vec<NativeToolCall<'a>>,
}

/// The final object of `/api/chat`.
#[derive(Debug, Serialize)]
pub(crate) struct ChatFinal<'a> {
    pub(crate) model: &'a str,
    pub(crate) created_at: &'a str,
    pub(crate) message: Message<'a>,
    pub(crate) done: bool,
    pub(crate) done_reason: &'a str,
    /// After `done_reason`, before the metrics (`api.ChatResponse`, api/types.go 520-549).
    #[serde(skip_serializing_if = "<[Logprob]>::is_empty")]
    pub(crate) logprobs: &'a [Logprob],
    #[serde(flatten)]
    pub(crate) metrics: &'a Metrics,
}

/// OpenAI `choices[].logprobs` (`openai.ChoiceLogprobs`): the native entries under `content`.
#[derive(Debug, Serialize)]
pub(crate) struct ChoiceLogprobs<'a> {
    pub(crate) content: &'a [Logprob],
}

/// OpenAI `usage`.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Usage {
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    pub(crate) total_tokens: u64,
}

impl Usage {
    pub(crate) fn new(prompt: u64, completion: u64) -> Usage {
        Usage { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
    }
}

/// Which streaming format a response uses, with what it needs to render lines.
#[derive(Debug, Clone)]
pub(crate) enum Wire {
    /// `/api/generate` NDJSON; `context` holds the prompt's token ids unless raw, and `note`
    /// what they and the answer's stand for, to remember when they go out.
    Generate { model: String, context: Option<Vec<u32>>, note: Option<crate::contexts::Note> },
    /// `/api/chat` NDJSON.
    Chat { model: String },
    /// `/v1/chat/completions` SSE.
    OpenAiChat { id: String, model: String, created: u64, include_usage: bool },
    /// `/v1/completions` SSE.
    OpenAiCompletion { id: String, model: String, include_usage: bool },
    /// `/v1/messages` (Anthropic) SSE.
    Anthropic(anthropic::Stream),
    /// `/v1/responses` (OpenAI Responses) SSE.
    Responses(Box<responses::Stream>),
}

impl Wire {
    /// Appends the line of one token, with its log probability when asked for (`lp`: native
    /// and `/v1` chat; the other wires carry none). `first` is true for the first token of the
    /// stream.
    pub(crate) fn token(
        &self,
        out: &mut BytesMut,
        piece: &str,
        created_at: &str,
        created_unix: u64,
        first: bool,
        lp: Option<&Logprob>,
    ) {
        match self {
            Wire::OpenAiCompletion { id, model, include_usage } => {
                completion_chunk(out, id, model, created_unix, piece, None, *include_usage);
            }
            Wire::Anthropic(a) => a.text(out, piece),
            Wire::Responses(r) => r.text(out, piece, created_unix),
            Wire::Generate { .. } | Wire::Chat { .. } | Wire::OpenAiChat { .. } => {
                self.piece_line(out, piece, created_at, first, false, lp)
            }
        }
    }

    /// The native and `/v1` chat line of one piece of the answer or, with `thinking`, of the
    /// reasoning: the same line, the piece under its own key (beside an empty answer when it is
    /// reasoning), its log probability where `api.GenerateResponse` and `api.ChatResponse` put
    /// `logprobs` (after `done`) and `/v1` its choice's (after `finish_reason`). The other
    /// wires write events of their own: nothing here.
    fn piece_line(
        &self,
        out: &mut BytesMut,
        piece: &str,
        created_at: &str,
        first: bool,
        thinking: bool,
        lp: Option<&Logprob>,
    ) {
        let (key, close): (&[u8], &[u8]) = match self {
            Wire::Generate { model, .. } => {
                native_line_open(out, model, created_at);
                let key: &[u8] = if thinking { b"\"response\":\"\",\"thinking\":" } else { b"\"response\":" };
                (key, b",\"done\":false")
            }
            Wire::Chat { model } => {
                native_line_open(out, model, created_at);
                let key: &[u8] = if thinking {
                    b"\"message\":{\"role\":\"assistant\",\"content\":\"\",\"thinking\":"
                } else {
                    b"\"message\":{\"role\":\"assistant\",\"content\":"
                };
                (key, b"},\"done\":false")
            }
            Wire::OpenAiChat { id, model, created, .. } => {
                chat_delta_open(out, id, *created, model, first);
                let key: &[u8] = if thinking { b"\"content\":\"\",\"reasoning\":" } else { b"\"content\":" };
                (key, b"},\"finish_reason\":null")
            }
            Wire::OpenAiCompletion { .. } | Wire::Anthropic(_) | Wire::Responses(_) => return,
        };
        out.put_slice(key);
        write_json_str(out, piece);
        out.put_slice(close);
        self.line_end(out, lp);
    }

    /// The end of a native or `/v1` chat line: its log probabilities, if any, then the
    /// closing brackets.
    fn line_end(&self, out: &mut BytesMut, lp: Option<&Logprob>) {
        let openai = matches!(self, Wire::OpenAiChat { .. });
        if let Some(lp) = lp {
            out.put_slice(if openai { b",\"logprobs\":{\"content\":[" } else { b",\"logprobs\":[" });
            write_go_json(&mut out.writer(), lp);
            out.put_slice(if openai { b"]}" } else { b"]" });
        }
        out.put_slice(if openai { b"}]}\n\n" } else { b"}\n" });
    }

    /// Appends the line of a token that writes nothing of its own (inside a tool call, which
    /// the real server's parser holds back) where its log probability was asked for: an empty
    /// piece with it, as the real handler still sends such chunks while its parser buffers
    /// (server/routes.go v0.33.0-rc2 2873-2880). Returns whether anything was written.
    pub(crate) fn logprob_only(&self, out: &mut BytesMut, created_at: &str, first: bool, lp: &Logprob) -> bool {
        match self {
            Wire::Chat { .. } | Wire::OpenAiChat { .. } | Wire::Generate { .. } => {
                self.piece_line(out, "", created_at, first, false, Some(lp));
                true
            }
            Wire::OpenAiCompletion { .. } | Wire::Anthropic(_) | Wire::Responses(_) => false,
        }
    }

    /// Appends the line of one token of reasoning: native `thinking` beside an empty answer
    /// (`api.GenerateResponse`, `api.Message`, api/types.go v0.33.0-rc2 197-207 and 893-919),
    /// `/v1` `delta.reasoning` beside empty content (`openai/openai.go` toChunk, 310-337).
    /// `/v1/completions` sends the response only (`ToCompleteChunk`), so nothing. Returns
    /// whether anything was written.
    pub(crate) fn thinking(
        &self,
        out: &mut BytesMut,
        piece: &str,
        created_at: &str,
        created_unix: u64,
        first: bool,
        lp: Option<&Logprob>,
    ) -> bool {
        match self {
            Wire::OpenAiCompletion { .. } => return false,
            Wire::Anthropic(a) => a.thinking(out, piece),
            Wire::Responses(r) => r.thinking(out, piece, created_unix),
            Wire::Generate { .. } | Wire::Chat { .. } | Wire::OpenAiChat { .. } => {
                self.piece_line(out, piece, created_at, first, true, lp)
            }
        }
        true
    }

    /// Appends the chunk that carries tool calls: empty content and the calls, as the real
    /// server sends them once its tool parser has read a whole call (`server/routes.go`
    /// ChatHandler; `openai/openai.go` toChunk and ToToolCalls for `/v1`). `first` is true when
    /// nothing was written before (the `/v1` role goes on the first chunk only).
    pub(crate) fn tool_calls(
        &self,
        out: &mut BytesMut,
        calls: &[ToolCall],
        created_at: &str,
        created_unix: u64,
        first: bool,
        lp: Option<&Logprob>,
    ) {
        match self {
            Wire::Chat { model } => {
                native_line_open(out, model, created_at);
                out.put_slice(b"\"message\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":");
                write_go_json(&mut out.writer(), &native_calls(calls));
                out.put_slice(b"},\"done\":false");
                self.line_end(out, lp);
            }
            Wire::OpenAiChat { id, model, created, .. } => {
                chat_delta_open(out, id, *created, model, first);
                out.put_slice(b"\"content\":\"\",\"tool_calls\":");
                write_go_json(&mut out.writer(), &openai_calls(calls));
                out.put_slice(b"},\"finish_reason\":null");
                self.line_end(out, lp);
            }
            Wire::Anthropic(a) => a.tool_calls(out, calls),
            Wire::Responses(r) => r.tool_calls(out, calls, created_unix),
            // Generate and completions take no tools.
            Wire::Generate { .. } | Wire::OpenAiCompletion { .. } => {}
        }
    }

    /// Appends everything after the last token: the final object, or the finish, usage and
    /// `[DONE]` events. `tool_calls` says whether a tool call was sent (`/v1` then finishes
    /// with `tool_calls` where the model stopped).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish(
        &self,
        out: &mut BytesMut,
        reason: DoneReason,
        tool_calls: bool,
        created_at: &str,
        created_unix: u64,
        metrics: &Metrics,
        output_ids: &[u32],
    ) {
        match self {
            Wire::Generate { model, context, .. } => {
                let ctx: Option<Vec<u32>> = context.as_ref().map(|c| c.iter().chain(output_ids).copied().collect());
                let f = GenerateFinal {
                    model,
                    created_at,
                    response: "",
                    thinking: "",
                    done: true,
                    done_reason: reason.as_str(),
                    context: ctx.as_deref(),
                    metrics,
                    logprobs: &[],
                };
                write_go_json(&mut out.writer(), &f);
                out.put_u8(b'\n');
            }
            Wire::Chat { model } => {
                let f = ChatFinal {
                    model,
                    created_at,
                    message: Message { role: "assistant", content: "", thinking: "", tool_calls: Vec::new() },
                    done: true,
                    done_reason: reason.as_str(),
                    logprobs: &[],
                    metrics,
                };
                write_go_json(&mut out.writer(), &f);
                out.put_u8(b'\n');
            }
            Wire::OpenAiChat { id, model, created, include_usage } => {
                chat_chunk_head(out, id, *created, model);
                out.put_slice(b"\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"");
                out.put_slice(openai_finish(reason, tool_calls).as_bytes());
                out.put_slice(b"\"}]}\n\n");
                if *include_usage {
                    chat_chunk_head(out, id, *created, model);
                    out.put_slice(b"\"choices\":[],\"usage\":");
                    write_go_json(&mut out.writer(), &Usage::new(metrics.prompt_eval_count, metrics.eval_count));
                    out.put_slice(b"}\n\n");
                }
                out.put_slice(b"data: [DONE]\n\n");
            }
            Wire::OpenAiCompletion { id, model, include_usage } => {
                let usage = Usage::new(metrics.prompt_eval_count, metrics.eval_count);
                completion_end(out, id, model, created_unix, reason.as_str(), *include_usage, &usage);
            }
            Wire::Anthropic(a) => a.finish(out, reason, metrics),
            Wire::Responses(r) => r.finish(out, reason, metrics.prompt_eval_count, metrics.eval_count, created_unix),
        }
    }

    /// Appends what a client sees when the stream fails after it began.
    pub(crate) fn error(&self, out: &mut BytesMut, message: &str) {
        match self {
            Wire::Generate { .. } | Wire::Chat { .. } => {
                out.put_slice(b"{\"error\":");
                write_json_str(out, message);
                out.put_slice(b"}\n");
            }
            // The /v1 writers pass the error object through as if it were a chunk: one more
            // chunk with empty content, then the end, with no finish_reason and no [DONE].
            Wire::OpenAiChat { id, model, created, .. } => {
                chat_chunk_head(out, id, *created, model);
                out.put_slice(b"\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":null}]}\n\n");
            }
            Wire::OpenAiCompletion { id, model, include_usage } => {
                completion_chunk(out, id, model, 0, "", None, *include_usage);
            }
            // The Anthropic writer reads an error chunk as an empty answer and writes nothing
            // for it: the stream just ends, without `message_stop`.
            Wire::Anthropic(_) => {}
            // The Responses writer likewise reads it as an empty chunk: nothing is written.
            Wire::Responses(_) => {}
        }
    }
}

/// The start of a native stream line, up to the comma after `created_at`:
/// `{"model":..,"created_at":"..",`.
fn native_line_open(out: &mut BytesMut, model: &str, created_at: &str) {
    out.put_slice(b"{\"model\":");
    write_json_str(out, model);
    out.put_slice(b",\"created_at\":\"");
    out.put_slice(created_at.as_bytes());
    out.put_slice(b"\",");
}

/// The start of every `/v1` chat chunk, up to the comma before `choices`:
/// `data: {"id":..,"object":"chat.completion.chunk","created":..,"model":..,"system_fingerprint":"fp_ollama",`.
fn chat_chunk_head(out: &mut BytesMut, id: &str, created: u64, model: &str) {
    out.put_slice(b"data: {\"id\":\"");
    out.put_slice(id.as_bytes());
    out.put_slice(b"\",\"object\":\"chat.completion.chunk\",\"created\":");
    out.put_slice(created.to_string().as_bytes());
    out.put_slice(b",\"model\":");
    write_json_str(out, model);
    out.put_slice(b",\"system_fingerprint\":\"fp_ollama\",");
}

/// A `/v1` chat chunk up to the inside of its delta, with the role on the first chunk only.
fn chat_delta_open(out: &mut BytesMut, id: &str, created: u64, model: &str, first: bool) {
    chat_chunk_head(out, id, created, model);
    out.put_slice(b"\"choices\":[{\"index\":0,\"delta\":{");
    if first {
        out.put_slice(b"\"role\":\"assistant\",");
    }
}

/// `finish_reason` of a `/v1` chat answer: `stop` becomes `tool_calls` when the answer called
/// a tool (`openai/openai.go` FinishChunk and ToChatCompletion); `length` stays.
pub(crate) fn openai_finish(reason: DoneReason, tool_calls: bool) -> &'static str {
    match reason {
        DoneReason::Stop if tool_calls => "tool_calls",
        r => r.as_str(),
    }
}

/// A native tool call (`api.ToolCall`): `id`, then `function` with `index`, `name` and the
/// arguments as an object, in that order.
#[derive(Debug, Serialize)]
pub(crate) struct NativeToolCall<'a> {
    id: &'a str,
    function: NativeFunction<'a>,
}

#[derive(Debug, Serialize)]
struct NativeFunction<'a> {
    index: usize,
    name: &'a str,
    arguments: &'a serde_json::Value,
}

/// The native form of calls.
pub(crate) fn native_calls(calls: &[ToolCall]) -> Vec<NativeToolCall<'_>> {
    calls
        .iter()
        .map(|c| NativeToolCall {
            id: &c.id,
            function: NativeFunction { index: c.index, name: &c.name, arguments: &c.arguments },
        })
        .collect()
}

/// An OpenAI tool call (`openai.ToolCall`): `id`, `index`, `type`, and `function` with the
/// arguments re-encoded as a JSON string (Go's encoder, so `<`, `>` and `&` are escaped).
#[derive(Debug, Serialize)]
pub(crate) struct OpenAiToolCall<'a> {
    id: &'a str,
    index: usize,
    #[serde(rename = "type")]
    kind: &'static str,
    function: OpenAiFunction<'a>,
}

#[derive(Debug, Serialize)]
struct OpenAiFunction<'a> {
    name: &'a str,
    arguments: String,
}

/// The `/v1` form of calls.
pub(crate) fn openai_calls(calls: &[ToolCall]) -> Vec<OpenAiToolCall<'_>> {
    calls
        .iter()
        .map(|c| OpenAiToolCall {
            id: &c.id,
            index: c.index,
            kind: "function",
            function: OpenAiFunction {
                name: &c.name,
                arguments: String::from_utf8(to_go_json(&c.arguments)).unwrap_or_default(),
            },
        })
        .collect()
}

/// The end of a `/v1/completions` stream: the chunk with the finish reason, the usage chunk
/// when asked for, and `[DONE]` (middleware/openai.go `CompleteWriter.writeResponse`).
pub(crate) fn completion_end(
    out: &mut BytesMut,
    id: &str,
    model: &str,
    created_unix: u64,
    reason: &str,
    include_usage: bool,
    usage: &Usage,
) {
    completion_chunk(out, id, model, created_unix, "", Some(reason), include_usage);
    if include_usage {
        completion_chunk_head(out, id, created_unix);
        out.put_slice(b"\"choices\":[],\"model\":");
        write_json_str(out, model);
        out.put_slice(b",\"system_fingerprint\":\"fp_ollama\",\"usage\":");
        write_go_json(&mut out.writer(), usage);
        out.put_slice(b"}\n\n");
    }
    out.put_slice(b"data: [DONE]\n\n");
}

/// The start of every `/v1/completions` chunk, up to the comma before `choices`:
/// `data: {"id":..,"object":"text_completion","created":..,`.
fn completion_chunk_head(out: &mut BytesMut, id: &str, created: u64) {
    out.put_slice(b"data: {\"id\":\"");
    out.put_slice(id.as_bytes());
    out.put_slice(b"\",\"object\":\"text_completion\",\"created\":");
    out.put_slice(created.to_string().as_bytes());
    out.put_u8(b',');
}

fn completion_chunk(
    out: &mut BytesMut,
    id: &str,
    model: &str,
    created: u64,
    text: &str,
    finish: Option<&str>,
    include_usage: bool,
) {
    completion_chunk_head(out, id, created);
    out.put_slice(b"\"choices\":[{\"text\":");
    write_json_str(out, text);
    out.put_slice(b",\"index\":0,\"finish_reason\":");
    match finish {
        Some(f) => {
            out.put_u8(b'"');
            out.put_slice(f.as_bytes());
            out.put_u8(b'"');
        }
        None => out.put_slice(b"null"),
    }
    out.put_slice(b"}],\"model\":");
    write_json_str(out, model);
    out.put_slice(b",\"system_fingerprint\":\"fp_ollama\"");
    if include_usage {
        out.put_slice(b",\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":0,\"total_tokens\":0}");
    }
    out.put_slice(b"}\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_formatter_escapes_html_characters() {
        assert_eq!(to_go_json("a<b>&c"), br#""a\u003cb\u003e\u0026c""#.to_vec());
        assert_eq!(to_go_json("\u{2028}"), br#""\u2028""#.to_vec());
        assert_eq!(to_go_json("plain \"q\"\n"), br#""plain \"q\"\n""#.to_vec());
    }

    #[test]
    fn token_lines_are_valid_json_with_ollamas_field_order() {
        let mut b = BytesMut::new();
        Wire::Chat { model: "tiny".into() }.token(&mut b, "Hi&", "2026-01-01T00:00:00Z", 0, true, None);
        assert_eq!(
            &b[..],
            &b"{\"model\":\"tiny\",\"created_at\":\"2026-01-01T00:00:00Z\",\"message\":{\"role\":\"assistant\",\"content\":\"Hi\\u0026\"},\"done\":false}\n"[..]
        );
    }

    #[test]
    fn final_objects_omit_zero_metrics() {
        let mut b = BytesMut::new();
        let m = Metrics {
            total_duration: 5,
            load_duration: 0,
            prompt_eval_count: 3,
            prompt_eval_duration: 1000,
            eval_count: 0,
            eval_duration: 0,
        };
        Wire::Generate { model: "m".into(), context: None, note: None }.finish(
            &mut b,
            DoneReason::Stop,
            false,
            "t",
            0,
            &m,
            &[],
        );
        let s = std::str::from_utf8(&b).unwrap();
        assert_eq!(
            s,
            "{\"model\":\"m\",\"created_at\":\"t\",\"response\":\"\",\"done\":true,\"done_reason\":\"stop\",\"total_duration\":5,\"prompt_eval_count\":3,\"prompt_eval_duration\":1000}\n"
        );
    }
}
