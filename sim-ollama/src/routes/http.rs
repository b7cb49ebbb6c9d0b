//! What every handler shares: its state, the one JSON body reader (in the route's error
//! shape), the response builders, and the middlewares' streaming headers. A leaf of the routes:
//! the adapters and the pipeline name it, it names none of them.

use crate::error::ApiError;
use crate::scheduler::Instance;
use crate::shared::Shared;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// What every handler gets: the simulator and the instance the request reached.
#[derive(Debug, Clone)]
pub(crate) struct AppState {
    pub(crate) shared: Arc<Shared>,
    pub(crate) instance: Arc<Instance>,
}

/// The body of a POST, or 413 past the limit, in Ollama's error shape.
pub(crate) fn body_bytes(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<Bytes, ApiError> {
    body.map_err(|rej| {
        if rej.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("request body too large: the limit is {limit} bytes"))
        } else {
            ApiError::bad_request(rej.body_text())
        }
    })
}

/// Whose error shape a route's body-decoding errors take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyErrors {
    /// Ollama's native `{"error": "..."}`.
    Native,
    /// The OpenAI-compatible middleware's, which keeps gin's charset on decoding errors.
    OpenAi,
    /// The Anthropic middleware's own checks, answered by gin (middleware/anthropic.go
    /// v0.33.0-rc2 736-760).
    AnthropicMiddleware,
}

impl BodyErrors {
    /// The Go package of the layer's request types, as its decoding errors name them.
    fn package(self) -> &'static str {
        match self {
            BodyErrors::Native => "api",
            BodyErrors::OpenAi => "openai",
            BodyErrors::AnthropicMiddleware => "anthropic",
        }
    }

    /// What an empty body is answered: the native handlers check for one first; the `/v1`
    /// and Anthropic middlewares bind with gin, whose decoder says `EOF`.
    fn empty_body(self) -> &'static str {
        match self {
            BodyErrors::Native => "missing request body",
            BodyErrors::OpenAi | BodyErrors::AnthropicMiddleware => "EOF",
        }
    }

    fn shape(self, e: ApiError) -> ApiError {
        match self {
            BodyErrors::Native => e,
            BodyErrors::OpenAi => e.openai().with_charset(),
            BodyErrors::AnthropicMiddleware => e.anthropic_middleware(),
        }
    }
}

/// A request's JSON object body, read as the real handlers bind it: the size limit, a missing
/// body, Go's decoding errors (`go_type` names the Go type in them), in the route's error shape.
/// Every JSON endpoint reads its body through this.
pub(crate) fn json_body(
    s: &AppState,
    body: Result<Bytes, BytesRejection>,
    go_type: &str,
    errors: BodyErrors,
) -> Result<crate::request::Body, ApiError> {
    let bytes = body_bytes(body, s.shared.cfg.body_limit).map_err(|e| errors.shape(e))?;
    crate::request::decode_body(&bytes, &format!("{}.{go_type}", errors.package()), errors.empty_body())
        .map_err(|e| errors.shape(e))
}

/// What the Responses and Anthropic middlewares set on a streamed request before the chat
/// handler runs (middleware/openai.go v0.33.0-rc2 1208-1212, middleware/anthropic.go 786-790),
/// so its answer carries them, and so does an error the handler answers it with.
pub(crate) fn streaming_middleware_headers(r: &mut Response) {
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
}

/// A streamed request's error past the middleware (Responses, Anthropic): its answer with the
/// middleware's streaming headers; a middleware's own error (with a charset) as it is.
pub(crate) fn streamed_error(e: ApiError, stream: bool) -> Result<Response, ApiError> {
    let e = e.in_stream(stream);
    if !stream || e.charset {
        return Err(e);
    }
    let mut r = e.into_response();
    streaming_middleware_headers(&mut r);
    Ok(r)
}

/// The agent a request names in its `X-Agent` header, if any.
pub(crate) fn agent_label(headers: &HeaderMap) -> Option<String> {
    headers.get("x-agent").and_then(|v| v.to_str().ok()).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// For `skip_serializing_if`: Go's `omitempty` on a number.
pub(crate) fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// A JSON response with the native content type.
pub(crate) fn json_response<T: serde::Serialize>(status: StatusCode, v: &T) -> Response {
    bytes_response(status, "application/json; charset=utf-8", crate::gojson::to_go_json(v))
}

/// A 200 with a JSON body as Go's `json.Encoder` writes it (a newline after the object), typed
/// `application/json`: how the Responses and Anthropic middlewares answer.
pub(crate) fn encoder_response<T: serde::Serialize>(v: &T) -> Response {
    let mut b = crate::gojson::to_go_json(v);
    b.push(b'\n');
    bytes_response(StatusCode::OK, "application/json", b)
}

pub(crate) fn bytes_response(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}
