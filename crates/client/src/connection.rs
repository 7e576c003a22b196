//! Bytes ↔ frames on one TCP (or TLS) stream. Writes are buffered until [`Connection::flush`]; reads go
//! through a buffer that never grows past one maximal packet plus one read chunk.

use crate::stream::ClientStream;
use bytes::BytesMut;
use sluice_proto::encode::Packet;
use sluice_proto::{decode_frame, Decoded, Magic, HEADER_LEN};
use sluice_types::limits::PACKET_BODY_BYTES_MAX;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::ClientError;
use crate::response::Response;

/// Bytes asked of the socket per read when no larger frame is pending: enough for dozens of
/// pipelined 1 KiB responses per system call.
pub(crate) const READ_CHUNK_BYTES: usize = 64 * 1024;

/// The most the read buffer holds: one packet at the protocol's 30 MiB body limit plus one
/// read chunk. A larger announced body is rejected before it is buffered.
pub const READ_BUFFER_BYTES_MAX: usize = HEADER_LEN + PACKET_BODY_BYTES_MAX + READ_CHUNK_BYTES;

pub(crate) struct Connection {
    stream: ClientStream,
    read_buf: BytesMut,
    write_buf: Vec<u8>,
}

impl Connection {
    pub(crate) fn new(stream: ClientStream) -> Connection {
        Connection {
            stream,
            read_buf: BytesMut::with_capacity(READ_CHUNK_BYTES),
            write_buf: Vec::with_capacity(READ_CHUNK_BYTES),
        }
    }

    /// The socket and any bytes already read past the last frame, for a protocol that takes
    /// the connection over after the bootstrap (DCP). Unsent writes are dropped: flush first.
    pub(crate) fn into_parts(self) -> (ClientStream, BytesMut) {
        (self.stream, self.read_buf)
    }

    /// Appends a packet to the write buffer; nothing is sent until [`Connection::flush`].
    pub(crate) fn queue(&mut self, packet: &Packet<'_>) {
        packet.encode_into(&mut self.write_buf);
    }

    pub(crate) async fn flush(&mut self) -> Result<(), ClientError> {
        if !self.write_buf.is_empty() {
            self.stream.write_all(&self.write_buf).await?;
            // TLS holds records back until flushed; a socket flushes at once.
            self.stream.flush().await?;
            self.write_buf.clear();
        }
        Ok(())
    }

    /// Reads the next response frame.
    ///
    /// Cancel-safe: bytes read before a cancellation stay in the buffer, so this can sit in a
    /// `tokio::select!` beside a timer.
    pub(crate) async fn read_response(&mut self) -> Result<Response, ClientError> {
        loop {
            if let Some(resp) = self.take_buffered()? {
                return Ok(resp);
            }
            let n = self.stream.read_buf(&mut self.read_buf).await?;
            if n == 0 {
                return Err(ClientError::Closed);
            }
        }
    }

    /// Decodes one response from the front of the buffer, or makes room for the rest of it.
    fn take_buffered(&mut self) -> Result<Option<Response>, ClientError> {
        take_response(&mut self.read_buf)
    }
}

/// Decodes one response from the front of `read_buf`, or makes room for the rest of it.
/// Shared by [`Connection`] and the cluster client's node connections, which read on their
/// own task.
pub(crate) fn take_response(read_buf: &mut BytesMut) -> Result<Option<Response>, ClientError> {
    let (header, lens, used) = match decode_frame(read_buf, PACKET_BODY_BYTES_MAX)? {
        Decoded::Frame(f, used) => {
            if !matches!(f.magic, Magic::ClientResponse | Magic::AltClientResponse) {
                // Server-initiated requests need Duplex, which this client never asks for.
                return Err(ClientError::Unexpected("a packet that is not a response"));
            }
            let header = (f.opcode, f.vbucket_or_status, f.datatype, f.opaque, f.cas);
            let lens = (f.framing_extras.len(), f.extras.len(), f.key.len());
            (header, lens, used)
        }
        Decoded::Incomplete { needed } => {
            let missing = needed.saturating_sub(read_buf.len());
            read_buf.reserve(missing.max(READ_CHUNK_BYTES));
            return Ok(None);
        }
    };
    let frame = read_buf.split_to(used).freeze();
    let (opcode, status_code, datatype, opaque, cas) = header;
    let (framing_len, extras_len, key_len) = lens;
    let extras_at = HEADER_LEN + framing_len;
    let key_at = extras_at + extras_len;
    let value_at = key_at + key_len;
    let resp = Response {
        opcode,
        status_code,
        datatype,
        opaque,
        cas,
        extras: frame.slice(extras_at..key_at),
        key: frame.slice(key_at..value_at),
        value: frame.slice(value_at..),
    };
    // Keep the buffer from pinning a huge allocation once a big frame has passed.
    if read_buf.is_empty() && read_buf.capacity() > 4 * READ_CHUNK_BYTES {
        *read_buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    }
    Ok(Some(resp))
}
