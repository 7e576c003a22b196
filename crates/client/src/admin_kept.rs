//! Admin calls over kept connections: for the calls a node makes to its peers many times a
//! second (a query scanning an index copy on another node asks it for every page). A fresh
//! connection per call costs a TCP handshake, over TLS a TLS handshake too, and the peer's
//! authentication: about 0.7 ms of a 0.9 ms remote page on loopback.
//!
//! At most [`KeptConnections::new`]'s `per_addr` idle connections are kept per address;
//! calls that find none open one, and leave it for the next if there is room. A kept
//! connection the peer has closed meanwhile (its idle timeout, a restart) fails its request
//! before an answer: the call then goes on a fresh connection, once. So only calls that may
//! run twice (reads) belong here.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::admin_http::{open, request, within, AdminAnswer, AdminHttpError, Body, Method, Sender};
use crate::net::Dial;
use crate::Credentials;

/// Addresses with kept connections, at most (a cluster has at most 16 nodes; more
/// addresses than this means nodes were replaced: the oldest entries go).
const ADDRS_MAX: usize = 64;

pub struct KeptConnections {
    per_addr: usize,
    idle: Mutex<HashMap<String, Vec<Sender>>>,
}

impl KeptConnections {
    /// Keeps up to `per_addr` idle connections per address.
    pub fn new(per_addr: usize) -> KeptConnections {
        KeptConnections {
            per_addr,
            idle: Mutex::new(HashMap::new()),
        }
    }

    /// POSTs `body` as JSON to `path` on `addr`, as `who`, on a kept connection if one is
    /// idle. The call must be one that may run twice (see the module comment).
    pub async fn post(
        &self,
        dial: &Dial,
        addr: &str,
        who: &Credentials,
        path: &str,
        body: &serde_json::Value,
        timeout: Duration,
    ) -> Result<AdminAnswer, AdminHttpError> {
        let call = async {
            if let Some(mut sender) = self.take(addr) {
                let answer = request(&mut sender, addr, who, Method::POST, path, Body::Json(body));
                match answer.await {
                    Ok(answer) => {
                        self.keep(addr, sender);
                        return Ok(answer);
                    }
                    // Closed by the peer since: once more on a fresh connection.
                    Err(AdminHttpError::Transport { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            let (mut sender, _driver) = open(dial, addr).await?;
            let answer = request(&mut sender, addr, who, Method::POST, path, Body::Json(body));
            let answer = answer.await?;
            self.keep(addr, sender);
            Ok(answer)
        };
        within(addr, timeout, call).await
    }

    /// An idle connection to `addr` that is still open, if any.
    fn take(&self, addr: &str) -> Option<Sender> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let kept = idle.get_mut(addr)?;
        while let Some(sender) = kept.pop() {
            if !sender.is_closed() {
                return Some(sender);
            }
        }
        None
    }

    /// Keeps `sender` for the next call to `addr`, if there is room (else it is dropped,
    /// which closes the connection once its driver sees that).
    fn keep(&self, addr: &str, sender: Sender) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if !idle.contains_key(addr) && idle.len() >= ADDRS_MAX {
            idle.clear();
        }
        let kept = idle.entry(addr.to_string()).or_default();
        if kept.len() < self.per_addr {
            kept.push(sender);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A keep-alive HTTP/1.1 server answering `{"n": N}` (N counting requests) to every
    /// request, counting the connections it accepts; each connection serves `per_conn`
    /// requests, then closes.
    async fn server(per_conn: usize) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            let served = Arc::new(AtomicUsize::new(0));
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                count.fetch_add(1, Ordering::SeqCst);
                let served = served.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    for _ in 0..per_conn {
                        // Read one request: its head, then a Content-Length body.
                        let (head, len) = loop {
                            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                                let len = head
                                    .lines()
                                    .find_map(|l| l.strip_prefix("content-length: "))
                                    .map_or(0, |v| v.trim().parse().unwrap());
                                break (end + 4, len);
                            }
                            let mut chunk = [0; 1024];
                            match s.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        };
                        while buf.len() < head + len {
                            let mut chunk = [0; 1024];
                            match s.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        buf.drain(..head + len);
                        let n = served.fetch_add(1, Ordering::SeqCst);
                        let body = format!("{{\"n\":{n}}}");
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                             content-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if s.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    async fn call(kept: &KeptConnections, addr: &str) -> serde_json::Value {
        let who = Credentials::new("u", "p");
        let body = serde_json::json!({});
        let answer = kept
            .post(
                &Dial::default(),
                addr,
                &who,
                "/x",
                &body,
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!(answer.status, 200);
        answer.body["n"].clone()
    }

    #[tokio::test]
    async fn calls_reuse_one_connection() {
        let (addr, accepted) = server(usize::MAX).await;
        let kept = KeptConnections::new(2);
        for n in 0..5 {
            assert_eq!(call(&kept, &addr).await, n);
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_connection_the_peer_closed_is_replaced() {
        // Each connection serves 2 requests, then the server closes it: every third call
        // finds its kept connection closed and goes on a fresh one.
        let (addr, accepted) = server(2).await;
        let kept = KeptConnections::new(1);
        for n in 0..6 {
            assert_eq!(call(&kept, &addr).await, n);
            // Let the client's driver see a close before the next call.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn no_more_than_per_addr_idle_connections_are_kept() {
        let (addr, accepted) = server(usize::MAX).await;
        let kept = KeptConnections::new(2);
        // Four at once need four connections; two are kept after.
        tokio::join!(
            call(&kept, &addr),
            call(&kept, &addr),
            call(&kept, &addr),
            call(&kept, &addr)
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 4);
        assert_eq!(kept.idle.lock().unwrap()[&addr].len(), 2);
    }
}
