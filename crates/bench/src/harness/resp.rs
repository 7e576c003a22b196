//! Just enough RESP2 for the Redis peer of `bench replication`: commands are encoded as arrays
//! of bulk strings, and the replies SET, GET, INFO, PING and REPLICAOF give (simple strings,
//! errors, integers, bulk strings) are parsed. The parser is sans-IO ([`parse`]); [`RespConn`]
//! wraps a socket for request/answer use and [`RespReader`] reads the answers of a pipeline.

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest bulk string accepted: INFO answers are a few KiB and values are the bench's own.
const BULK_BYTES_MAX: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    /// `None` is the null bulk string (GET of a missing key).
    Bulk(Option<Vec<u8>>),
}

impl Reply {
    pub fn is_ok(&self) -> bool {
        matches!(self, Reply::Simple(s) if s == "OK")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RespError {
    #[error("RESP: unexpected type byte 0x{0:02x}")]
    Type(u8),
    #[error("RESP: malformed length or integer line")]
    Number,
    #[error("RESP: bulk string of {0} bytes is over the limit")]
    TooLong(i64),
    #[error("RESP: bulk string not ended by CRLF")]
    Terminator,
    #[error("RESP: the server closed the connection")]
    Closed,
    #[error("Redis answered an error: {0}")]
    Server(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Appends `args` as one command.
pub fn encode(args: &[&[u8]], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// One reply from the front of `buf` and the bytes it took, or `None` if it is not complete.
pub fn parse(buf: &[u8]) -> Result<Option<(Reply, usize)>, RespError> {
    let Some(&kind) = buf.first() else {
        return Ok(None);
    };
    let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let line = &buf[1..eol];
    let text = || String::from_utf8_lossy(line).into_owned();
    let number = || -> Result<i64, RespError> {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(RespError::Number)
    };
    let after = eol + 2;
    Ok(Some(match kind {
        b'+' => (Reply::Simple(text()), after),
        b'-' => (Reply::Error(text()), after),
        b':' => (Reply::Integer(number()?), after),
        b'$' => {
            let len = number()?;
            if len < 0 {
                return Ok(Some((Reply::Bulk(None), after)));
            }
            let n = usize::try_from(len).map_err(|_| RespError::Number)?;
            if n > BULK_BYTES_MAX {
                return Err(RespError::TooLong(len));
            }
            if buf.len() < after + n + 2 {
                return Ok(None);
            }
            if &buf[after + n..after + n + 2] != b"\r\n" {
                return Err(RespError::Terminator);
            }
            (
                Reply::Bulk(Some(buf[after..after + n].to_vec())),
                after + n + 2,
            )
        }
        other => return Err(RespError::Type(other)),
    }))
}

/// Reads replies one at a time from any byte stream.
pub struct RespReader<R> {
    io: R,
    buf: BytesMut,
}

impl<R: AsyncRead + Unpin> RespReader<R> {
    pub fn new(io: R) -> Self {
        RespReader {
            io,
            buf: BytesMut::with_capacity(64 * 1024),
        }
    }

    pub async fn next(&mut self) -> Result<Reply, RespError> {
        loop {
            if let Some((reply, used)) = parse(&self.buf)? {
                self.buf.advance(used);
                return Ok(reply);
            }
            if self.io.read_buf(&mut self.buf).await? == 0 {
                return Err(RespError::Closed);
            }
        }
    }
}

/// One connection used request by request.
pub struct RespConn {
    reader: RespReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
    out: Vec<u8>,
}

impl RespConn {
    pub async fn connect(addr: std::net::SocketAddr) -> Result<RespConn, RespError> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (r, w) = stream.into_split();
        Ok(RespConn {
            reader: RespReader::new(r),
            writer: w,
            out: Vec::new(),
        })
    }

    /// Sends one command without reading its answer.
    pub async fn send(&mut self, args: &[&[u8]]) -> Result<(), RespError> {
        self.out.clear();
        encode(args, &mut self.out);
        self.writer.write_all(&self.out).await?;
        Ok(())
    }

    /// Sends already encoded commands (a pipeline).
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), RespError> {
        self.writer.write_all(bytes).await?;
        Ok(())
    }

    pub async fn read(&mut self) -> Result<Reply, RespError> {
        self.reader.next().await
    }

    /// One command and its answer; an error reply is an `Err`.
    pub async fn call(&mut self, args: &[&[u8]]) -> Result<Reply, RespError> {
        self.send(args).await?;
        match self.read().await? {
            Reply::Error(e) => Err(RespError::Server(e)),
            r => Ok(r),
        }
    }

    /// INFO `section` as its `field:value` lines.
    pub async fn info(&mut self, section: &str) -> Result<Vec<(String, String)>, RespError> {
        match self.call(&[b"INFO", section.as_bytes()]).await? {
            Reply::Bulk(Some(text)) => Ok(String::from_utf8_lossy(&text)
                .lines()
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.to_string(), v.trim().to_string()))
                .collect()),
            other => Err(RespError::Server(format!("INFO answered {other:?}"))),
        }
    }

    pub fn into_split(
        self,
    ) -> (
        RespReader<tokio::net::tcp::OwnedReadHalf>,
        tokio::net::tcp::OwnedWriteHalf,
    ) {
        (self.reader, self.writer)
    }
}

/// The value of `field` in INFO lines, as a number.
pub fn info_u64(info: &[(String, String)], field: &str) -> Option<u64> {
    info.iter()
        .find(|(k, _)| k == field)
        .and_then(|(_, v)| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        encode(&[b"SET", b"k", b"v\r\n"], &mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nv\r\n\r\n");
    }

    #[test]
    fn every_reply_kind_parses_and_reports_its_length() {
        let buf = b"+OK\r\n-ERR no\r\n:42\r\n$3\r\na\r\n\r\n$-1\r\n";
        let mut at = 0;
        let mut got = Vec::new();
        while let Some((r, n)) = parse(&buf[at..]).unwrap() {
            got.push(r);
            at += n;
        }
        assert_eq!(at, buf.len());
        assert_eq!(
            got,
            vec![
                Reply::Simple("OK".into()),
                Reply::Error("ERR no".into()),
                Reply::Integer(42),
                Reply::Bulk(Some(b"a\r\n".to_vec())),
                Reply::Bulk(None),
            ]
        );
        assert!(got[0].is_ok() && !got[1].is_ok());
    }

    #[test]
    fn partial_replies_wait_for_more_bytes() {
        for cut in [b"".as_slice(), b"+O", b"$5\r\nabc", b"$5\r\nabcde\r"] {
            assert!(parse(cut).unwrap().is_none(), "{cut:?}");
        }
    }

    #[test]
    fn malformed_replies_are_errors_not_panics() {
        assert!(matches!(parse(b"*1\r\n"), Err(RespError::Type(b'*'))));
        assert!(matches!(parse(b":x\r\n"), Err(RespError::Number)));
        assert!(matches!(parse(b"$3\r\nabcXY"), Err(RespError::Terminator)));
        assert!(matches!(
            parse(b"$999999999999\r\n"),
            Err(RespError::TooLong(_))
        ));
    }

    #[test]
    fn info_fields_are_found_by_name() {
        let info = vec![
            ("role".to_string(), "master".to_string()),
            ("master_repl_offset".to_string(), "1234".to_string()),
        ];
        assert_eq!(info_u64(&info, "master_repl_offset"), Some(1234));
        assert_eq!(info_u64(&info, "role"), None);
        assert_eq!(info_u64(&info, "absent"), None);
    }
}
