//! The `/v1` OpenAI requests' fields checked in the body's order, as the middleware's
//! `ShouldBindJSON` decodes them (middleware/openai.go v0.33.0-rc2) before the handler reads
//! them in an order of its own: Go's decoder goes on past a field of the wrong type and names
//! the earliest in the body (openai/openai.go 90-95, 105-124, 148-163); no field of these
//! requests decodes itself, but a chat tool's `properties` (an ordered map that does), whose
//! error ends the decoding. Each field's own JSON type is checked here, and the tools' nested
//! types; what is inside a message the handlers check as they read it.

use crate::error::ApiError;
use crate::gotype::OPENAI_STREAM_OPTIONS;
use crate::request::Fields;

/// `openai.CompletionRequest`.
pub(crate) fn completion_bound_in_order(f: &Fields<'_>) -> Result<(), ApiError> {
    f.in_body_order(|f, key| match key {
        "model" | "prompt" | "suffix" => f.string(key).map(drop),
        "stream" | "_debug_render_only" => f.bool(key).map(drop),
        "max_tokens" | "seed" | "logprobs" => f.int(key).map(drop),
        "frequency_penalty" | "presence_penalty" | "temperature" | "top_p" => f.float_of(key, "float32").map(drop),
        "stream_options" => f.decoded("stream_options", OPENAI_STREAM_OPTIONS, "CompletionRequest"),
        _ => Ok(()),
    })
}

/// `openai.ChatCompletionRequest`: its tools' parameters' `properties` decode themselves.
pub(crate) fn chat_completion_bound_in_order(f: &Fields<'_>) -> Result<(), ApiError> {
    let check = |f: &Fields<'_>, key: &str| match key {
        "model" | "reasoning_effort" => f.string(key).map(drop),
        "stream" | "logprobs" | "_debug_render_only" => f.bool(key).map(drop),
        "max_tokens" | "seed" | "top_logprobs" => f.int(key).map(drop),
        "temperature" | "frequency_penalty" | "presence_penalty" | "top_p" => f.float(key).map(drop),
        "messages" => messages_bound(f),
        // Decoded where they stand (an earlier occurrence of a key inside them, in its place).
        "tools" => f.tools_bound("ChatCompletionRequest").0,
        "stream_options" => f.decoded("stream_options", OPENAI_STREAM_OPTIONS, "ChatCompletionRequest"),
        "response_format" => f.object(key, "openai.ResponseFormat").map(drop),
        "reasoning" => f.object(key, "openai.Reasoning").map(drop),
        _ => Ok(()),
    };
    f.bound(check, |f, key| key == "tools" && f.tools_bound("ChatCompletionRequest").1)
}

/// `messages`, each element an `openai.Message` (openai/openai.go v0.33.0-rc2 32-39): its own
/// fields' types, each occurrence of one that came twice in turn (`content` is an `any`); the
/// earliest error. On the real server `{"role": 1, "content": "hi"}` is refused ("Go struct
/// field Message.messages.role of type string"), and `{"role": 1, "role": "user"}` too.
fn messages_bound(f: &Fields<'_>) -> Result<(), ApiError> {
    let Some(items) = f.array("messages", "[]openai.Message")? else { return Ok(()) };
    for (i, v) in items.iter().enumerate() {
        let m = match v {
            serde_json::Value::Object(m) => m,
            // A null element binds nothing.
            serde_json::Value::Null => continue,
            other => {
                return Err(ApiError::bad_request(format!(
                    "json: cannot unmarshal {} into Go struct field ChatCompletionRequest.messages of type openai.Message",
                    crate::request::json_kind(other)
                ))
                .from_middleware());
            }
        };
        f.message(i, m, "Message.messages").in_body_order(|mf, key| match key {
            "role" | "reasoning" | "name" | "tool_call_id" => mf.string(key).map(drop),
            // Each call's fields too (an `openai.ToolCall`, its function a struct).
            "tool_calls" => match mf.map.get(key).filter(|v| !v.is_null()) {
                None => Ok(()),
                Some(v) => match crate::gotype::decode_field(
                    v,
                    crate::gotype::OPENAI_TOOL_CALLS,
                    "Message",
                    "messages.tool_calls",
                ) {
                    crate::gotype::Decoded::Fits => Ok(()),
                    crate::gotype::Decoded::Saved(e) | crate::gotype::Decoded::Ended(e) => {
                        Err(ApiError::bad_request(e.text()).from_middleware())
                    }
                },
            },
            _ => Ok(()),
        })?;
    }
    Ok(())
}

/// `openai.EmbedRequest`.
pub(crate) fn embed_bound_in_order(f: &Fields<'_>) -> Result<(), ApiError> {
    f.in_body_order(|f, key| match key {
        "model" | "encoding_format" => f.string(key).map(drop),
        "dimensions" => f.int(key).map(drop),
        _ => Ok(()),
    })
}
