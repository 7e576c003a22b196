//! Where a drain ends: each vbucket's high seqno when the run starts (GET_ALL_VB_SEQNOS).
//! A consumer is done with a vbucket once it has received an item at or above that seqno;
//! empty vbuckets are not streamed at all.

use sluice_client::Client;
use sluice_types::{Seqno, VbId};

use crate::error::BenchError;

#[derive(Debug, Clone, Default)]
pub struct StreamTargets {
    /// Indexed by vbucket; 0 for vbuckets with nothing to stream.
    high: Vec<u64>,
}

impl StreamTargets {
    pub async fn read(client: &mut Client) -> Result<StreamTargets, BenchError> {
        Ok(StreamTargets::from_seqnos(
            &client.get_all_vb_seqnos().await?,
        ))
    }

    pub fn from_seqnos(seqnos: &[(VbId, Seqno)]) -> StreamTargets {
        let len = seqnos.iter().map(|(vb, _)| usize::from(vb.0) + 1).max();
        let mut high = vec![0; len.unwrap_or(0)];
        for (vb, s) in seqnos {
            high[usize::from(vb.0)] = s.0;
        }
        StreamTargets { high }
    }

    /// The target of `vb` (0 = not streamed).
    pub fn of(&self, vb: VbId) -> u64 {
        self.high.get(usize::from(vb.0)).copied().unwrap_or(0)
    }

    /// Vbuckets with something to stream.
    pub fn vbuckets(&self) -> impl Iterator<Item = VbId> + '_ {
        self.high
            .iter()
            .enumerate()
            .filter(|(_, s)| **s > 0)
            .map(|(vb, _)| VbId(vb as u16))
    }

    /// Sum of the targets: the number of seqnos a from-zero stream covers.
    pub fn total_seqnos(&self) -> u64 {
        self.high.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_vbuckets_are_left_out() {
        let t = StreamTargets::from_seqnos(&[
            (VbId(0), Seqno(5)),
            (VbId(1), Seqno(0)),
            (VbId(3), Seqno(7)),
        ]);
        assert_eq!(t.vbuckets().collect::<Vec<_>>(), [VbId(0), VbId(3)]);
        assert_eq!((t.of(VbId(3)), t.of(VbId(1)), t.of(VbId(900))), (7, 0, 0));
        assert_eq!(t.total_seqnos(), 12);
        assert_eq!(StreamTargets::from_seqnos(&[]).vbuckets().count(), 0);
    }
}
