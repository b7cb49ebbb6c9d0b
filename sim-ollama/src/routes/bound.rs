//! The `/v1` OpenAI requests' fields checked in the body's order, as the middleware's
//! `ShouldBindJSON` decodes them (middleware/openai.go v0.33.0-rc2) before the handler reads
//! them in an order of its own: Go's decoder goes on past a field of the wrong type and names
//! the earliest in the body (openai/openai.go 90-95, 105-124, 148-163); no field of these
//! requests decodes itself, but a chat tool's `properties` (an ordered map that does), whose
//! error ends the decoding. Each field's own JSON type is checked here, and the tools' nested
//! types; what is inside a message the handlers check as they read it.

use crate::error::ApiError;
use crate::request::Fields;

/// `openai.CompletionRequest`.
pub(crate) fn completion_bound_in_order(f: &Fields<'_>) -> Result<(), ApiError> {
    f.in_body_order(|f, key| match key {
        "model" | "prompt" | "suffix" => f.string(key).map(drop),
        "stream" | "_debug_render_only" => f.bool(key).map(drop),
        "max_tokens" | "seed" | "logprobs" => f.int(key).map(drop),
        "frequency_penalty" | "presence_penalty" | "temperature" | "top_p" => f.float_of(key, "float32").map(drop),
        "stream_options" => f.object(key, "openai.StreamOptions").map(drop),
        _ => Ok(()),
    })
}

/// `openai.ChatCompletionRequest`: its tools' parameters' `properties` decode themselves.
pub(crate) fn chat_completion_bound_in_order(f: &Fields<'_>) -> Result<(), ApiError> {
    let (tools, tools_end) = f.tools_bound("ChatCompletionRequest");
    let check = |f: &Fields<'_>, key: &str| match key {
        "model" | "reasoning_effort" => f.string(key).map(drop),
        "stream" | "logprobs" | "_debug_render_only" => f.bool(key).map(drop),
        "max_tokens" | "seed" | "top_logprobs" => f.int(key).map(drop),
        "temperature" | "frequency_penalty" | "presence_penalty" | "top_p" => f.float(key).map(drop),
        "messages" => f.array(key, "[]openai.Message").map(drop),
        "tools" => tools.clone(),
        "stream_options" => f.object(key, "openai.StreamOptions").map(drop),
        "response_format" => f.object(key, "openai.ResponseFormat").map(drop),
        "reasoning" => f.object(key, "openai.Reasoning").map(drop),
        _ => Ok(()),
    };
    f.bound(check, |_, key| key == "tools" && tools_end)
}

/// `openai.EmbedRequest`.
pub(crate) fn embed_bound_in_order(f: &Fields<'_>) -> Result<(), ApiError> {
    f.in_body_order(|f, key| match key {
        "model" | "encoding_format" => f.string(key).map(drop),
        "dimensions" => f.int(key).map(drop),
        _ => Ok(()),
    })
}
