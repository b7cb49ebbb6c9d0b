//! When a request reached the server, as opposed to when the simulator got round to it.
//!
//! A burst of a thousand connections keeps the simulator's two workers busy parsing for tens
//! of milliseconds; a request parsed last would start its modelled schedule that much later
//! than it arrived, and every token of it would reach the client late by the simulator's own
//! CPU time, which the real server (microseconds of HTTP parsing) does not spend. So each
//! connection stamps the moment its request's bytes were there, and a generation that had
//! nothing modelled to wait for (a loaded runner, a free slot) runs its schedule from that
//! stamp ([`crate::generation::Running::start`]): the first token leaves at its deadline when
//! the simulator gets to the request before it. One it gets to later sends its first token at
//! once and keeps its gaps after it ([`crate::pacer::Pacer::new`]): the delay is absorbed by
//! the wait for the first token, never by crowding the tokens after it.
//!
//! The stamp is never earlier than the client's send: it is taken when the bytes are seen
//! (when the connection is accepted if they are already waiting, else when a read returns
//! them after one that found nothing). A pre-connected client that sends later is stamped at
//! its send. A stamp belongs to one request: the handler takes it, and the connection forgets
//! one nobody took when it writes, so a request read while another is answered (pipelined,
//! or sent at once behind it on a kept-alive connection) finds none and counts from when it
//! is handled, as the real server, which serves a connection's requests in turn, starts it.

use axum::serve::Listener;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// The stamp of a connection's latest request, until a handler takes it or the connection
/// writes (answers): nanoseconds since [`origin`] plus one, zero for none.
#[derive(Debug, Default)]
pub(crate) struct Stamp(AtomicU64);

/// What stamps count from.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl Stamp {
    fn set(&self, at: Instant) {
        let ns = at.saturating_duration_since(origin()).as_nanos().min(u128::from(u64::MAX - 1)) as u64;
        self.0.store(ns + 1, Ordering::Relaxed);
    }

    /// Forgets a stamp no handler took: bytes read while a request is answered (its body's
    /// tail) do not start the next request, which is stamped when it is read after a read
    /// that found nothing, or not at all.
    fn clear(&self) {
        if self.0.load(Ordering::Relaxed) != 0 {
            self.0.store(0, Ordering::Relaxed);
        }
    }

    /// Takes the stamp: each request's belongs to it alone.
    pub(crate) fn take(&self) -> Option<Instant> {
        match self.0.swap(0, Ordering::Relaxed) {
            0 => None,
            ns => Some(origin() + Duration::from_nanos(ns - 1)),
        }
    }
}

/// The simulator's listener: TCP with `TCP_NODELAY`, each connection stamping its requests.
#[derive(Debug)]
pub(crate) struct Stamping(TcpListener);

impl Stamping {
    pub(crate) fn new(listener: TcpListener) -> Self {
        // Stamps count from before the first connection.
        origin();
        Stamping(listener)
    }
}

impl Listener for Stamping {
    type Io = Stamped;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Stamped, SocketAddr) {
        // axum's own accept: it retries on errors, pausing when out of file descriptors.
        let (tcp, addr) = Listener::accept(&mut self.0).await;
        let accepted = Instant::now();
        // Tokens are small writes: without TCP_NODELAY, Nagle's algorithm would hold each one
        // back until the previous is acknowledged.
        let _ = tcp.set_nodelay(true);
        // Is the request already waiting? Then it arrived by now (one recv with MSG_PEEK on a
        // non-blocking socket; nothing waiting says WouldBlock).
        let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        let waiting = socket2::SockRef::from(&tcp).peek(&mut probe).is_ok_and(|n| n > 0);
        let stamp = Arc::new(Stamp::default());
        if waiting {
            stamp.set(accepted);
        }
        (Stamped { io: tcp, idle: !waiting, stamp }, addr)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// A connection that stamps the first bytes read after a read that found none.
#[derive(Debug)]
pub(crate) struct Stamped {
    io: TcpStream,
    /// The last read found nothing: the next bytes start a request.
    idle: bool,
    stamp: Arc<Stamp>,
}

impl Stamped {
    /// The connection's stamp, shared with every request it carries.
    pub(crate) fn stamp(&self) -> Arc<Stamp> {
        Arc::clone(&self.stamp)
    }
}

impl AsyncRead for Stamped {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        match r {
            Poll::Pending => self.idle = true,
            Poll::Ready(Ok(())) if self.idle && buf.filled().len() > before => {
                self.idle = false;
                self.stamp.set(Instant::now());
            }
            Poll::Ready(_) => {}
        }
        r
    }
}

impl AsyncWrite for Stamped {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.stamp.clear();
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.stamp.clear();
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// What every request of a connection gets (as axum's `ConnectInfo`, inserted by
/// [`crate::http1::serve`]): the client's address and the connection's stamp.
#[derive(Debug, Clone)]
pub(crate) struct Conn {
    pub(crate) addr: SocketAddr,
    pub(crate) stamp: Arc<Stamp>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
    }

    fn listener() -> (Stamping, SocketAddr) {
        let l = crate::server::listen("127.0.0.1:0".parse().expect("addr")).expect("listen");
        let addr = l.local_addr().expect("addr");
        (Stamping::new(TcpListener::from_std(l).expect("tokio listener")), addr)
    }

    #[test]
    fn a_request_waiting_when_its_connection_is_accepted_is_stamped_then_and_taken_once() {
        runtime().block_on(async {
            let (mut l, addr) = listener();
            let sent = Instant::now();
            let mut c = std::net::TcpStream::connect(addr).expect("connect");
            c.write_all(b"GET / HTTP/1.1\r\n\r\n").expect("send");
            // The bytes are in the server's receive queue before it accepts.
            std::thread::sleep(Duration::from_millis(20));
            let before = Instant::now();
            let (io, _) = Listener::accept(&mut l).await;
            let after = Instant::now();
            let at = io.stamp.take().expect("stamped at accept");
            assert!(
                at >= before && at <= after && at >= sent,
                "stamped {at:?}, accepted between {before:?} and {after:?}"
            );
            assert_eq!(io.stamp.take(), None, "a stamp belongs to one request");
        });
    }

    #[test]
    fn a_request_sent_later_is_stamped_when_read_and_an_answer_forgets_a_stamp_nobody_took() {
        runtime().block_on(async {
            let (mut l, addr) = listener();
            let mut c = std::net::TcpStream::connect(addr).expect("connect");
            let (mut io, _) = Listener::accept(&mut l).await;
            // Connected, nothing sent: nothing to stamp (a pool's idle connection).
            assert_eq!(io.stamp.take(), None);
            let client = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                let sent = Instant::now();
                c.write_all(b"GET / HTTP/1.1\r\n\r\n").expect("send");
                (c, sent)
            });
            let mut buf = [0u8; 64];
            let n = io.read(&mut buf).await.expect("read");
            let read = Instant::now();
            let (mut c, sent) = client.join().expect("client");
            assert!(n > 0);
            let at = io.stamp.take().expect("stamped when read");
            assert!(at >= sent && at <= read, "stamped {at:?}, sent {sent:?}, read {read:?}");
            // Stamped again after a read that waited, and forgotten once the server answers:
            // bytes read while a request is answered do not start the next one.
            let client = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                c.write_all(b"tail").expect("send");
                c
            });
            let _ = io.read(&mut buf).await.expect("read");
            let mut c = client.join().expect("client");
            io.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await.expect("answer");
            assert_eq!(io.stamp.take(), None, "the answer forgot the stamp");
            let mut got = [0u8; 8];
            c.read_exact(&mut got).expect("the answer arrives");
        });
    }
}
