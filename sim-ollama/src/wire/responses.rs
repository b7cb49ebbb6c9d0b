//! `/v1/responses` (the OpenAI Responses API) as the real server writes it
//! (openai/responses.go v0.33.0-rc2): one response object (`ToResponse`, 898-1024), or a stream
//! of events (`ResponsesStreamConverter`, 1026-1624) written as `event: NAME\ndata: JSON\n\n`
//! (middleware/openai.go 498-511): `response.created`, `response.in_progress`, a reasoning
//! item, a message item or function calls, `response.completed` with the whole response.
//! Stream events are Go maps, so their keys are written sorted; every event carries a
//! `sequence_number`.

use crate::gojson::{sorted, to_go_json};
use crate::tokens::DoneReason;
use crate::tools::ToolCall;
use bytes::{BufMut, BytesMut};
use serde_json::{Map, Value, json};
use std::cell::RefCell;

/// What the response object echoes of the request.
#[derive(Debug, Clone)]
pub(crate) struct Echo {
    pub(crate) instructions: Option<String>,
    pub(crate) truncation: String,
    /// The request's tools, as given.
    pub(crate) tools: Vec<Value>,
    /// `text.format`, `{"type":"text"}` by default.
    pub(crate) text_format: Value,
    pub(crate) effort: Option<String>,
    pub(crate) summary: Option<String>,
    pub(crate) top_p: f64,
    pub(crate) temperature: f64,
    pub(crate) max_output_tokens: Option<i64>,
    pub(crate) background: bool,
    /// Whether the response is streamed (the objects differ in small ways).
    pub(crate) streamed: bool,
}

/// One response's ids and what it echoes.
#[derive(Debug, Clone)]
pub(crate) struct Ids {
    /// `resp_N`.
    pub(crate) response: String,
    /// `msg_N`: the message item.
    pub(crate) item: String,
    /// `rs_N` of the streamed reasoning item, `fc_N_i` of a streamed call.
    pub(crate) reasoning: String,
    pub(crate) call_base: String,
}

#[derive(Debug, Default, Clone)]
struct State {
    sequence: u64,
    started: bool,
    output_index: u64,
    reasoning_started: bool,
    reasoning: String,
    content_started: bool,
    text: String,
    tool_calls_sent: bool,
    completed: Vec<Value>,
}

/// One streamed response.
#[derive(Debug, Clone)]
pub(crate) struct Stream {
    pub(crate) ids: Ids,
    pub(crate) model: String,
    pub(crate) echo: Echo,
    state: RefCell<State>,
}

/// A float as Go writes it: integral values without a fraction (`1`, not `1.0`).
fn go_float(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 1e15 { Value::from(f as i64) } else { Value::from(f) }
}

/// The usage object.
pub(crate) fn usage(input: u64, output: u64) -> Value {
    json!({"input_tokens": input, "output_tokens": output, "total_tokens": input + output,
        "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}})
}

/// A message output item.
fn message_item(id: &str, status: &str, text: &str) -> Value {
    json!({"id": id, "type": "message", "status": status, "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]})
}

/// A tool call's arguments as the OpenAI layer writes them (a JSON string).
fn arguments(c: &ToolCall) -> String {
    String::from_utf8(to_go_json(&c.arguments)).unwrap_or_default()
}

impl Echo {
    /// The response object (`ResponsesResponse`'s fields, in its order).
    pub(crate) fn response(
        &self,
        ids: &Ids,
        model: &str,
        created: u64,
        status: &str,
        output: Vec<Value>,
        usage: Value,
        completed_at: Option<u64>,
    ) -> Value {
        // Streamed, a map with both keys; collected, a struct whose empty fields are omitted.
        let reasoning = match (&self.effort, &self.summary) {
            (None, None) => Value::Null,
            (e, s) if self.streamed => json!({"effort": e, "summary": s}),
            (e, s) => {
                let mut m = Map::new();
                if let Some(e) = e {
                    m.insert("effort".into(), Value::from(e.as_str()));
                }
                if let Some(s) = s {
                    m.insert("summary".into(), Value::from(s.as_str()));
                }
                Value::Object(m)
            }
        };
        json!({
            "id": ids.response, "object": "response", "created_at": created, "completed_at": completed_at,
            "status": status, "incomplete_details": null, "model": model, "previous_response_id": null,
            "instructions": self.instructions, "output": output, "error": null, "tools": self.tools,
            "tool_choice": "auto", "truncation": self.truncation, "parallel_tool_calls": true,
            "text": {"format": self.text_format}, "top_p": go_float(self.top_p), "presence_penalty": 0,
            "frequency_penalty": 0, "top_logprobs": 0, "temperature": go_float(self.temperature), "reasoning": reasoning,
            "usage": usage, "max_output_tokens": self.max_output_tokens, "max_tool_calls": null, "store": false,
            "background": self.background, "service_tier": "default", "metadata": {}, "safety_identifier": null,
            "prompt_cache_key": null
        })
    }
}

/// The non-streamed output (`ToResponse`): the reasoning, then the calls or the message.
pub(crate) fn output(ids: &Ids, thinking: &str, text: &str, calls: &[ToolCall]) -> Vec<Value> {
    let mut out = Vec::new();
    if !thinking.is_empty() {
        out.push(json!({"id": format!("rs_{}", ids.response), "type": "reasoning",
            "summary": [{"type": "summary_text", "text": thinking}], "encrypted_content": thinking}));
    }
    if calls.is_empty() {
        out.push(message_item(&ids.item, "completed", text));
    }
    for (i, c) in calls.iter().enumerate() {
        out.push(json!({"id": format!("fc_{}_{i}", ids.response), "type": "function_call", "status": "completed",
            "call_id": c.id, "name": c.name, "arguments": arguments(c)}));
    }
    out
}

impl Stream {
    pub(crate) fn new(ids: Ids, model: String, echo: Echo) -> Self {
        Stream { ids, model, echo, state: RefCell::new(State::default()) }
    }

    fn event(out: &mut BytesMut, st: &mut State, name: &str, data: Value) {
        let Value::Object(mut m) = data else { return };
        m.insert("type".into(), Value::from(name));
        m.insert("sequence_number".into(), Value::from(st.sequence));
        st.sequence += 1;
        out.put_slice(b"event: ");
        out.put_slice(name.as_bytes());
        out.put_slice(b"\ndata: ");
        out.put_slice(&to_go_json(&sorted(Value::Object(m))));
        out.put_slice(b"\n\n");
    }

    fn start(&self, out: &mut BytesMut, st: &mut State, created: u64) {
        if std::mem::replace(&mut st.started, true) {
            return;
        }
        for name in ["response.created", "response.in_progress"] {
            let r = self.echo.response(&self.ids, &self.model, created, "in_progress", Vec::new(), Value::Null, None);
            Self::event(out, st, name, json!({"response": r}));
        }
    }

    fn finish_reasoning(&self, out: &mut BytesMut, st: &mut State) {
        if !std::mem::take(&mut st.reasoning_started) {
            return;
        }
        let text = std::mem::take(&mut st.reasoning);
        let index = st.output_index;
        let item = json!({"id": self.ids.reasoning, "type": "reasoning",
            "summary": [{"type": "summary_text", "text": text}], "encrypted_content": text});
        st.completed.push(item.clone());
        st.output_index += 1;
        let done = json!({"item_id": self.ids.reasoning, "output_index": index, "summary_index": 0, "text": text});
        Self::event(out, st, "response.reasoning_summary_text.done", done);
        Self::event(out, st, "response.output_item.done", json!({"output_index": index, "item": item}));
    }

    /// A token of reasoning.
    pub(crate) fn thinking(&self, out: &mut BytesMut, piece: &str, created: u64) {
        let st = &mut *self.state.borrow_mut();
        self.start(out, st, created);
        if !std::mem::replace(&mut st.reasoning_started, true) {
            let item = json!({"id": self.ids.reasoning, "type": "reasoning", "summary": []});
            Self::event(out, st, "response.output_item.added", json!({"output_index": st.output_index, "item": item}));
        }
        st.reasoning.push_str(piece);
        let delta =
            json!({"item_id": self.ids.reasoning, "output_index": st.output_index, "summary_index": 0, "delta": piece});
        Self::event(out, st, "response.reasoning_summary_text.delta", delta);
    }

    /// A token of the answer (none are sent once a call was).
    pub(crate) fn text(&self, out: &mut BytesMut, piece: &str, created: u64) {
        let st = &mut *self.state.borrow_mut();
        self.start(out, st, created);
        if st.tool_calls_sent {
            return;
        }
        self.finish_reasoning(out, st);
        let (id, index) = (self.ids.item.as_str(), st.output_index);
        if !std::mem::replace(&mut st.content_started, true) {
            let item =
                json!({"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []});
            Self::event(out, st, "response.output_item.added", json!({"output_index": index, "item": item}));
            let part = json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
            let added = json!({"item_id": id, "output_index": index, "content_index": 0, "part": part});
            Self::event(out, st, "response.content_part.added", added);
        }
        st.text.push_str(piece);
        let delta = json!({"item_id": id, "output_index": index, "content_index": 0, "delta": piece, "logprobs": []});
        Self::event(out, st, "response.output_text.delta", delta);
    }

    /// Tool calls: an item each, its arguments in one delta.
    pub(crate) fn tool_calls(&self, out: &mut BytesMut, calls: &[ToolCall], created: u64) {
        let st = &mut *self.state.borrow_mut();
        self.start(out, st, created);
        self.finish_reasoning(out, st);
        for (i, c) in calls.iter().enumerate() {
            let index = st.output_index + i as u64;
            let id = format!("{}_{i}", self.ids.call_base);
            let args = arguments(c);
            let item = |status: &str, a: &str| json!({"id": id, "type": "function_call", "status": status, "call_id": c.id, "name": c.name, "arguments": a});
            st.completed.push(item("completed", &args));
            Self::event(
                out,
                st,
                "response.output_item.added",
                json!({"output_index": index, "item": item("in_progress", "")}),
            );
            let delta = json!({"item_id": id, "output_index": index, "delta": args});
            Self::event(out, st, "response.function_call_arguments.delta", delta);
            let done = json!({"item_id": id, "output_index": index, "arguments": args});
            Self::event(out, st, "response.function_call_arguments.done", done);
            Self::event(
                out,
                st,
                "response.output_item.done",
                json!({"output_index": index, "item": item("completed", &args)}),
            );
        }
        st.output_index += calls.len() as u64;
        st.tool_calls_sent |= !calls.is_empty();
    }

    /// The end: the open items closed, then `response.completed` with the whole response.
    pub(crate) fn finish(&self, out: &mut BytesMut, _reason: DoneReason, input: u64, output: u64, created: u64) {
        let st = &mut *self.state.borrow_mut();
        self.start(out, st, created);
        self.finish_reasoning(out, st);
        let (id, index, text) = (self.ids.item.clone(), st.output_index, st.text.clone());
        if !st.tool_calls_sent && st.content_started {
            let done = json!({"item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []});
            Self::event(out, st, "response.output_text.done", done);
            let part = json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
            let done = json!({"item_id": id, "output_index": index, "content_index": 0, "part": part});
            Self::event(out, st, "response.content_part.done", done);
            let item = message_item(&id, "completed", &text);
            Self::event(out, st, "response.output_item.done", json!({"output_index": index, "item": item}));
        }
        let mut all = st.completed.clone();
        if st.content_started {
            all.push(message_item(&id, "completed", &text));
        }
        let nothing = all.is_empty();
        let mut r =
            self.echo.response(&self.ids, &self.model, created, "completed", all, usage(input, output), Some(created));
        if nothing {
            // `buildFinalOutput`'s nil slice (a load with nothing to generate).
            r["output"] = Value::Null;
        }
        Self::event(out, st, "response.completed", json!({"response": r}));
    }
}

/// A request's tool as the response echoes it (`ResponsesTool`: type, name, description,
/// strict, parameters; its parameters a Go map, so sorted).
pub(crate) fn tool_echo(t: &Map<String, Value>) -> Value {
    let get = |k: &str| t.get(k).cloned().unwrap_or(Value::Null);
    json!({"type": get("type"), "name": get("name"), "description": get("description"),
        "strict": get("strict"), "parameters": sorted(get("parameters"))})
}
