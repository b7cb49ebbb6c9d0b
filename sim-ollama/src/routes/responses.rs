//! `POST /v1/responses`: the OpenAI Responses API (what the OpenAI Agents SDK uses by
//! default), as the real server's middleware serves it (`ResponsesMiddleware`,
//! middleware/openai.go v0.33.0-rc2 1154-1230; `FromResponsesRequest`, openai/responses.go
//! 416-621): the request becomes a chat turn through the same pipeline as `/api/chat`, and the
//! answer is written as a response object or Responses events ([`crate::wire::responses`]).

use super::http::{AppState, BodyErrors, bytes_response, encoder_response, json_body, streaming_middleware_headers};
use super::peer::Peer;
use super::pipeline::{self, ChatInput, Started, begin_trace, output_format, traced};
use super::responses_request::{bind, chat_tools};
use crate::error::ApiError;
use crate::request::{Fields, Options, Think};
use crate::tokens::DoneReason;
use crate::wire::Wire;
use crate::wire::responses::{Echo, Ids, Stream, output, tool_echo, usage};
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

/// A response's ids: the real ones are random numbers below 999999 (`rand.Intn`); here from
/// the seed.
fn ids(seed: u64) -> Ids {
    let n = |salt: u64| crate::seed::mix(seed ^ salt) % 999_999;
    Ids {
        response: format!("resp_{}", n(1)),
        item: format!("msg_{}", n(2)),
        reasoning: format!("rs_{}", n(3)),
        call_base: format!("fc_{}", n(4)),
    }
}

/// The answer to a request with nothing to generate (the chat handler's load, written by the
/// Responses writer): an empty message; streamed, no item at all (`response.completed`'s
/// `output` is null, `buildFinalOutput` having nothing), with the middleware's headers.
fn loaded(s: &AppState, model: &str, echo: Echo) -> Response {
    let created = crate::clock::unix_seconds(s.shared.clock.now());
    let ids = ids(s.shared.cfg.seed);
    if echo.streamed {
        let mut out = bytes::BytesMut::new();
        Stream::new(ids, model.to_string(), echo).finish(&mut out, DoneReason::Stop, 0, 0, created);
        let mut r = bytes_response(StatusCode::OK, "text/event-stream", out.to_vec());
        streaming_middleware_headers(&mut r);
        return r;
    }
    let out = output(&ids, "", "", &[]);
    encoder_response(&echo.response(&ids, model, created, "completed", out, usage(0, 0), Some(created)))
}

/// `POST /v1/responses`.
pub(crate) async fn responses(
    State(s): State<AppState>,
    peer: Peer,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let arrival = peer.arrival();
    let body = json_body(&s, body, "ResponsesRequest", BodyErrors::OpenAi)?;
    // The binding and the history's conversion, before anything else.
    let messages = bind(&body).map_err(ApiError::openai)?;
    let map = body.map;
    let f = Fields::new(&map, "ResponsesRequest");
    let model_s = f.string("model").map_err(ApiError::openai)?.unwrap_or_default();
    let stream = f.bool("stream").map_err(ApiError::openai)?.unwrap_or(false);
    let mut trace = None;
    let r = async {
        let instructions = f.string("instructions")?.filter(|i| !i.is_empty());
        let temperature = f.float("temperature")?;
        let top_p = f.float("top_p")?;
        let max_output_tokens = f.int("max_output_tokens")?;
        let mut o = Map::new();
        o.insert("temperature".into(), Value::from(temperature.unwrap_or(1.0)));
        if let Some(p) = top_p {
            o.insert("top_p".into(), Value::from(p));
        }
        if let Some(n) = max_output_tokens {
            o.insert("num_predict".into(), Value::from(n));
        }
        let options = Options::from_map(Some(&o))?;
        let reasoning = f.object("reasoning", "openai.ResponsesReasoning")?;
        let effort = reasoning.and_then(|r| r.get("effort")).and_then(Value::as_str).filter(|e| !e.is_empty());
        let summary = reasoning.and_then(|r| r.get("summary")).and_then(Value::as_str).filter(|e| !e.is_empty());
        let think = Think::from_effort(effort.unwrap_or("")).map_err(ApiError::from_middleware)?;
        let request_tools: Vec<Map<String, Value>> = f
            .array("tools", "[]openai.ResponsesTool")?
            .into_iter()
            .flatten()
            .filter_map(|t| t.as_object().cloned())
            .collect();
        let tools = chat_tools(f.array("tools", "[]openai.ResponsesTool")?.map_or(&[][..], Vec::as_slice))?;
        let offered = tools.len();
        let tools = crate::tools::parse(Some(&tools))?;
        let text_format = map.get("text").and_then(|t| t.get("format")).filter(|v| v.is_object());
        // `text.format.schema` of a `json_schema` format is the chat request's format, as given
        // (a JSON `null` is no format); the runner checks it when inference starts.
        let schema = text_format
            .filter(|tf| tf.get("type").and_then(Value::as_str) == Some("json_schema"))
            .and_then(|tf| tf.get("schema"))
            .filter(|s| !s.is_null());
        // The chat handler's checks.
        pipeline::chat_model_named(&model_s)?;
        trace = Some(begin_trace(&s, arrival, "/v1/responses", &model_s, peer, stream, Some(&o)));
        let model = pipeline::chat_model(&s, &model_s, think, offered)?;
        let echo = Echo {
            instructions,
            truncation: f.string("truncation")?.unwrap_or_else(|| "disabled".into()),
            tools: request_tools.iter().map(tool_echo).collect(),
            text_format: text_format.cloned().unwrap_or_else(|| json!({"type": "text"})),
            effort: effort.map(str::to_string),
            summary: summary.map(str::to_string),
            top_p: top_p.unwrap_or(1.0),
            temperature: temperature.unwrap_or(1.0),
            max_output_tokens,
            background: f.bool("background")?.unwrap_or(false),
            streamed: stream,
        };
        if messages.is_empty() {
            // Nothing to generate: the chat handler loads the model and answers with an empty
            // message (done_reason "load"), which the writer turns into an empty response.
            let mut t = trace.take().unwrap_or_else(|| unreachable!("the trace is taken once"));
            pipeline::load_only(&s, &model, &options, true, None, &mut t).await?;
            return Ok(loaded(&s, &model_s, echo));
        }
        let format = output_format(schema).map_err(|e| e.from_runner().in_stream(stream))?;
        let input = ChatInput {
            default_temperature: 1.0,
            format,
            think,
            ..ChatInput::new("/v1/responses", messages, options, tools, arrival)
        };
        let Started { run, fault, seed } = pipeline::chat(&s, input, model, &mut trace).await?;
        let ids = ids(seed);
        let wire = Wire::Responses(Box::new(Stream::new(ids.clone(), model_s.clone(), echo.clone())));
        Ok(pipeline::respond(run, wire, stream, fault, move |run, text, now| {
            let m = run.metrics(now);
            let calls = run.tool_calls_so_far();
            let created = run.created_unix(now);
            let out = output(&ids, &run.thinking_text(), &text, &calls);
            let r = echo.response(
                &ids,
                &model_s,
                created,
                "completed",
                out,
                usage(m.prompt_eval_count, m.eval_count),
                Some(created),
            );
            encoder_response(&r)
        })
        .await)
    }
    .await;
    traced(&mut trace, r).or_else(|e| super::http::streamed_error(e.openai(), stream))
}
