//! A failover log on the wire: `u64 uuid, u64 seqno` pairs, big-endian, newest first
//! (protocol.md: GET_FAILOVER_LOG, and the value of a DCP_STREAM_REQ answered SUCCESS).

use sluice_types::{FailoverEntry, Seqno, VbUuid};

/// Bytes per entry.
pub const ENTRY_BYTES: usize = 16;

/// Appends `entries` (newest first) to `out`.
pub fn encode<'a>(entries: impl IntoIterator<Item = &'a FailoverEntry>, out: &mut Vec<u8>) {
    for e in entries {
        out.extend_from_slice(&e.uuid.0.to_be_bytes());
        out.extend_from_slice(&e.seqno.0.to_be_bytes());
    }
}

/// `entries` as a response value.
pub fn to_vec(entries: &[FailoverEntry]) -> Vec<u8> {
    let mut v = Vec::with_capacity(ENTRY_BYTES * entries.len());
    encode(entries, &mut v);
    v
}

/// Parses a failover log. `None` unless the value is a non-empty list of 16-byte entries
/// (every vbucket has at least its first branch).
pub fn decode(value: &[u8]) -> Option<Vec<FailoverEntry>> {
    if value.is_empty() || !value.len().is_multiple_of(ENTRY_BYTES) {
        return None;
    }
    value
        .chunks_exact(ENTRY_BYTES)
        .map(|c| {
            let (uuid, seqno) = c.split_at(8);
            Some(FailoverEntry {
                uuid: VbUuid(u64::from_be_bytes(uuid.try_into().ok()?)),
                seqno: Seqno(u64::from_be_bytes(seqno.try_into().ok()?)),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_newest_first() {
        let entries = vec![
            FailoverEntry {
                uuid: VbUuid(30),
                seqno: Seqno(900),
            },
            FailoverEntry {
                uuid: VbUuid(10),
                seqno: Seqno(0),
            },
        ];
        let v = to_vec(&entries);
        assert_eq!(v.len(), 32);
        assert_eq!(&v[..8], &30u64.to_be_bytes());
        assert_eq!(decode(&v), Some(entries));
    }

    #[test]
    fn rejects_empty_and_ragged_logs() {
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&[0; 17]), None);
    }
}
