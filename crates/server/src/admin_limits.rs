//! Limits on the admin port, for clients that hold it without using it:
//!
//! - **connections**: at most `connections_max` at once per admin listener (cleartext and
//!   TLS each); beyond them, `reserve` more are kept for the cluster's own members: such a
//!   connection is served only requests made as the cluster identity (any other gets 503
//!   and the connection closes, see [`AdminConn`]); one more than both is closed as soon
//!   as it is accepted, before anything is read;
//! - **idle**: a connection that neither sends nor receives a byte for `idle` is closed
//!   (headers trickled slowly, a silent keep-alive, a client that never reads its answer);
//! - **request time**: a request not answered within `request` gets 503; its handler is
//!   dropped (a proposal it made may still commit, as with any client timeout).
//!
//! The members' own calls (Raft, forwarded requests, failover and rebalance steps, probes)
//! come in on the same port: a flood of connections that fills `connections_max` leaves
//! them the reserve, so a stranger cannot cut a node off from its cluster (or get it
//! fenced) by opening sockets. The reserve cannot tell a member before its first request
//! is read, so strangers can hold reserve slots too, but only until their first request
//! (answered 503, then closed) or the idle limit. `idle` is longer than `request`: a
//! handler that works in silence is cut by the request limit, with an answer, first.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// See [`AdminLimits::connections_max`].
pub const ADMIN_CONNECTIONS_MAX_DEFAULT: usize = 256;
/// See [`AdminLimits::idle`].
pub const ADMIN_IDLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(120);
/// See [`AdminLimits::reserve`]: Raft, probes and the leader's calls need a few each.
pub const ADMIN_RESERVE_DEFAULT: usize = 32;
/// See [`AdminLimits::request`]. A failover asks every replica's node for its position
/// within 2 s, a forwarded request waits 10 s for the leader: a minute is far above both.
pub const ADMIN_REQUEST_TIMEOUT_DEFAULT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdminLimits {
    /// Connections open at once, per admin listener.
    pub connections_max: usize,
    /// Connections beyond `connections_max` kept for the cluster's members.
    pub reserve: usize,
    /// A connection with no byte in either direction for this long is closed.
    pub idle: Duration,
    /// A request not answered within this gets 503.
    pub request: Duration,
}

impl Default for AdminLimits {
    fn default() -> Self {
        AdminLimits {
            connections_max: ADMIN_CONNECTIONS_MAX_DEFAULT,
            reserve: ADMIN_RESERVE_DEFAULT,
            idle: ADMIN_IDLE_TIMEOUT_DEFAULT,
            request: ADMIN_REQUEST_TIMEOUT_DEFAULT,
        }
    }
}

/// An admin listener with the connection cap and the idle limit.
pub struct LimitedListener<L> {
    inner: L,
    slots: Arc<Semaphore>,
    /// The members' reserve, taken once `slots` are gone.
    reserve: Arc<Semaphore>,
    idle: Duration,
    /// Connections closed at the cap, for a log line now and then rather than one each.
    refused: u64,
}

impl<L> LimitedListener<L> {
    pub fn new(inner: L, limits: AdminLimits) -> LimitedListener<L> {
        assert!(
            limits.connections_max > 0,
            "an admin port that admits no one"
        );
        LimitedListener {
            inner,
            slots: Arc::new(Semaphore::new(limits.connections_max)),
            reserve: Arc::new(Semaphore::new(limits.reserve)),
            idle: limits.idle,
            refused: 0,
        }
    }
}

impl<L> axum::serve::Listener for LimitedListener<L>
where
    L: axum::serve::Listener,
{
    type Io = Guarded<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (io, addr) = self.inner.accept().await;
            let slot = match self.slots.clone().try_acquire_owned() {
                Ok(slot) => Ok((slot, false)),
                Err(_) => self.reserve.clone().try_acquire_owned().map(|s| (s, true)),
            };
            match slot {
                Ok((slot, reserved)) => return (Guarded::new(io, self.idle, slot, reserved), addr),
                Err(_) => {
                    // Dropped unread: the client sees the connection closed.
                    drop(io);
                    self.refused += 1;
                    if self.refused.is_power_of_two() {
                        tracing::warn!(refused = self.refused,
                            "admin port at its connection limit (--admin-max-connections, and the members' reserve): closing new connections");
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// One admitted connection: its slot, held until it closes, and its idle timer, which any
/// byte read or written resets.
pub struct Guarded<Io> {
    io: Io,
    idle: Duration,
    timer: Pin<Box<Sleep>>,
    _slot: OwnedSemaphorePermit,
    /// Admitted into the members' reserve.
    reserved: bool,
}

impl<Io> Guarded<Io> {
    fn new(io: Io, idle: Duration, slot: OwnedSemaphorePermit, reserved: bool) -> Guarded<Io> {
        Guarded {
            io,
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
            _slot: slot,
            reserved,
        }
    }

    fn progressed(&mut self) {
        let next = Instant::now() + self.idle;
        self.timer.as_mut().reset(next);
    }

    /// After the inner I/O answered `Pending`: an error once the connection has been idle
    /// too long (the timer is registered with `cx` otherwise).
    fn idle_expired(&mut self, cx: &mut Context<'_>) -> bool {
        self.timer.as_mut().poll(cx).is_ready()
    }
}

/// What a request knows of its admin connection (`axum`'s `ConnectInfo<AdminConn>`; the
/// admin router is served `into_make_service_with_connect_info::<AdminConn>()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdminConn {
    /// The connection holds a slot of the members' reserve: only the cluster identity is
    /// served on it.
    pub reserved: bool,
}

impl<L> axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, LimitedListener<L>>>
    for AdminConn
where
    L: axum::serve::Listener,
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, LimitedListener<L>>) -> AdminConn {
        AdminConn {
            reserved: stream.io().reserved,
        }
    }
}

fn idle_error(idle: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("admin connection idle for {idle:?}"),
    )
}

impl<Io: AsyncRead + Unpin> AsyncRead for Guarded<Io> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(r) => {
                this.progressed();
                Poll::Ready(r)
            }
            Poll::Pending if this.idle_expired(cx) => Poll::Ready(Err(idle_error(this.idle))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<Io: AsyncWrite + Unpin> AsyncWrite for Guarded<Io> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.io).poll_write(cx, data) {
            Poll::Ready(r) => {
                this.progressed();
                Poll::Ready(r)
            }
            Poll::Pending if this.idle_expired(cx) => Poll::Ready(Err(idle_error(this.idle))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.io).poll_flush(cx) {
            Poll::Pending if this.idle_expired(cx) => Poll::Ready(Err(idle_error(this.idle))),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Middleware: the request limit. Outermost, so that it bounds authentication too. A query
/// (`/query/service`) is bounded by its own `timeout` instead (at most
/// [`crate::query_service::TIMEOUT_MAX`]): the SDKs ask for 75 s by default. So is a page
/// of a remote index scan (`/internal/index/scan`), whose consistency wait is the query's.
pub async fn time_limit(
    axum::extract::State(limit): axum::extract::State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    let limit = if path == "/query/service" || path == "/internal/index/scan" {
        crate::query_service::TIMEOUT_MAX + Duration::from_secs(5)
    } else {
        limit
    };
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(serde_json::json!({
                "error": format!("the request was not answered within {limit:?} (--admin-request-timeout-s)")
            })),
        )
            .into_response(),
    }
}
