//! How far an index has applied one vbucket's stream: what a stream request needs to go on
//! from there without gap or repeat (the branch, the last seqno, and the snapshot it is in).
//! Saved as 32 bytes, four big-endian u64s, in the batch that applied the changes up to it.

use sluice_types::{Seqno, VbUuid};

use crate::error::{IndexError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VbPosition {
    /// The producer's failover-log uuid the stream followed (0: nothing applied yet).
    pub vb_uuid: VbUuid,
    pub seqno: Seqno,
    pub snap_start: Seqno,
    pub snap_end: Seqno,
}

impl VbPosition {
    pub const ENCODED_LEN: usize = 32;

    /// Nothing applied: stream from the beginning.
    pub fn zero() -> VbPosition {
        VbPosition::default()
    }

    pub fn encode(&self) -> [u8; Self::ENCODED_LEN] {
        let mut out = [0u8; Self::ENCODED_LEN];
        for (chunk, v) in out.chunks_exact_mut(8).zip([
            self.vb_uuid.0,
            self.seqno.0,
            self.snap_start.0,
            self.snap_end.0,
        ]) {
            chunk.copy_from_slice(&v.to_be_bytes());
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<VbPosition> {
        if bytes.len() != Self::ENCODED_LEN {
            return Err(IndexError::Corrupt(format!(
                "a stream position of {} bytes, not {}",
                bytes.len(),
                Self::ENCODED_LEN
            )));
        }
        let mut words = bytes.chunks_exact(8).map(|c| {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            u64::from_be_bytes(w)
        });
        let mut next = || words.next().expect("32 bytes are four words");
        let p = VbPosition {
            vb_uuid: VbUuid(next()),
            seqno: Seqno(next()),
            snap_start: Seqno(next()),
            snap_end: Seqno(next()),
        };
        if !(p.snap_start <= p.seqno && p.seqno <= p.snap_end) {
            return Err(IndexError::Corrupt(format!(
                "stream position {} outside its snapshot {}..={}",
                p.seqno.0, p.snap_start.0, p.snap_end.0
            )));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_round_trips_and_bad_bytes_are_refused() {
        let p = VbPosition {
            vb_uuid: VbUuid(0xdead_beef_0102),
            seqno: Seqno(41),
            snap_start: Seqno(40),
            snap_end: Seqno(50),
        };
        assert_eq!(VbPosition::decode(&p.encode()).expect("decodes"), p);
        assert!(VbPosition::decode(&p.encode()[..31]).is_err());
        let mut bad = p;
        bad.seqno = Seqno(51);
        assert!(VbPosition::decode(&bad.encode()).is_err());
    }
}
