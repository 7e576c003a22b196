//! `HttpClient`: JSON over HTTP/1.1 to one peer, on one kept-alive connection.
//!
//! Every call is bounded: the connect (`CONNECT_TIMEOUT`), the whole exchange (the caller's
//! timeout) and the response body (`RPC_BODY_BYTES_MAX`). A connection that failed or timed
//! out is dropped, since it may hold a half-read answer; the next call dials again.
//!
//! Errors say whether the request may have reached the peer: `Connect` means it cannot have
//! (nothing was sent), which is what makes retrying a forwarded proposal safe.

use crate::config::{CONNECT_TIMEOUT, RPC_BODY_BYTES_MAX};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use serde::Serialize;
use sluice_client::net::Dial;
use sluice_client::Credentials;
use std::time::Duration;

/// A call that did not bring back an answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpError {
    /// No connection could be made: the request was not sent.
    #[error("cannot connect to {addr}: {reason}")]
    Connect { addr: String, reason: String },
    /// The peer did not answer in time; it may have acted on the request.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The peer is shutting down or is at its request limit (503).
    #[error("the peer is unavailable")]
    Unavailable,
    /// The peer refused the credentials (401) or the identity (403).
    #[error("the peer refused the credentials (HTTP {0})")]
    Refused(u16),
    #[error("the peer answered HTTP {0}")]
    Status(u16),
    /// The connection failed after the request was sent; the peer may have acted on it.
    #[error("the exchange failed: {0}")]
    Transport(String),
    #[error("the answer cannot be read: {0}")]
    Decode(String),
}

/// A client for one peer's admin address.
pub(crate) struct HttpClient {
    addr: String,
    dial: Dial,
    /// The `Authorization` header every request carries.
    auth: String,
    conn: Option<SendRequest<Full<Bytes>>>,
}

impl HttpClient {
    /// A client for `addr`, connecting as `dial` says (from its source address, over TLS if
    /// it has TLS), calling as `who`.
    pub(crate) fn new(addr: String, dial: Dial, who: &Credentials) -> HttpClient {
        HttpClient {
            addr,
            dial,
            auth: who.basic_header(),
            conn: None,
        }
    }

    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// POSTs `body` as JSON to `path` and decodes the JSON answer, all within `timeout`.
    pub(crate) async fn post<B, R>(
        &mut self,
        path: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<R, HttpError>
    where
        B: Serialize + ?Sized,
        R: DeserializeOwned,
    {
        let bytes = serde_json::to_vec(body).map_err(|e| HttpError::Decode(e.to_string()))?;
        let result = match tokio::time::timeout(timeout, self.exchange(path, bytes)).await {
            Ok(result) => result,
            Err(_) => Err(HttpError::Timeout(timeout)),
        };
        if result.is_err() {
            self.conn = None;
        }
        let answer = result?;
        serde_json::from_slice(&answer).map_err(|e| HttpError::Decode(e.to_string()))
    }

    async fn exchange(&mut self, path: &str, body: Vec<u8>) -> Result<Bytes, HttpError> {
        let mut sender = match self.conn.take() {
            Some(kept) if !kept.is_closed() => kept,
            _ => self.connect().await?,
        };
        // A kept-alive connection the peer closed fails here, before anything is written.
        if sender.ready().await.is_err() {
            sender = self.connect().await?;
            sender.ready().await.map_err(|e| HttpError::Connect {
                addr: self.addr.clone(),
                reason: e.to_string(),
            })?;
        }
        let request = Request::post(path)
            .header(HOST, self.addr.as_str())
            .header(AUTHORIZATION, self.auth.as_str())
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| HttpError::Transport(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| HttpError::Transport(e.to_string()))?;
        match response.status() {
            StatusCode::OK => {}
            StatusCode::SERVICE_UNAVAILABLE => return Err(HttpError::Unavailable),
            s @ (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) => {
                return Err(HttpError::Refused(s.as_u16()))
            }
            other => return Err(HttpError::Status(other.as_u16())),
        }
        let collected = Limited::new(response.into_body(), RPC_BODY_BYTES_MAX)
            .collect()
            .await
            .map_err(|e| HttpError::Transport(e.to_string()))?;
        // Only a connection whose answer was read in full can carry the next request.
        self.conn = Some(sender);
        Ok(collected.to_bytes())
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, HttpError> {
        let failed = |reason: String| HttpError::Connect {
            addr: self.addr.clone(),
            reason,
        };
        // The TLS handshake, if any, is part of the connect and bounded with it.
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, self.dial.connect(&self.addr))
            .await
            .map_err(|_| failed(format!("no connection within {CONNECT_TIMEOUT:?}")))?
            .map_err(|e| failed(e.to_string()))?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| failed(e.to_string()))?;
        // The connection task ends when the sender is dropped or the peer closes.
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("meta rpc connection closed: {e}");
            }
        });
        Ok(sender)
    }
}
