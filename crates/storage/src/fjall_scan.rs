//! Range scans over `by_seqno`, live or from a point-in-time snapshot.

use crate::codec;
use crate::{ItemRecord, Result, StoreError, StoreSnapshot};
use fjall::{Keyspace, Readable, Snapshot};
use sluice_types::{Seqno, VbId};
use std::ops::RangeInclusive;

pub(crate) type RecordIter<'a> = Box<dyn Iterator<Item = Result<ItemRecord>> + Send + 'a>;

/// `by_seqno` keys of `vb` with `start < seqno <= end`; `None` when that range is empty
/// (an inverted range is not handed to the LSM engine at all).
pub(crate) fn seqno_range(vb: VbId, start: Seqno, end: Seqno) -> Option<RangeInclusive<[u8; 10]>> {
    let first = start.0.checked_add(1)?;
    (first <= end.0).then(|| codec::seqno_key(vb, Seqno(first))..=codec::seqno_key(vb, end))
}

/// Decodes one `by_seqno` entry, checking that key and record agree.
pub(crate) fn decode_entry(guard: fjall::Guard, vb: VbId) -> Result<ItemRecord> {
    let (k, v) = guard.into_inner().map_err(io)?;
    let (key_vb, seqno) = codec::decode_seqno_key(&k)?;
    let body = codec::decode_record(&v)?;
    if key_vb != vb || body.meta.seqno != seqno {
        return Err(StoreError::Corrupt(format!(
            "by_seqno entry {key_vb}/{seqno} holds a record of seqno {} (scanning {vb})",
            body.meta.seqno
        )));
    }
    Ok(ItemRecord {
        vb,
        key: body.key,
        meta: body.meta,
        value: body.value,
        kind: body.kind,
    })
}

/// Adapts a fjall iterator over `by_seqno` into records.
pub(crate) fn records(iter: fjall::Iter, vb: VbId) -> RecordIter<'static> {
    Box::new(iter.map(move |guard| decode_entry(guard, vb)))
}

pub(crate) fn io(e: fjall::Error) -> StoreError {
    StoreError::Io(e.to_string())
}

/// A fjall snapshot plus the keyspace handle it reads.
///
/// Holding it pins old versions in the LSM tree (and keeps the database open), so backfills
/// should drop it promptly.
pub(crate) struct FjallSnapshot {
    pub(crate) snapshot: Snapshot,
    pub(crate) by_seqno: Keyspace,
    pub(crate) vb_meta: Keyspace,
}

impl FjallSnapshot {
    fn vb_meta(&self, vb: VbId) -> Result<Option<crate::VbMeta>> {
        match self
            .snapshot
            .get(&self.vb_meta, codec::vb_key(vb))
            .map_err(io)?
        {
            Some(v) => Ok(Some(codec::decode_vb_meta(&v)?)),
            None => Ok(None),
        }
    }
}

impl StoreSnapshot for FjallSnapshot {
    fn scan_seqnos(&self, vb: VbId, start: Seqno, end: Seqno) -> RecordIter<'_> {
        match seqno_range(vb, start, end) {
            Some(range) => records(self.snapshot.range(&self.by_seqno, range), vb),
            None => Box::new(std::iter::empty()),
        }
    }

    fn max_visible_seqno(&self, vb: VbId, start: Seqno, end: Seqno) -> Result<Option<Seqno>> {
        let Some(range) = seqno_range(vb, start, end) else {
            return Ok(None);
        };
        for guard in self.snapshot.range(&self.by_seqno, range).rev() {
            let record = decode_entry(guard, vb)?;
            if record.kind == crate::RecordKind::Committed {
                return Ok(Some(record.meta.seqno));
            }
        }
        Ok(None)
    }

    fn high_seqno(&self, vb: VbId) -> Result<Seqno> {
        Ok(self.vb_meta(vb)?.map_or(Seqno::ZERO, |m| m.high_seqno))
    }

    fn high_completed_seqno(&self, vb: VbId) -> Result<Seqno> {
        Ok(self
            .vb_meta(vb)?
            .map_or(Seqno::ZERO, |m| m.high_completed_seqno))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_overflowing_ranges_are_none() {
        assert!(seqno_range(VbId(0), Seqno(5), Seqno(5)).is_none());
        assert!(seqno_range(VbId(0), Seqno(6), Seqno(5)).is_none());
        assert!(seqno_range(VbId(0), Seqno::MAX, Seqno::MAX).is_none());
        let r = seqno_range(VbId(1), Seqno(0), Seqno::MAX).expect("non-empty");
        assert_eq!(*r.start(), codec::seqno_key(VbId(1), Seqno(1)));
        assert_eq!(*r.end(), codec::seqno_key(VbId(1), Seqno::MAX));
    }
}
