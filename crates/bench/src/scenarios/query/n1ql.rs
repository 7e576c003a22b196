//! A query client of Sluice's `POST /query/service`: one kept-alive HTTP/1 connection
//! (hyper), JSON bodies, HTTP Basic as the bench's login. Every exchange is bounded in time
//! and in answer size.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;

/// Largest answer read: a point lookup's is ~1.3 KiB, a range page's ~5 KiB, and
/// system:indexes' small.
const ANSWER_BYTES_MAX: usize = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum N1qlError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("HTTP: {0}")]
    Http(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("the answer is not the query service's JSON: {0}")]
    Decode(String),
    #[error("the query failed (HTTP {http}, status {status}): {errors}")]
    Failed {
        http: u16,
        status: String,
        errors: String,
    },
}

/// The envelope's fields the bench reads; results counted, not kept.
#[derive(Deserialize)]
struct Counted {
    status: String,
    #[serde(default)]
    results: Vec<IgnoredAny>,
    #[serde(default)]
    errors: Vec<serde_json::Value>,
    /// What a PREPARE with `auto_execute` named its statement.
    #[serde(default)]
    prepared: Option<String>,
}

#[derive(Deserialize)]
struct WithRows {
    status: String,
    #[serde(default)]
    results: Vec<serde_json::Value>,
    #[serde(default)]
    errors: Vec<serde_json::Value>,
}

pub struct N1qlConn {
    /// The `Host` and `Authorization` headers, made once: the bench's client shares the
    /// cores with the server it measures.
    host: HeaderValue,
    auth: HeaderValue,
    sender: SendRequest<Full<Bytes>>,
    timeout: Duration,
}

impl N1qlConn {
    /// Connects to the admin port `addr` as `username`.
    pub async fn connect(
        addr: SocketAddr,
        username: &str,
        password: &str,
        timeout: Duration,
    ) -> Result<N1qlConn, N1qlError> {
        use base64::Engine;
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|source| N1qlError::Connect { addr, source })?;
        stream
            .set_nodelay(true)
            .map_err(|source| N1qlError::Connect { addr, source })?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| N1qlError::Http(e.to_string()))?;
        // The connection's driver ends when the sender is dropped (or the server closes).
        tokio::spawn(conn);
        let token =
            base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
        let header =
            |text: String| HeaderValue::try_from(text).map_err(|e| N1qlError::Http(e.to_string()));
        Ok(N1qlConn {
            host: header(addr.to_string())?,
            auth: header(format!("Basic {token}"))?,
            sender,
            timeout,
        })
    }

    /// Runs `request` (the JSON body: `statement` and the other fields); returns the number
    /// of result rows of a successful statement.
    pub async fn count(&mut self, request: &impl Serialize) -> Result<usize, N1qlError> {
        Ok(self.count_prepared(request).await?.0)
    }

    /// [`N1qlConn::count`], with the `prepared` name the answer gives (a PREPARE with
    /// `auto_execute`).
    pub async fn count_prepared(
        &mut self,
        request: &impl Serialize,
    ) -> Result<(usize, Option<String>), N1qlError> {
        let (http, body) = self.exchange(request).await?;
        let env: Counted =
            serde_json::from_slice(&body).map_err(|e| N1qlError::Decode(e.to_string()))?;
        check(http, &env.status, &env.errors)?;
        Ok((env.results.len(), env.prepared))
    }

    /// Runs `request`; returns its result rows.
    pub async fn rows(
        &mut self,
        request: &serde_json::Value,
    ) -> Result<Vec<serde_json::Value>, N1qlError> {
        let (http, body) = self.exchange(request).await?;
        let env: WithRows =
            serde_json::from_slice(&body).map_err(|e| N1qlError::Decode(e.to_string()))?;
        check(http, &env.status, &env.errors)?;
        Ok(env.results)
    }

    async fn exchange(&mut self, request: &impl Serialize) -> Result<(u16, Bytes), N1qlError> {
        let body = serde_json::to_vec(request).map_err(|e| N1qlError::Decode(e.to_string()))?;
        let req = Request::post("/query/service")
            .header(HOST, self.host.clone())
            .header(AUTHORIZATION, self.auth.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| N1qlError::Http(e.to_string()))?;
        let sender = &mut self.sender;
        let exchanged = async move {
            sender
                .ready()
                .await
                .map_err(|e| N1qlError::Http(e.to_string()))?;
            let resp = sender
                .send_request(req)
                .await
                .map_err(|e| N1qlError::Http(e.to_string()))?;
            let http = resp.status().as_u16();
            let bytes = Limited::new(resp.into_body(), ANSWER_BYTES_MAX)
                .collect()
                .await
                .map_err(|e| N1qlError::Http(e.to_string()))?
                .to_bytes();
            Ok((http, bytes))
        };
        tokio::time::timeout(self.timeout, exchanged)
            .await
            .map_err(|_| N1qlError::Timeout(self.timeout))?
    }
}

fn check(http: u16, status: &str, errors: &[serde_json::Value]) -> Result<(), N1qlError> {
    if status == "success" && (200..300).contains(&http) {
        return Ok(());
    }
    Err(N1qlError::Failed {
        http,
        status: status.to_string(),
        errors: serde_json::Value::from(errors.to_vec()).to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_statement_says_its_errors() {
        assert!(check(200, "success", &[]).is_ok());
        let e = check(
            400,
            "errors",
            &[serde_json::json!({"code": 3000, "msg": "syntax"})],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("3000") && e.contains("HTTP 400"), "{e}");
        assert!(check(500, "success", &[]).is_err());
    }
}
