//! GET_ALL_VB_SEQNOS's answer: `u16 vbucket, u64 high seqno` pairs, big-endian, sorted by
//! vbucket.

use sluice_types::{Seqno, VbId};

/// Bytes per vbucket.
pub const ENTRY_BYTES: usize = 10;

/// Appends one vbucket's entry to `out`.
pub fn encode_entry(vb: VbId, seqno: Seqno, out: &mut Vec<u8>) {
    out.extend_from_slice(&vb.0.to_be_bytes());
    out.extend_from_slice(&seqno.0.to_be_bytes());
}

/// Parses the answer. `None` unless it is a whole number of entries.
pub fn decode(value: &[u8]) -> Option<Vec<(VbId, Seqno)>> {
    if !value.len().is_multiple_of(ENTRY_BYTES) {
        return None;
    }
    value
        .chunks_exact(ENTRY_BYTES)
        .map(|c| {
            let (vb, seqno) = c.split_at(2);
            Some((
                VbId(u16::from_be_bytes(vb.try_into().ok()?)),
                Seqno(u64::from_be_bytes(seqno.try_into().ok()?)),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let mut v = Vec::new();
        encode_entry(VbId(3), Seqno(77), &mut v);
        encode_entry(VbId(9), Seqno(u64::MAX), &mut v);
        assert_eq!(
            decode(&v),
            Some(vec![(VbId(3), Seqno(77)), (VbId(9), Seqno(u64::MAX))])
        );
        assert_eq!(decode(&[]), Some(vec![]), "a node with no vbuckets");
        assert_eq!(decode(&v[..11]), None);
    }
}
