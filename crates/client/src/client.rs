//! [`Client`]: one connection, its negotiated state, and the two ways to talk on it —
//! typed operations (one request, one answer) and the pipelined low-level API.

use sluice_proto::encode::Packet;
use sluice_proto::Feature;
use sluice_types::{vbucket_of, VbId};
use tokio::net::ToSocketAddrs;

use crate::connection::Connection;
use crate::error::ClientError;
use crate::options::ConnectOptions;
use crate::response::Response;

pub struct Client {
    conn: Connection,
    /// Next opaque to hand out; responses echo it, which is how pipelined answers are matched.
    next_opaque: u32,
    /// Requests sent with [`Client::send_request`] and not yet answered. Typed operations
    /// refuse to run while this is non-zero, since they would read someone else's answer.
    in_flight: usize,
    /// From the cluster map; `None` (no bucket selected) sends every key to vbucket 0.
    num_vbuckets: Option<u16>,
    /// What the server agreed to in HELLO.
    features: Vec<Feature>,
}

/// Shows the negotiated state, not the buffers.
impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("num_vbuckets", &self.num_vbuckets)
            .field("features", &self.features)
            .field("in_flight", &self.in_flight)
            .finish()
    }
}

impl Client {
    /// Connects and bootstraps: TCP_NODELAY, HELLO, SASL, SELECT_BUCKET and the cluster
    /// config, each only when `options` asks for it.
    pub async fn connect(
        addr: impl ToSocketAddrs,
        options: ConnectOptions,
    ) -> Result<Client, ClientError> {
        let stream = crate::net::connect_from(addr, options.source_ip).await?;
        // Requests are small and latency-bound; Nagle would hold them back.
        stream.set_nodelay(true)?;
        let stream = match &options.tls {
            Some(tls) => tls.handshake(stream).await?,
            None => crate::stream::ClientStream::Plain(stream),
        };
        let mut client = Client {
            conn: Connection::new(stream),
            next_opaque: 1,
            in_flight: 0,
            num_vbuckets: None,
            features: Vec::new(),
        };
        crate::bootstrap::run(&mut client, &options).await?;
        Ok(client)
    }

    /// The features the server enabled in HELLO.
    pub fn features(&self) -> &[Feature] {
        &self.features
    }

    pub fn has_feature(&self, f: Feature) -> bool {
        self.features.contains(&f)
    }

    /// The vbucket count learned from the cluster map, if a bucket was selected.
    pub fn num_vbuckets(&self) -> Option<u16> {
        self.num_vbuckets
    }

    /// The vbucket a key lives in (vbucket 0 without a cluster map).
    pub fn vbucket_of(&self, key: &[u8]) -> VbId {
        match self.num_vbuckets {
            Some(n) => vbucket_of(key, n),
            None => VbId(0),
        }
    }

    /// Requests sent with [`Client::send_request`] / [`Client::queue_request`] and not yet
    /// answered.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Buffers a request with a fresh opaque (returned) without sending it; see
    /// [`Client::flush`]. The packet's own opaque is ignored.
    pub fn queue_request(&mut self, packet: Packet<'_>) -> u32 {
        let opaque = self.take_opaque();
        self.conn.queue(&Packet { opaque, ..packet });
        self.in_flight += 1;
        opaque
    }

    /// Sends everything queued.
    pub async fn flush(&mut self) -> Result<(), ClientError> {
        self.conn.flush().await
    }

    /// Sends one request with a fresh opaque (returned) without waiting for its answer, so a
    /// caller can keep several requests in flight. Quiet opcodes are the caller's business:
    /// they may never be answered.
    pub async fn send_request(&mut self, packet: Packet<'_>) -> Result<u32, ClientError> {
        let opaque = self.queue_request(packet);
        self.conn.flush().await?;
        Ok(opaque)
    }

    /// Reads the next response, in the order the server sends them. Cancel-safe.
    pub async fn read_response(&mut self) -> Result<Response, ClientError> {
        let resp = self.conn.read_response().await?;
        self.in_flight = self.in_flight.saturating_sub(1);
        Ok(resp)
    }

    /// One request, its answer (any status). The typed operations are built on this.
    pub(crate) async fn call(&mut self, packet: Packet<'_>) -> Result<Response, ClientError> {
        if self.in_flight > 0 {
            return Err(ClientError::PipelineBusy {
                in_flight: self.in_flight,
            });
        }
        let opaque = self.take_opaque();
        self.conn.queue(&Packet { opaque, ..packet });
        self.conn.flush().await?;
        let resp = self.conn.read_response().await?;
        check_answers(&resp, packet.opcode, opaque)?;
        Ok(resp)
    }

    /// Reads one more answer to the request [`Client::call`] just sent (STAT answers with many).
    pub(crate) async fn read_more(
        &mut self,
        opcode: u8,
        opaque: u32,
    ) -> Result<Response, ClientError> {
        let resp = self.conn.read_response().await?;
        check_answers(&resp, opcode, opaque)?;
        Ok(resp)
    }

    /// Gives up the connection after the bootstrap, for DCP, whose server-initiated
    /// requests the response-only reader here would reject.
    pub(crate) fn into_parts(self) -> (crate::stream::ClientStream, bytes::BytesMut) {
        self.conn.into_parts()
    }

    pub(crate) fn set_negotiated(&mut self, features: Vec<Feature>) {
        self.features = features;
    }

    pub(crate) fn set_num_vbuckets(&mut self, n: u16) {
        self.num_vbuckets = Some(n);
    }

    fn take_opaque(&mut self) -> u32 {
        let opaque = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1);
        opaque
    }
}

/// An ordered connection answers requests in order; anything else means the stream is out
/// of step and must not be used further.
fn check_answers(resp: &Response, opcode: u8, opaque: u32) -> Result<(), ClientError> {
    if resp.opaque != opaque {
        return Err(ClientError::Unexpected(
            "response opaque does not match the request",
        ));
    }
    if resp.opcode != opcode {
        return Err(ClientError::Unexpected(
            "response opcode does not match the request",
        ));
    }
    Ok(())
}
