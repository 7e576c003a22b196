//! Writing packets: one [`Packet`] description encodes requests and responses alike, so the
//! server and the client share it.

use crate::header::{Magic, HEADER_LEN};
use crate::status::Status;

/// A packet to write. Borrowed parts are copied into the output buffer once.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    pub magic: Magic,
    pub opcode: u8,
    pub datatype: u8,
    /// vbucket id (requests) or status (responses).
    pub vbucket_or_status: u16,
    pub opaque: u32,
    pub cas: u64,
    pub framing_extras: &'a [u8],
    pub extras: &'a [u8],
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl<'a> Packet<'a> {
    /// A bare response with no body.
    pub fn response(opcode: u8, status: Status, opaque: u32) -> Packet<'a> {
        Packet {
            magic: Magic::ClientResponse,
            opcode,
            datatype: 0,
            vbucket_or_status: status.code(),
            opaque,
            cas: 0,
            framing_extras: &[],
            extras: &[],
            key: &[],
            value: &[],
        }
    }

    /// A bare classic request with no body.
    pub fn request(opcode: u8, vb: u16, opaque: u32) -> Packet<'a> {
        Packet {
            magic: Magic::ClientRequest,
            opcode,
            datatype: 0,
            vbucket_or_status: vb,
            opaque,
            cas: 0,
            framing_extras: &[],
            extras: &[],
            key: &[],
            value: &[],
        }
    }

    pub fn cas(mut self, cas: u64) -> Self {
        self.cas = cas;
        self
    }
    pub fn datatype(mut self, datatype: u8) -> Self {
        self.datatype = datatype;
        self
    }
    pub fn extras(mut self, extras: &'a [u8]) -> Self {
        self.extras = extras;
        self
    }
    pub fn key(mut self, key: &'a [u8]) -> Self {
        self.key = key;
        self
    }
    pub fn value(mut self, value: &'a [u8]) -> Self {
        self.value = value;
        self
    }
    /// A server → client request (magic 0x82; duplex connections only), e.g. a clustermap
    /// change notification.
    pub fn server_request(opcode: u8, opaque: u32) -> Packet<'a> {
        Packet {
            magic: Magic::ServerRequest,
            ..Packet::request(opcode, 0, opaque)
        }
    }

    /// Attaches flexible framing extras, switching to the alt magic of the same direction.
    pub fn framing_extras(mut self, fe: &'a [u8]) -> Self {
        self.framing_extras = fe;
        if !fe.is_empty() {
            self.magic = match self.magic {
                Magic::ClientRequest => Magic::AltClientRequest,
                Magic::ClientResponse => Magic::AltClientResponse,
                m => m,
            };
        }
        self
    }

    pub fn wire_len(&self) -> usize {
        HEADER_LEN
            + self.framing_extras.len()
            + self.extras.len()
            + self.key.len()
            + self.value.len()
    }

    /// Appends the encoded packet to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let body =
            self.framing_extras.len() + self.extras.len() + self.key.len() + self.value.len();
        assert!(
            self.extras.len() <= usize::from(u8::MAX),
            "extras fit a byte"
        );
        assert!(u32::try_from(body).is_ok(), "body length fits 32 bits");
        out.reserve(HEADER_LEN + body);
        out.push(self.magic.byte());
        out.push(self.opcode);
        if self.magic.is_alt() {
            assert!(self.framing_extras.len() <= 255 && self.key.len() <= 255);
            out.push(self.framing_extras.len() as u8);
            out.push(self.key.len() as u8);
        } else {
            assert!(
                self.framing_extras.is_empty(),
                "classic packets have no framing extras"
            );
            let klen = u16::try_from(self.key.len()).expect("key length fits 16 bits");
            out.extend_from_slice(&klen.to_be_bytes());
        }
        out.push(self.extras.len() as u8);
        out.push(self.datatype);
        out.extend_from_slice(&self.vbucket_or_status.to_be_bytes());
        out.extend_from_slice(&(body as u32).to_be_bytes());
        out.extend_from_slice(&self.opaque.to_be_bytes());
        out.extend_from_slice(&self.cas.to_be_bytes());
        out.extend_from_slice(self.framing_extras);
        out.extend_from_slice(self.extras);
        out.extend_from_slice(self.key);
        out.extend_from_slice(self.value);
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.wire_len());
        self.encode_into(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{decode_frame, Decoded};

    #[test]
    fn encoded_packets_decode_back() {
        let p = Packet::request(0x01, 12, 77)
            .cas(5)
            .datatype(1)
            .extras(&[0, 0, 0, 1, 0, 0, 0, 2])
            .key(b"key")
            .value(b"{}")
            .framing_extras(&[0x11, 0x01]);
        let bytes = p.to_vec();
        let Decoded::Frame(f, n) = decode_frame(&bytes, 1 << 20).unwrap() else {
            panic!()
        };
        assert_eq!(n, bytes.len());
        assert_eq!(f.magic, Magic::AltClientRequest);
        assert_eq!(
            (f.opcode, f.vbucket_or_status, f.opaque, f.cas),
            (1, 12, 77, 5)
        );
        assert_eq!(f.framing_extras, &[0x11, 0x01]);
        assert_eq!((f.key, f.value), (&b"key"[..], &b"{}"[..]));
    }

    #[test]
    fn response_bytes_match_the_spec_layout() {
        let bytes = Packet::response(0x0a, Status::Success, 0x01020304).to_vec();
        assert_eq!(
            bytes,
            vec![0x81, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0]
        );
    }
}
