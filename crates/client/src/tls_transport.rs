//! The TCP socket under a TLS stream, on both ends (the client's and the server's).
//!
//! rustls hands its pending records to the transport with `write_vectored` even when there
//! is a single record, which is the usual case for one request or one answer. On Linux a
//! one-slice `writev(2)` costs measurably more than `send(2)` of the same bytes (the iovec
//! import and the generic VFS write path: about 2 % of a node's CPU in the read-heavy KV
//! cell over TLS, by perf). So a vectored write of one non-empty slice goes out as a plain
//! write; several slices still go out in one `writev`.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A TCP socket carrying TLS records. Reads pass through; see the module docs for writes.
#[derive(Debug)]
pub struct TlsTransport(pub TcpStream);

/// The only non-empty slice of `bufs`, if there is exactly one.
fn single_slice<'a>(bufs: &'a [IoSlice<'_>]) -> Option<&'a [u8]> {
    let mut filled = bufs.iter().filter(|b| !b.is_empty());
    match (filled.next(), filled.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

impl AsyncRead for TlsTransport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsTransport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let socket = &mut self.get_mut().0;
        match single_slice(bufs) {
            Some(one) => Pin::new(socket).poll_write(cx, one),
            None => Pin::new(socket).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn one_filled_slice_among_empty_ones_is_single() {
        let (a, empty) = (b"abc".as_slice(), b"".as_slice());
        assert_eq!(single_slice(&[IoSlice::new(a)]), Some(a));
        assert_eq!(
            single_slice(&[IoSlice::new(empty), IoSlice::new(a), IoSlice::new(empty)]),
            Some(a)
        );
        assert_eq!(single_slice(&[IoSlice::new(a), IoSlice::new(a)]), None);
        assert_eq!(single_slice(&[IoSlice::new(empty)]), None);
        assert_eq!(single_slice(&[]), None);
    }

    /// Both kinds of vectored write deliver every byte, in order.
    #[tokio::test]
    async fn vectored_writes_deliver_all_bytes_in_order() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let sender = tokio::spawn(async move {
            let mut t = TlsTransport(TcpStream::connect(addr).await.unwrap());
            let one = [IoSlice::new(b""), IoSlice::new(b"one;")];
            let n = t.write_vectored(&one).await.unwrap();
            assert_eq!(n, 4);
            let two = [IoSlice::new(b"two"), IoSlice::new(b";three")];
            // Nine bytes fit an empty loopback socket buffer: a short write would be a bug.
            assert_eq!(t.write_vectored(&two).await.unwrap(), 9);
            t.shutdown().await.unwrap();
        });
        let (mut peer, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        peer.read_to_end(&mut got).await.unwrap();
        sender.await.unwrap();
        assert_eq!(got, b"one;two;three");
    }
}
