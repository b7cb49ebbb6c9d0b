//! `POST /v1/responses`: the OpenAI Responses API (what the OpenAI Agents SDK uses by
//! default), as the real server's middleware serves it (`ResponsesMiddleware`,
//! middleware/openai.go v0.33.0-rc2 1154-1230; `FromResponsesRequest`, openai/responses.go
//! 416-621): the request becomes a chat turn through the same pipeline as `/api/chat`, and the
//! answer is written as a response object or Responses events ([`crate::wire::responses`]).

use super::history::ChatMessage;
use super::http::{AppState, BodyErrors, encoder_response, json_body};
use super::peer::Peer;
use super::pipeline::{self, ChatInput, Started, begin_trace, traced};
use crate::error::ApiError;
use crate::request::{Fields, Options, Think};
use crate::tokens::OutputFormat;
use crate::wire::Wire;
use crate::wire::responses::{Echo, Ids, Stream, output, tool_echo, usage};
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::Response;
use serde_json::{Map, Value, json};

/// The text of a message's content: a string, or its `input_text` / `output_text` parts.
fn content_text(v: Option<&Value>) -> (String, usize) {
    match v {
        Some(Value::String(s)) => (s.clone(), 0),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            let mut images = 0;
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("input_text" | "output_text") => {
                        text.push_str(p.get("text").and_then(Value::as_str).unwrap_or(""))
                    }
                    Some("input_image")
                        if p.get("image_url").and_then(Value::as_str).is_some_and(|u| !u.is_empty()) =>
                    {
                        images += 1
                    }
                    _ => {}
                }
            }
            (text, images)
        }
        _ => (String::new(), 0),
    }
}

/// `input`: a string (one user message) or items: messages (`type` absent when a role is
/// given), `function_call` (merged into the assistant message before it), `function_call_output`
/// (a tool message), `reasoning` (kept out of the prompt).
fn convert_input(input: Option<&Value>, out: &mut Vec<ChatMessage>) -> Result<(), ApiError> {
    let msg = |role: &str, content: String, images: usize, tool_text: String| ChatMessage {
        role: role.to_string(),
        content,
        images,
        tool_text,
    };
    match input {
        Some(Value::String(s)) if !s.is_empty() => out.push(msg("user", s.clone(), 0, String::new())),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let role = item.get("role").and_then(Value::as_str).unwrap_or("");
                let kind = match item.get("type").and_then(Value::as_str).unwrap_or("") {
                    "" if !role.is_empty() => "message",
                    k => k,
                };
                match kind {
                    "message" => {
                        let (text, images) = content_text(item.get("content"));
                        out.push(msg(role, text, images, String::new()));
                    }
                    "function_call" => {
                        let call = json!({"id": item.get("call_id"), "function": {"name": item.get("name"),
                            "arguments": item.get("arguments")}});
                        match out.last_mut().filter(|m| m.role == "assistant") {
                            Some(m) => m.tool_text.push_str(&call.to_string()),
                            None => out.push(msg("assistant", String::new(), 0, call.to_string())),
                        }
                    }
                    "function_call_output" => {
                        let id = item.get("call_id").and_then(Value::as_str).unwrap_or("").to_string();
                        let (text, _) = content_text(item.get("output"));
                        out.push(msg("tool", text, 0, id));
                    }
                    "reasoning" | "web_search_call" => {}
                    "" => {
                        return Err(ApiError::bad_request(format!(
                            "input[{i}]: input item missing required 'type' field"
                        )));
                    }
                    other => {
                        return Err(ApiError::bad_request(format!(
                            "input[{i}]: unknown input item type: {}",
                            Value::String(other.to_string())
                        )));
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// `POST /v1/responses`.
pub(crate) async fn responses(
    State(s): State<AppState>,
    peer: Peer,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let arrival = peer.arrival();
    let map = json_body(&s, body, "ResponsesRequest", BodyErrors::OpenAi)?;
    let f = Fields::new(&map, "ResponsesRequest");
    let model_s = f.string("model").map_err(ApiError::openai)?.unwrap_or_default();
    let stream = f.bool("stream").map_err(ApiError::openai)?.unwrap_or(false);
    let mut trace = None;
    let r = async {
        let mut messages = Vec::new();
        let instructions = f.string("instructions")?.filter(|i| !i.is_empty());
        if let Some(i) = &instructions {
            messages.push(ChatMessage {
                role: "system".into(),
                content: i.clone(),
                images: 0,
                tool_text: String::new(),
            });
        }
        convert_input(map.get("input"), &mut messages)?;
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
        let think = Think::from_effort(effort.unwrap_or(""))?;
        let request_tools: Vec<Map<String, Value>> = f
            .array("tools", "[]openai.ResponsesTool")?
            .into_iter()
            .flatten()
            .filter_map(|t| t.as_object().cloned())
            .collect();
        let tools: Vec<Value> = request_tools
            .iter()
            .filter(|t| t.get("type").and_then(Value::as_str) == Some("function"))
            .map(|t| {
                json!({"type": "function", "function": {"name": t.get("name"),
                "description": t.get("description"), "parameters": t.get("parameters")}})
            })
            .collect();
        let offered = tools.len();
        let tools = crate::tools::parse(Some(&tools))?;
        let text_format = map.get("text").and_then(|t| t.get("format")).filter(|v| v.is_object());
        let format = match text_format {
            Some(tf) if tf.get("type").and_then(Value::as_str) == Some("json_schema") => tf
                .get("schema")
                .filter(|s| s.is_object())
                .map_or(OutputFormat::Prose, |s| OutputFormat::Schema(s.clone())),
            _ => OutputFormat::Prose,
        };
        // The chat handler's checks.
        pipeline::chat_model_named(&model_s)?;
        trace = Some(begin_trace(&s, arrival, "/v1/responses", &model_s, peer, stream, Some(&o)));
        let model = pipeline::chat_model(&s, &model_s, think, offered)?;
        let input = ChatInput {
            default_temperature: 1.0,
            format,
            think,
            ..ChatInput::new("/v1/responses", messages, options, tools, arrival)
        };
        let Started { run, fault, seed } = pipeline::chat(&s, input, model, &mut trace).await?;
        // The real ids are random numbers below 999999 (`rand.Intn`); here from the seed.
        let n = |salt: u64| crate::seed::mix(seed ^ salt) % 999_999;
        let ids = Ids {
            response: format!("resp_{}", n(1)),
            item: format!("msg_{}", n(2)),
            reasoning: format!("rs_{}", n(3)),
            call_base: format!("fc_{}", n(4)),
        };
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
