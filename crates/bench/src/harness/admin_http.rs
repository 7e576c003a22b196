//! One-shot requests to a node's admin port (REST): a form POST or a DELETE, HTTP Basic as the
//! bench's login, answer bounded in size and time. For setting up what a scenario needs
//! (XDCR references and replications); the query service has its own kept-alive client.

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::time::Duration;

/// Largest answer read (the task list of a few replications is a few KiB).
const ANSWER_BYTES_MAX: usize = 4 << 20;
/// A request not answered by then fails.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Where and as whom.
#[derive(Debug, Clone)]
pub struct AdminHttp {
    pub addr: SocketAddr,
    pub username: String,
    pub password: String,
}

/// An answer: its HTTP status and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
}

impl Answer {
    /// The body as JSON of a 2xx answer; any other status is an error naming the body.
    pub fn json(self, what: &str) -> anyhow::Result<serde_json::Value> {
        anyhow::ensure!(
            (200..300).contains(&self.status),
            "{what}: HTTP {}: {}",
            self.status,
            String::from_utf8_lossy(&self.body)
        );
        if self.body.is_empty() {
            return Ok(serde_json::Value::Null);
        }
        serde_json::from_slice(&self.body)
            .with_context(|| format!("{what}: the answer is not JSON"))
    }
}

impl AdminHttp {
    /// POSTs `form` (urlencoded).
    pub async fn post_form(&self, path: &str, form: &[(&str, &str)]) -> anyhow::Result<Answer> {
        let body = serde_urlencoded::to_string(form).context("encoding the form")?;
        self.send(Method::POST, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> anyhow::Result<Answer> {
        self.send(Method::DELETE, path, None).await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        form: Option<String>,
    ) -> anyhow::Result<Answer> {
        use base64::Engine;
        let token = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", self.username, self.password));
        let mut req = Request::builder()
            .method(method.clone())
            .uri(path)
            .header(HOST, self.addr.to_string())
            .header(AUTHORIZATION, format!("Basic {token}"));
        if form.is_some() {
            req = req.header(CONTENT_TYPE, "application/x-www-form-urlencoded");
        }
        let req = req.body(Full::new(Bytes::from(form.unwrap_or_default())))?;
        let addr = self.addr;
        let exchange = async move {
            let stream = tokio::net::TcpStream::connect(addr)
                .await
                .with_context(|| format!("connecting to {addr}"))?;
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            // Ends when the sender is dropped or the server closes.
            tokio::spawn(conn);
            let resp = sender.send_request(req).await?;
            let status = resp.status().as_u16();
            let body = Limited::new(resp.into_body(), ANSWER_BYTES_MAX)
                .collect()
                .await
                .map_err(|e| anyhow::anyhow!("reading the answer: {e}"))?
                .to_bytes();
            anyhow::Ok(Answer { status, body })
        };
        tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {TIMEOUT:?}"))?
            .with_context(|| format!("{method} http://{}{path}", self.addr))
    }
}
