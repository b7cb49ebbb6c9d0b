//! Ollama's native generation API: `/api/generate` and `/api/chat`, which share their fields
//! and their loads. Validation order, status codes and texts follow `server/routes.go`.

use super::history::ChatMessage;
use super::http::{AppState, BodyErrors, json_body, json_response};
use super::peer::Peer;
use super::pipeline::{
    self, ChatInput, Generation, Started, begin_trace, chat_model, load_only, output_format, resolve, traced,
};
use crate::clock::rfc3339;
use crate::error::ApiError;
use crate::keepalive::KeepAlive;
use crate::request::{Fields, Options, Think};
use crate::store::Installed;
use crate::trace::{Outcome, TraceGuard};
use crate::wire::{ChatFinal, GenerateFinal, Message, Wire};
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use serde_json::{Map, Value};
use std::time::Instant;

/// Fields shared by generate and chat.
struct ChatGenerateFields {
    stream: bool,
    keep_alive: Option<KeepAlive>,
    think: Option<Think>,
    shift: bool,
    truncate: bool,
    options_map: Option<Map<String, Value>>,
    format: Option<Value>,
    /// `logprobs` asked for, with `top_logprobs` alternatives per token.
    logprobs: Option<usize>,
}

fn chat_generate_fields(f: &Fields<'_>) -> Result<ChatGenerateFields, ApiError> {
    let stream = f.bool("stream")?.unwrap_or(true);
    let keep_alive = f.keep_alive()?;
    let think = f.think()?;
    let shift = f.bool("shift")?.unwrap_or(true);
    let truncate = f.bool("truncate")?.unwrap_or(true);
    let logprobs = f.bool("logprobs")?.unwrap_or(false);
    // Checked whether or not logprobs are asked for, before the model is looked up
    // (server/routes.go v0.33.0-rc2 256-259, 2452-2455).
    let top = f.int("top_logprobs")?.unwrap_or(0);
    if !(0..=20).contains(&top) {
        return Err(ApiError::bad_request("top_logprobs must be between 0 and 20"));
    }
    let options_map = f.object("options", "map[string]interface {}")?.cloned();
    let format = f.map.get("format").filter(|v| !v.is_null()).cloned();
    let logprobs = logprobs.then_some(top as usize);
    Ok(ChatGenerateFields { stream, keep_alive, think, shift, truncate, options_map, format, logprobs })
}

/// Binding, as Go's `encoding/json` does it: a field of the wrong type does not stop the
/// decoder, which goes on and reports the earliest such error in the body's order, unless a
/// type with an `UnmarshalJSON` of its own fails first: that error ends the decoding where it
/// stands (`keep_alive`'s `Duration`, `think`'s `ThinkValue`, each of `messages`' `Message`:
/// api/types.go; on Ollama 0.33 `{"stream":"yes","keep_alive":true}` answers `Unsupported type:
/// 'bool'`, and a message's wrong role before a bad `keep_alive` names the role). The handlers
/// read the fields in an order of their own (and act between them), so the types of the fields
/// they read are checked here first, in the body's order, each with the error its handler gives.
fn bound_in_order(f: &Fields<'_>, endpoint: &str) -> Result<(), ApiError> {
    let chat = endpoint == "/api/chat";
    f.bound(
        |f, key| match key {
            "model" => f.string(key).map(|_| ()),
            "stream" | "shift" | "truncate" | "logprobs" => f.bool(key).map(|_| ()),
            "keep_alive" => f.keep_alive().map(|_| ()),
            "think" => f.think().map(|_| ()),
            "top_logprobs" => f.int(key).map(|_| ()),
            "options" => f.object(key, "map[string]interface {}").map(|_| ()),
            "messages" if chat => messages_bound(f),
            // Their error, and whether it ends the decoding, where they stand (an earlier
            // occurrence of a key inside them, in its place).
            "tools" if chat => f.tools_bound("ChatRequest").0,
            "prompt" | "suffix" | "system" | "template" if !chat => f.string(key).map(|_| ()),
            "raw" if !chat => f.bool(key).map(|_| ()),
            "context" if !chat => f.int_array(key).map(|_| ()),
            "images" if !chat => f.images(key),
            _ => Ok(()),
        },
        |f, key| {
            matches!(key, "keep_alive" | "think")
                || (key == "messages" && f.map.get(key).is_some_and(Value::is_array))
                || (key == "tools" && chat && f.tools_bound("ChatRequest").1)
        },
    )
}

/// A generate or chat request as far as the two read it alike: its body, its model's name,
/// the fields they share, when it arrived, and its trace, begun.
struct Begun {
    map: Map<String, Value>,
    model: String,
    c: ChatGenerateFields,
    arrival: Instant,
    trace: Option<TraceGuard>,
}

/// Reads a generate or chat request's body and shared fields and begins its trace. Chat
/// refuses an empty model here, before the trace, as the real ChatHandler does right after
/// binding (server/routes.go v0.33.0-rc2 2457-2461); generate's model is checked where it is
/// resolved.
fn begin(
    s: &AppState,
    peer: Peer,
    body: Result<Bytes, BytesRejection>,
    go_type: &'static str,
    endpoint: &'static str,
) -> Result<Begun, ApiError> {
    let arrival = peer.arrival();
    let body = json_body(s, body, go_type, BodyErrors::Native)?;
    let f = Fields::of(&body, go_type);
    bound_in_order(&f, endpoint)?;
    let model = f.string("model")?.unwrap_or_default();
    let c = chat_generate_fields(&f)?;
    // The chat handler trims the name first (a blank one is missing); generate does not.
    if endpoint == "/api/chat" {
        super::pipeline::chat_model_named(&model)?;
    }
    let trace = Some(begin_trace(s, arrival, endpoint, &model, peer, c.stream, c.options_map.as_ref()));
    Ok(Begun { map: body.map, model, c, arrival, trace })
}

fn now_stamp(s: &AppState) -> String {
    rfc3339(s.shared.clock.now())
}

#[derive(Serialize)]
struct GenerateLoad<'a> {
    model: &'a str,
    created_at: String,
    response: &'a str,
    done: bool,
    done_reason: &'a str,
}

/// Which endpoint a request with nothing to generate came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Empty {
    Generate,
    Chat,
}

/// A request with nothing to generate (no prompt, no messages) and `keep_alive` 0 unloads its
/// model at once, before its options are read (server/routes.go v0.33.0-rc2 `GenerateHandler`
/// and `ChatHandler`).
fn unload(s: &AppState, model: &Installed, trace: &mut Option<TraceGuard>) {
    s.instance.unload(&model.runner_key());
    if let Some(mut t) = trace.take() {
        t.finish(Outcome::Done, 200, None);
    }
}

/// A request with nothing to generate loads its model, through the scheduler.
async fn load(
    s: &AppState,
    model: &Installed,
    options: &Options,
    c: &ChatGenerateFields,
    trace: &mut Option<TraceGuard>,
) -> Result<(), ApiError> {
    let mut t = trace.take().unwrap_or_else(|| unreachable!("the trace is taken once"));
    load_only(s, model, options, c.shift, c.keep_alive, &mut t).await
}

/// The answer of a request with nothing to generate, once its model is loaded or unloaded:
/// `/api/generate`'s with an empty `response`, `/api/chat`'s with an empty assistant message.
fn nothing_generated(s: &AppState, model: &str, endpoint: Empty, done_reason: &str) -> Response {
    let created_at = now_stamp(s);
    match endpoint {
        Empty::Generate => {
            json_response(StatusCode::OK, &GenerateLoad { model, created_at, response: "", done: true, done_reason })
        }
        Empty::Chat => {
            let message = Message { role: "assistant", content: "", thinking: "", tool_calls: Vec::new() };
            json_response(StatusCode::OK, &ChatLoad { model, created_at, message, done: true, done_reason })
        }
    }
}

/// `POST /api/generate`.
pub(crate) async fn generate(
    State(s): State<AppState>,
    peer: Peer,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let mut b = begin(&s, peer, body, "GenerateRequest", "/api/generate")?;
    let f = Fields::new(&b.map, "GenerateRequest");
    let r = generate_inner(&s, &f, b.model, b.c, b.arrival, &mut b.trace).await;
    traced(&mut b.trace, r)
}

async fn generate_inner(
    s: &AppState,
    f: &Fields<'_>,
    model_s: String,
    c: ChatGenerateFields,
    arrival: Instant,
    trace: &mut Option<TraceGuard>,
) -> Result<Response, ApiError> {
    let prompt = f.string("prompt")?.unwrap_or_default();
    let suffix = f.string("suffix")?.unwrap_or_default();
    let system = f.string("system")?;
    let template = f.string("template")?;
    // A context sent back (ids a generate answer gave: `crate::contexts`).
    let context_in: Vec<u32> = f.int_array("context")?.unwrap_or_default().into_iter().map(|id| id as u32).collect();
    let raw = f.bool("raw")?.unwrap_or(false);
    // Checked as Go decodes them when the body was bound (`begin`): counted here.
    let images = f.array("images", "[]api.ImageData")?.map_or(0, Vec::len);
    let model = resolve(s, &model_s)?;
    if raw && (template.is_some() || system.is_some() || !context_in.is_empty()) {
        return Err(ApiError::bad_request("raw mode does not support template, system, or context"));
    }
    let spec = &model.spec;
    if !spec.has("completion") {
        return Err(ApiError::bad_request(format!("\"{model_s}\" does not support generate")));
    }
    if c.think.is_some_and(Think::is_on) && !spec.has("thinking") {
        return Err(ApiError::bad_request(format!("\"{model_s}\" does not support thinking")));
    }
    let think = Think::resolve(c.think, spec.has("thinking"));
    if !suffix.is_empty() && !spec.has("insert") {
        return Err(ApiError::bad_request(format!("{} does not support insert", model.name.full())));
    }
    if prompt.is_empty() && c.keep_alive.is_some_and(|k| k.is_zero()) {
        unload(s, &model, trace);
        return Ok(nothing_generated(s, &model_s, Empty::Generate, "unload"));
    }
    let options = Options::from_map(c.options_map.as_ref())?;
    if prompt.is_empty() {
        load(s, &model, &options, &c, trace).await?;
        return Ok(nothing_generated(s, &model_s, Empty::Generate, "load"));
    }
    // The runner checks the format when inference starts (llm/llama_server.go v0.33.0-rc2
    // 1583-1596): a load with no prompt never sees it, and a streamed answer carries its error.
    let format = output_format(c.format.as_ref()).map_err(|e| e.from_runner().in_stream(c.stream))?;
    let own = match (&system, raw) {
        (Some(sys), false) => format!("{sys}\n{prompt}{suffix}"),
        _ => format!("{prompt}{suffix}"),
    };
    // The context's text before the prompt, its ids first in the next one, and the request a
    // turn of the conversation that answered it.
    let recalled = (!context_in.is_empty()).then(|| s.shared.contexts.recall(&context_in)).flatten();
    // The remembered text holds the earlier prompts' own words; their templates' tokens (in the
    // ids, counted by the real server, not in the text) count again as filler after it, where
    // the slot's prompt cache has matched all it holds.
    let rendered = match &recalled {
        Some(r) => {
            format!("{}{}{own}", r.text, crate::contexts::filler(model.spec.profile.template_tokens as usize))
        }
        None => format!("{}{own}", crate::contexts::filler(context_in.len())),
    };
    let prompt_tokens = crate::generation::prompt_tokens(&model, &rendered, !raw, images);
    let context_ids: Option<Vec<u32>> = (!raw).then(|| {
        let own_tokens = prompt_tokens.saturating_sub(context_in.len() as u32);
        context_in.iter().copied().chain(crate::tokens::token_ids(&own, own_tokens, 32_000)).collect()
    });
    let key = crate::contexts::key(&rendered);
    if let (Some(t), false) = (trace.as_ref(), raw) {
        let parent = recalled.as_ref().map(|r| r.key.clone());
        t.with(|r| r.conversation = Some(crate::trace::Conversation { key: key.clone(), parent }));
    }
    let note = context_ids.as_ref().map(|_| crate::contexts::Note {
        contexts: s.shared.contexts.clone(),
        prompt: rendered.clone(),
        key,
    });
    let runner = pipeline::runner_options(s, &model, &options, c.shift);
    let g = Generation {
        endpoint: "/api/generate",
        model,
        rendered: &rendered,
        templated: !raw,
        images,
        options: &options,
        runner,
        keep_alive: c.keep_alive,
        default_temperature: 0.8,
        format,
        tools: &[],
        last_role: None,
        reply_prefix: "",
        think,
        truncate: c.truncate,
        arrival,
        logprobs: c.logprobs,
    };
    let Started { run, fault, .. } = pipeline::start(s, g, trace).await.map_err(|e| e.in_stream(c.stream))?;
    let wire = Wire::Generate { model: model_s.clone(), context: context_ids.clone(), note: note.clone() };
    Ok(pipeline::respond(run, wire, c.stream, fault, move |run, text, now| {
        let metrics = run.metrics(now);
        let ctx: Option<Vec<u32>> = context_ids.map(|mut c| {
            c.extend(run.output_ids());
            c
        });
        if let (Some(n), Some(c)) = (&note, &ctx) {
            n.remember(c, &run.emitted_text());
        }
        let created_at = run.created_at(now);
        let thinking = run.thinking_text();
        let logprobs = run.logprobs_so_far();
        let fin = GenerateFinal {
            model: &model_s,
            created_at: &created_at,
            response: &text,
            thinking: &thinking,
            done: true,
            done_reason: run.done_reason().as_str(),
            context: ctx.as_deref(),
            metrics: &metrics,
            logprobs: &logprobs,
        };
        json_response(StatusCode::OK, &fin)
    })
    .await)
}

/// The messages' types, each message's fields in its own order (see `bound_in_order`), with
/// nothing built: [`parse_messages`] reads them once they bound.
fn messages_bound(f: &Fields<'_>) -> Result<(), ApiError> {
    for (i, v) in f.array("messages", "[]api.Message")?.into_iter().flatten().enumerate() {
        // A field that came twice in the message: each occurrence bound in turn (the real
        // server refuses `{"role": 1, "role": "user"}` for the first).
        // Its tool calls decoded whole (`api.ToolCall`): an argument list that is no object
        // ends the message's decoding with its own error, whatever came before in it.
        let calls = |mf: &Fields<'_>| {
            mf.map.get("tool_calls").filter(|v| !v.is_null()).map(|v| {
                crate::gotype::decode_field(v, crate::gotype::NATIVE_TOOL_CALLS, "ChatRequest", "messages.tool_calls")
            })
        };
        f.message(i, message_object(v)?, "ChatRequest.messages").bound(
            |mf, key| match key {
                "role" | "content" | "tool_name" | "tool_call_id" => mf.string(key).map(|_| ()),
                "images" => mf.images(key),
                "tool_calls" => match calls(mf) {
                    None | Some(crate::gotype::Decoded::Fits) => Ok(()),
                    Some(crate::gotype::Decoded::Saved(e) | crate::gotype::Decoded::Ended(e)) => {
                        Err(ApiError::bad_request(e.text()).from_middleware())
                    }
                },
                _ => Ok(()),
            },
            |mf, key| key == "tool_calls" && matches!(calls(mf), Some(crate::gotype::Decoded::Ended(_))),
        )?;
    }
    Ok(())
}

/// A message, or Go's error for an element of `messages` that is no object.
fn message_object(v: &Value) -> Result<&Map<String, Value>, ApiError> {
    match v {
        Value::Object(m) => Ok(m),
        _ => Err(ApiError::bad_request(format!(
            "json: cannot unmarshal {} into Go struct field ChatRequest.messages of type api.Message",
            crate::request::json_kind(v)
        ))),
    }
}

fn parse_messages(f: &Fields<'_>) -> Result<Vec<ChatMessage>, ApiError> {
    let Some(arr) = f.array("messages", "[]api.Message")? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(arr.len());
    for v in arr {
        let mf = Fields::new(message_object(v)?, "ChatRequest.messages");
        let role = mf.string("role")?.unwrap_or_default().to_lowercase();
        let content = mf.string("content")?.unwrap_or_default();
        // Checked as Go decodes them by `messages_bound`: counted here.
        let images = mf.array("images", "[]api.ImageData")?.map_or(0, Vec::len);
        let mut tool_text = String::new();
        if let Some(calls) = mf.array("tool_calls", "[]api.ToolCall")? {
            tool_text = Value::Array(calls.clone()).to_string();
        }
        for key in ["tool_name", "tool_call_id"] {
            if let Some(v) = mf.string(key)? {
                tool_text.push_str(&v);
            }
        }
        out.push(ChatMessage { role, content, images, tool_text });
    }
    Ok(out)
}

#[derive(Serialize)]
struct ChatLoad<'a> {
    model: &'a str,
    created_at: String,
    message: Message<'a>,
    done: bool,
    done_reason: &'a str,
}

/// `POST /api/chat`.
pub(crate) async fn chat(
    State(s): State<AppState>,
    peer: Peer,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let mut b = begin(&s, peer, body, "ChatRequest", "/api/chat")?;
    let f = Fields::new(&b.map, "ChatRequest");
    let r = chat_inner(&s, &f, b.model, b.c, b.arrival, &mut b.trace).await;
    traced(&mut b.trace, r)
}

async fn chat_inner(
    s: &AppState,
    f: &Fields<'_>,
    model_s: String,
    c: ChatGenerateFields,
    arrival: Instant,
    trace: &mut Option<TraceGuard>,
) -> Result<Response, ApiError> {
    let messages = parse_messages(f)?;
    let offered_tools = f.array("tools", "api.Tools")?;
    let offered = offered_tools.map_or(0, Vec::len);
    let tools = crate::tools::parse(offered_tools)?;
    let model = chat_model(s, &model_s, c.think, offered)?;
    if messages.is_empty() && c.keep_alive.is_some_and(|k| k.is_zero()) {
        unload(s, &model, trace);
        return Ok(nothing_generated(s, &model_s, Empty::Chat, "unload"));
    }
    let options = Options::from_map(c.options_map.as_ref())?;
    if messages.is_empty() {
        load(s, &model, &options, &c, trace).await?;
        return Ok(nothing_generated(s, &model_s, Empty::Chat, "load"));
    }
    // As in generate: the runner's check, when inference starts.
    let format = output_format(c.format.as_ref()).map_err(|e| e.from_runner().in_stream(c.stream))?;
    let input = ChatInput {
        think: c.think,
        format,
        shift: c.shift,
        truncate: c.truncate,
        keep_alive: c.keep_alive,
        logprobs: c.logprobs,
        ..ChatInput::new("/api/chat", messages, options, tools, arrival)
    };
    let Started { run, fault, .. } = pipeline::chat(s, input, model, trace).await.map_err(|e| e.in_stream(c.stream))?;
    let wire = Wire::Chat { model: model_s.clone() };
    Ok(pipeline::respond(run, wire, c.stream, fault, move |run, text, now| {
        let metrics = run.metrics(now);
        let created_at = run.created_at(now);
        // Calls are collected only when the request offered tools (writeChatResponse).
        let calls = run.tool_calls_so_far();
        let thinking = run.thinking_text();
        let logprobs = run.logprobs_so_far();
        let fin = ChatFinal {
            model: &model_s,
            created_at: &created_at,
            message: Message {
                role: "assistant",
                content: &text,
                thinking: &thinking,
                tool_calls: crate::wire::native_calls(&calls),
            },
            done: true,
            done_reason: run.done_reason().as_str(),
            logprobs: &logprobs,
            metrics: &metrics,
        };
        json_response(StatusCode::OK, &fin)
    })
    .await)
}
