//! Embeddings: `/api/embed`, the legacy `/api/embeddings` (and what `/v1/embeddings` reuses):
//! deterministic vectors, the embedding model's capability check, the runner's time.

use super::http::{AppState, BodyErrors, json_body, json_response};
use super::peer::Peer;
use super::pipeline::{begin_trace, job, load_only, load_runner, runner_options};
use crate::error::ApiError;
use crate::generation::{Plan, PlanInput, Running};
use crate::keepalive::KeepAlive;
use crate::request::{Fields, Options};
use crate::store::Installed;
use crate::tokens::OutputFormat;
use crate::trace::{Outcome, TraceGuard};
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use serde_json::Value;
use std::time::Instant;

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
    // Each input with the special tokens its runner adds (`prompt_eval_count` counts them).
    let specials = special_tokens(&model);
    let tokens: u32 = inputs.iter().map(|t| model.spec.profile.tokenizer().count(t) + specials).sum();
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
        // Its text is not used.
        slot: crate::context::SlotContext { tokens: usize::MAX, shift: true },
        marked: false,
    });
    let plan = Plan {
        prompt_tokens: tokens.max(1),
        text: crate::tokens::TextPlan {
            pieces: Vec::new(),
            done_reason: crate::tokens::DoneReason::Stop,
            calls: Vec::new(),
            thinking: 0,
            stop_token: false,
        },
        ..plan
    };
    let ticket = super::pipeline::probe_ticket(s, &trace, &model, &rendered, 0);
    let opts = runner_options(s, &model, options, true);
    let mut job = job(s, model, opts, keep_alive, plan, arrival, Vec::new(), "");
    job.probe = ticket;
    let mut run = Running::start(job, trace).await?;
    let m = run.metrics(Instant::now());
    // A probe run may hold the answer back, as it holds a generation's last line.
    run.released().await;
    run.finish(Outcome::Done, None);
    Ok((m.total_duration, m.load_duration, m.prompt_eval_count))
}

/// The special tokens an embedding runner adds to each input, which `prompt_eval_count`
/// counts (llama-server's `usage.prompt_tokens`): a BERT-style model's [CLS] and [SEP] (the
/// integration suite's all-minilm: "why is the sky blue?" is 6 tokens and 8 evaluated), one
/// beginning-of-sequence token for the others.
fn special_tokens(model: &Installed) -> u32 {
    let family = model.spec.family.as_str();
    if family.contains("bert") || family.contains("roberta") { 2 } else { 1 }
}

/// Fits each input into the context as the real `EmbedHandler` does (server/routes.go
/// v0.33.0-rc2 875-973): the limit is the model's context length, or `num_ctx` where smaller,
/// less the two tokens kept for the special ones; an input past it keeps its beginning
/// (`truncate`, the default) or is refused. A runner started with an explicit `num_ctx` of
/// less than 4 has 4 (server/sched.go 170-172): an input the handler let through that does not
/// fit it is refused by the runner, and with `truncate` the retry cannot cut it further.
fn fit_inputs(
    inputs: Vec<String>,
    tok: crate::tokenizer::Tokenizer,
    context_length: u64,
    options: &Options,
    truncate: bool,
) -> Result<Vec<String>, ApiError> {
    let ctx = match options.num_ctx {
        Some(n) if n > 0 => (n as u64).min(context_length),
        _ => context_length,
    } as i64;
    let limit = ctx - 2;
    inputs
        .into_iter()
        .map(|text| {
            if limit <= 0 {
                return Err(ApiError::bad_request("input after truncation exceeds maximum context length"));
            }
            let n = i64::from(tok.count(&text));
            let text = match (n > limit, truncate) {
                (false, _) => text,
                (true, true) => tok.first(&text, limit as u32).to_string(),
                (true, false) => return Err(ApiError::bad_request("the input length exceeds the context length")),
            };
            Ok(text)
        })
        .collect()
}

/// The runner's own check of what the handler fitted: its context is num_ctx, at least 4
/// tokens. It runs in the runner, so a model without embeddings refuses first (the real CPU
/// build: num_ctx 0 on a chat model answers 501, on an embedding model this error).
fn runner_fits(
    inputs: &[String],
    tok: crate::tokenizer::Tokenizer,
    options: &Options,
    truncate: bool,
) -> Result<(), ApiError> {
    let Some(runner) = options.num_ctx.map(|n| n.max(4)) else { return Ok(()) };
    if inputs.iter().any(|t| i64::from(tok.count(t)) + 2 > runner) {
        return Err(ApiError::bad_request(if truncate {
            "input exceeds maximum context length and cannot be truncated further"
        } else {
            "the input length exceeds the context length"
        }));
    }
    Ok(())
}

#[derive(Serialize)]
struct EmbedResponse<'a> {
    model: &'a str,
    embeddings: Vec<Vec<f32>>,
    #[serde(skip_serializing_if = "super::http::is_zero")]
    total_duration: u64,
    #[serde(skip_serializing_if = "super::http::is_zero")]
    load_duration: u64,
    #[serde(skip_serializing_if = "super::http::is_zero")]
    prompt_eval_count: u64,
}

/// Looks up an embedding model with embed's not-found text and capability check.
pub(crate) fn resolve_embedding_model(s: &AppState, model_s: &str) -> Result<Installed, ApiError> {
    let m = resolve_installed(s, model_s)?;
    refuse_without_embedding(&m)?;
    Ok(m)
}

/// Looks up an installed model with embed's not-found text.
fn resolve_installed(s: &AppState, model_s: &str) -> Result<Installed, ApiError> {
    let not_found = || ApiError::not_found(format!("model \"{model_s}\" not found, try pulling it first"));
    let name = super::pipeline::parse_model_name(model_s)?;
    s.instance.store.get(&name).ok_or_else(not_found)
}

/// A model without the `embedding` capability: its runner was started without `--embeddings`
/// and refuses to embed with llama-server's 501. An empty input never reaches the runner
/// (`EmbedHandler` and `EmbeddingsHandler` answer it with an empty list first), so it is
/// checked only when there is something to embed (the real CPU build: `/api/embed` with `[]`,
/// `""` or no input on a chat model answers 200 `{"embeddings":[]}`).
fn refuse_without_embedding(m: &Installed) -> Result<(), ApiError> {
    if m.spec.has("embedding") {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::NOT_IMPLEMENTED,
        "This server does not support embeddings. Start it with `--embeddings`",
    ))
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
    let body = json_body(&s, body, "EmbedRequest", BodyErrors::Native)?;
    let (map, f) = (&body.map, Fields::of(&body, "EmbedRequest"));
    // Bound in the body's order (api.EmbedRequest, api/types.go v0.33.0-rc2 599-620):
    // `keep_alive` decodes itself, and its failure ends the binding there.
    f.bound(
        |f, key| match key {
            "model" => f.string(key).map(drop),
            "keep_alive" => f.keep_alive().map(drop),
            "truncate" => f.bool(key).map(drop),
            "dimensions" => f.int(key).map(drop),
            "options" => f.object(key, "map[string]interface {}").map(drop),
            _ => Ok(()),
        },
        |_, key| key == "keep_alive",
    )?;
    let model_s = f.string("model")?.unwrap_or_default();
    let keep_alive = f.keep_alive()?;
    let truncate = f.bool("truncate")?.unwrap_or(true);
    let dimensions = f.int("dimensions")?;
    let options_map = f.object("options", "map[string]interface {}")?;
    let inputs = embed_inputs(map.get("input"))?;
    if model_s.is_empty() {
        return Err(ApiError::model_not_found(""));
    }
    let model = resolve_installed(&s, &model_s)?;
    // The handler reads the options and fits the inputs into the context before the runner is
    // asked for embeddings, and a model without them refuses only then (server/routes.go
    // v0.33.0-rc2, EmbedHandler).
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
    let inputs = match fit_inputs(inputs, model.spec.profile.tokenizer(), model.spec.context_length, &options, truncate)
    {
        Ok(i) => i,
        Err(e) => {
            trace.finish(Outcome::Error, e.status.as_u16(), Some(e.message.clone()));
            return Err(e);
        }
    };
    if let Err(e) = refuse_without_embedding(&model) {
        // The handler schedules the runner first (a load, as for any request: the real CPU
        // build lists the model in /api/ps after refusing), then the runner refuses.
        load_runner(&s, &model, &options, true, keep_alive, &mut trace).await?;
        trace.finish(Outcome::Error, e.status.as_u16(), Some(e.message.clone()));
        return Err(e);
    }
    let inputs = match runner_fits(&inputs, model.spec.profile.tokenizer(), &options, truncate) {
        Ok(()) => inputs,
        Err(e) => {
            trace.finish(Outcome::Error, e.status.as_u16(), Some(e.message.clone()));
            return Err(e);
        }
    };
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
    let body = json_body(&s, body, "EmbeddingRequest", BodyErrors::Native)?;
    let f = Fields::of(&body, "EmbeddingRequest");
    // Bound in the body's order (api.EmbeddingRequest, api/types.go v0.33.0-rc2 631-644).
    f.bound(
        |f, key| match key {
            "model" | "prompt" => f.string(key).map(drop),
            "keep_alive" => f.keep_alive().map(drop),
            "options" => f.object(key, "map[string]interface {}").map(drop),
            _ => Ok(()),
        },
        |_, key| key == "keep_alive",
    )?;
    let model_s = f.string("model")?.unwrap_or_default();
    let prompt = f.string("prompt")?.unwrap_or_default();
    let keep_alive = f.keep_alive()?;
    let options_map = f.object("options", "map[string]interface {}")?;
    if model_s.trim().is_empty() {
        return Err(ApiError::bad_request("model is required"));
    }
    // The legacy handler answers every error of the runner's `Embedding` with a 500
    // (server/routes.go v0.33.0-rc2 1084-1088), where /api/embed passes the runner's 501 on.
    let model = resolve_installed(&s, &model_s)?;
    let options = Options::from_map(options_map)?;
    let mut trace = begin_trace(&s, arrival, "/api/embeddings", &model_s, peer, false, options_map);
    if !prompt.is_empty() && !model.spec.has("embedding") {
        // Loaded first, then refused by the runner, as /api/embed.
        load_runner(&s, &model, &options, true, keep_alive, &mut trace).await?;
        let e = refuse_without_embedding(&model).map_err(|e| ApiError::internal(e.message)).unwrap_err();
        trace.finish(Outcome::Error, e.status.as_u16(), Some(e.message.clone()));
        return Err(e);
    }
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
