//! Ollama's native API: `/`, `/api/version`, `/api/tags`, `/api/ps`, `/api/show`,
//! `/api/generate`, `/api/chat`, `/api/embed`, `/api/embeddings`, `/api/pull`, `/api/copy`,
//! `/api/delete`. Validation order, status codes and texts follow `server/routes.go`.

use super::history::{ChatMessage, conversation, fit_history, render_messages};
use super::peer::Peer;
use super::pipeline::{self, Generation, Started, begin_trace, job, load_only, output_format, resolve, traced};
use super::{AppState, body_bytes, bytes_response, json_response};
use crate::clock::rfc3339;
use crate::config::ModelSpec;
use crate::error::ApiError;
use crate::generation::{Plan, PlanInput, Running};
use crate::keepalive::KeepAlive;
use crate::names::Name;
use crate::request::{Fields, Options, Think, decode_body};
use crate::store::Installed;
use crate::tokens::OutputFormat;
use crate::trace::{Outcome, TraceGuard};
use crate::wire::{ChatFinal, GenerateFinal, Message, Wire};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Instant;

/// `GET /` and `HEAD /`.
pub(crate) async fn root() -> Response {
    bytes_response(StatusCode::OK, "text/plain; charset=utf-8", b"Ollama is running".to_vec())
}

#[derive(Serialize)]
struct Version<'a> {
    version: &'a str,
}

/// `GET /api/version`.
pub(crate) async fn version(State(s): State<AppState>) -> Response {
    json_response(StatusCode::OK, &Version { version: &s.shared.cfg.version })
}

#[derive(Serialize)]
pub(crate) struct Details<'a> {
    parent_model: &'a str,
    format: &'a str,
    family: &'a str,
    families: [&'a str; 1],
    parameter_size: &'a str,
    quantization_level: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_length: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    embedding_length: Option<u64>,
}

fn details(m: &ModelSpec, with_lengths: bool) -> Details<'_> {
    Details {
        parent_model: "",
        format: "gguf",
        family: &m.family,
        families: [&m.family],
        parameter_size: &m.parameter_size,
        quantization_level: &m.quantization_level,
        context_length: with_lengths.then_some(m.context_length),
        embedding_length: with_lengths.then_some(m.embedding_length),
    }
}

#[derive(Serialize)]
struct TagModel<'a> {
    name: String,
    model: String,
    modified_at: String,
    size: u64,
    digest: String,
    details: Details<'a>,
    capabilities: &'a [String],
}

#[derive(Serialize)]
struct Tags<'a> {
    models: Vec<TagModel<'a>>,
}

/// `GET /api/tags`.
pub(crate) async fn tags(State(s): State<AppState>) -> Response {
    let list = s.instance.store.list();
    let models = list
        .iter()
        .map(|m| TagModel {
            name: m.name.display(),
            model: m.name.display(),
            modified_at: rfc3339(m.modified_at),
            size: m.spec.size,
            digest: m.spec.digest(),
            details: details(&m.spec, true),
            capabilities: &m.spec.capabilities,
        })
        .collect();
    json_response(StatusCode::OK, &Tags { models })
}

#[derive(Serialize)]
struct PsModel<'a> {
    name: &'a str,
    model: &'a str,
    size: u64,
    digest: String,
    details: Details<'a>,
    expires_at: String,
    size_vram: u64,
    context_length: u64,
}

#[derive(Serialize)]
struct Ps<'a> {
    models: Vec<PsModel<'a>>,
}

/// `GET /api/ps`.
pub(crate) async fn ps(State(s): State<AppState>) -> Response {
    let mut runners = s.instance.runners();
    runners.sort_by(|a, b| b.expires_at.cmp(&a.expires_at));
    let models = runners
        .iter()
        .map(|r| PsModel {
            name: &r.display,
            model: &r.display,
            size: r.size,
            digest: r.model.digest(),
            details: details(&r.model, false),
            expires_at: rfc3339(r.expires_at),
            size_vram: r.size_vram,
            context_length: r.num_ctx,
        })
        .collect();
    json_response(StatusCode::OK, &Ps { models })
}

#[derive(Serialize)]
struct Show<'a> {
    modelfile: String,
    parameters: String,
    template: &'a str,
    details: Details<'a>,
    model_info: Map<String, Value>,
    tensors: Vec<crate::gguf::Tensor>,
    capabilities: &'a [String],
    modified_at: String,
}

/// `POST /api/show` (`GetModelInfo`, server/routes.go v0.33.0-rc2 1396-1598; what the model
/// file says is in [`crate::gguf`]).
pub(crate) async fn show(State(s): State<AppState>, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let body = body_bytes(body, s.shared.cfg.body_limit)?;
    let map = decode_body(&body, "ShowRequest")?;
    let f = Fields::new(&map, "ShowRequest");
    let model = f.string("model")?.filter(|m| !m.is_empty()).or(f.string("name")?.filter(|m| !m.is_empty()));
    let Some(model) = model else {
        return Err(ApiError::bad_request("model is required"));
    };
    let verbose = f.bool("verbose")?.unwrap_or(false);
    let name = Name::parse(&model).ok_or_else(ApiError::invalid_model_name)?;
    let m = s.instance.store.get(&name).ok_or_else(|| ApiError::model_not_found(&name.display()))?;
    let spec = &m.spec;
    let display = m.name.display();
    let mut modelfile = format!(
        "# Modelfile generated by \"ollama show\"\n# To build a new Modelfile based on this, replace FROM with:\n# FROM {display}\n\nFROM /root/.ollama/models/blobs/sha256-{}\n",
        spec.digest()
    );
    if !spec.template.is_empty() {
        modelfile.push_str(&format!("TEMPLATE {:?}\n", spec.template));
    }
    modelfile.push_str(&crate::gguf::modelfile_parameters(spec));
    let show = Show {
        modelfile,
        parameters: crate::gguf::parameters(spec),
        template: &spec.template,
        details: details(spec, false),
        model_info: crate::gguf::model_info(spec, verbose),
        tensors: crate::gguf::tensors(spec),
        capabilities: &spec.capabilities,
        modified_at: rfc3339(m.modified_at),
    };
    Ok(json_response(StatusCode::OK, &show))
}

/// Fields shared by generate and chat.
struct ChatGenerateFields {
    stream: bool,
    keep_alive: Option<KeepAlive>,
    think: Option<Think>,
    shift: bool,
    truncate: bool,
    options_map: Option<Map<String, Value>>,
    format: Option<Value>,
}

fn chat_generate_fields(f: &Fields<'_>) -> Result<ChatGenerateFields, ApiError> {
    let stream = f.bool("stream")?.unwrap_or(true);
    let keep_alive = f.keep_alive()?;
    let think = f.think()?;
    let shift = f.bool("shift")?.unwrap_or(true);
    let truncate = f.bool("truncate")?.unwrap_or(true);
    let _logprobs = f.bool("logprobs")?;
    if let Some(n) = f.int("top_logprobs")? {
        if !(0..=20).contains(&n) {
            return Err(ApiError::bad_request("top_logprobs must be between 0 and 20"));
        }
    }
    let options_map = f.object("options", "map[string]interface {}")?.cloned();
    let format = f.map.get("format").filter(|v| !v.is_null()).cloned();
    Ok(ChatGenerateFields { stream, keep_alive, think, shift, truncate, options_map, format })
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

/// `POST /api/generate`.
pub(crate) async fn generate(
    State(s): State<AppState>,
    peer: Peer,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let arrival = peer.arrival();
    let body = body_bytes(body, s.shared.cfg.body_limit)?;
    let map = decode_body(&body, "GenerateRequest")?;
    let f = Fields::new(&map, "GenerateRequest");
    let model_s = f.string("model")?.unwrap_or_default();
    let c = chat_generate_fields(&f)?;
    let mut trace = Some(begin_trace(&s, arrival, "/api/generate", &model_s, peer, c.stream, c.options_map.as_ref()));
    let r = generate_inner(&s, &f, model_s, c, arrival, &mut trace).await;
    traced(&mut trace, r)
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
    let context = f.array("context", "[]int")?.map_or(0, Vec::len);
    let raw = f.bool("raw")?.unwrap_or(false);
    let images = f.string_array("images")?.map_or(0, |v| v.len());
    let model = resolve(s, &model_s)?;
    if raw && (template.is_some() || system.is_some() || context > 0) {
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
        s.instance.unload(&model.runner_key());
        if let Some(mut t) = trace.take() {
            t.finish(Outcome::Done, 200, None);
        }
        let body =
            GenerateLoad { model: &model_s, created_at: now_stamp(s), response: "", done: true, done_reason: "unload" };
        return Ok(json_response(StatusCode::OK, &body));
    }
    let options = Options::from_map(c.options_map.as_ref())?;
    let format = output_format(c.format.as_ref())?;
    if prompt.is_empty() {
        let mut t = trace.take().unwrap_or_else(|| unreachable!("the trace is taken once"));
        load_only(s, &model, &options, c.shift, c.keep_alive, &mut t).await?;
        let body =
            GenerateLoad { model: &model_s, created_at: now_stamp(s), response: "", done: true, done_reason: "load" };
        return Ok(json_response(StatusCode::OK, &body));
    }
    let rendered = match (&system, raw) {
        (Some(sys), false) => format!("{sys}\n{prompt}{suffix}"),
        _ => format!("{prompt}{suffix}"),
    };
    let prompt_tokens = crate::generation::prompt_tokens(&model, &rendered, !raw, images);
    let context_ids: Option<Vec<u32>> =
        (!raw).then(|| crate::tokens::token_ids(&rendered, prompt_tokens, 32_000).collect());
    let g = Generation {
        endpoint: "/api/generate",
        model,
        rendered: &rendered,
        templated: !raw,
        images,
        options: &options,
        shift: c.shift,
        keep_alive: c.keep_alive,
        default_temperature: 0.8,
        format,
        tools: &[],
        last_role: None,
        reply_prefix: "",
        think,
        truncate: c.truncate,
        arrival,
    };
    let Started { run, fault, .. } = pipeline::start(s, g, trace).await?;
    let wire = Wire::Generate { model: model_s.clone(), context: context_ids.clone() };
    Ok(pipeline::respond(run, wire, c.stream, fault, move |run, text, now| {
        let metrics = run.metrics(now);
        let ctx: Option<Vec<u32>> = context_ids.map(|mut c| {
            c.extend(run.output_ids());
            c
        });
        let created_at = run.created_at(now);
        let thinking = run.thinking_text();
        let fin = GenerateFinal {
            model: &model_s,
            created_at: &created_at,
            response: &text,
            thinking: &thinking,
            done: true,
            done_reason: run.done_reason().as_str(),
            context: ctx.as_deref(),
            metrics: &metrics,
        };
        json_response(StatusCode::OK, &fin)
    })
    .await)
}

fn parse_messages(f: &Fields<'_>) -> Result<Vec<ChatMessage>, ApiError> {
    let Some(arr) = f.array("messages", "[]api.Message")? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(arr.len());
    for v in arr {
        let Value::Object(m) = v else {
            return Err(ApiError::bad_request(format!(
                "json: cannot unmarshal {} into Go struct field ChatRequest.messages of type api.Message",
                crate::request::json_kind(v)
            )));
        };
        let mf = Fields::new(m, "ChatRequest.messages");
        let role = mf.string("role")?.unwrap_or_default().to_lowercase();
        let content = mf.string("content")?.unwrap_or_default();
        let images = mf.string_array("images")?.map_or(0, |v| v.len());
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
    let arrival = peer.arrival();
    let body = body_bytes(body, s.shared.cfg.body_limit)?;
    let map = decode_body(&body, "ChatRequest")?;
    let f = Fields::new(&map, "ChatRequest");
    let model_s = f.string("model")?.unwrap_or_default();
    let c = chat_generate_fields(&f)?;
    if model_s.is_empty() {
        return Err(ApiError::bad_request("model is required"));
    }
    let mut trace = Some(begin_trace(&s, arrival, "/api/chat", &model_s, peer, c.stream, c.options_map.as_ref()));
    let r = chat_inner(&s, &f, model_s, c, arrival, &mut trace).await;
    traced(&mut trace, r)
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
    let offered_tools = f.array("tools", "[]api.Tool")?;
    let offered = offered_tools.map_or(0, Vec::len);
    let tools = crate::tools::parse(offered_tools)?;
    let model = resolve(s, &model_s)?;
    let spec = &model.spec;
    if !spec.has("completion") {
        return Err(ApiError::bad_request(format!("\"{model_s}\" does not support chat")));
    }
    if c.think.is_some_and(Think::is_on) && !spec.has("thinking") {
        return Err(ApiError::bad_request(format!("\"{model_s}\" does not support thinking")));
    }
    let think = Think::resolve(c.think, spec.has("thinking"));
    if offered > 0 && !spec.has("tools") {
        return Err(ApiError::bad_request(format!("{} does not support tools", model.name.full())));
    }
    let empty = Message { role: "assistant", content: "", thinking: "", tool_calls: Vec::new() };
    if messages.is_empty() && c.keep_alive.is_some_and(|k| k.is_zero()) {
        s.instance.unload(&model.runner_key());
        if let Some(mut t) = trace.take() {
            t.finish(Outcome::Done, 200, None);
        }
        let body =
            ChatLoad { model: &model_s, created_at: now_stamp(s), message: empty, done: true, done_reason: "unload" };
        return Ok(json_response(StatusCode::OK, &body));
    }
    let options = Options::from_map(c.options_map.as_ref())?;
    let format = output_format(c.format.as_ref())?;
    if messages.is_empty() {
        let mut t = trace.take().unwrap_or_else(|| unreachable!("the trace is taken once"));
        load_only(s, &model, &options, c.shift, c.keep_alive, &mut t).await?;
        let body =
            ChatLoad { model: &model_s, created_at: now_stamp(s), message: empty, done: true, done_reason: "load" };
        return Ok(json_response(StatusCode::OK, &body));
    }
    if let Some(t) = trace.as_ref() {
        let c = conversation(&messages);
        t.with(|r| r.conversation = Some(c));
    }
    let (messages, rendered) = if c.truncate {
        fit_history(messages, &model, pipeline::num_ctx(s, &model, &options, c.shift))
    } else {
        let rendered = render_messages(&messages);
        (messages, rendered)
    };
    let g = Generation {
        shift: c.shift,
        keep_alive: c.keep_alive,
        format,
        think,
        truncate: c.truncate,
        ..Generation::chat("/api/chat", model, &messages, &rendered, &options, &tools, arrival)
    };
    let Started { run, fault, .. } = pipeline::start(s, g, trace).await?;
    let wire = Wire::Chat { model: model_s.clone() };
    Ok(pipeline::respond(run, wire, c.stream, fault, move |run, text, now| {
        let metrics = run.metrics(now);
        let created_at = run.created_at(now);
        // Calls are collected only when the request offered tools (writeChatResponse).
        let calls = run.tool_calls_so_far();
        let thinking = run.thinking_text();
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
            metrics: &metrics,
        };
        json_response(StatusCode::OK, &fin)
    })
    .await)
}

/// Deterministic embedding of a text: the normalised sum of one pseudo-random vector per
/// word, so texts sharing words have similar vectors (cosine similarity means something).
/// Depends on the model and the text only, like a real model's.
pub(crate) fn embedding(model_key: &str, text: &str, dims: usize) -> Vec<f64> {
    use rand::RngExt;
    let mut v = vec![0.0f64; dims.max(1)];
    let words: Vec<&str> = text.split_whitespace().collect();
    let words = if words.is_empty() { vec![text] } else { words };
    for w in words {
        let mut rng = crate::seed::SeedBuilder::new(0).str("embedding").str(model_key).str(&w.to_lowercase()).rng();
        for x in v.iter_mut() {
            *x += rng.random_range(-1.0..1.0);
        }
    }
    v
}

fn normalise(v: &mut [f64]) {
    let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

/// Runs an embedding: scheduler, slot, prompt evaluation on the device. Returns the timing
/// metrics (total and load durations, in ns).
pub(crate) async fn run_embedding(
    s: &AppState,
    model: Installed,
    options: &Options,
    keep_alive: Option<KeepAlive>,
    inputs: &[String],
    arrival: Instant,
    trace: TraceGuard,
) -> Result<(u64, u64, u64), ApiError> {
    let rendered = inputs.join("\n");
    let tokens: u32 = inputs.iter().map(|t| crate::tokens::count_tokens(t).max(1)).sum();
    let plan = Plan::new(&PlanInput {
        sim_seed: s.shared.cfg.seed,
        time_scale: s.shared.cfg.time_scale,
        model: &model,
        rendered: &rendered,
        templated: false,
        images: 0,
        options: &Options { num_predict: None, ..options.clone() },
        default_temperature: 0.8,
        format: OutputFormat::Prose,
        tools: &[],
        last_role: None,
        scripted: None,
        think: 0.0,
        num_ctx: model.spec.context_length,
    });
    let plan = Plan {
        prompt_tokens: tokens.max(1),
        text: crate::tokens::TextPlan {
            pieces: Vec::new(),
            done_reason: crate::tokens::DoneReason::Stop,
            calls: Vec::new(),
            thinking: 0,
        },
        ..plan
    };
    let job = job(s, model, options, true, keep_alive, plan, arrival, Vec::new(), "");
    let mut run = Running::start(job, trace).await?;
    let m = run.metrics(Instant::now());
    run.finish(Outcome::Done, None);
    Ok((m.total_duration, m.load_duration, m.prompt_eval_count))
}

#[derive(Serialize)]
struct EmbedResponse<'a> {
    model: &'a str,
    embeddings: Vec<Vec<f32>>,
    #[serde(skip_serializing_if = "is_zero")]
    total_duration: u64,
    #[serde(skip_serializing_if = "is_zero")]
    load_duration: u64,
    #[serde(skip_serializing_if = "is_zero")]
    prompt_eval_count: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Looks up an embedding model with embed's not-found text and capability check.
pub(crate) fn resolve_embedding_model(s: &AppState, model_s: &str) -> Result<Installed, ApiError> {
    let not_found = || ApiError::not_found(format!("model \"{model_s}\" not found, try pulling it first"));
    let name = super::pipeline::parse_model_name(model_s)?;
    let m = s.instance.store.get(&name).ok_or_else(not_found)?;
    if !m.spec.has("embedding") {
        return Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "This server does not support embeddings. Start it with `--embeddings`",
        ));
    }
    Ok(m)
}

/// Most inputs one embedding request may hold: the simulator's own limit (the real server
/// has none, but its memory bounds it), so that a 32 MiB body of empty strings cannot make it
/// allocate tens of gigabytes of vectors.
pub(crate) const MAX_EMBED_INPUTS: usize = 2048;

/// Reads `input`: a string or an array of strings.
pub(crate) fn embed_inputs(v: Option<&Value>) -> Result<Vec<String>, ApiError> {
    if let Some(Value::Array(a)) = v {
        if a.len() > MAX_EMBED_INPUTS {
            return Err(ApiError::bad_request(format!(
                "sim-ollama: {} inputs in one request; the simulator embeds at most {MAX_EMBED_INPUTS} at a time",
                a.len()
            )));
        }
    }
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) if s.is_empty() => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().map(str::to_string).ok_or_else(|| ApiError::bad_request("invalid input type")))
            .collect(),
        Some(_) => Err(ApiError::bad_request("invalid input type")),
    }
}

/// `POST /api/embed`.
pub(crate) async fn embed(
    State(s): State<AppState>,
    peer: Peer,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let arrival = peer.arrival();
    let body = body_bytes(body, s.shared.cfg.body_limit)?;
    let map = decode_body(&body, "EmbedRequest")?;
    let f = Fields::new(&map, "EmbedRequest");
    let model_s = f.string("model")?.unwrap_or_default();
    let keep_alive = f.keep_alive()?;
    let _truncate = f.bool("truncate")?;
    let dimensions = f.int("dimensions")?;
    let options_map = f.object("options", "map[string]interface {}")?;
    let inputs = embed_inputs(map.get("input"))?;
    if model_s.is_empty() {
        return Err(ApiError::model_not_found(""));
    }
    let model = resolve_embedding_model(&s, &model_s)?;
    let options = Options::from_map(options_map)?;
    let mut trace = begin_trace(&s, arrival, "/api/embed", &model_s, peer, false, options_map);
    if inputs.is_empty() {
        load_only(&s, &model, &options, true, keep_alive, &mut trace).await?;
        return Ok(json_response(
            StatusCode::OK,
            &EmbedResponse {
                model: &model_s,
                embeddings: Vec::new(),
                total_duration: 0,
                load_duration: 0,
                prompt_eval_count: 0,
            },
        ));
    }
    let dims = match dimensions {
        Some(d) if d > 0 => (d as usize).min(model.spec.embedding_length as usize),
        _ => model.spec.embedding_length as usize,
    };
    let key = model.name.key();
    let full = model.spec.embedding_length as usize;
    let (total, load, count) = run_embedding(&s, model, &options, keep_alive, &inputs, arrival, trace).await?;
    let embeddings = inputs
        .iter()
        .map(|t| {
            let mut v = embedding(&key, t, full);
            v.truncate(dims);
            normalise(&mut v);
            v.into_iter().map(|x| x as f32).collect()
        })
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &EmbedResponse {
            model: &model_s,
            embeddings,
            total_duration: total,
            load_duration: load,
            prompt_eval_count: count,
        },
    ))
}

#[derive(Serialize)]
struct EmbeddingResponse {
    embedding: Vec<f64>,
}

/// `POST /api/embeddings` (legacy: one vector, not normalised, no metrics).
pub(crate) async fn embeddings(
    State(s): State<AppState>,
    peer: Peer,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let arrival = peer.arrival();
    let body = body_bytes(body, s.shared.cfg.body_limit)?;
    let map = decode_body(&body, "EmbeddingRequest")?;
    let f = Fields::new(&map, "EmbeddingRequest");
    let model_s = f.string("model")?.unwrap_or_default();
    let prompt = f.string("prompt")?.unwrap_or_default();
    let keep_alive = f.keep_alive()?;
    let options_map = f.object("options", "map[string]interface {}")?;
    if model_s.is_empty() {
        return Err(ApiError::bad_request("model is required"));
    }
    // The legacy handler answers every error of the runner's `Embedding` with a 500
    // (server/routes.go v0.33.0-rc2 1084-1088), where /api/embed passes the runner's 501 on.
    let model = resolve_embedding_model(&s, &model_s)
        .map_err(|e| if e.status == StatusCode::NOT_IMPLEMENTED { ApiError::internal(e.message) } else { e })?;
    let options = Options::from_map(options_map)?;
    let mut trace = begin_trace(&s, arrival, "/api/embeddings", &model_s, peer, false, options_map);
    if prompt.is_empty() {
        load_only(&s, &model, &options, true, keep_alive, &mut trace).await?;
        return Ok(json_response(StatusCode::OK, &EmbeddingResponse { embedding: Vec::new() }));
    }
    let key = model.name.key();
    let dims = model.spec.embedding_length as usize;
    run_embedding(&s, model, &options, keep_alive, std::slice::from_ref(&prompt), arrival, trace).await?;
    // Not normalised, as the legacy endpoint's vectors are not.
    let v = embedding(&key, &prompt, dims);
    Ok(json_response(StatusCode::OK, &EmbeddingResponse { embedding: v }))
}

#[derive(Serialize)]
struct Progress<'a> {
    status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    digest: Option<String>,
    #[serde(skip_serializing_if = "is_zero")]
    total: u64,
    #[serde(skip_serializing_if = "is_zero")]
    completed: u64,
    #[serde(skip)]
    _p: std::marker::PhantomData<&'a ()>,
}

fn progress(status: impl Into<String>) -> Progress<'static> {
    Progress { status: status.into(), digest: None, total: 0, completed: 0, _p: std::marker::PhantomData }
}

/// `POST /api/pull`: a simulated progress stream that installs a catalogue model.
pub(crate) async fn pull(State(s): State<AppState>, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let body = body_bytes(body, s.shared.cfg.body_limit)?;
    let map = decode_body(&body, "PullRequest")?;
    let f = Fields::new(&map, "PullRequest");
    let model_s = f.string("model")?.filter(|m| !m.is_empty()).or(f.string("name")?.filter(|m| !m.is_empty()));
    let _insecure = f.bool("insecure")?;
    let stream = f.bool("stream")?.unwrap_or(true);
    let Some(model_s) = model_s else {
        return Err(ApiError::bad_request("model is required"));
    };
    let name = Name::parse(&model_s).ok_or_else(ApiError::invalid_model_name)?;
    let missing = "pull model manifest: file does not exist";
    let Some(spec) = s.instance.store.registry_entry(&name) else {
        if !stream {
            return Err(ApiError::internal(missing));
        }
        let mut out = crate::gojson::to_go_json(&progress("pulling manifest"));
        out.push(b'\n');
        out.extend(crate::gojson::to_go_json(&serde_json::json!({ "error": missing })));
        out.push(b'\n');
        return Ok(bytes_response(StatusCode::OK, "application/x-ndjson", out));
    };
    let digest = spec.digest();
    let cached = s.instance.store.get(&name).is_some();
    let mut lines: Vec<Progress<'static>> = vec![progress("pulling manifest")];
    let steps: u64 = if cached { 1 } else { 4 };
    for i in 1..=steps {
        lines.push(Progress {
            status: format!("pulling {}", digest.get(..12).unwrap_or(&digest)),
            digest: Some(format!("sha256:{digest}")),
            total: spec.size,
            completed: spec.size * i / steps,
            _p: std::marker::PhantomData,
        });
    }
    lines.extend([progress("verifying sha256 digest"), progress("writing manifest"), progress("success")]);
    let installed_at = s.shared.clock.now();
    if !stream {
        // A download of a few simulated steps, paced like the stream.
        tokio::time::sleep(pull_step(&s) * steps as u32).await;
        s.instance.store.install(name, spec, installed_at).map_err(ApiError::internal)?;
        return Ok(json_response(StatusCode::OK, &progress("success")));
    }
    let step = pull_step(&s);
    let inst = Arc::clone(&s.instance);
    let stream = async_stream(lines, step, move || {
        if let Err(e) = inst.store.install(name, spec, installed_at) {
            tracing::warn!(target: "sim_ollama", "{e}");
        }
    });
    let mut r = (StatusCode::OK, Body::from_stream(stream)).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
    Ok(r)
}

/// Time between pull progress lines: the real server's 60 ms, scaled.
fn pull_step(s: &AppState) -> std::time::Duration {
    std::time::Duration::try_from_secs_f64(0.060 * s.shared.cfg.time_scale)
        .unwrap_or(std::time::Duration::from_secs(60))
}

fn async_stream(
    lines: Vec<Progress<'static>>,
    step: std::time::Duration,
    on_done: impl FnOnce() + Send + 'static,
) -> impl futures::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send {
    let n = lines.len();
    let mut on_done = Some(on_done);
    futures::stream::unfold((lines.into_iter().enumerate(), Instant::now()), move |(mut it, start)| {
        let done = if it.len() == 1 { on_done.take() } else { None };
        async move {
            let (i, p) = it.next()?;
            if i > 0 && i + 3 < n {
                tokio::time::sleep_until((start + step * i as u32).into()).await;
            }
            if let Some(f) = done {
                f();
            }
            let mut b = crate::gojson::to_go_json(&p);
            b.push(b'\n');
            Some((Ok(Bytes::from(b)), (it, start)))
        }
    })
}

/// `POST /api/copy`: 200 with an empty body.
pub(crate) async fn copy(State(s): State<AppState>, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let body = body_bytes(body, s.shared.cfg.body_limit)?;
    let map = decode_body(&body, "CopyRequest")?;
    let f = Fields::new(&map, "CopyRequest");
    let src_s = f.string("source")?.unwrap_or_default();
    let dst_s = f.string("destination")?.unwrap_or_default();
    let src = Name::parse(&src_s).ok_or_else(|| ApiError::bad_request(format!("source \"{src_s}\" is invalid")))?;
    let dst =
        Name::parse(&dst_s).ok_or_else(|| ApiError::bad_request(format!("destination \"{dst_s}\" is invalid")))?;
    let m = s.instance.store.get(&src).ok_or_else(|| ApiError::not_found(format!("model \"{src_s}\" not found")))?;
    let at = s.shared.clock.now();
    s.instance.store.install(dst, m.spec, at).map_err(ApiError::internal)?;
    Ok(StatusCode::OK.into_response())
}

/// `DELETE /api/delete`: 200 with an empty body.
pub(crate) async fn delete(
    State(s): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body_bytes(body, s.shared.cfg.body_limit)?;
    let map = decode_body(&body, "DeleteRequest")?;
    let f = Fields::new(&map, "DeleteRequest");
    let model_s = f.string("model")?.filter(|m| !m.is_empty()).or(f.string("name")?.filter(|m| !m.is_empty()));
    let Some(model_s) = model_s else {
        return Err(ApiError::bad_request("model is required"));
    };
    // DeleteHandler's own text for a name it cannot parse (server/routes.go 1257-1266).
    let name = Name::parse(&model_s).ok_or_else(|| ApiError::bad_request(format!("name {model_s:?} is invalid")))?;
    if !s.instance.store.remove(&name) {
        return Err(ApiError::model_not_found(&model_s));
    }
    // The real DeleteHandler (server/routes.go v0.33.0-rc2 1247-1297) removes the manifest and
    // layers and never touches the scheduler: a loaded runner stays loaded (and in /api/ps)
    // until it expires.
    Ok(StatusCode::OK.into_response())
}
