//! The HTTP surface: a pure router per instance (`app`), built separately from binding and
//! serving so most tests call it in memory.
//!
//! - [`models`]: `/`, `/api/version`, `/api/tags`, `/api/ps`, `/api/show`, pull, copy, delete.
//! - [`native`]: `/api/generate`, `/api/chat`.
//! - [`embed`]: `/api/embed`, `/api/embeddings`.
//! - [`openai`]: `/v1/*`, the OpenAI-compatible layer; [`audio`]: `/v1/audio/transcriptions`.
//! - [`sim`]: `/sim/*`, the simulator's own trace and metrics.
//! - [`body`]: the paced streaming body shared by every streaming endpoint.
//! - [`http`]: what every handler shares (state, the JSON body reader, response builders).

pub(crate) mod anthropic;
pub(crate) mod audio;
pub(crate) mod body;
pub(crate) mod bound;
pub(crate) mod create;
pub(crate) mod embed;
pub(crate) mod history;
pub(crate) mod http;
pub(crate) mod models;
pub(crate) mod native;
pub(crate) mod openai;
pub(crate) mod peer;
pub(crate) mod pipeline;
pub(crate) mod responses;
pub(crate) mod responses_request;
pub(crate) mod sim;

pub(crate) use http::AppState;

use crate::error::ApiError;
use crate::faults::FaultRule;
use crate::script::ScriptRule;
use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};

/// Builds the router of one instance.
pub(crate) fn app(state: AppState) -> Router {
    let limit = state.shared.cfg.body_limit;
    Router::new()
        .route("/", get(models::root))
        .route("/api/version", get(models::version))
        .route("/api/status", get(models::status))
        .route("/api/tags", get(models::tags))
        .route("/api/ps", get(models::ps))
        .route("/api/show", post(models::show))
        .route("/api/generate", post(native::generate))
        .route("/api/chat", post(native::chat))
        .route("/api/embed", post(embed::embed))
        .route("/api/embeddings", post(embed::embeddings))
        .route("/api/pull", post(models::pull))
        .route("/api/copy", post(models::copy))
        .route("/api/create", post(create::create))
        .route("/api/delete", delete(models::delete))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/v1/completions", post(openai::completions))
        .route("/v1/embeddings", post(openai::embeddings))
        .route("/v1/audio/transcriptions", post(audio::transcriptions))
        .route("/v1/messages", post(anthropic::messages))
        .route("/v1/responses", post(responses::responses))
        .route("/v1/models", get(openai::models))
        .route("/v1/models/{*model}", get(openai::model))
        .route("/sim/trace", get(sim::get_trace).delete(sim::delete_trace))
        .route("/sim/metrics", get(sim::metrics))
        .route("/sim/mark", post(sim::post_mark))
        .route("/sim/probe", post(sim::post_probe))
        .route("/sim/confirm", post(sim::post_confirm))
        .route("/sim/judge", get(sim::judge))
        .route(
            "/sim/script",
            get(sim::get_rules::<ScriptRule>)
                .put(sim::put_rules::<ScriptRule>)
                .post(sim::post_rules::<ScriptRule>)
                .delete(sim::delete_rules::<ScriptRule>),
        )
        .route(
            "/sim/faults",
            get(sim::get_rules::<FaultRule>)
                .put(sim::put_rules::<FaultRule>)
                .post(sim::post_rules::<FaultRule>)
                .delete(sim::delete_rules::<FaultRule>),
        )
        .fallback(fallback)
        .layer(middleware::from_fn(edge))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// Paths that exist, for the trailing-slash redirect.
const KNOWN_PATHS: &[&str] = &[
    "/api/version",
    "/api/status",
    "/api/tags",
    "/api/ps",
    "/api/show",
    "/api/generate",
    "/api/chat",
    "/api/embed",
    "/api/embeddings",
    "/api/pull",
    "/api/copy",
    "/api/create",
    "/api/delete",
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/audio/transcriptions",
    "/v1/models",
    "/sim/trace",
    "/sim/metrics",
    "/sim/faults",
    "/sim/script",
    "/sim/mark",
    "/sim/probe",
    "/sim/confirm",
    "/sim/judge",
];

/// Unknown paths: Go's redirect to the clean path (a doubled slash, `.` or `..`), gin's for a
/// trailing slash, or gin's text/plain 404.
///
/// The real server serves gin's routes through Go's `http.DefaultServeMux` (server/routes.go
/// v0.33.0-rc2 2000, `http.Handle("/", h)`), which answers a path that is not clean (Go's
/// `cleanPath`: `//api/chat`, a base URL ending in `/` joined to `/api/chat`) with a 307 to the
/// clean one before gin sees it; gin then redirects a known path with a trailing slash (301
/// for GET, 307 otherwise). Both write with `http.Redirect`. A clean path matches no route
/// only when it is unknown, so the check lives here.
async fn fallback(method: Method, uri: axum::http::Uri) -> Response {
    let path = uri.path();
    let clean = go_clean_path(path);
    if clean != path {
        let to = match uri.query() {
            Some(q) => format!("{clean}?{q}"),
            None => clean,
        };
        return go_redirect(&method, StatusCode::TEMPORARY_REDIRECT, &to);
    }
    if path.len() > 1 && path.ends_with('/') && KNOWN_PATHS.contains(&path.trim_end_matches('/')) {
        let status = if method == Method::GET { StatusCode::MOVED_PERMANENTLY } else { StatusCode::TEMPORARY_REDIRECT };
        return go_redirect(&method, status, path.trim_end_matches('/'));
    }
    text(StatusCode::NOT_FOUND, "404 page not found")
}

/// Go's `cleanPath` (net/http/server.go): runs of slashes as one, `.` elements dropped, `..`
/// dropping the element before it (never above the root), a trailing slash kept.
fn go_clean_path(p: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    for element in p.split('/') {
        match element {
            "" | "." => {}
            ".." => {
                kept.pop();
            }
            e => kept.push(e),
        }
    }
    let mut clean = format!("/{}", kept.join("/"));
    if p.ends_with('/') && clean != "/" {
        clean.push('/');
    }
    clean
}

/// Go's `http.Redirect`: the status and `Location`, and for GET and HEAD a short HTML body
/// (`<a href="/api/tags">Moved Permanently</a>.`, written with `fmt.Fprintln` after a line
/// that already ends in a newline: two of them) with its content type.
fn go_redirect(method: &Method, status: StatusCode, to: &str) -> Response {
    let location = HeaderValue::from_str(to).unwrap_or_else(|_| HeaderValue::from_static("/"));
    let mut r = if method == Method::GET || method == Method::HEAD {
        let href = to.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&#34;");
        let body = format!("<a href=\"{href}\">{}</a>.\n\n", status.canonical_reason().unwrap_or(""));
        let mut r = (status, body).into_response();
        r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
        r
    } else {
        status.into_response()
    };
    r.headers_mut().insert(header::LOCATION, location);
    r
}

fn text(status: StatusCode, body: &'static str) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    r
}

/// A handler that panics answers 500 in Ollama's error shape instead of dropping the
/// connection (the panic is logged; the simulator keeps serving). A panic inside a streaming
/// body, after the headers, can only end that stream.
async fn catch_panics(req: Request, next: Next) -> Response {
    use futures::FutureExt;
    let path = req.uri().path().to_string();
    match std::panic::AssertUnwindSafe(next.run(req)).catch_unwind().await {
        Ok(r) => r,
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            tracing::error!(target: "sim_ollama", "handler for {path} panicked: {what}");
            ApiError::internal("sim-ollama: internal error while handling this request").into_response()
        }
    }
}

/// What every request passes through, in one layer (each `from_fn` layer costs a clone of the
/// routes and a boxed future per request): CORS as the real server applies it, a handler's
/// panic answered with a 500, axum's 405 with gin's text.
async fn edge(req: Request, next: Next) -> Response {
    let origin = match cors(&req) {
        Cors::Pass(origin) => origin,
        Cors::Answered(refused_or_preflight) => return refused_or_preflight,
    };
    // axum answers HEAD on every GET route (as a GET); gin only where HEAD is registered.
    let head_by_get = req.method() == Method::HEAD && !crate::http1::HEAD_PATHS.contains(&req.uri().path());
    let mut r = catch_panics(req, next).await;
    if head_by_get && r.status().is_success() {
        r = StatusCode::METHOD_NOT_ALLOWED.into_response();
        r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET"));
    }
    let r = go_style_errors(r);
    match origin {
        Some(origin) => with_cors(r, &origin, false),
        None => r,
    }
}

/// Gives axum's bare 405 gin's text body (gin's `Allow` is written after every layer:
/// [`crate::http1::gin_allow`]).
fn go_style_errors(r: Response) -> Response {
    if r.status() == StatusCode::METHOD_NOT_ALLOWED {
        let (mut parts, _) = r.into_parts();
        parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        parts.headers.remove(header::CONTENT_LENGTH);
        return Response::from_parts(parts, Body::from("405 method not allowed"));
    }
    r
}

/// Origins the real server allows by default (any port).
fn origin_allowed(origin: &str) -> bool {
    let lower = origin.to_ascii_lowercase();
    for scheme in ["app://", "file://", "tauri://", "vscode-webview://", "vscode-file://"] {
        if lower.starts_with(scheme) {
            return true;
        }
    }
    let rest = lower.strip_prefix("http://").or_else(|| lower.strip_prefix("https://"));
    let Some(rest) = rest else { return false };
    let host = rest.split('/').next().unwrap_or("");
    let host =
        host.rsplit_once(':').map_or(host, |(h, port)| if port.bytes().all(|b| b.is_ascii_digit()) { h } else { host });
    matches!(host, "localhost" | "127.0.0.1" | "0.0.0.0" | "[::1]")
        || std::env::var("OLLAMA_ORIGINS").is_ok_and(|list| {
            list.split(',').map(str::trim).filter(|p| !p.is_empty()).any(|p| wildcard_match(p, origin))
        })
}

fn wildcard_match(pattern: &str, s: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern.eq_ignore_ascii_case(s),
        Some((pre, post)) => {
            s.len() >= pre.len() + post.len()
                && s[..pre.len()].eq_ignore_ascii_case(pre)
                && s[s.len() - post.len()..].eq_ignore_ascii_case(post)
        }
    }
}

/// What CORS makes of a request.
enum Cors {
    /// On to the handler; the allowed origin, if any, for the CORS headers of the answer.
    Pass(Option<String>),
    /// Answered here: a foreign origin's 403, an allowed origin's preflight 204.
    Answered(Response),
}

/// CORS as the real server applies it: a request with a foreign `Origin` gets 403, a preflight
/// from an allowed one 204.
fn cors(req: &Request) -> Cors {
    let Some(origin) = req.headers().get(header::ORIGIN).and_then(|v| v.to_str().ok()).map(str::to_string) else {
        return Cors::Pass(None);
    };
    let own_host = req.headers().get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    let same_host = origin.split("://").nth(1).is_some_and(|h| h.eq_ignore_ascii_case(own_host));
    if !same_host && !origin_allowed(&origin) {
        let mut r = StatusCode::FORBIDDEN.into_response();
        if req.method() == Method::OPTIONS {
            r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
        }
        return Cors::Answered(r);
    }
    if req.method() == Method::OPTIONS {
        return Cors::Answered(with_cors(StatusCode::NO_CONTENT.into_response(), &origin, true));
    }
    Cors::Pass(Some(origin))
}

/// The CORS headers of an answer to an allowed origin (and a preflight's).
fn with_cors(mut r: Response, origin: &str, preflight: bool) -> Response {
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(origin) {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
    }
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
    if preflight {
        // A preflight varies by what it was asked too, and gin-contrib/cors lists the allowed
        // headers in canonical form (a real Ollama 0.33, 2026-11-26); `X-Agent` is the
        // simulator's own, last, so a browser program can label its agents.
        h.append(header::VARY, HeaderValue::from_static("Access-Control-Request-Method"));
        h.append(header::VARY, HeaderValue::from_static("Access-Control-Request-Headers"));
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET,POST,PUT,PATCH,DELETE,HEAD,OPTIONS"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("Authorization,Content-Type,User-Agent,Accept,X-Requested-With,Openai-Beta,X-Stainless-Arch,X-Stainless-Async,X-Stainless-Custom-Poll-Interval,X-Stainless-Helper-Method,X-Stainless-Lang,X-Stainless-Os,X-Stainless-Package-Version,X-Stainless-Poll-Helper,X-Stainless-Retry-Count,X-Stainless-Runtime,X-Stainless-Runtime-Version,X-Stainless-Timeout,X-Agent"),
        );
        h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("43200"));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_origins_are_local_ones() {
        assert!(origin_allowed("http://localhost:3000"));
        assert!(origin_allowed("https://127.0.0.1"));
        assert!(origin_allowed("app://obsidian.md"));
        assert!(!origin_allowed("http://example.com"));
        assert!(!origin_allowed("http://localhost.evil.com"));
    }

    #[test]
    fn a_panicking_handler_answers_500_in_ollamas_shape_and_the_server_keeps_serving() {
        // No route of the simulator panics on purpose, so the layer is driven with one that
        // does, served the way the simulator serves (issue 10: a panic used to drop the
        // connection, and was caught by a test only by accident).
        async fn boom() -> &'static str {
            panic!("boom")
        }
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let app = Router::new()
                .route("/boom", get(boom))
                .route("/fine", get(|| async { "fine" }))
                .layer(middleware::from_fn(catch_panics));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move { axum::serve(listener, app).await });
            let client = reqwest::Client::new();
            let r =
                client.get(format!("http://{addr}/boom")).send().await.expect("an answer, not a dropped connection");
            assert_eq!(r.status().as_u16(), 500);
            assert_eq!(
                r.text().await.unwrap(),
                r#"{"error":"sim-ollama: internal error while handling this request"}"#
            );
            let r = client.get(format!("http://{addr}/fine")).send().await.unwrap();
            assert_eq!(r.text().await.unwrap(), "fine");
        });
    }

    #[test]
    fn wildcards_match_prefix_and_suffix() {
        assert!(wildcard_match("https://*.example.com", "https://a.example.com"));
        assert!(!wildcard_match("https://*.example.com", "https://a.example.org"));
    }
}
