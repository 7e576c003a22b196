//! JSON over HTTP to a node's admin port (`/health`, `/api/v1/cluster`, ...), for tools such
//! as `sluice cluster up`. Every call authenticates with HTTP Basic as the credentials given
//! (an administrator, or a node calling its peers as the cluster). One request per
//! connection (`kept` keeps connections for a node's frequent calls to its peers); every
//! call bounded in time and in answer size.

use crate::net::Dial;
use crate::Credentials;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
pub use hyper::Method;
use hyper::Request;
use hyper_util::rt::TokioIo;
use std::time::Duration;

/// Largest answer read (admin answers are small JSON documents).
const ANSWER_BYTES_MAX: usize = 4 * 1024 * 1024;

/// An admin call that brought back no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum AdminHttpError {
    #[error("cannot reach {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error("{addr} did not answer within {waited:?}")]
    Timeout { addr: String, waited: Duration },
    #[error("HTTP exchange with {addr} failed: {reason}")]
    Transport { addr: String, reason: String },
    #[error("the answer from {addr} is not JSON: {reason}")]
    Decode { addr: String, reason: String },
}

/// An answer: its HTTP status and JSON body (`Null` when empty; a string holding the text
/// when the answer is not JSON, such as `/metrics`).
#[derive(Debug, Clone)]
pub struct AdminAnswer {
    pub status: u16,
    pub body: serde_json::Value,
}

impl AdminAnswer {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// GET `path` on the admin address `addr` (`host:port`), as `who`.
pub async fn get(
    addr: &str,
    who: &Credentials,
    path: &str,
    timeout: Duration,
) -> Result<AdminAnswer, AdminHttpError> {
    let dial = Dial::default();
    send(&dial, addr, who, Method::GET, path, Body::None, timeout).await
}

/// POST `body` as JSON to `path` on `addr`.
pub async fn post(
    addr: &str,
    who: &Credentials,
    path: &str,
    body: &serde_json::Value,
    timeout: Duration,
) -> Result<AdminAnswer, AdminHttpError> {
    send(
        &Dial::default(),
        addr,
        who,
        Method::POST,
        path,
        Body::Json(body),
        timeout,
    )
    .await
}

/// [`get`] (no `body`) or [`post`], connecting as `dial` says (a node calling its peers: from
/// its source address, over TLS when the cluster encrypts its control traffic).
pub async fn call(
    dial: &Dial,
    addr: &str,
    who: &Credentials,
    path: &str,
    body: Option<&serde_json::Value>,
    timeout: Duration,
) -> Result<AdminAnswer, AdminHttpError> {
    let (method, body) = match body {
        Some(json) => (Method::POST, Body::Json(json)),
        None => (Method::GET, Body::None),
    };
    send(dial, addr, who, method, path, body, timeout).await
}

/// A request's body.
#[derive(Debug, Clone, Copy)]
pub enum Body<'a> {
    None,
    Json(&'a serde_json::Value),
    /// `application/x-www-form-urlencoded`, as Couchbase's settings routes take it.
    Form(&'a [(&'a str, &'a str)]),
}

/// `s` with every byte but RFC 3986's unreserved ones as `%XX`: for a path segment or a
/// form field.
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `application/x-www-form-urlencoded`.
fn form_encode(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Any `method` on `path` of `addr`, with `body`, connecting as `dial` says.
pub async fn send(
    dial: &Dial,
    addr: &str,
    who: &Credentials,
    method: Method,
    path: &str,
    body: Body<'_>,
    timeout: Duration,
) -> Result<AdminAnswer, AdminHttpError> {
    within(addr, timeout, exchange(dial, addr, who, method, path, body)).await
}

/// `call`'s answer, or [`AdminHttpError::Timeout`] once `timeout` passed.
pub(crate) async fn within(
    addr: &str,
    timeout: Duration,
    call: impl std::future::Future<Output = Result<AdminAnswer, AdminHttpError>>,
) -> Result<AdminAnswer, AdminHttpError> {
    match tokio::time::timeout(timeout, call).await {
        Ok(answer) => answer,
        Err(_) => Err(AdminHttpError::Timeout {
            addr: addr.to_string(),
            waited: timeout,
        }),
    }
}

async fn exchange(
    dial: &Dial,
    addr: &str,
    who: &Credentials,
    method: Method,
    path: &str,
    body: Body<'_>,
) -> Result<AdminAnswer, AdminHttpError> {
    let (mut sender, driver) = open(dial, addr).await?;
    let answer = request(&mut sender, addr, who, method, path, body).await;
    driver.abort();
    answer
}

/// A connection to `addr`'s admin port: the handle requests are sent on, and the task
/// driving the connection (it ends when the handle is dropped or the peer closes).
pub(crate) async fn open(
    dial: &Dial,
    addr: &str,
) -> Result<(Sender, tokio::task::JoinHandle<()>), AdminHttpError> {
    let stream = dial
        .connect(addr)
        .await
        .map_err(|e| AdminHttpError::Connect {
            addr: addr.to_string(),
            reason: e.to_string(),
        })?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| AdminHttpError::Transport {
            addr: addr.to_string(),
            reason: e.to_string(),
        })?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok((sender, driver))
}

/// The handle of an open admin connection.
pub(crate) type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// One request on an open connection, and its answer read whole.
pub(crate) async fn request(
    sender: &mut Sender,
    addr: &str,
    who: &Credentials,
    method: Method,
    path: &str,
    body: Body<'_>,
) -> Result<AdminAnswer, AdminHttpError> {
    let transport = |reason: String| AdminHttpError::Transport {
        addr: addr.to_string(),
        reason,
    };
    let (bytes, content_type) = match body {
        Body::None => (Vec::new(), "application/json"),
        Body::Json(json) => (
            serde_json::to_vec(json).unwrap_or_default(),
            "application/json",
        ),
        Body::Form(pairs) => (
            form_encode(pairs).into_bytes(),
            "application/x-www-form-urlencoded",
        ),
    };
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(HOST, addr)
        .header(AUTHORIZATION, who.basic_header())
        .header(CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(bytes)))
        .map_err(|e| transport(e.to_string()))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| transport(e.to_string()))?;
    let status = response.status().as_u16();
    let json = response
        .headers()
        .get(CONTENT_TYPE)
        .is_none_or(|v| v.as_bytes().starts_with(b"application/json"));
    let collected = Limited::new(response.into_body(), ANSWER_BYTES_MAX)
        .collect()
        .await
        .map_err(|e| transport(e.to_string()))?
        .to_bytes();
    let body = if collected.is_empty() {
        serde_json::Value::Null
    } else if !json {
        serde_json::Value::String(String::from_utf8_lossy(&collected).into_owned())
    } else {
        serde_json::from_slice(&collected).map_err(|e| AdminHttpError::Decode {
            addr: addr.to_string(),
            reason: e.to_string(),
        })?
    };
    Ok(AdminAnswer { status, body })
}

#[cfg(test)]
mod tests {
    #[test]
    fn forms_are_percent_encoded() {
        let form =
            super::form_encode(&[("roles", "data_reader[default],ro_admin"), ("p", "a b&c")]);
        assert_eq!(
            form,
            "roles=data_reader%5Bdefault%5D%2Cro_admin&p=a%20b%26c"
        );
    }
}
