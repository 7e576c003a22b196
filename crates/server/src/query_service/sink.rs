//! Where a statement's results go: serialized as they are made, and handed to the HTTP
//! response in chunks of about [`CHUNK_BYTES`] through a channel of [`CHUNKS_QUEUED`], so a
//! large result streams to the client instead of being held whole, and what the service
//! holds for one request is bounded (a row larger than a chunk is one chunk). A client that
//! goes away drops the response, and the statement with it (see `http`).

use tokio::sync::mpsc;

use super::error::ServiceError;

/// A chunk is sent once it holds this many bytes of serialized results.
pub const CHUNK_BYTES: usize = 64 * 1024;
/// Chunks waiting for the client; the statement waits while the queue is full.
pub const CHUNKS_QUEUED: usize = 4;

pub struct Sink {
    tx: mpsc::Sender<Vec<u8>>,
    /// Serialized results (JSON text, comma-separated) not sent yet.
    buf: Vec<u8>,
    count: usize,
    bytes: usize,
    prepared: Option<String>,
}

/// What a sink wrote, once the statement is done.
#[derive(Debug, Default)]
pub struct Written {
    /// Results not sent as chunks yet (JSON text, comma-separated).
    pub rest: Vec<u8>,
    pub count: usize,
    /// Bytes of results, separators included.
    pub bytes: usize,
    /// The name of the statement a `PREPARE` with `auto_execute` prepared and ran: the
    /// response's `prepared` field, which the SDKs cache.
    pub prepared: Option<String>,
}

impl Sink {
    pub fn new(tx: mpsc::Sender<Vec<u8>>) -> Sink {
        Sink {
            tx,
            buf: Vec::new(),
            count: 0,
            bytes: 0,
            prepared: None,
        }
    }

    /// Names the prepared statement the response carries (see [`Written::prepared`]).
    pub fn set_prepared(&mut self, name: &str) {
        self.prepared = Some(name.to_owned());
    }

    /// Adds one result.
    pub fn push(&mut self, v: &serde_json::Value) {
        let before = self.buf.len();
        if self.count > 0 {
            self.buf.push(b',');
        }
        // Straight into the buffer (not through `Display`, whose formatter adapter costs
        // a call per token); writing a serde_json value to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut self.buf, v);
        self.bytes += self.buf.len() - before;
        self.count += 1;
    }

    /// Adds results and sends a chunk if there is one's worth.
    pub async fn extend(
        &mut self,
        results: &mut Vec<serde_json::Value>,
    ) -> Result<(), ServiceError> {
        for v in results.drain(..) {
            self.push(&v);
        }
        if self.buf.len() >= CHUNK_BYTES {
            let chunk = std::mem::take(&mut self.buf);
            self.tx
                .send(chunk)
                .await
                .map_err(|_| ServiceError::Cancelled)?;
        }
        Ok(())
    }

    pub fn finish(self) -> Written {
        Written {
            rest: self.buf,
            count: self.count,
            bytes: self.bytes,
            prepared: self.prepared,
        }
    }
}
