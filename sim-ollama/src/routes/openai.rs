//! The OpenAI-compatible layer: `/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`,
//! `/v1/models`, `/v1/models/{model}`. As in the real server, requests are converted to native
//! ones (`stream` defaults to false, `temperature` and `top_p` to 1.0, `max_tokens` becomes
//! `num_predict`) and errors are wrapped in OpenAI's error object.

use super::bound::{chat_completion_bound_in_order, completion_bound_in_order, embed_bound_in_order};
use super::embed;
use super::history::ChatMessage;
use super::http::{AppState, BodyErrors, bytes_response, json_body};
use super::peer::Peer;
use super::pipeline::{self, ChatInput, Generation, Started, begin_trace, traced};
use crate::clock::unix_seconds;
use crate::error::ApiError;
use crate::gojson::to_go_json;
use crate::names::Name;
use crate::request::{Fields, Options, Think};
use crate::tokens::OutputFormat;
use crate::wire::{Usage, Wire};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use serde_json::Value;
use std::time::Instant;

/// A `/v1` JSON body: no charset, and a trailing newline (captures 23, 24, 45).
fn v1_json<T: Serialize>(v: &T) -> Response {
    let mut b = to_go_json(v);
    b.push(b'\n');
    bytes_response(StatusCode::OK, "application/json", b)
}

/// Converts OpenAI sampling fields into native options. `strict_stop`: a `stop` list with an
/// entry that is not a string is refused, as `FromCompleteRequest` refuses it (the chat
/// conversion drops such entries).
fn options(f: &Fields<'_>, strict_stop: bool) -> Result<Options, ApiError> {
    // The completion request's sampling fields are float32, the chat request's float64.
    let float = |key: &str| f.float_of(key, if strict_stop { "float32" } else { "float64" });
    let mut o = Options {
        temperature: Some(float("temperature")?.unwrap_or(1.0)),
        top_p: Some(float("top_p")?.unwrap_or(1.0)),
        ..Options::default()
    };
    o.num_predict = f.int("max_tokens")?;
    o.seed = f.int("seed")?;
    let _ = float("frequency_penalty")?;
    let _ = float("presence_penalty")?;
    o.stop = match f.map.get("stop") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => {
            if let Some(v) = a.iter().find(|v| !v.is_string()).filter(|_| strict_stop) {
                let go = go_dynamic_type(v);
                return Err(ApiError::bad_request(format!("invalid type for 'stop' field: {go}")).from_middleware());
            }
            a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()
        }
        // Any other type is dropped, not refused (openai/openai.go v0.33.0-rc2 643-654, 790-803).
        Some(_) => Vec::new(),
    };
    Ok(o)
}

fn response_format(f: &Fields<'_>) -> Result<OutputFormat, ApiError> {
    match f.object("response_format", "openai.ResponseFormat")? {
        Some(rf) => match rf.get("type").and_then(Value::as_str) {
            Some("json_object") => Ok(OutputFormat::Json),
            // `json_schema.schema` becomes the native format (openai/openai.go).
            Some("json_schema") => Ok(match rf.get("json_schema").and_then(|j| j.get("schema")) {
                Some(v @ Value::Object(_)) => OutputFormat::Schema(v.clone()),
                _ => OutputFormat::Json,
            }),
            _ => Ok(OutputFormat::Prose),
        },
        None => Ok(OutputFormat::Prose),
    }
}

/// `stream_options.include_usage`, its key bound as Go binds it: exactly, else ignoring case
/// (the last such key; its type was checked with the request's binding).
fn include_usage(f: &Fields<'_>) -> Result<bool, ApiError> {
    let Some(o) = f.object("stream_options", "openai.StreamOptions")? else { return Ok(false) };
    let value = o
        .get("include_usage")
        .or_else(|| o.iter().filter(|(k, _)| crate::gotype::folds_to(k, "include_usage")).map(|(_, v)| v).last());
    Ok(value.and_then(Value::as_bool).unwrap_or(false))
}

/// Message content: a string, or an array of text and image parts. Anything else (null or
/// absent included) is accepted only from a message with tool calls, as the real
/// `FromChatRequest` does (openai/openai.go v0.33.0-rc2 627-631: "content is only optional if
/// tool calls are present"), and refused with Go's name of its type otherwise.
fn message_content(v: Option<&Value>, tool_calls: bool) -> Result<(String, usize), ApiError> {
    let go_type = match v {
        Some(Value::String(_) | Value::Array(_)) => "",
        other => go_dynamic_type(other.unwrap_or(&Value::Null)),
    };
    if !go_type.is_empty() {
        if tool_calls {
            return Ok((String::new(), 0));
        }
        return Err(ApiError::bad_request(format!("invalid message content type: {go_type}")).from_middleware());
    }
    match v {
        Some(Value::String(s)) => Ok((s.clone(), 0)),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            let mut images = 0;
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => text.push_str(p.get("text").and_then(Value::as_str).unwrap_or("")),
                    // A URL string, or an object with one (openai/openai.go v0.33.0-rc2 579-596).
                    Some("image_url") => {
                        let url = match p.get("image_url") {
                            Some(Value::Object(u)) => u.get("url").and_then(Value::as_str),
                            Some(u) => u.as_str(),
                            None => None,
                        };
                        let url =
                            url.ok_or_else(|| ApiError::bad_request("invalid message format").from_middleware())?;
                        crate::request::decode_image_url(url)?;
                        images += 1;
                    }
                    // Audio, passed to the model as its multimodal data (openai/openai.go
                    // v0.33.0-rc2 597-610).
                    Some("input_audio") => {
                        let bad = |m: String| ApiError::bad_request(m).from_middleware();
                        let Some(audio) = p.get("input_audio").and_then(Value::as_object) else {
                            return Err(bad("invalid input_audio format".into()));
                        };
                        let Some(data) = audio.get("data").and_then(Value::as_str) else {
                            return Err(bad("invalid input_audio format: missing data".into()));
                        };
                        use base64::Engine;
                        if let Err(e) = base64::engine::general_purpose::STANDARD.decode(data) {
                            return Err(bad(format!("invalid input_audio base64 data: {}", go_base64_error(&e))));
                        }
                        images += 1;
                    }
                    _ => return Err(ApiError::bad_request("invalid message format").from_middleware()),
                }
            }
            Ok((text, images))
        }
        _ => unreachable!("the other types are handled above"),
    }
}

/// Go's `%T` of a JSON value decoded into `any` (the middleware's error texts name it).
fn go_dynamic_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// Go's `base64.CorruptInputError` text for a decoding error.
fn go_base64_error(e: &base64::DecodeError) -> String {
    let at = match e {
        base64::DecodeError::InvalidByte(i, _) | base64::DecodeError::InvalidLastSymbol(i, _) => *i,
        base64::DecodeError::InvalidLength(n) => *n,
        base64::DecodeError::InvalidPadding => 0,
    };
    format!("illegal base64 data at input byte {at}")
}

/// Thinking asked for by `reasoning.effort` or `reasoning_effort`, as the real
/// `thinkFromReasoningEffort` maps them (openai/openai.go v0.33.0-rc2 523-546): "none" turns it
/// off, the levels (and "minimal", "xhigh", "ultra", clamped) turn it on, anything else is a 400.
fn think_from_effort(f: &Fields<'_>) -> Result<Option<Think>, ApiError> {
    let effort = match f.object("reasoning", "openai.Reasoning")? {
        Some(r) => r.get("effort").and_then(Value::as_str).unwrap_or("").to_string(),
        None => f.string("reasoning_effort")?.unwrap_or_default(),
    };
    Think::from_effort(&effort).map_err(ApiError::from_middleware)
}

#[derive(Serialize)]
struct Choice<'a> {
    index: u32,
    message: ChoiceMessage<'a>,
    finish_reason: &'a str,
    /// Omitted when none (`openai.Choice`, openai/openai.go v0.33.0-rc2 50-66).
    #[serde(skip_serializing_if = "Option::is_none")]
    logprobs: Option<crate::wire::ChoiceLogprobs<'a>>,
}

#[derive(Serialize)]
struct ChoiceMessage<'a> {
    role: &'a str,
    content: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    reasoning: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<crate::wire::OpenAiToolCall<'a>>,
}

#[derive(Serialize)]
struct ChatCompletion<'a> {
    id: String,
    object: &'a str,
    created: u64,
    model: &'a str,
    system_fingerprint: &'a str,
    choices: [Choice<'a>; 1],
    usage: Usage,
}

/// `POST /v1/chat/completions`.
pub(crate) async fn chat_completions(
    State(s): State<AppState>,
    peer: Peer,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let arrival = peer.arrival();
    let body = json_body(&s, body, "ChatCompletionRequest", BodyErrors::OpenAi)?;
    let f = Fields::of(&body, "ChatCompletionRequest");
    chat_completion_bound_in_order(&f).map_err(ApiError::openai)?;
    let model_s = f.string("model").map_err(ApiError::openai)?.unwrap_or_default();
    let stream = f.bool("stream").map_err(ApiError::openai)?.unwrap_or(false);
    let mut trace = None;
    let r = async {
        // Binding first: a field of the wrong type is named before any check of a value
        // (the middleware's ShouldBindJSON, middleware/openai.go v0.33.0-rc2).
        options(&f, false)?;
        f.object("response_format", "openai.ResponseFormat")?;
        f.object("stream_options", "openai.StreamOptions")?;
        f.object("reasoning", "openai.Reasoning")?;
        f.string("reasoning_effort")?;
        f.bool("logprobs")?;
        f.int("top_logprobs")?;
        f.array("tools", "[]api.Tool")?;
        let msgs = f.array("messages", "[]openai.Message")?;
        let msgs = match msgs {
            Some(m) if !m.is_empty() => m,
            _ => return Err(ApiError::bad_request("[] is too short - 'messages'").from_middleware()),
        };
        let mut messages = Vec::with_capacity(msgs.len());
        for m in msgs {
            let role = m.get("role").and_then(Value::as_str).unwrap_or("").to_lowercase();
            let has_calls = m.get("tool_calls").is_some_and(|c| !c.is_null());
            let (content, images) = message_content(m.get("content"), has_calls)?;
            let mut tool_text = String::new();
            if let Some(calls) = m.get("tool_calls").filter(|c| !c.is_null()) {
                tool_text = calls.to_string();
            }
            if let Some(id) = m.get("tool_call_id").and_then(Value::as_str) {
                tool_text.push_str(id);
            }
            messages.push(ChatMessage { role, content, images, tool_text });
        }
        let think = think_from_effort(&f)?;
        let options = options(&f, false)?;
        let format = response_format(&f)?;
        let usage = include_usage(&f)?;
        // `logprobs` and `top_logprobs` pass to the native handler, which checks the range
        // (openai/openai.go v0.33.0-rc2 121-122, 716-720).
        let logprobs = f.bool("logprobs")?.unwrap_or(false);
        let top = f.int("top_logprobs")?.unwrap_or(0);
        if !(0..=20).contains(&top) {
            return Err(ApiError::bad_request("top_logprobs must be between 0 and 20"));
        }
        let offered_tools = f.array("tools", "[]api.Tool")?;
        let offered = offered_tools.map_or(0, Vec::len);
        let tools = crate::tools::parse(offered_tools)?;
        pipeline::chat_model_named(&model_s)?;
        trace = Some(begin_trace(&s, arrival, "/v1/chat/completions", &model_s, peer, stream, None));
        let model = pipeline::chat_model(&s, &model_s, think, offered)?;
        // The /v1 request has no `truncate`: the chat handler's default (true) applies.
        let input = ChatInput {
            default_temperature: 1.0,
            format,
            think,
            logprobs: logprobs.then_some(top as usize),
            ..ChatInput::new("/v1/chat/completions", messages, options, tools, arrival)
        };
        let Started { run, fault, seed } =
            pipeline::chat(&s, input, model, &mut trace).await.map_err(|e| e.in_stream(stream))?;
        let id = format!("chatcmpl-{}", seed % 999);
        let created = unix_seconds(run.stamp(Instant::now()));
        let wire = Wire::OpenAiChat { id: id.clone(), model: model_s.clone(), created, include_usage: usage };
        Ok(pipeline::respond(run, wire, stream, fault, move |run, text, now| {
            let m = run.metrics(now);
            let calls = run.tool_calls_so_far();
            let reasoning = run.thinking_text();
            let logprobs = run.logprobs_so_far();
            v1_json(&ChatCompletion {
                id,
                object: "chat.completion",
                created: run.created_unix(now),
                model: &model_s,
                system_fingerprint: "fp_ollama",
                choices: [Choice {
                    index: 0,
                    message: ChoiceMessage {
                        role: "assistant",
                        content: &text,
                        reasoning: &reasoning,
                        tool_calls: crate::wire::openai_calls(&calls),
                    },
                    finish_reason: crate::wire::openai_finish(run.done_reason(), !calls.is_empty()),
                    logprobs: (!logprobs.is_empty()).then_some(crate::wire::ChoiceLogprobs { content: &logprobs }),
                }],
                usage: Usage::new(m.prompt_eval_count, m.eval_count),
            })
        })
        .await)
    }
    .await;
    traced(&mut trace, r).map_err(ApiError::openai)
}

#[derive(Serialize)]
struct TextChoice<'a> {
    text: &'a str,
    index: u32,
    finish_reason: &'a str,
}

#[derive(Serialize)]
struct Completion<'a> {
    id: String,
    object: &'a str,
    created: u64,
    model: &'a str,
    system_fingerprint: &'a str,
    choices: [TextChoice<'a>; 1],
    usage: Usage,
}

/// The answer to a `/v1/completions` request with an empty prompt, once the model is loaded.
fn completion_load(s: &AppState, model: &str, stream: bool, include_usage: bool) -> Response {
    let created = unix_seconds(s.shared.clock.now());
    let id = format!("cmpl-{}", s.shared.cfg.seed % 999);
    if stream {
        let mut out = bytes::BytesMut::new();
        crate::wire::completion_end(&mut out, &id, model, created, "load", include_usage, &Usage::new(0, 0));
        return bytes_response(StatusCode::OK, "text/event-stream", out.to_vec());
    }
    v1_json(&Completion {
        id,
        object: "text_completion",
        created,
        model,
        system_fingerprint: "fp_ollama",
        choices: [TextChoice { text: "", index: 0, finish_reason: "load" }],
        usage: Usage::new(0, 0),
    })
}

/// `POST /v1/completions`.
pub(crate) async fn completions(
    State(s): State<AppState>,
    peer: Peer,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let arrival = peer.arrival();
    let body = json_body(&s, body, "CompletionRequest", BodyErrors::OpenAi)?;
    let f = Fields::of(&body, "CompletionRequest");
    completion_bound_in_order(&f).map_err(ApiError::openai)?;
    let model_s = f.string("model").map_err(ApiError::openai)?.unwrap_or_default();
    let stream = f.bool("stream").map_err(ApiError::openai)?.unwrap_or(false);
    let mut trace = None;
    let r = async {
        let prompt = f.string("prompt")?.unwrap_or_default();
        let suffix = f.string("suffix")?.unwrap_or_default();
        let options = options(&f, true)?;
        let usage = include_usage(&f)?;
        // `logprobs: N` asks for N alternatives: the native handler checks the range first
        // (openai/openai.go v0.33.0-rc2 829-844; server/routes.go 256-259).
        if f.int("logprobs")?.is_some_and(|n| n > 20) {
            return Err(ApiError::bad_request("top_logprobs must be between 0 and 20"));
        }
        if model_s.is_empty() {
            return Err(ApiError::model_not_found(""));
        }
        trace = Some(begin_trace(&s, arrival, "/v1/completions", &model_s, peer, stream, None));
        let model = pipeline::resolve(&s, &model_s)?;
        let can_think = model.spec.has("thinking");
        if !model.spec.has("completion") {
            return Err(ApiError::bad_request(format!("\"{model_s}\" does not support generate")));
        }
        // The generate handler's insert check (server/routes.go v0.33.0-rc2), as on /api/generate.
        if !suffix.is_empty() && !model.spec.has("insert") {
            return Err(ApiError::bad_request(format!("{} does not support insert", model.name.full())));
        }
        if prompt.is_empty() {
            // The real middleware turns this into a generate request with an empty prompt: a
            // load (server/routes.go v0.33.0-rc2 477-486), answered as a completion with no
            // text and the finish reason "load" (openai/openai.go ToCompletion).
            let mut t = trace.take().unwrap_or_else(|| unreachable!("the trace is taken once"));
            pipeline::load_only(&s, &model, &options, true, None, &mut t).await?;
            return Ok(completion_load(&s, &model_s, stream, usage));
        }
        let rendered = format!("{prompt}{suffix}");
        let runner = pipeline::runner_options(&s, &model, &options, true);
        let g = Generation {
            endpoint: "/v1/completions",
            model,
            rendered: &rendered,
            templated: true,
            images: 0,
            options: &options,
            runner,
            keep_alive: None,
            default_temperature: 1.0,
            format: OutputFormat::Prose,
            tools: &[],
            last_role: None,
            reply_prefix: "",
            truncate: true,
            think: Think::resolve(None, can_think),
            arrival,
            // Asked for with `logprobs: N`, but `ToCompletion` and `ToCompleteChunk` never put
            // them in the answer (openai/openai.go v0.33.0-rc2 407-447).
            logprobs: None,
        };
        let Started { run, fault, seed } = pipeline::start(&s, g, &mut trace).await.map_err(|e| e.in_stream(stream))?;
        let id = format!("cmpl-{}", seed % 999);
        let wire = Wire::OpenAiCompletion { id: id.clone(), model: model_s.clone(), include_usage: usage };
        Ok(pipeline::respond(run, wire, stream, fault, move |run, text, now| {
            let m = run.metrics(now);
            v1_json(&Completion {
                id,
                object: "text_completion",
                created: run.created_unix(now),
                model: &model_s,
                system_fingerprint: "fp_ollama",
                choices: [TextChoice { text: &text, index: 0, finish_reason: run.done_reason().as_str() }],
                usage: Usage::new(m.prompt_eval_count, m.eval_count),
            })
        })
        .await)
    }
    .await;
    traced(&mut trace, r).map_err(ApiError::openai)
}

#[derive(Serialize)]
struct EmbeddingData {
    object: &'static str,
    embedding: Value,
    index: usize,
}

#[derive(Serialize)]
struct EmbeddingList<'a> {
    object: &'a str,
    data: Vec<EmbeddingData>,
    model: &'a str,
    usage: EmbeddingUsage,
}

#[derive(Serialize)]
struct EmbeddingUsage {
    prompt_tokens: u64,
    total_tokens: u64,
}

/// `POST /v1/embeddings`.
pub(crate) async fn embeddings(
    State(s): State<AppState>,
    peer: Peer,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let arrival = peer.arrival();
    let body = json_body(&s, body, "EmbedRequest", BodyErrors::OpenAi)?;
    let (map, f) = (&body.map, Fields::of(&body, "EmbedRequest"));
    let r = async {
        embed_bound_in_order(&f)?;
        let model_s = f.string("model")?.unwrap_or_default();
        let dimensions = f.int("dimensions")?;
        // The real middleware binds the request, checks the format (middleware/openai.go
        // v0.33.0-rc2 395-424), then that there is an input; the handler checks the model,
        // then the input's type.
        let base64 = match f.string("encoding_format")?.unwrap_or_default() {
            e if e.is_empty() || e.eq_ignore_ascii_case("float") => false,
            e if e.eq_ignore_ascii_case("base64") => true,
            other => {
                return Err(ApiError::bad_request(format!(
                    "Invalid value for 'encoding_format' = {other}. Supported values: ['float', 'base64']."
                ))
                .from_middleware());
            }
        };
        let inputs = match map.get("input") {
            Some(Value::String(s)) if s.is_empty() => vec![String::new()],
            Some(Value::Array(a)) if a.is_empty() => {
                return Err(ApiError::bad_request("invalid input").from_middleware());
            }
            None | Some(Value::Null) => return Err(ApiError::bad_request("invalid input").from_middleware()),
            other => {
                // The handler's model reference check (`model '' not found`, 404; an invalid
                // name, 400: server/routes.go EmbedHandler -> parseAndValidateModelRef) comes
                // before the input's type.
                pipeline::parse_model_name(&model_s)?;
                embed::embed_inputs(other)?
            }
        };
        if inputs.is_empty() {
            return Err(ApiError::bad_request("invalid input").from_middleware());
        }
        if model_s.trim().is_empty() {
            return Err(ApiError::model_not_found(&model_s));
        }
        let model = embed::resolve_embedding_model(&s, &model_s)?;
        let trace = begin_trace(&s, arrival, "/v1/embeddings", &model_s, peer, false, None);
        let key = model.name.key();
        let full = model.spec.embedding_length as usize;
        let dims = dimensions.filter(|d| *d > 0).map_or(full, |d| (d as usize).min(full));
        let (_, _, count) = embed::run_embedding(&s, model, &Options::default(), None, &inputs, arrival, trace).await?;
        let data = inputs
            .iter()
            .enumerate()
            .map(|(index, t)| {
                let mut v = embed::embedding(&key, t, full);
                v.truncate(dims);
                let n = v.iter().map(|x| x * x).sum::<f64>().sqrt().max(f64::MIN_POSITIVE);
                let v: Vec<f32> = v.iter().map(|x| (x / n) as f32).collect();
                let embedding =
                    if base64 { Value::from(base64_f32(&v)) } else { serde_json::to_value(&v).unwrap_or(Value::Null) };
                EmbeddingData { object: "embedding", embedding, index }
            })
            .collect();
        Ok(v1_json(&EmbeddingList {
            object: "list",
            data,
            model: &model_s,
            usage: EmbeddingUsage { prompt_tokens: count, total_tokens: count },
        }))
    }
    .await;
    r.map_err(ApiError::openai)
}

/// The OpenAI `base64` encoding: standard base64 of little-endian float32s.
fn base64_f32(v: &[f32]) -> String {
    use base64::Engine;
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[derive(Serialize)]
struct ModelObject<'a> {
    id: String,
    object: &'a str,
    created: u64,
    owned_by: String,
}

#[derive(Serialize)]
struct ModelList<'a> {
    object: &'a str,
    data: Option<Vec<ModelObject<'a>>>,
}

fn owned_by(name: &Name) -> String {
    name.namespace.clone()
}

/// `GET /v1/models`: `data` is `null` when no model is installed.
pub(crate) async fn models(State(s): State<AppState>) -> Response {
    let list = s.instance.store.list();
    let data: Vec<ModelObject<'_>> = list
        .iter()
        .map(|m| ModelObject {
            id: m.name.display(),
            object: "model",
            created: unix_seconds(m.modified_at),
            owned_by: owned_by(&m.name),
        })
        .collect();
    v1_json(&ModelList { object: "list", data: if data.is_empty() { None } else { Some(data) } })
}

/// `GET /v1/models/{model}`: the id is echoed as requested. An unknown one is named as the
/// show handler behind the middleware names it, its shortest display (`missing:latest`).
pub(crate) async fn model(State(s): State<AppState>, Path(model): Path<String>) -> Result<Response, ApiError> {
    let name = Name::parse(&model).ok_or_else(|| ApiError::invalid_model_name().openai())?;
    let m = s.instance.store.get(&name).ok_or_else(|| ApiError::model_not_found(&name.display()).openai())?;
    Ok(v1_json(&ModelObject {
        id: model,
        object: "model",
        created: unix_seconds(m.modified_at),
        owned_by: owned_by(&m.name),
    }))
}
