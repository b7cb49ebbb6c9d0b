//! Who sent a request and when it arrived: the extractor every model endpoint takes.

use crate::arrival::{Conn, Stamp};
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// Who sent a request and when it arrived: the client's address (when the server was started
/// with connect info), its `X-Agent` label, and its connection's stamp ([`crate::arrival`]).
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    pub(crate) addr: Option<SocketAddr>,
    pub(crate) agent: Option<String>,
    stamp: Option<Arc<Stamp>>,
}

impl Peer {
    /// When the request arrived: its connection's stamp, taken once the handler has the body
    /// (a body that came slowly is stamped by its last bytes, as the real server starts work
    /// once it has decoded it), or now when there is none (a router called in memory, a
    /// request read while another was answered).
    pub(crate) fn arrival(&self) -> Instant {
        let now = Instant::now();
        self.stamp.as_ref().and_then(|s| s.take()).map_or(now, |at| at.min(now))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let conn = parts.extensions.get::<ConnectInfo<Conn>>();
        Ok(Peer {
            addr: conn.map(|c| c.addr),
            agent: super::http::agent_label(&parts.headers),
            stamp: conn.map(|c| Arc::clone(&c.stamp)),
        })
    }
}
