//! HTTP/1.1 on the wire as Ollama's Go server writes it: the connection loop and the response
//! head.
//!
//! axum's `serve` writes header names in lower case, in the order the handler inserted them,
//! with `date` last, and sends every body whose size is known with `Content-Length`. Go's
//! net/http (go1.24 src/net/http/server.go, `chunkWriter.writeHeader` and `extraHeader.Write`)
//! writes differently, and a client that reads the raw head sees it:
//! - names in canonical case (`Content-Type`), which hyper writes with `title_case_headers`;
//! - the handler's headers first, sorted by name (`Header.WriteSubset`), then `Date`, then
//!   `Content-Length` (or `Transfer-Encoding: chunked`);
//! - `Content-Length` only when the whole body fitted in the response writer's 2,048-byte
//!   buffer before the handler returned (`bufferBeforeChunkingSize`); a larger body (an
//!   `/api/show`, an `/api/generate` with a long `context`) goes out chunked;
//! - no `Content-Length` on a status that has no body (1xx, 204, 304).
//!
//! So the simulator serves each connection with hyper itself ([`serve`]) and passes every
//! response through [`go_head`]. Checked against a real Ollama 0.33 by `harness conformance`.

use crate::arrival::{Conn, Stamping};
use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode, header};
use axum::serve::Listener;
use futures::TryFutureExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::pin::pin;
use tokio::sync::watch;
use tower::ServiceExt;

/// Go's response buffer (`bufferBeforeChunkingSize`, net/http/server.go): a body that fits in
/// it is sent with `Content-Length`, a larger one chunked.
pub(crate) const GO_BUFFER_BEFORE_CHUNKING: u64 = 2048;

/// Serves `listener` with `app` until `stop` turns true, then lets each open connection finish
/// the response it is writing (hyper's graceful shutdown) and returns when all have closed.
pub(crate) async fn serve(mut listener: Stamping, app: Router, mut stop: watch::Receiver<bool>) {
    // Each connection holds a receiver; `closed()` on the sender resolves when all are gone.
    let (open_tx, open_rx) = watch::channel(());
    let (shutdown_tx, _) = watch::channel(false);
    loop {
        let (io, addr) = tokio::select! {
            conn = listener.accept() => conn,
            _ = stop.wait_for(|s| *s) => break,
        };
        let conn = Conn { addr, stamp: io.stamp() };
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(conn.clone()));
            // After every layer: axum's method router adds `Allow` to its 405 last of all.
            let path = req.uri().path().to_owned();
            app.clone().oneshot(req.map(Body::new)).map_ok(move |r| go_head(gin_allow(r, &path)))
        });
        let open = open_rx.clone();
        let mut shutdown = shutdown_tx.subscribe();
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.title_case_headers(true);
            let mut conn = pin!(builder.serve_connection(TokioIo::new(io), service).with_upgrades());
            let mut shutting = false;
            loop {
                tokio::select! {
                    r = conn.as_mut() => {
                        if let Err(e) = r {
                            tracing::trace!(target: "sim_ollama", "connection from {addr}: {e}");
                        }
                        break;
                    }
                    _ = shutdown.wait_for(|s| *s), if !shutting => {
                        shutting = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
            drop(open);
        });
    }
    let _ = shutdown_tx.send(true);
    drop(open_rx);
    open_tx.closed().await;
}

/// The paths the real server registers HEAD on (server/routes.go v0.33.0-rc2 1877-1887); a HEAD
/// anywhere else is gin's 405, where axum answers it as a GET (`routes::edge`).
pub(crate) const HEAD_PATHS: &[&str] = &["/", "/api/version", "/api/tags"];

/// A 405's `Allow` as gin writes it (gin.go `handleHTTPRequest`): the path's methods in the
/// order gin first saw each registered, its method trees' order (HEAD, GET, POST, DELETE), HEAD
/// only where it is registered, joined by ", "; axum writes `GET,HEAD` for every GET route.
fn gin_allow(mut r: Response<Body>, path: &str) -> Response<Body> {
    if r.status() != StatusCode::METHOD_NOT_ALLOWED {
        return r;
    }
    let Some(listed) = r.headers().get(header::ALLOW).and_then(|v| v.to_str().ok()).map(str::to_owned) else {
        return r;
    };
    let listed: Vec<&str> = listed.split(',').map(str::trim).collect();
    let gin: Vec<&str> = ["HEAD", "GET", "POST", "DELETE"]
        .into_iter()
        .filter(|m| listed.contains(m) && (*m != "HEAD" || HEAD_PATHS.contains(&path)))
        .collect();
    if let Ok(v) = HeaderValue::from_str(&gin.join(", ")) {
        r.headers_mut().insert(header::ALLOW, v);
    }
    r
}

/// The response head as Go writes it (see the module's header): the handler's headers sorted
/// by name, `Date`, then `Content-Length` for a body of at most 2,048 bytes; a larger body
/// loses its known size so that hyper sends it chunked, as Go does.
pub(crate) fn go_head(r: Response<Body>) -> Response<Body> {
    let (mut parts, body) = r.into_parts();
    let mut handler: Vec<(HeaderName, HeaderValue)> = Vec::with_capacity(parts.headers.len());
    let mut last: Option<HeaderName> = None;
    let given_length = parts.headers.get(header::CONTENT_LENGTH).cloned();
    for (name, value) in std::mem::take(&mut parts.headers) {
        // `into_iter` names a header once, before all of its values.
        let name = match name {
            Some(n) => {
                last = Some(n.clone());
                n
            }
            None => last.clone().expect("a header's first value comes with its name"),
        };
        if name == header::DATE || name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING {
            continue;
        }
        handler.push((name, value));
    }
    // Canonical names sort as their lower-case forms do, except where a letter follows a
    // non-letter; sorting the canonical form is Go's order exactly.
    handler.sort_by_cached_key(|(n, _)| canonical(n.as_str()));
    let mut headers = HeaderMap::with_capacity(handler.len() + 2);
    for (n, v) in handler {
        headers.append(n, v);
    }
    headers.insert(header::DATE, date_now());
    let status = parts.status;
    let has_body =
        !(status.is_informational() || status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED);
    // A length the router set stands for a body it then dropped (axum answers HEAD with the
    // GET handler's length and no body), as Go counts what a HEAD handler writes.
    let length = given_length
        .as_ref()
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .or(body.size_hint().exact());
    let body = match length {
        Some(n) if has_body && n <= GO_BUFFER_BEFORE_CHUNKING => {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
            body
        }
        Some(_) if has_body && body.size_hint().exact() != Some(0) => Body::from_stream(body.into_data_stream()),
        _ => body,
    };
    parts.headers = headers;
    Response::from_parts(parts, body)
}

/// A header name in Go's canonical form (`textproto.CanonicalMIMEHeaderKey`), which is also
/// what hyper writes with `title_case_headers`.
fn canonical(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = true;
    for c in name.chars() {
        out.push(if upper { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() });
        upper = c == '-';
    }
    out
}

/// Now, as an HTTP date (`Tue, 24 Nov 2026 06:49:32 GMT`).
fn date_now() -> HeaderValue {
    HeaderValue::from_str(&httpdate::fmt_http_date(std::time::SystemTime::now()))
        .expect("an HTTP date is a valid header value")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(r: &Response<Body>) -> Vec<String> {
        r.headers().keys().map(|k| canonical(k.as_str())).collect()
    }

    #[test]
    fn headers_go_in_gos_order_with_date_then_length() {
        let r = Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ALLOW, "POST")
            .body(Body::from("{}"))
            .unwrap();
        let r = go_head(r);
        assert_eq!(names(&r), ["Allow", "Content-Type", "Date", "Content-Length"]);
        assert_eq!(r.headers()[header::CONTENT_LENGTH], "2");
    }

    #[test]
    fn a_body_over_gos_buffer_loses_its_length_so_it_is_chunked() {
        let at_limit = go_head(Response::new(Body::from(vec![b'x'; 2048])));
        assert_eq!(at_limit.headers()[header::CONTENT_LENGTH], "2048");
        assert_eq!(at_limit.body().size_hint().exact(), Some(2048));
        let over = go_head(Response::new(Body::from(vec![b'x'; 2049])));
        assert!(over.headers().get(header::CONTENT_LENGTH).is_none());
        assert_eq!(over.body().size_hint().exact(), None);
    }

    #[test]
    fn a_length_set_for_a_dropped_body_is_kept() {
        // axum's answer to HEAD: the GET handler's length, no body.
        let r = Response::builder().header(header::CONTENT_LENGTH, "17").body(Body::empty()).unwrap();
        assert_eq!(go_head(r).headers()[header::CONTENT_LENGTH], "17");
    }

    #[test]
    fn statuses_without_a_body_get_no_length() {
        let r = Response::builder().status(StatusCode::NO_CONTENT).body(Body::empty()).unwrap();
        assert_eq!(names(&go_head(r)), ["Date"]);
    }

    #[test]
    fn canonical_names_are_gos() {
        assert_eq!(canonical("content-type"), "Content-Type");
        assert_eq!(canonical("x-request-id"), "X-Request-Id");
        assert_eq!(canonical("www-authenticate"), "Www-Authenticate");
    }
}
