//! The 24-byte packet header and its magic byte.

pub const HEADER_LEN: usize = 24;

/// What the first byte of a packet says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Magic {
    /// 0x80: client → server request, classic header.
    ClientRequest,
    /// 0x81: server → client response, classic header.
    ClientResponse,
    /// 0x08: client → server request with flexible framing extras.
    AltClientRequest,
    /// 0x18: server → client response with flexible framing extras.
    AltClientResponse,
    /// 0x82: server → client request (duplex).
    ServerRequest,
    /// 0x83: client → server response to a 0x82 request.
    ServerResponse,
}

impl Magic {
    pub fn from_byte(b: u8) -> Option<Magic> {
        match b {
            0x80 => Some(Magic::ClientRequest),
            0x81 => Some(Magic::ClientResponse),
            0x08 => Some(Magic::AltClientRequest),
            0x18 => Some(Magic::AltClientResponse),
            0x82 => Some(Magic::ServerRequest),
            0x83 => Some(Magic::ServerResponse),
            _ => None,
        }
    }

    pub fn byte(self) -> u8 {
        match self {
            Magic::ClientRequest => 0x80,
            Magic::ClientResponse => 0x81,
            Magic::AltClientRequest => 0x08,
            Magic::AltClientResponse => 0x18,
            Magic::ServerRequest => 0x82,
            Magic::ServerResponse => 0x83,
        }
    }

    /// Alt forms split the key-length field into framing-extras length + an 8-bit key length.
    pub fn is_alt(self) -> bool {
        matches!(self, Magic::AltClientRequest | Magic::AltClientResponse)
    }

    /// Requests carry a vbucket id in bytes 6..8; responses carry a status.
    pub fn is_request(self) -> bool {
        matches!(
            self,
            Magic::ClientRequest | Magic::AltClientRequest | Magic::ServerRequest
        )
    }
}
