//! DCP_STREAM_REQ's 48-byte extras.

use super::flags::StreamFlags;
use sluice_types::{Seqno, VbUuid};

pub const STREAM_REQUEST_EXTRAS_LEN: usize = 48;

/// What a consumer asks for: everything after `start` up to `end`, given the history it has
/// (`vb_uuid`) and the snapshot it was in (`snap_start..=snap_end`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamRequest {
    pub flags: StreamFlags,
    /// The last seqno the client has (0 = nothing).
    pub start: Seqno,
    /// Stop after the snapshot holding this seqno; `u64::MAX` = never.
    pub end: Seqno,
    pub vb_uuid: VbUuid,
    pub snap_start: Seqno,
    pub snap_end: Seqno,
}

impl StreamRequest {
    /// Parses the extras; `None` unless exactly 48 bytes.
    pub fn parse(extras: &[u8]) -> Option<StreamRequest> {
        if extras.len() != STREAM_REQUEST_EXTRAS_LEN {
            return None;
        }
        let at = |o: usize| extras.get(o..).unwrap_or_default();
        let u32_at = |o: usize| at(o).first_chunk().copied().map_or(0, u32::from_be_bytes);
        let u64_at = |o: usize| at(o).first_chunk().copied().map_or(0, u64::from_be_bytes);
        Some(StreamRequest {
            flags: StreamFlags(u32_at(0)),
            start: Seqno(u64_at(8)),
            end: Seqno(u64_at(16)),
            vb_uuid: VbUuid(u64_at(24)),
            snap_start: Seqno(u64_at(32)),
            snap_end: Seqno(u64_at(40)),
        })
    }

    pub fn encode(&self) -> [u8; STREAM_REQUEST_EXTRAS_LEN] {
        let mut e = [0u8; STREAM_REQUEST_EXTRAS_LEN];
        e[0..4].copy_from_slice(&self.flags.0.to_be_bytes());
        e[8..16].copy_from_slice(&self.start.0.to_be_bytes());
        e[16..24].copy_from_slice(&self.end.0.to_be_bytes());
        e[24..32].copy_from_slice(&self.vb_uuid.0.to_be_bytes());
        e[32..40].copy_from_slice(&self.snap_start.0.to_be_bytes());
        e[40..48].copy_from_slice(&self.snap_end.0.to_be_bytes());
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let r = StreamRequest {
            flags: StreamFlags::TO_LATEST,
            start: Seqno(5),
            end: Seqno(u64::MAX),
            vb_uuid: VbUuid(0xdead_beef),
            snap_start: Seqno(3),
            snap_end: Seqno(9),
        };
        assert_eq!(StreamRequest::parse(&r.encode()), Some(r));
        assert_eq!(StreamRequest::parse(&r.encode()[..47]), None);
    }
}
