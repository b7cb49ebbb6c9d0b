//! The HTTP error type: one `ApiError` that renders in Ollama's own error shapes, native
//! (`{"error":"..."}`) or OpenAI-compatible (`{"error":{"message","type","param","code"}}`).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Which API family a request came through, which decides the error shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    Native,
    OpenAi,
    /// `/v1/messages`: `{"type":"error","error":{"type","message"},"request_id"}`.
    Anthropic,
}

/// An error answered to the client.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
    pub(crate) flavor: Flavor,
    /// The `/v1` layer answers request-decoding errors with a charset in the content type
    /// (the native handler's bind error passes through); see capture 44.
    pub(crate) charset: bool,
    /// The runner's own refusal, which reaches the handler through its response channel once
    /// the request has its runner: in a streamed answer it is written inside the stream
    /// ([`ApiError::in_stream`]).
    pub(crate) runner: bool,
    /// Sent without a length, as Go sends what a handler writes inside `c.Stream`.
    pub(crate) chunked: bool,
    /// Raised where a `/v1` or Anthropic request is bound and checked by its middleware, before
    /// the handler (a body's type errors, the middleware's own checks): gin's
    /// `AbortWithStatusJSON` answers those, with a charset, whatever the layer's flavour.
    pub(crate) middleware: bool,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            flavor: Flavor::Native,
            charset: true,
            runner: false,
            chunked: false,
            middleware: false,
        }
    }
    /// Marks an error as the runner's ([`ApiError::runner`]).
    pub(crate) fn from_runner(mut self) -> Self {
        self.runner = true;
        self
    }
    /// A runner's error in a streamed answer, as `streamResponse` writes an error that comes
    /// before any content (server/routes.go v0.33.0-rc2 2097-2122): `Content-Type:
    /// application/json` without a charset, inside `c.Stream`, so chunked; the `/v1`,
    /// Responses and Anthropic writers pass it on the same way (captured from the real CPU
    /// build). Other errors, and any error of an answer that does not stream, are unchanged.
    pub(crate) fn in_stream(mut self, stream: bool) -> Self {
        if stream && self.runner {
            self.charset = false;
            self.chunked = true;
        }
        self
    }
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
    /// The scheduler's queue is full.
    pub(crate) fn busy() -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "server busy, please try again.  maximum pending requests exceeded")
    }
    /// `invalid model name`: a name the real server cannot parse (`model.ErrUnqualifiedName`,
    /// written by `writeModelRefParseError`, server/routes.go v0.33.0-rc2 66-75, for generate,
    /// chat, embed and show, and through the `/v1` middleware in OpenAI's shape).
    pub(crate) fn invalid_model_name() -> Self {
        Self::bad_request("invalid model name")
    }
    /// llama-server's 400 for a request it refuses, as Ollama passes it on: its JSON error
    /// (`{"error":{"code","message","type"}}`) as the error's text.
    pub(crate) fn llama_server_refusal(message: &str) -> Self {
        let body = serde_json::json!({"error": {"code": 400, "message": message, "type": "invalid_request_error"}});
        Self::bad_request(body.to_string())
    }
    /// `model 'NAME' not found` (generate, chat, show, delete).
    pub(crate) fn model_not_found(name: &str) -> Self {
        Self::not_found(format!("model '{name}' not found"))
    }
    /// Re-flavours an error for the OpenAI layer: its response writer's `application/json`,
    /// or the middleware's charset for an error raised there ([`ApiError::from_middleware`]).
    pub(crate) fn openai(mut self) -> Self {
        if self.flavor == Flavor::Native {
            self.flavor = Flavor::OpenAi;
            self.charset = self.middleware;
        }
        self
    }
    /// Marks an error as the middleware's (see `middleware`): binding a `/v1` or Anthropic
    /// request, or one of the middleware's own checks (middleware/openai.go v0.33.0-rc2: every
    /// `c.AbortWithStatusJSON` before `c.Next()`).
    pub(crate) fn from_middleware(mut self) -> Self {
        self.middleware = true;
        self
    }
    /// Re-flavours an error for the Anthropic layer (`anthropic.NewError`, anthropic/anthropic.go
    /// v0.33.0-rc2 38-61: the type follows the status) as its response writer sends the chat
    /// handler's errors: `application/json`, encoded with a newline (middleware/anthropic.go
    /// 41-42). An error already flavoured (by [`ApiError::anthropic_middleware`]) is kept.
    pub(crate) fn anthropic(mut self) -> Self {
        if self.middleware {
            return self.anthropic_middleware();
        }
        if self.flavor != Flavor::Anthropic {
            self.flavor = Flavor::Anthropic;
            self.charset = false;
        }
        self
    }
    /// An Anthropic error of the middleware's own checks (binding, model, max_tokens,
    /// messages, the conversion): gin's `AbortWithStatusJSON`, so a charset and no newline
    /// (middleware/anthropic.go v0.33.0-rc2 736-760).
    pub(crate) fn anthropic_middleware(mut self) -> Self {
        self.flavor = Flavor::Anthropic;
        self.charset = true;
        self
    }
    /// Marks an OpenAI error as a request-decoding error (content type with charset).
    pub(crate) fn with_charset(mut self) -> Self {
        self.charset = true;
        self
    }

    /// The body bytes.
    pub(crate) fn body(&self) -> Vec<u8> {
        match self.flavor {
            Flavor::Native => crate::gojson::to_go_json(&NativeError { error: &self.message }),
            Flavor::Anthropic => {
                let kind = match self.status.as_u16() {
                    400 => "invalid_request_error",
                    401 => "authentication_error",
                    403 => "permission_error",
                    404 => "not_found_error",
                    429 => "rate_limit_error",
                    503 | 529 => "overloaded_error",
                    _ => "api_error",
                };
                // The real id is random (`req_` and 24 hex digits); here it is derived from the
                // message, so a run's errors are the same bytes every time.
                let h = crate::seed::mix(crate::seed::fnv1a(self.message.as_bytes()));
                let id = format!("req_{h:016x}{:08x}", crate::seed::mix(h) >> 32);
                let mut b = crate::gojson::to_go_json(&AnthropicError {
                    kind: "error",
                    error: AnthropicErrorBody { kind, message: &self.message },
                    request_id: &id,
                });
                if !self.charset {
                    b.push(b'\n');
                }
                b
            }
            Flavor::OpenAi => {
                let kind = match self.status.as_u16() {
                    400 => "invalid_request_error",
                    404 => "not_found_error",
                    _ => "api_error",
                };
                let mut b = crate::gojson::to_go_json(&OpenAiError {
                    error: OpenAiErrorBody { message: &self.message, kind, param: None, code: None },
                });
                // Errors the /v1 middleware writes itself end with a newline; its own decoding
                // errors do not (captures 28, 43 and 44).
                if !self.charset {
                    b.push(b'\n');
                }
                b
            }
        }
    }
}

#[derive(Serialize)]
struct NativeError<'a> {
    error: &'a str,
}

#[derive(Serialize)]
struct AnthropicError<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    error: AnthropicErrorBody<'a>,
    request_id: &'a str,
}

#[derive(Serialize)]
struct AnthropicErrorBody<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    message: &'a str,
}

#[derive(Serialize)]
struct OpenAiError<'a> {
    error: OpenAiErrorBody<'a>,
}

#[derive(Serialize)]
struct OpenAiErrorBody<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    param: Option<&'a str>,
    code: Option<&'a str>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        tracing::debug!(target: "sim_ollama", status = self.status.as_u16(), message = %self.message, "error response");
        let ct = if self.charset { "application/json; charset=utf-8" } else { "application/json" };
        let mut r = if self.chunked {
            let body = bytes::Bytes::from(self.body());
            let once = futures::stream::once(async move { Ok::<_, std::convert::Infallible>(body) });
            (self.status, axum::body::Body::from_stream(once)).into_response()
        } else {
            (self.status, self.body()).into_response()
        };
        r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
        r
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.message)
    }
}
