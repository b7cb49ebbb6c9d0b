//! The generation pipeline every generating endpoint shares (`/api/generate`, `/api/chat`,
//! `/v1/chat/completions`, `/v1/completions`): the trace, the scripted answer, the plan, the
//! fault, the runner and slot ([`start`]), then streaming or collecting the answer in the
//! endpoint's wire format ([`respond`]). An endpoint is an adapter: it parses its request into
//! a [`Generation`] and renders its answer. The chat routes share more: each decodes its
//! request into a [`ChatInput`], checks its model with [`chat_model`], and hands both to
//! [`chat`].

use super::body::{TokenBody, write_finish, write_token};
use super::history::{self, ChatMessage};
use super::http::AppState;
use super::peer::Peer;
use crate::error::ApiError;
use crate::faults::{FaultKind, FaultRule};
use crate::generation::{Job, Plan, PlanInput, Running};
use crate::keepalive::KeepAlive;
use crate::names::Name;
use crate::request::{Options, Think};
use crate::scheduler::{RunnerOptions, RunnerRequest};
use crate::store::Installed;
use crate::tokens::OutputFormat;
use crate::tools::ToolDef;
use crate::trace::{Outcome, TraceGuard};
use crate::wire::Wire;
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Instant;

/// A parsed generation request: what every endpoint hands the pipeline.
#[derive(Debug)]
pub(crate) struct Generation<'a> {
    /// The path, for faults, scripts and the trace.
    pub(crate) endpoint: &'static str,
    pub(crate) model: Installed,
    /// The prompt as the model sees it.
    pub(crate) rendered: &'a str,
    /// Whether the chat template wraps it (not in raw mode).
    pub(crate) templated: bool,
    pub(crate) images: usize,
    pub(crate) options: &'a Options,
    /// The runner it needs, computed once per request ([`runner_options`]).
    pub(crate) runner: RunnerOptions,
    pub(crate) keep_alive: Option<KeepAlive>,
    /// 0.8 native, 1.0 OpenAI.
    pub(crate) default_temperature: f64,
    pub(crate) format: OutputFormat,
    pub(crate) tools: &'a [ToolDef],
    /// Role of the last chat message (`None` outside chat).
    pub(crate) last_role: Option<&'a str>,
    pub(crate) arrival: Instant,
    /// What the template puts before the answer when the next turn resends it (chat:
    /// `"assistant: "`), so the slot's prompt cache holds what the next turn sends.
    pub(crate) reply_prefix: &'static str,
    /// Whether and how hard the model reasons first (resolved against the model).
    pub(crate) think: Think,
    /// The request's `truncate` (default true): a prompt longer than the context is cut.
    pub(crate) truncate: bool,
    /// `logprobs` asked for, with `top_logprobs` alternatives per token.
    pub(crate) logprobs: Option<usize>,
}

/// A chat request as its route decoded it, in one pass: everything the chat pipeline
/// ([`chat`]) needs. `/api/chat`, `/v1/chat/completions`, `/v1/messages` and `/v1/responses`
/// differ in their wire formats and defaults, not in what happens next.
#[derive(Debug)]
pub(crate) struct ChatInput {
    pub(crate) endpoint: &'static str,
    pub(crate) messages: Vec<ChatMessage>,
    pub(crate) options: Options,
    pub(crate) tools: Vec<ToolDef>,
    /// Thinking asked for (`None`: the model's default).
    pub(crate) think: Option<Think>,
    pub(crate) format: OutputFormat,
    /// 0.8 native, 1.0 OpenAI.
    pub(crate) default_temperature: f64,
    pub(crate) shift: bool,
    /// A history longer than the context is cut to fit (the chat handler's default).
    pub(crate) truncate: bool,
    pub(crate) keep_alive: Option<KeepAlive>,
    pub(crate) arrival: Instant,
    /// `logprobs` asked for, with `top_logprobs` alternatives per token.
    pub(crate) logprobs: Option<usize>,
}

impl ChatInput {
    /// A chat request with the chat handler's defaults: the model's own thinking, prose,
    /// temperature 0.8, `shift` and `truncate` on, the server's keep-alive.
    pub(crate) fn new(
        endpoint: &'static str,
        messages: Vec<ChatMessage>,
        options: Options,
        tools: Vec<ToolDef>,
        arrival: Instant,
    ) -> Self {
        ChatInput {
            endpoint,
            messages,
            options,
            tools,
            think: None,
            format: OutputFormat::Prose,
            default_temperature: 0.8,
            shift: true,
            truncate: true,
            keep_alive: None,
            arrival,
            logprobs: None,
        }
    }
}

/// The chat pipeline, for a request whose model passed [`chat_model`]'s checks: the
/// conversation in the trace, thinking resolved against the model, the runner's options, the
/// history fitted to its context (`truncate`), then [`start`].
pub(crate) async fn chat(
    s: &AppState,
    input: ChatInput,
    model: Installed,
    trace: &mut Option<TraceGuard>,
) -> Result<Started, ApiError> {
    if let Some(t) = trace.as_ref() {
        let c = history::conversation(&input.messages);
        t.with(|r| r.conversation = Some(c));
    }
    let think = Think::resolve(input.think, model.spec.has("thinking"));
    let runner = runner_options(s, &model, &input.options, input.shift);
    let (messages, rendered) = if input.truncate {
        history::fit_history(input.messages, &model, runner.num_ctx)
    } else {
        let rendered = history::render_messages(&input.messages);
        (input.messages, rendered)
    };
    let g = Generation {
        endpoint: input.endpoint,
        model,
        rendered: &rendered,
        templated: true,
        images: messages.iter().map(|m| m.images).sum(),
        options: &input.options,
        runner,
        keep_alive: input.keep_alive,
        default_temperature: input.default_temperature,
        format: input.format,
        tools: &input.tools,
        last_role: messages.last().map(|m| m.role.as_str()),
        arrival: input.arrival,
        reply_prefix: "assistant: ",
        think,
        truncate: input.truncate,
        logprobs: input.logprobs,
    };
    start(s, g, trace).await
}

/// A generation that has its runner and slot.
#[derive(Debug)]
pub(crate) struct Started {
    pub(crate) run: Running,
    /// The fault it got, if any.
    pub(crate) fault: Option<FaultRule>,
    /// The seed of the answer's ids (OpenAI, Anthropic, Responses): the plan's seed with the
    /// request's trace id mixed in, so two identical requests get different ids, as the real
    /// server's random ids differ, while a simulator run answers the same requests in the same
    /// order with the same ids.
    pub(crate) seed: u64,
}

/// Everything between a parsed request and its first token: the scripted answer (a scripted
/// error is the answer), the plan, the fault, then a runner and a slot. Takes the trace (an
/// error before it is taken is recorded by [`traced`]).
pub(crate) async fn start(
    s: &AppState,
    g: Generation<'_>,
    trace: &mut Option<TraceGuard>,
) -> Result<Started, ApiError> {
    let scripted = pick_script(s, &g.model, g.endpoint, trace.as_ref())?;
    let refusal = g.options.runner_refusal().or_else(|| schema_refusal(&g.format));
    let num_ctx = g.runner.num_ctx;
    // In a probe run, its place first: an answer under a hand-off test is in marked words.
    let ticket = trace.as_ref().and_then(|t| probe_ticket(s, t, &g.model, g.rendered, g.images));
    let mut plan = Plan::new(&PlanInput {
        sim_seed: s.shared.cfg.seed,
        time_scale: s.shared.cfg.time_scale,
        model: &g.model,
        rendered: g.rendered,
        templated: g.templated,
        images: g.images,
        options: g.options,
        default_temperature: g.default_temperature,
        format: g.format,
        tools: g.tools,
        last_role: g.last_role,
        scripted,
        think: g.think.factor(),
        num_ctx,
        slot: g.runner.slot(&g.model.spec),
        marked: ticket.as_ref().is_some_and(|t| t.marked),
    });
    if let Some(t) = trace.as_ref() {
        // What the model will answer (its reasoning aside) and its tool calls' ids, to
        // recognise in later prompts.
        let answer: String = plan.text.pieces[plan.text.thinking.min(plan.text.pieces.len())..].concat();
        let ids: Vec<&str> = plan.text.calls.iter().map(|c| c.call.id.as_str()).collect();
        t.carry(g.rendered, &answer, &ids);
    }
    let id = trace.as_ref().map_or(0, |t| t.id());
    let seed = crate::seed::mix(plan.seed ^ crate::seed::mix(id));
    // A device slower or faster than the profile's: all the stream's work with it (its start by
    // the device's prompt speed where that is set apart).
    let spec = &s.instance.device.spec;
    let (speed, prompt_speed) = (spec.speed, spec.prompt_speed.unwrap_or(spec.speed));
    if speed != 1.0 || prompt_speed != 1.0 {
        plan.timing.slow_down_parts(1.0 / prompt_speed, 1.0 / speed);
    }
    let noise = &s.shared.cfg.noise;
    if noise.is_active() {
        // Streams decoding on other devices now (instances on this one share it already).
        let mine = s.instance.device.index;
        let mut devices: Vec<_> = s.shared.instances.iter().map(|i| &i.device).filter(|d| d.index != mine).collect();
        devices.sort_by_key(|d| d.index);
        devices.dedup_by_key(|d| d.index);
        let others: usize = devices.iter().map(|d| d.streams()).sum();
        plan.timing.slow_down(noise.factor(s.shared.cfg.seed, id, others));
    }
    let prompt = crate::generation::prompt_hashes(&g.model, g.rendered, g.templated, g.images);
    let mut job = job(s, g.model, g.runner, g.keep_alive, plan, g.arrival, prompt, g.reply_prefix);
    job.truncate = g.truncate && g.images == 0;
    job.images = g.images;
    job.refusal = refusal;
    job.logprobs = g.logprobs;
    job.probe = ticket;
    let fault =
        pick_fault(s, &job.model, g.endpoint, trace.as_ref().unwrap_or_else(|| unreachable!("the trace is begun")))?;
    let t = trace.take().unwrap_or_else(|| unreachable!("the trace is taken once"));
    let run = Running::start(job, t).await?;
    Ok(Started { run, fault, seed })
}

/// Records what the model was asked (`prompt_key`: the model and the rendered prompt, so the
/// same request sent again, in a probe run, is known), and in a probe run hands the request
/// to the probe: it closes its agent's gap, and its answer may be held ([`crate::probe`]).
pub(crate) fn probe_ticket(
    s: &AppState,
    t: &TraceGuard,
    model: &Installed,
    rendered: &str,
    images: usize,
) -> Option<crate::probe::Ticket> {
    let key = crate::seed::SeedBuilder::new(0).str("prompt").str(&model.name.key()).str(rendered).u64(images as u64);
    let prompt_key = format!("{:016x}", key.finish());
    t.with(|r| r.prompt_key = Some(prompt_key.clone()));
    if !s.shared.probe.active() {
        return None;
    }
    let (label, conversation) = t.with(|r| (r.agent_label.clone(), r.conversation.clone()));
    let fingerprints = conversation.as_ref().map(|c| (c.key.as_str(), c.parent.as_deref()));
    let ticket = s.shared.probe.arrive(label.as_deref(), fingerprints, (t.id(), &prompt_key))?;
    t.with(|r| (r.probe_after, r.probe_marked) = (ticket.after, crate::tokens::holds_marked(rendered)));
    Some(ticket)
}

/// What llama-server answers a schema it refuses (`crate::grammar`), once the request has its
/// runner: its 400, with the conversion's error under llama-server's field prefix
/// (tools/server/server-schema.cpp's json_schema handler), or its grammar parser's.
fn schema_refusal(format: &OutputFormat) -> Option<ApiError> {
    use crate::grammar::Refusal;
    let OutputFormat::Schema(schema) = format else { return None };
    Some(ApiError::llama_server_refusal(&match crate::grammar::refusal(schema)? {
        Refusal::Conversion(error) => {
            format!("Field 'json_schema': \"json_schema\": JSON schema conversion failed:\n{error}")
        }
        Refusal::Grammar => "Failed to initialize samplers: failed to parse grammar".into(),
    }))
}

/// `format`: `"json"` or a schema object; anything else fails when inference starts.
pub(crate) fn output_format(format: Option<&Value>) -> Result<OutputFormat, ApiError> {
    match format {
        None => Ok(OutputFormat::Prose),
        Some(Value::String(s)) if s.is_empty() => Ok(OutputFormat::Prose),
        Some(Value::String(s)) if s == "json" => Ok(OutputFormat::Json),
        Some(v @ Value::Object(_)) => Ok(OutputFormat::Schema(v.clone())),
        // The real text quotes the raw JSON it was given, Go's %q of a json.RawMessage
        // (llm/llama_server.go v0.33.0-rc2 1583-1596).
        Some(other) => Err(ApiError::internal(format!(
            "invalid format: {}; expected \"json\" or a valid JSON Schema object",
            Value::String(other.to_string())
        ))),
    }
}

/// Starts the trace of a model request.
#[allow(clippy::too_many_arguments)]
pub(crate) fn begin_trace(
    s: &AppState,
    arrival: Instant,
    endpoint: &str,
    model: &str,
    peer: Peer,
    stream: bool,
    options: Option<&Map<String, Value>>,
) -> TraceGuard {
    let client = peer.addr.map_or_else(|| "unknown".to_string(), |a| a.to_string());
    let agent = peer.agent;
    s.shared.trace.begin(
        arrival,
        s.instance.index,
        s.instance.device.index,
        endpoint,
        model,
        agent,
        client,
        stream,
        options.map_or(Value::Null, |o| Value::Object(o.clone())),
    )
}

/// Finishes a trace with the error a handler returns.
pub(crate) fn traced<T>(trace: &mut Option<TraceGuard>, r: Result<T, ApiError>) -> Result<T, ApiError> {
    if let (Err(e), Some(t)) = (&r, trace.as_mut()) {
        t.finish(Outcome::Error, e.status.as_u16(), Some(e.message.clone()));
    }
    r
}

/// Parses a model name as the real handlers do (`parseAndValidateModelRef`): an empty name is
/// not found (`ErrModelRequired` falls through to the handler's not-found text), any other name
/// that does not parse is `invalid model name`.
pub(crate) fn parse_model_name(model: &str) -> Result<Name, ApiError> {
    if model.trim().is_empty() {
        return Err(ApiError::model_not_found(model));
    }
    Name::parse(model).ok_or_else(ApiError::invalid_model_name)
}

/// The runner a request needs (its context per slot, batch, GPU layers...): computed once per
/// request and carried.
pub(crate) fn runner_options(s: &AppState, model: &Installed, options: &Options, shift: bool) -> RunnerOptions {
    RunnerOptions::from_options(options, &model.spec, shift, s.instance.device.spec.default_num_ctx())
}

/// The chat handler's first check after binding: it trims the model's name, and a blank one is
/// missing (server/routes.go v0.33.0-rc2 2457-2461). Every route that hands a request to it
/// (`/api/chat`, `/v1/chat/completions`, `/v1/responses`, `/v1/messages`) asks it before its
/// trace begins; their middlewares refuse only an empty name themselves.
pub(crate) fn chat_model_named(model_s: &str) -> Result<(), ApiError> {
    if model_s.trim().is_empty() {
        return Err(ApiError::bad_request("model is required"));
    }
    Ok(())
}

/// The model of a chat request, checked as the chat handler checks it (server/routes.go
/// v0.33.0-rc2, `ChatHandler`): the completion capability, thinking when asked for (`None`: not
/// checked), tools when offered.
pub(crate) fn chat_model(
    s: &AppState,
    model_s: &str,
    think: Option<Think>,
    offered_tools: usize,
) -> Result<Installed, ApiError> {
    let model = resolve(s, model_s)?;
    if !model.spec.has("completion") {
        return Err(ApiError::bad_request(format!("\"{model_s}\" does not support chat")));
    }
    if think.is_some_and(Think::is_on) && !model.spec.has("thinking") {
        return Err(ApiError::bad_request(format!("\"{model_s}\" does not support thinking")));
    }
    if offered_tools > 0 && !model.spec.has("tools") {
        return Err(ApiError::bad_request(format!("{} does not support tools", model.name.full())));
    }
    Ok(model)
}

/// Looks a model up, with generate/chat's not-found text (the name as sent).
pub(crate) fn resolve(s: &AppState, model: &str) -> Result<Installed, ApiError> {
    let name = parse_model_name(model)?;
    s.instance.store.get(&name).ok_or_else(|| ApiError::model_not_found(model))
}

/// The job of a generation request: `prompt` holds its tokens for the slot's prompt cache
/// (empty: none to compare, as for embeddings).
#[allow(clippy::too_many_arguments)]
pub(crate) fn job(
    s: &AppState,
    model: Installed,
    opts: RunnerOptions,
    keep_alive: Option<KeepAlive>,
    plan: Plan,
    arrival: Instant,
    prompt: Vec<crate::cache::Tok>,
    reply_prefix: &'static str,
) -> Job {
    let per_token_s =
        model.spec.kv_bytes_per_token() as f64 / (s.instance.device.spec.cache_copy_gib_s * crate::config::GIB as f64);
    let copy_per_token = crate::latency::scaled_ms(per_token_s * 1000.0, s.shared.cfg.time_scale);
    Job {
        prompt,
        reply_prefix,
        copy_per_token,
        truncate: true,
        instance: Arc::clone(&s.instance),
        model,
        opts,
        keep_alive,
        plan,
        clock: s.shared.clock,
        lateness: Arc::clone(&s.shared.lateness),
        timer: Arc::clone(&s.shared.timer),
        arrival,
        probe: None,
        logprobs: None,
        images: 0,
        refusal: None,
    }
}

/// Loads a model without generating (empty prompt), through the scheduler.
pub(crate) async fn load_only(
    s: &AppState,
    model: &Installed,
    options: &Options,
    shift: bool,
    keep_alive: Option<KeepAlive>,
    trace: &mut TraceGuard,
) -> Result<(), ApiError> {
    load_runner(s, model, options, shift, keep_alive, trace).await?;
    trace.finish(Outcome::Done, 200, None);
    Ok(())
}

/// Gets the model's runner (loading it if need be) and lets it go, leaving the trace open.
pub(crate) async fn load_runner(
    s: &AppState,
    model: &Installed,
    options: &Options,
    shift: bool,
    keep_alive: Option<KeepAlive>,
    trace: &mut TraceGuard,
) -> Result<(), ApiError> {
    let req = RunnerRequest {
        key: model.runner_key(),
        name_key: model.name.key(),
        display: model.name.display(),
        model: Arc::clone(&model.spec),
        opts: runner_options(s, model, options, shift),
        keep_alive,
        trace,
        arrival: Instant::now(),
    };
    let lease = s.instance.acquire(req).await?;
    trace.with(|r| r.runner_us = Some(trace.us(Instant::now())));
    drop(lease);
    Ok(())
}

/// Chooses the fault a generation gets. An `http_error` fault becomes the error answer.
pub(crate) fn pick_fault(
    s: &AppState,
    model: &Installed,
    endpoint: &str,
    trace: &TraceGuard,
) -> Result<Option<FaultRule>, ApiError> {
    let Some(f) = s.shared.faults.pick(s.instance.index, &model.name.key(), endpoint) else {
        return Ok(None);
    };
    trace.with(|r| r.fault = Some(f.describe()));
    if f.kind == FaultKind::HttpError {
        let status = StatusCode::from_u16(f.status.unwrap_or(500)).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return Err(ApiError::new(status, f.message_or_default()));
    }
    Ok(Some(f))
}

/// The scripted answer of a request, if a script rule picks it (counting the request on every
/// rule it matches). A scripted error is the request's answer, in Ollama's error shape.
pub(crate) fn pick_script(
    s: &AppState,
    model: &Installed,
    endpoint: &str,
    trace: Option<&TraceGuard>,
) -> Result<Option<crate::script::Reply>, ApiError> {
    let agent = trace.and_then(|t| t.with(|r| r.agent_label.clone()));
    match s.shared.script.pick(agent.as_deref(), &model.name.key(), endpoint) {
        Some(crate::script::Reply::Error(e)) => {
            let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            Err(ApiError::new(status, e.message))
        }
        other => Ok(other),
    }
}

/// Streams a generation or collects it, in a wire format, with its fault if any.
pub(crate) async fn respond(
    mut run: Running,
    wire: Wire,
    stream: bool,
    fault: Option<FaultRule>,
    collect: impl FnOnce(&Running, String, Instant) -> Response,
) -> Response {
    let slow_headers = fault.as_ref().filter(|f| f.kind == FaultKind::SlowHeaders).and_then(|f| f.duration_ms);
    if stream {
        // The headers leave with the first chunk: the first token that writes anything (the
        // tokens of a tool call write nothing until the call is whole).
        let mut buf = BytesMut::new();
        let done = loop {
            match run.next_token().await {
                Some(t) => {
                    if write_token(&mut run, &wire, &mut buf, t.index, t.at) {
                        break false;
                    }
                }
                None => {
                    write_finish(&mut run, &wire, &mut buf);
                    break true;
                }
            }
        };
        if let Some(ms) = slow_headers {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        let ct = match wire {
            Wire::Generate { .. } | Wire::Chat { .. } => "application/x-ndjson",
            _ => "text/event-stream",
        };
        let middleware_headers = matches!(wire, Wire::Anthropic(_) | Wire::Responses(_));
        let body = Body::from_stream(TokenBody::new(run, wire, buf.freeze(), done, fault));
        let mut r = (StatusCode::OK, body).into_response();
        r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
        if middleware_headers {
            super::http::streaming_middleware_headers(&mut r);
        }
        r
    } else {
        let mut text = String::new();
        let strike = |run: &Running, start: Instant| {
            fault.as_ref().is_some_and(|f| match f.trigger() {
                crate::faults::Trigger::AfterTokens(n) => run.emitted() as u64 >= n,
                crate::faults::Trigger::AfterTime(d) => start.elapsed() >= d,
            })
        };
        let start = Instant::now();
        let mut struck = false;
        while let Some(t) = run.next_token().await {
            if !run.text.hidden(t.index) && t.index >= run.text.thinking {
                text.push_str(run.piece(t.index));
            }
            if !struck && strike(&run, start) {
                struck = true;
                if let Some(f) = &fault {
                    let what = f.describe();
                    match f.kind {
                        // A failure during a non-streamed generation is the HTTP status.
                        FaultKind::ErrorLine => {
                            run.finish(Outcome::Error, Some(format!("{} (injected: {what})", f.message_or_default())));
                            return ApiError::internal(f.message_or_default()).into_response();
                        }
                        // The others break the body: headers, then a dropped connection.
                        FaultKind::Disconnect | FaultKind::Truncate | FaultKind::MalformedLine => {
                            run.finish(Outcome::Error, Some(format!("body broken (injected: {what})")));
                            let broken = futures::stream::iter([
                                Ok(Bytes::from_static(b"{\"model\":")),
                                Err(std::io::Error::new(
                                    std::io::ErrorKind::ConnectionAborted,
                                    "sim-ollama: injected fault",
                                )),
                            ]);
                            let mut r = (StatusCode::OK, Body::from_stream(broken)).into_response();
                            r.headers_mut().insert(
                                header::CONTENT_TYPE,
                                HeaderValue::from_static("application/json; charset=utf-8"),
                            );
                            return r;
                        }
                        FaultKind::Stall => {
                            let d = f.duration_ms.map_or(
                                std::time::Duration::from_secs(365 * 24 * 3600),
                                std::time::Duration::from_millis,
                            );
                            run.delay(d);
                        }
                        FaultKind::HttpError | FaultKind::SlowHeaders => {}
                    }
                }
            }
        }
        if let Some(ms) = slow_headers {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        let r = collect(&run, text, Instant::now());
        run.finish(Outcome::Done, None);
        r
    }
}
