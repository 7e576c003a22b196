//! Which stream a message, a cursor or a backfill belongs to on one producer connection.
//!
//! Without `enable_stream_id` a connection has at most one stream per vbucket and the
//! vbucket names it. With it, the consumer gives every stream request an id of its own
//! (1..=65535, the `sid` of the request's JSON value) and may open several streams of one
//! vbucket, each with its own filter; every message of such a stream carries the id in a
//! stream-id frame info, and CLOSE_STREAM names it the same way.

use sluice_types::VbId;
use std::ops::RangeInclusive;

/// A stream's name on its connection: its vbucket and, with stream ids, the consumer's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamKey {
    pub vb: VbId,
    /// `None` on connections without stream ids (never `Some(0)`: 0 is "no id" on the wire).
    pub sid: Option<u16>,
}

impl StreamKey {
    /// The one stream of `vb` on a connection without stream ids.
    pub fn vb(vb: VbId) -> StreamKey {
        StreamKey { vb, sid: None }
    }

    /// Stream `sid` of `vb`; 0 means no id, as on the wire.
    pub fn new(vb: VbId, sid: u16) -> StreamKey {
        StreamKey {
            vb,
            sid: (sid != 0).then_some(sid),
        }
    }

    /// Every key of `vb`, in order (for range lookups in ordered maps).
    pub fn all_of(vb: VbId) -> RangeInclusive<StreamKey> {
        StreamKey { vb, sid: None }..=StreamKey {
            vb,
            sid: Some(u16::MAX),
        }
    }
}

impl std::fmt::Display for StreamKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.sid {
            None => write!(f, "{}", self.vb),
            Some(sid) => write!(f, "{} sid {sid}", self.vb),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn a_vbuckets_keys_sort_together_and_zero_is_no_id() {
        assert_eq!(StreamKey::new(VbId(3), 0), StreamKey::vb(VbId(3)));
        let keys: BTreeSet<StreamKey> = [
            StreamKey::new(VbId(2), 9),
            StreamKey::vb(VbId(3)),
            StreamKey::new(VbId(3), 1),
            StreamKey::new(VbId(3), u16::MAX),
            StreamKey::new(VbId(4), 1),
        ]
        .into();
        let of_3: Vec<_> = keys.range(StreamKey::all_of(VbId(3))).collect();
        assert_eq!(of_3.len(), 3);
        assert!(of_3.iter().all(|k| k.vb == VbId(3)));
    }
}
