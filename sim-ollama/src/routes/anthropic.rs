//! `POST /v1/messages`: the Anthropic Messages API, as the real server's middleware serves it
//! (middleware/anthropic.go and anthropic/anthropic.go of v0.33.0-rc2): the request becomes a
//! chat request (`FromMessagesRequest`, 297-414; `convertMessage`, 417-552), goes through the
//! same pipeline as `/api/chat` (scheduling, slots, prompt cache, trace), and its answer is
//! written as Anthropic events or one message object ([`crate::wire::anthropic`]).

use super::history::ChatMessage;
use super::http::{AppState, BodyErrors, encoder_response, json_body};
use super::peer::Peer;
use super::pipeline::{self, ChatInput, Started, begin_trace, traced};
use crate::error::ApiError;
use crate::gotype::{self, Decoded, Go, GoStruct};
use crate::request::{Effort, Fields, Options, Think};
use crate::wire::Wire;
use crate::wire::anthropic::{Stream, Usage, stop_reason};
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::Response;
use serde::Serialize;
use serde_json::{Map, Value, json};

/// The request's nested types (anthropic/anthropic.go v0.33.0-rc2 67-82, 178-205), as the
/// binding decodes them ([`crate::gotype`]).
static TOOLS: Go = Go::Slice("[]anthropic.Tool", &TOOL_TYPE);
static TOOL_TYPE: Go = Go::Struct(&TOOL);
static TOOL: GoStruct = GoStruct {
    name: "Tool",
    type_name: "anthropic.Tool",
    fields: &[
        ("type", Go::String),
        ("name", Go::String),
        ("description", Go::String),
        ("input_schema", Go::Any),
        ("max_uses", Go::Int),
    ],
};
static TOOL_CHOICE: GoStruct = GoStruct {
    name: "ToolChoice",
    type_name: "anthropic.ToolChoice",
    fields: &[("type", Go::String), ("name", Go::String), ("disable_parallel_tool_use", Go::Bool)],
};
static THINKING: GoStruct = GoStruct {
    name: "ThinkingConfig",
    type_name: "anthropic.ThinkingConfig",
    fields: &[("type", Go::String), ("budget_tokens", Go::Int)],
};
static METADATA: GoStruct =
    GoStruct { name: "Metadata", type_name: "anthropic.Metadata", fields: &[("user_id", Go::String)] };
static OUTPUT_CONFIG: GoStruct =
    GoStruct { name: "OutputConfig", type_name: "anthropic.OutputConfig", fields: &[("effort", Go::String)] };
/// The request's fields of these types, by name.
static NESTED: [(&str, Go); 5] = [
    ("tools", TOOLS),
    ("tool_choice", Go::Struct(&TOOL_CHOICE)),
    ("thinking", Go::Struct(&THINKING)),
    ("metadata", Go::Struct(&METADATA)),
    ("output_config", Go::Struct(&OUTPUT_CONFIG)),
];

/// The non-streaming answer (`MessagesResponse`, anthropic/anthropic.go 207-217).
#[derive(Serialize)]
struct MessagesResponse<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    role: &'a str,
    model: &'a str,
    /// `null` when the answer is empty (a nil slice in Go).
    content: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "str::is_empty")]
    stop_reason: &'a str,
    usage: Usage,
}

/// The text of a content field: a string, or the `text` of its text blocks.
fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// `convertMessage`: text blocks join into the content, images count, `tool_use` blocks become
/// the message's tool calls, each `tool_result` a `tool` message (before the user's text),
/// `thinking` blocks are kept out of the prompt.
fn convert(m: &Map<String, Value>, out: &mut Vec<ChatMessage>) -> Result<(), ApiError> {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("").to_lowercase();
    let blocks: Vec<Value> = match m.get("content") {
        Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    };
    let (mut text, mut images, mut calls, mut results) = (String::new(), 0, Vec::new(), Vec::new());
    for b in &blocks {
        match b.get("type").and_then(Value::as_str).unwrap_or("") {
            "text" => text.push_str(b.get("text").and_then(Value::as_str).unwrap_or("")),
            "image" => {
                let source = b.get("source").ok_or_else(|| ApiError::bad_request("invalid image source"))?;
                let kind = source.get("type").and_then(Value::as_str).unwrap_or("");
                if kind != "base64" {
                    return Err(ApiError::bad_request(format!(
                        "invalid image source type: {kind}. Only base64 images are supported."
                    )));
                }
                images += 1;
            }
            "tool_use" => {
                let id = b.get("id").and_then(Value::as_str).unwrap_or("");
                let name = b.get("name").and_then(Value::as_str).unwrap_or("");
                if id.is_empty() {
                    return Err(ApiError::bad_request("tool_use block missing required 'id' field"));
                }
                if name.is_empty() {
                    return Err(ApiError::bad_request("tool_use block missing required 'name' field"));
                }
                calls.push(json!({"id": id, "function": {"name": name, "arguments": b.get("input")}}));
            }
            "tool_result" => results.push(ChatMessage {
                role: "tool".into(),
                content: text_of(b.get("content")),
                images: 0,
                tool_text: b.get("tool_use_id").and_then(Value::as_str).unwrap_or("").to_string(),
            }),
            _ => {}
        }
    }
    let user_results = role == "user" && !results.is_empty();
    if user_results {
        out.append(&mut results);
    }
    if !text.is_empty() || images > 0 || !calls.is_empty() {
        let tool_text = if calls.is_empty() { String::new() } else { Value::Array(calls).to_string() };
        out.push(ChatMessage { role, content: text, images, tool_text });
    }
    out.append(&mut results);
    Ok(())
}

/// `EstimateInputTokens` (anthropic/anthropic.go 1077-1118): characters of the system prompt,
/// the messages (roles, texts, thinking, tool blocks as JSON) and the tools, over 4.
fn estimate_input_tokens(map: &Map<String, Value>) -> u64 {
    let block_len = |b: &Value| -> usize {
        let mut n = b.get("text").and_then(Value::as_str).map_or(0, str::len);
        n += b.get("thinking").and_then(Value::as_str).map_or(0, str::len);
        if matches!(b.get("type").and_then(Value::as_str), Some("tool_use" | "tool_result")) {
            n += b.to_string().len();
        }
        n
    };
    let content_len = |v: Option<&Value>| match v {
        Some(Value::String(s)) => s.len(),
        Some(Value::Array(a)) => a.iter().map(block_len).sum(),
        _ => 0,
    };
    let mut total = content_len(map.get("system"));
    let messages = map.get("messages").and_then(Value::as_array);
    for m in messages.into_iter().flatten() {
        total += m.get("role").and_then(Value::as_str).map_or(0, str::len) + content_len(m.get("content"));
    }
    for t in map.get("tools").and_then(Value::as_array).into_iter().flatten() {
        let s = |k: &str| t.get(k).and_then(Value::as_str).map_or(0, str::len);
        total += s("name") + s("description") + t.get("input_schema").map_or(0, |v| v.to_string().len());
    }
    let tokens = (total / 4) as u64;
    if tokens == 0 && (messages.is_some_and(|m| !m.is_empty()) || map.contains_key("system")) { 1 } else { tokens }
}

/// Binds a `MessagesRequest` as the middleware's `ShouldBindJSON` does (anthropic/anthropic.go
/// v0.33.0-rc2 67-82), in the body's order: Go's decoder goes on past a field of the wrong type
/// and names the earliest, but each message decodes itself (`MessageParam.UnmarshalJSON`,
/// 94-111), and a message that fails ends the decoding there: its role not a string, its
/// content not a string, null or a list of blocks, or missing (Go's "unexpected end of JSON
/// input").
fn bind(f: &Fields<'_>) -> Result<(), ApiError> {
    let field = |key: &str, go: &str, v: &Value| f.type_error(key, v, go);
    f.bound(
        |f, key| match key {
            "model" => f.string(key).map(drop),
            "max_tokens" | "top_k" => f.int(key).map(drop),
            "stream" => f.bool(key).map(drop),
            "temperature" | "top_p" => f.float(key).map(drop),
            "stop_sequences" => match f.array(key, "[]string")?.into_iter().flatten().find(|v| !v.is_string()) {
                Some(v) => Err(field("stop_sequences", "string", v)),
                None => Ok(()),
            },
            "messages" => f
                .array(key, "[]anthropic.MessageParam")?
                .into_iter()
                .flatten()
                .try_for_each(|m| message_bound(m, &field)),
            _ => match (NESTED.iter().find(|(name, _)| *name == key), f.map.get(key)) {
                (Some((name, ty)), Some(v)) => match gotype::decode_field(v, *ty, "MessagesRequest", name) {
                    Decoded::Saved(e) | Decoded::Ended(e) => Err(ApiError::bad_request(e.text())),
                    Decoded::Fits => Ok(()),
                },
                _ => Ok(()),
            },
        },
        // Each message decodes itself: its failure ends the decoding.
        |f, key| key == "messages" && f.map.get(key).is_some_and(Value::is_array),
    )
}

/// One message as `MessageParam.UnmarshalJSON` decodes it.
fn message_bound(m: &Value, field: &impl Fn(&str, &str, &Value) -> ApiError) -> Result<(), ApiError> {
    let Value::Object(m) = m else { return Ok(()) };
    if let Some(role) = m.get("role").filter(|r| !r.is_string() && !r.is_null()) {
        return Err(field("messages.role", "string", role));
    }
    match m.get("content") {
        None => Err(ApiError::bad_request("unexpected end of JSON input")),
        Some(Value::Null | Value::String(_)) => Ok(()),
        // The blocks, field by field (`ContentBlock`), every error naming the request's struct.
        Some(blocks @ Value::Array(_)) => {
            match gotype::decode_field(blocks, gotype::ANTHROPIC_CONTENT_BLOCKS, "MessagesRequest", "messages") {
                Decoded::Saved(e) | Decoded::Ended(e) => Err(ApiError::bad_request(e.text())),
                Decoded::Fits => Ok(()),
            }
        }
        Some(other) => Err(field("messages", "[]anthropic.ContentBlock", other)),
    }
}

/// The chat request's tools from the request's (`FromMessagesRequest` 351-373, `convertTool`
/// 616-653): a built-in `web_search_*` tool as a function of that name (a declared tool of the
/// same name then left out), every other tool a function whose `input_schema` must decode into
/// `api.ToolFunctionParameters` (in the body's order: it is kept raw until then).
fn chat_tools(tools: &[Value]) -> Result<Vec<Value>, ApiError> {
    let kind = |t: &Map<String, Value>| gotype::string_field(t, "type");
    let objects: Vec<&Map<String, Value>> = tools.iter().filter_map(Value::as_object).collect();
    let builtin = objects.iter().any(|t| kind(t).starts_with("web_search"));
    let mut out = Vec::new();
    for t in objects {
        let name = gotype::string_field(t, "name");
        if kind(t).starts_with("web_search") {
            out.push(json!({"type": "function", "function": {"name": "web_search",
                "description": "Search the web for current information. Use this to find up-to-date information about any topic.",
                "parameters": {"type": "object", "required": ["query"], "properties": {"query": {"type": "string",
                    "description": "The search query to look up on the web"}}}}}));
            continue;
        }
        if builtin && name == "web_search" {
            continue;
        }
        let schema = gotype::field(t, "input_schema");
        if let Some(s) = schema {
            gotype::check(s, Go::Struct(&gotype::TOOL_FUNCTION_PARAMETERS)).map_err(|e| {
                ApiError::bad_request(format!(
                    "invalid input_schema for tool {}: {}",
                    crate::gojson::go_quote(&name),
                    e.text()
                ))
            })?;
        }
        out.push(json!({"type": "function", "function": {"name": name,
            "description": gotype::field(t, "description"), "parameters": schema.filter(|s| s.is_object())}}));
    }
    Ok(out)
}

/// `POST /v1/messages`.
pub(crate) async fn messages(
    State(s): State<AppState>,
    peer: Peer,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let arrival = peer.arrival();
    // The middleware's own checks (middleware/anthropic.go 736-760), answered by gin itself.
    let mw = ApiError::anthropic_middleware;
    let body = json_body(&s, body, "MessagesRequest", BodyErrors::AnthropicMiddleware)?;
    let (map, f) = (&body.map, Fields::of(&body, "MessagesRequest"));
    bind(&f).map_err(mw)?;
    let model_s = f.string("model").map_err(mw)?.unwrap_or_default();
    let stream = f.bool("stream").map_err(mw)?.unwrap_or(false);
    let max_tokens = f.int("max_tokens").map_err(mw)?.unwrap_or(0);
    let mut trace = None;
    let r = async {
        if model_s.is_empty() {
            return Err(mw(ApiError::bad_request("model is required")));
        }
        if max_tokens <= 0 {
            return Err(mw(ApiError::bad_request("max_tokens is required and must be positive")));
        }
        let msgs = match f.array("messages", "[]anthropic.MessageParam").map_err(mw)? {
            Some(m) if !m.is_empty() => m,
            _ => return Err(mw(ApiError::bad_request("messages is required"))),
        };
        let mut messages = Vec::new();
        let system = text_of(map.get("system"));
        if !system.is_empty() {
            messages.push(ChatMessage { role: "system".into(), content: system, images: 0, tool_text: String::new() });
        }
        for m in msgs {
            let Value::Object(m) = m else {
                return Err(mw(ApiError::bad_request(format!(
                    "json: cannot unmarshal {} into Go struct field MessagesRequest.messages of type anthropic.MessageParam",
                    crate::request::json_kind(m)
                ))));
            };
            convert(m, &mut messages).map_err(mw)?;
        }
        // The tools, converted by the middleware (its errors before any of the chat handler's).
        let tools = chat_tools(f.array("tools", "[]anthropic.Tool")?.map_or(&[][..], Vec::as_slice)).map_err(mw)?;
        // Sampling: max_tokens is num_predict; the chat handler's defaults otherwise.
        let mut o = Map::new();
        o.insert("num_predict".into(), Value::from(max_tokens));
        for (from, to) in [("temperature", "temperature"), ("top_p", "top_p"), ("top_k", "top_k"), ("stop_sequences", "stop")] {
            if let Some(v) = map.get(from).filter(|v| !v.is_null()) {
                o.insert(to.into(), v.clone());
            }
        }
        let options = Options::from_map(Some(&o))?;
        let offered = tools.len();
        let tools = crate::tools::parse(Some(&tools))?;
        // `thinking` enabled / disabled, else `output_config.effort`.
        let effort = map
            .get("output_config")
            .and_then(|c| c.get("effort"))
            .and_then(Value::as_str)
            .map(|e| e.trim().to_lowercase());
        let think = match map.get("thinking").and_then(|t| t.get("type")).and_then(Value::as_str) {
            Some("enabled") => Some(Think::On(Effort::Default)),
            Some("disabled") => Some(Think::Off),
            _ => match effort.as_deref() {
                Some("low") => Some(Think::On(Effort::Low)),
                Some("medium") => Some(Think::On(Effort::Medium)),
                Some("high" | "xhigh" | "max") => Some(Think::On(Effort::High)),
                _ => None,
            },
        };
        pipeline::chat_model_named(&model_s)?;
        trace = Some(begin_trace(&s, arrival, "/v1/messages", &model_s, peer, stream, Some(&o)));
        // No thinking check: the Anthropic route relaxes thinking on a model that cannot think,
        // where the chat handler would refuse it (`relax_thinking`, server/routes.go 2622-2630).
        let model = pipeline::chat_model(&s, &model_s, None, offered)?;
        let think = if model.spec.has("thinking") { think } else { Some(Think::Off) };
        let input = ChatInput { think, ..ChatInput::new("/v1/messages", messages, options, tools, arrival) };
        let Started { run, fault, seed } = pipeline::chat(&s, input, model, &mut trace).await?;
        // The real id is `msg_` and 24 random hex digits.
        let id = format!("msg_{seed:016x}{:08x}", crate::seed::mix(seed) >> 32);
        let wire = Wire::Anthropic(Stream {
            id: id.clone(),
            model: model_s.clone(),
            input_estimate: estimate_input_tokens(&map),
            blocks: Default::default(),
        });
        Ok(pipeline::respond(run, wire, stream, fault, move |run, text, now| {
            let m = run.metrics(now);
            let calls = run.tool_calls_so_far();
            let thinking = run.thinking_text();
            let mut content = Vec::new();
            if !thinking.is_empty() {
                content.push(json!({"type": "thinking", "thinking": thinking}));
            }
            if !text.is_empty() {
                content.push(json!({"type": "text", "text": text}));
            }
            for c in &calls {
                content.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}));
            }
            let r = MessagesResponse {
                id: &id,
                kind: "message",
                role: "assistant",
                model: &model_s,
                content: (!content.is_empty()).then_some(content),
                stop_reason: stop_reason(run.done_reason(), !calls.is_empty()),
                usage: Usage { input_tokens: m.prompt_eval_count, output_tokens: m.eval_count },
            };
            encoder_response(&r)
        })
        .await)
    }
    .await;
    traced(&mut trace, r).or_else(|e| super::http::streamed_error(e.anthropic(), stream))
}
