//! Framing: bytes → a borrowed [`Frame`], checking only the header's arithmetic.

use crate::header::{Magic, HEADER_LEN};

/// One packet, borrowed from the read buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    pub magic: Magic,
    pub opcode: u8,
    pub datatype: u8,
    /// vbucket id for requests, status for responses.
    pub vbucket_or_status: u16,
    /// Echoed verbatim in the response.
    pub opaque: u32,
    pub cas: u64,
    pub framing_extras: &'a [u8],
    pub extras: &'a [u8],
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl Frame<'_> {
    /// Bytes this packet occupies on the wire.
    pub fn wire_len(&self) -> usize {
        HEADER_LEN
            + self.framing_extras.len()
            + self.extras.len()
            + self.key.len()
            + self.value.len()
    }
}

/// What decoding the front of a buffer found.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A whole packet, and how many bytes of the buffer it used.
    Frame(Frame<'a>, usize),
    /// Not enough bytes yet; at least this many are needed in total.
    Incomplete { needed: usize },
}

/// A header the connection cannot recover from: the peer is disconnected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("unknown magic byte 0x{0:02x}")]
    BadMagic(u8),
    #[error("body length {body} is shorter than framing extras + extras + key ({parts})")]
    InconsistentLengths { body: usize, parts: usize },
    #[error("body length {body} exceeds the limit of {max} bytes")]
    TooLarge { body: usize, max: usize },
}

/// Decodes the packet at the front of `buf`. `body_bytes_max` bounds what a peer may make us
/// buffer; a larger body is a protocol error (the connection is closed).
pub fn decode_frame(buf: &[u8], body_bytes_max: usize) -> Result<Decoded<'_>, FrameError> {
    let Some(header) = buf.first_chunk::<HEADER_LEN>() else {
        // Reject a bad magic as soon as its byte arrives, before waiting for a full header.
        if let Some(&b) = buf.first() {
            if Magic::from_byte(b).is_none() {
                return Err(FrameError::BadMagic(b));
            }
        }
        return Ok(Decoded::Incomplete { needed: HEADER_LEN });
    };
    let magic = Magic::from_byte(header[0]).ok_or(FrameError::BadMagic(header[0]))?;
    let (framing_len, key_len) = if magic.is_alt() {
        (usize::from(header[2]), usize::from(header[3]))
    } else {
        (0, usize::from(u16::from_be_bytes([header[2], header[3]])))
    };
    let extras_len = usize::from(header[4]);
    let body_len = u32::from_be_bytes([header[8], header[9], header[10], header[11]]) as usize;
    if body_len > body_bytes_max {
        return Err(FrameError::TooLarge {
            body: body_len,
            max: body_bytes_max,
        });
    }
    let parts = framing_len + extras_len + key_len;
    if parts > body_len {
        return Err(FrameError::InconsistentLengths {
            body: body_len,
            parts,
        });
    }
    let total = HEADER_LEN + body_len;
    let Some(body) = buf.get(HEADER_LEN..total) else {
        return Ok(Decoded::Incomplete { needed: total });
    };
    let (framing_extras, rest) = body.split_at(framing_len);
    let (extras, rest) = rest.split_at(extras_len);
    let (key, value) = rest.split_at(key_len);
    let frame = Frame {
        magic,
        opcode: header[1],
        datatype: header[5],
        vbucket_or_status: u16::from_be_bytes([header[6], header[7]]),
        opaque: u32::from_be_bytes([header[12], header[13], header[14], header[15]]),
        cas: u64::from_be_bytes([
            header[16], header[17], header[18], header[19], header[20], header[21], header[22],
            header[23],
        ]),
        framing_extras,
        extras,
        key,
        value,
    };
    Ok(Decoded::Frame(frame, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classic_get(key: &[u8]) -> Vec<u8> {
        let mut p = vec![0x80, 0x00];
        p.extend_from_slice(&(key.len() as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 7]); // extras, datatype, vbucket 7
        p.extend_from_slice(&(key.len() as u32).to_be_bytes());
        p.extend_from_slice(&0xdeadbeefu32.to_be_bytes());
        p.extend_from_slice(&[0; 8]);
        p.extend_from_slice(key);
        p
    }

    #[test]
    fn decodes_a_classic_request_and_reports_partial_reads() {
        let p = classic_get(b"hello");
        for cut in 0..p.len() {
            match decode_frame(&p[..cut], 1 << 20).unwrap() {
                Decoded::Incomplete { needed } => assert!(needed > cut),
                other => panic!("cut {cut}: {other:?}"),
            }
        }
        let Decoded::Frame(f, used) = decode_frame(&p, 1 << 20).unwrap() else {
            panic!("expected a frame")
        };
        assert_eq!(used, p.len());
        assert_eq!(f.key, b"hello");
        assert_eq!(f.vbucket_or_status, 7);
        assert_eq!(f.opaque, 0xdeadbeef);
        assert!(f.value.is_empty());
    }

    #[test]
    fn decodes_alt_request_framing_extras() {
        // magic 0x08, SET, framing 3 bytes, key 1, extras 8, value 2
        let mut p = vec![0x08, 0x01, 3, 1, 8, 0, 0, 0];
        p.extend_from_slice(&(3u32 + 8 + 1 + 2).to_be_bytes());
        p.extend_from_slice(&[0; 12]);
        p.extend_from_slice(&[0x13, 0x01, 0x00]); // durability majority? (id1 len3) level 1 + u16
        p.extend_from_slice(&[0; 8]);
        p.push(b'k');
        p.extend_from_slice(b"vv");
        let Decoded::Frame(f, _) = decode_frame(&p, 1 << 20).unwrap() else {
            panic!()
        };
        assert_eq!(f.framing_extras, &[0x13, 0x01, 0x00]);
        assert_eq!(f.extras.len(), 8);
        assert_eq!(f.key, b"k");
        assert_eq!(f.value, b"vv");
    }

    #[test]
    fn rejects_bad_magic_and_inconsistent_lengths() {
        assert_eq!(decode_frame(&[0x42], 100), Err(FrameError::BadMagic(0x42)));
        let mut p = classic_get(b"abc");
        p[11] = 2; // body 2 < key 3
        assert!(matches!(
            decode_frame(&p, 100),
            Err(FrameError::InconsistentLengths { .. })
        ));
        let mut p = classic_get(b"abc");
        p[8] = 0x7f; // huge body
        assert!(matches!(
            decode_frame(&p, 100),
            Err(FrameError::TooLarge { .. })
        ));
    }
}
