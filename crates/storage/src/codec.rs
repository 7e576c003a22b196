//! On-disk encoding of keys, records and vbucket metadata.
//!
//! All integers are big-endian, so that the byte order of a key is its numeric order and an
//! LSM range scan over `by_seqno` walks one vbucket in seqno order.
//!
//! ## Keys
//!
//! | index            | key                               | value                      |
//! |------------------|-----------------------------------|----------------------------|
//! | `by_seqno`       | `vb: u16` ++ `seqno: u64` (10 B)  | a record (below)           |
//! | `by_key`         | `vb: u16` ++ document key bytes   | `seqno: u64` (8 B)         |
//! | `pending_by_key` | `vb: u16` ++ document key bytes   | `seqno: u64` (8 B)         |
//! | `vb_meta`        | `vb: u16` (2 B)                   | vbucket metadata (below)   |
//!
//! `by_key` (committed records) and `pending_by_key` (prepares and aborts) are separate
//! keyspaces with the same encoding ([`doc_key_slice`], [`encode_seqno`]).
//!
//! ## Record (`by_seqno` value), format version 1
//!
//! ```text
//! offset  size  field
//!      0     1  format version (= 1)
//!      1     8  seqno
//!      9     8  rev_seqno
//!     17     8  cas
//!     25     4  flags
//!     29     4  expiry (absolute Unix seconds, 0 = never)
//!     33     4  delete_time
//!     37     1  datatype
//!     38     1  record bits: bit 0 = deleted (tombstone or durable delete),
//!               bit 1 = prepare, bit 2 = abort (never both); other bits must be 0
//!     39     2  key length K
//!     41     E  kind fields: a prepare's durability level (1 B, its wire value),
//!               an abort's prepared seqno (8 B), nothing for a committed record (E = 0)
//!   41+E     K  document key
//! 41+E+K     *  value, up to the end of the record (possibly empty)
//! ```
//!
//! The kind (bits 1 and 2 and the kind fields) came with SyncWrites. The version stayed 1
//! because the change is an extension through bits that had to be 0: a committed record is
//! encoded byte for byte as before, so every record written earlier decodes as
//! [`RecordKind::Committed`], and an older binary refuses a prepare or an abort ("unknown
//! record bits") instead of reading it as a document.
//!
//! The value takes "the rest" instead of carrying a length: the LSM engine already stores each
//! value's length and checksums its blocks, so a second length would only repeat it. The cost
//! is that the codec cannot tell a record cut inside its value from a shorter value; its job is
//! to reject garbage it *can* see (bad version, unknown bits or level, key past the end)
//! without panicking.
//!
//! ## vbucket metadata (`vb_meta` value), format version 1
//!
//! Binary rather than JSON: it has no failure modes on encode and is trivially strict on
//! decode (an empty failover log would make `FailoverLog` panic later, so it is rejected here).
//!
//! ```text
//! offset  size   field
//!      0     1   format version (= 1)
//!      1     1   state (VbState wire value: 1 active, 2 replica, 3 pending, 4 dead)
//!      2     8   high_seqno
//!     10     8   purge_seqno
//!     18     8   max_cas
//!     26     4   failover entry count N (N >= 1)
//!     30  16*N   entries, newest first: uuid u64 (never 0), seqno u64
//! ```

use crate::{RecordKind, Result, StoreError, VbMeta};
use bytes::Bytes;
use sluice_types::{
    Cas, Datatype, DurabilityLevel, Expiry, FailoverEntry, FailoverLog, ItemMeta, Seqno, VbId,
    VbState, VbUuid,
};
use std::io::Read;

/// Current record format version; bump when the layout changes and keep decoding the old one.
pub const RECORD_FORMAT_V1: u8 = 1;
/// The first vbucket metadata format, still read (its high completed seqno reads as 0).
pub const VB_META_FORMAT_V1: u8 = 1;
/// Current vbucket metadata format: version 1 plus the high completed seqno after `max_cas`.
pub const VB_META_FORMAT_V2: u8 = 2;

/// Bytes before the kind fields (and, for a committed record, the key) in a version-1 record.
const RECORD_HEADER_LEN: usize = 41;
const RECORD_BIT_DELETED: u8 = 0x01;
const RECORD_BIT_PREPARE: u8 = 0x02;
const RECORD_BIT_ABORT: u8 = 0x04;
const RECORD_BITS_KNOWN: u8 = RECORD_BIT_DELETED | RECORD_BIT_PREPARE | RECORD_BIT_ABORT;
/// Room for the largest kind fields (an abort's prepared seqno).
const KIND_FIELDS_LEN_MAX: usize = 8;
/// Bytes before the failover entries (version 2; version 1 has 8 fewer: no high completed
/// seqno).
const VB_META_HEADER_LEN: usize = 38;
const FAILOVER_ENTRY_LEN: usize = 16;

/// Longest document key the storage accepts: fjall keys are at most 65 536 bytes and a
/// `by_key` key carries the 2-byte vbucket prefix; the record stores the length in a u16.
/// (The protocol caps keys far lower, at `limits::KEY_BYTES_MAX`.)
pub const DOC_KEY_BYTES_MAX: usize = u16::MAX as usize - 2;

/// A decoded `by_seqno` value: everything of an [`crate::ItemRecord`] except its vbucket,
/// which lives in the index key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordBody {
    pub key: Bytes,
    pub meta: ItemMeta,
    pub value: Bytes,
    pub kind: RecordKind,
}

/// `by_seqno` key: `vb ++ seqno`.
pub fn seqno_key(vb: VbId, seqno: Seqno) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[..2].copy_from_slice(&vb.0.to_be_bytes());
    k[2..].copy_from_slice(&seqno.0.to_be_bytes());
    k
}

/// Inverse of [`seqno_key`].
pub fn decode_seqno_key(bytes: &[u8]) -> Result<(VbId, Seqno)> {
    let (vb, rest) = split_u16(bytes, "by_seqno key")?;
    let (seqno, rest) = split_u64(rest, "by_seqno key")?;
    ensure_consumed(rest, "by_seqno key")?;
    Ok((VbId(vb), Seqno(seqno)))
}

/// `by_key` key: `vb ++ key`, built as the storage engine's own buffer.
pub fn doc_key_slice(vb: VbId, key: &[u8]) -> fjall::Slice {
    byteview::ByteView::fused(&vb.0.to_be_bytes(), key).into()
}

/// [`doc_key_slice`] as a plain vector.
pub fn doc_key(vb: VbId, key: &[u8]) -> Vec<u8> {
    doc_key_slice(vb, key).to_vec()
}

/// `by_key` value: the key's current seqno.
pub fn encode_seqno(seqno: Seqno) -> [u8; 8] {
    seqno.0.to_be_bytes()
}

/// Inverse of [`encode_seqno`].
pub fn decode_seqno(bytes: &[u8]) -> Result<Seqno> {
    let (seqno, rest) = split_u64(bytes, "by_key value")?;
    ensure_consumed(rest, "by_key value")?;
    Ok(Seqno(seqno))
}

/// `vb_meta` key.
pub fn vb_key(vb: VbId) -> [u8; 2] {
    vb.0.to_be_bytes()
}

/// Inverse of [`vb_key`].
pub fn decode_vb_key(bytes: &[u8]) -> Result<VbId> {
    let (vb, rest) = split_u16(bytes, "vb_meta key")?;
    ensure_consumed(rest, "vb_meta key")?;
    Ok(VbId(vb))
}

/// Encodes a committed record as a `by_seqno` value: [`encode_record_kind`] with
/// [`RecordKind::Committed`] (the bytes every record had before SyncWrites).
pub fn encode_record(key: &[u8], meta: &ItemMeta, value: &[u8]) -> Result<fjall::Slice> {
    encode_record_kind(key, meta, RecordKind::Committed, value)
}

/// Encodes a `by_seqno` value of any kind. Fails only for a key longer than
/// [`DOC_KEY_BYTES_MAX`], which the engine never produces; it is checked here so that no
/// write can half-happen.
pub fn encode_record_kind(
    key: &[u8],
    meta: &ItemMeta,
    kind: RecordKind,
    value: &[u8],
) -> Result<fjall::Slice> {
    let key_len = u16::try_from(key.len())
        .ok()
        .filter(|_| key.len() <= DOC_KEY_BYTES_MAX)
        .ok_or_else(|| {
            StoreError::Corrupt(format!(
                "refusing to store a key of {} bytes (max {DOC_KEY_BYTES_MAX})",
                key.len()
            ))
        })?;
    let mut header = [0u8; RECORD_HEADER_LEN];
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        header
            .get_mut(at..at + bytes.len())
            .expect("the header's fields add up to RECORD_HEADER_LEN")
            .copy_from_slice(bytes);
        at += bytes.len();
    };
    put(&[RECORD_FORMAT_V1]);
    put(&meta.seqno.0.to_be_bytes());
    put(&meta.rev_seqno.to_be_bytes());
    put(&meta.cas.0.to_be_bytes());
    put(&meta.flags.to_be_bytes());
    put(&meta.expiry.0.to_be_bytes());
    put(&meta.delete_time.to_be_bytes());
    put(&[meta.datatype.0]);
    let deleted = if meta.deleted { RECORD_BIT_DELETED } else { 0 };
    put(&[deleted | kind_bit(kind)]);
    put(&key_len.to_be_bytes());
    debug_assert_eq!(at, RECORD_HEADER_LEN);
    let (kind_fields, kind_len) = kind_fields(kind);
    let kind_fields = kind_fields
        .get(..kind_len)
        .expect("kind fields are at most KIND_FIELDS_LEN_MAX bytes");
    // Assembled straight into the storage engine's own buffer: building a Vec first and
    // converting it cost the flusher an allocation and a copy of every value (~8 % of its
    // CPU with 1 KiB values).
    let len = RECORD_HEADER_LEN + kind_len + key.len() + value.len();
    let mut parts = header.as_slice().chain(kind_fields).chain(key).chain(value);
    let record = byteview::ByteView::from_reader(&mut parts, len)
        .expect("reading exactly the bytes of four in-memory slices cannot fail");
    Ok(record.into())
}

/// The record bit that says `kind` (none for a committed record).
fn kind_bit(kind: RecordKind) -> u8 {
    match kind {
        RecordKind::Committed => 0,
        RecordKind::Prepare(_) => RECORD_BIT_PREPARE,
        RecordKind::Abort { .. } => RECORD_BIT_ABORT,
    }
}

/// The kind fields that follow the header, and how many of the buffer's bytes they are.
fn kind_fields(kind: RecordKind) -> ([u8; KIND_FIELDS_LEN_MAX], usize) {
    match kind {
        RecordKind::Committed => ([0; KIND_FIELDS_LEN_MAX], 0),
        RecordKind::Prepare(level) => ([level.to_wire(), 0, 0, 0, 0, 0, 0, 0], 1),
        RecordKind::Abort { prepared } => (prepared.0.to_be_bytes(), KIND_FIELDS_LEN_MAX),
    }
}

/// Reads the kind fields the record bits announce. Never panics.
fn decode_kind(bits: u8, rest: &[u8]) -> Result<(RecordKind, &[u8])> {
    const WHAT: &str = "record kind";
    match (bits & RECORD_BIT_PREPARE != 0, bits & RECORD_BIT_ABORT != 0) {
        (false, false) => Ok((RecordKind::Committed, rest)),
        (true, false) => {
            let (level, rest) = split_u8(rest, WHAT)?;
            let level = DurabilityLevel::from_wire(level)
                .ok_or_else(|| corrupt(format!("prepare with unknown durability level {level}")))?;
            Ok((RecordKind::Prepare(level), rest))
        }
        (false, true) => {
            let (prepared, rest) = split_u64(rest, WHAT)?;
            Ok((
                RecordKind::Abort {
                    prepared: Seqno(prepared),
                },
                rest,
            ))
        }
        (true, true) => Err(corrupt(format!(
            "record bits {bits:#04x} say both prepare and abort"
        ))),
    }
}

/// Decodes a `by_seqno` value. Never panics: any malformed input is [`StoreError::Corrupt`].
/// This is the entry point for fuzzing.
pub fn decode_record(bytes: &[u8]) -> Result<RecordBody> {
    const WHAT: &str = "record";
    let (version, rest) = split_u8(bytes, WHAT)?;
    if version != RECORD_FORMAT_V1 {
        return Err(corrupt(format!("unknown record format version {version}")));
    }
    let (seqno, rest) = split_u64(rest, WHAT)?;
    let (rev_seqno, rest) = split_u64(rest, WHAT)?;
    let (cas, rest) = split_u64(rest, WHAT)?;
    let (flags, rest) = split_u32(rest, WHAT)?;
    let (expiry, rest) = split_u32(rest, WHAT)?;
    let (delete_time, rest) = split_u32(rest, WHAT)?;
    let (datatype, rest) = split_u8(rest, WHAT)?;
    let (bits, rest) = split_u8(rest, WHAT)?;
    if bits & !RECORD_BITS_KNOWN != 0 {
        return Err(corrupt(format!("unknown record bits {bits:#04x}")));
    }
    let (key_len, rest) = split_u16(rest, WHAT)?;
    let (kind, rest) = decode_kind(bits, rest)?;
    let key_len = usize::from(key_len);
    if rest.len() < key_len {
        return Err(corrupt(format!(
            "record key of {key_len} bytes but only {} bytes left",
            rest.len()
        )));
    }
    let (key, value) = rest.split_at(key_len);
    Ok(RecordBody {
        key: Bytes::copy_from_slice(key),
        meta: ItemMeta {
            seqno: Seqno(seqno),
            rev_seqno,
            cas: Cas(cas),
            flags,
            expiry: Expiry(expiry),
            datatype: Datatype(datatype),
            deleted: bits & RECORD_BIT_DELETED != 0,
            delete_time,
        },
        value: Bytes::copy_from_slice(value),
        kind,
    })
}

/// Encodes a `vb_meta` value.
pub fn encode_vb_meta(meta: &VbMeta) -> Vec<u8> {
    let entries = meta.failover_log.entries();
    let mut out = Vec::with_capacity(VB_META_HEADER_LEN + entries.len() * FAILOVER_ENTRY_LEN);
    out.push(VB_META_FORMAT_V2);
    out.push(meta.state as u8);
    out.extend_from_slice(&meta.high_seqno.0.to_be_bytes());
    out.extend_from_slice(&meta.purge_seqno.0.to_be_bytes());
    out.extend_from_slice(&meta.max_cas.to_be_bytes());
    out.extend_from_slice(&meta.high_completed_seqno.0.to_be_bytes());
    // A failover log holds at most 25 entries; u32 is merely "never truncates".
    let count = u32::try_from(entries.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&count.to_be_bytes());
    for e in entries.iter().take(count as usize) {
        out.extend_from_slice(&e.uuid.0.to_be_bytes());
        out.extend_from_slice(&e.seqno.0.to_be_bytes());
    }
    out
}

/// Decodes a `vb_meta` value. Never panics: malformed input is [`StoreError::Corrupt`].
pub fn decode_vb_meta(bytes: &[u8]) -> Result<VbMeta> {
    const WHAT: &str = "vb_meta";
    let (version, rest) = split_u8(bytes, WHAT)?;
    if version != VB_META_FORMAT_V1 && version != VB_META_FORMAT_V2 {
        return Err(corrupt(format!("unknown vb_meta format version {version}")));
    }
    let (state, rest) = split_u8(rest, WHAT)?;
    let state = VbState::from_wire(u32::from(state))
        .ok_or_else(|| corrupt(format!("unknown vbucket state {state}")))?;
    let (high_seqno, rest) = split_u64(rest, WHAT)?;
    let (purge_seqno, rest) = split_u64(rest, WHAT)?;
    let (max_cas, rest) = split_u64(rest, WHAT)?;
    let (high_completed_seqno, rest) = if version == VB_META_FORMAT_V2 {
        split_u64(rest, WHAT)?
    } else {
        (0, rest)
    };
    let (count, mut rest) = split_u32(rest, WHAT)?;
    // Check the length before allocating, so a corrupt count cannot ask for gigabytes.
    let count = count as usize;
    if count == 0 || rest.len() != count.saturating_mul(FAILOVER_ENTRY_LEN) {
        return Err(corrupt(format!(
            "vb_meta has {count} failover entries but {} bytes of them",
            rest.len()
        )));
    }
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let (uuid, r) = split_u64(rest, WHAT)?;
        let (seqno, r) = split_u64(r, WHAT)?;
        rest = r;
        if uuid == 0 {
            return Err(corrupt("vb_meta failover entry with uuid 0".to_string()));
        }
        entries.push(FailoverEntry {
            uuid: VbUuid(uuid),
            seqno: Seqno(seqno),
        });
    }
    Ok(VbMeta {
        state,
        failover_log: FailoverLog::from_entries(entries),
        high_seqno: Seqno(high_seqno),
        purge_seqno: Seqno(purge_seqno),
        max_cas,
        high_completed_seqno: Seqno(high_completed_seqno),
    })
}

fn corrupt(msg: String) -> StoreError {
    StoreError::Corrupt(msg)
}

/// Splits `N` bytes off the front, or reports a truncated `what`.
fn split_array<'a, const N: usize>(bytes: &'a [u8], what: &str) -> Result<([u8; N], &'a [u8])> {
    match bytes.split_first_chunk::<N>() {
        Some((head, rest)) => Ok((*head, rest)),
        None => Err(corrupt(format!(
            "truncated {what}: needed {N} more bytes, found {}",
            bytes.len()
        ))),
    }
}

fn split_u8<'a>(bytes: &'a [u8], what: &str) -> Result<(u8, &'a [u8])> {
    split_array::<1>(bytes, what).map(|(a, r)| (a[0], r))
}

fn split_u16<'a>(bytes: &'a [u8], what: &str) -> Result<(u16, &'a [u8])> {
    split_array(bytes, what).map(|(a, r)| (u16::from_be_bytes(a), r))
}

fn split_u32<'a>(bytes: &'a [u8], what: &str) -> Result<(u32, &'a [u8])> {
    split_array(bytes, what).map(|(a, r)| (u32::from_be_bytes(a), r))
}

fn split_u64<'a>(bytes: &'a [u8], what: &str) -> Result<(u64, &'a [u8])> {
    split_array(bytes, what).map(|(a, r)| (u64::from_be_bytes(a), r))
}

fn ensure_consumed(rest: &[u8], what: &str) -> Result<()> {
    if rest.is_empty() {
        Ok(())
    } else {
        Err(corrupt(format!("{what} has {} trailing bytes", rest.len())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> ItemMeta {
        ItemMeta {
            seqno: Seqno(0x0102_0304_0506_0708),
            rev_seqno: 7,
            cas: Cas(0xdead_beef_0000_0001),
            flags: 0xcafe_babe,
            expiry: Expiry(1_700_000_000),
            datatype: Datatype(Datatype::JSON | Datatype::XATTR),
            deleted: true,
            delete_time: 1_700_000_123,
        }
    }

    #[test]
    fn record_roundtrips() {
        let enc = encode_record(b"user::1", &meta(), b"{\"a\":1}").expect("encode");
        assert_eq!(enc.len(), RECORD_HEADER_LEN + 7 + 7);
        let dec = decode_record(&enc).expect("decode");
        assert_eq!(&dec.key[..], b"user::1");
        assert_eq!(dec.meta, meta());
        assert_eq!(&dec.value[..], b"{\"a\":1}");
    }

    #[test]
    fn record_with_empty_key_and_value_roundtrips() {
        let m = ItemMeta::default();
        let dec = decode_record(&encode_record(b"", &m, b"").expect("encode")).expect("decode");
        assert!(dec.key.is_empty() && dec.value.is_empty());
        assert_eq!(dec.meta, m);
    }

    #[test]
    fn record_layout_is_as_documented() {
        let enc = encode_record(b"k", &meta(), b"v").expect("encode");
        assert_eq!(enc[0], RECORD_FORMAT_V1);
        assert_eq!(&enc[1..9], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(enc[38], RECORD_BIT_DELETED);
        assert_eq!(&enc[39..41], &[0, 1]);
        assert_eq!(&enc[41..], b"kv");
    }

    #[test]
    fn record_rejects_bad_version_bits_and_key_length() {
        let enc = encode_record(b"key", &meta(), b"value")
            .expect("encode")
            .to_vec();
        let mut bad = enc.clone();
        bad[0] = 2;
        assert!(matches!(decode_record(&bad), Err(StoreError::Corrupt(_))));
        let mut bad = enc.clone();
        bad[38] = 0x80;
        assert!(matches!(decode_record(&bad), Err(StoreError::Corrupt(_))));
        let mut bad = enc.clone();
        bad[39..41].copy_from_slice(&u16::MAX.to_be_bytes());
        assert!(matches!(decode_record(&bad), Err(StoreError::Corrupt(_))));
        for cut in 0..RECORD_HEADER_LEN + 3 {
            assert!(decode_record(&enc[..cut]).is_err(), "cut at {cut}");
        }
    }

    /// A record exactly as the codec wrote it before records had a kind (written out by
    /// hand, not by the encoder): it must keep decoding, as a committed record.
    #[test]
    fn record_written_before_kinds_decodes_as_committed() {
        let mut old = vec![1u8]; // format version 1
        old.extend_from_slice(&42u64.to_be_bytes()); // seqno
        old.extend_from_slice(&3u64.to_be_bytes()); // rev_seqno
        old.extend_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes()); // cas
        old.extend_from_slice(&0xcafe_babeu32.to_be_bytes()); // flags
        old.extend_from_slice(&0u32.to_be_bytes()); // expiry
        old.extend_from_slice(&1_700_000_123u32.to_be_bytes()); // delete_time
        old.push(Datatype::JSON); // datatype
        old.push(0x01); // record bits: deleted
        old.extend_from_slice(&2u16.to_be_bytes()); // key length
        old.extend_from_slice(b"k1{}"); // key, then value
        let dec = decode_record(&old).expect("decode");
        assert_eq!(dec.kind, RecordKind::Committed);
        assert_eq!(&dec.key[..], b"k1");
        assert_eq!(&dec.value[..], b"{}");
        assert_eq!(
            dec.meta,
            ItemMeta {
                seqno: Seqno(42),
                rev_seqno: 3,
                cas: Cas(0x1122_3344_5566_7788),
                flags: 0xcafe_babe,
                expiry: Expiry(0),
                datatype: Datatype(Datatype::JSON),
                deleted: true,
                delete_time: 1_700_000_123,
            }
        );
        // And a committed record is still encoded to exactly those bytes.
        let enc = encode_record(&dec.key, &dec.meta, &dec.value).expect("encode");
        assert_eq!(&enc[..], &old[..]);
    }

    fn kinds() -> [RecordKind; 5] {
        [
            RecordKind::Committed,
            RecordKind::Prepare(DurabilityLevel::Majority),
            RecordKind::Prepare(DurabilityLevel::MajorityAndPersistOnMaster),
            RecordKind::Prepare(DurabilityLevel::PersistToMajority),
            RecordKind::Abort {
                prepared: Seqno(0x0a0b_0c0d_0e0f_1011),
            },
        ]
    }

    #[test]
    fn every_kind_roundtrips() {
        for kind in kinds() {
            let enc = encode_record_kind(b"user::1", &meta(), kind, b"{}").expect("encode");
            let dec = decode_record(&enc).expect("decode");
            assert_eq!(dec.kind, kind);
            assert_eq!(&dec.key[..], b"user::1");
            assert_eq!(dec.meta, meta());
            assert_eq!(&dec.value[..], b"{}");
        }
    }

    #[test]
    fn kind_layout_is_as_documented() {
        let prepare = RecordKind::Prepare(DurabilityLevel::PersistToMajority);
        let enc = encode_record_kind(b"k", &meta(), prepare, b"v").expect("encode");
        assert_eq!(enc[38], RECORD_BIT_DELETED | RECORD_BIT_PREPARE);
        assert_eq!(&enc[39..41], &[0, 1]);
        assert_eq!(enc[41], 3);
        assert_eq!(&enc[42..], b"kv");

        let abort = RecordKind::Abort {
            prepared: Seqno(0x0102),
        };
        let enc = encode_record_kind(b"k", &meta(), abort, b"").expect("encode");
        assert_eq!(enc[38], RECORD_BIT_DELETED | RECORD_BIT_ABORT);
        assert_eq!(&enc[41..49], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(&enc[49..], b"k");
    }

    #[test]
    fn record_rejects_bad_kinds() {
        let prepare = RecordKind::Prepare(DurabilityLevel::Majority);
        let enc = encode_record_kind(b"key", &meta(), prepare, b"value")
            .expect("encode")
            .to_vec();
        let mut bad = enc.clone();
        bad[38] |= RECORD_BIT_ABORT; // prepare and abort at once
        assert!(matches!(decode_record(&bad), Err(StoreError::Corrupt(_))));
        for level in [0u8, 4, 0xff] {
            let mut bad = enc.clone();
            bad[41] = level;
            assert!(matches!(decode_record(&bad), Err(StoreError::Corrupt(_))));
        }
        let abort = RecordKind::Abort { prepared: Seqno(9) };
        let enc = encode_record_kind(b"key", &meta(), abort, b"")
            .expect("encode")
            .to_vec();
        // Cut inside the kind fields or the key: never read as a shorter record.
        for cut in 0..enc.len() {
            assert!(decode_record(&enc[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn overlong_key_is_refused() {
        let key = vec![b'x'; DOC_KEY_BYTES_MAX + 1];
        assert!(encode_record(&key, &meta(), b"").is_err());
        assert!(encode_record(&key[1..], &meta(), b"").is_ok());
    }

    #[test]
    fn keys_sort_by_vbucket_then_seqno() {
        let a = seqno_key(VbId(1), Seqno(255));
        let b = seqno_key(VbId(1), Seqno(256));
        let c = seqno_key(VbId(2), Seqno(0));
        assert!(a < b && b < c);
        assert_eq!(decode_seqno_key(&b).expect("decode"), (VbId(1), Seqno(256)));
        assert!(decode_seqno_key(&b[..9]).is_err());
        assert_eq!(doc_key(VbId(0x0102), b"k"), vec![1, 2, b'k']);
        assert_eq!(
            decode_seqno(&encode_seqno(Seqno(42))).expect("decode"),
            Seqno(42)
        );
        assert_eq!(
            decode_vb_key(&vb_key(VbId(513))).expect("decode"),
            VbId(513)
        );
    }

    fn vb_meta() -> VbMeta {
        let mut log = FailoverLog::new(VbUuid(11), Seqno(0));
        log.new_branch(VbUuid(22), Seqno(100));
        VbMeta {
            state: VbState::Replica,
            failover_log: log,
            high_seqno: Seqno(150),
            purge_seqno: Seqno(20),
            max_cas: 0x1234_5678_9abc,
            high_completed_seqno: Seqno(140),
        }
    }

    #[test]
    fn vb_meta_roundtrips() {
        let enc = encode_vb_meta(&vb_meta());
        assert_eq!(enc.len(), VB_META_HEADER_LEN + 2 * FAILOVER_ENTRY_LEN);
        assert_eq!(decode_vb_meta(&enc).expect("decode"), vb_meta());
    }

    #[test]
    fn vb_meta_version_1_reads_with_no_high_completed_seqno() {
        // Version 1: the same layout without the 8 bytes after max_cas.
        const VB_META_V1_HEADER_LEN: usize = VB_META_HEADER_LEN - 8;
        let v2 = encode_vb_meta(&vb_meta());
        let mut v1 = vec![VB_META_FORMAT_V1];
        v1.extend_from_slice(&v2[1..VB_META_V1_HEADER_LEN - 4]);
        v1.extend_from_slice(&v2[VB_META_HEADER_LEN - 4..]);
        let back = decode_vb_meta(&v1).expect("decode");
        assert_eq!(back.high_completed_seqno, Seqno(0));
        assert_eq!(
            VbMeta {
                high_completed_seqno: Seqno(140),
                ..back
            },
            vb_meta()
        );
    }

    #[test]
    fn vb_meta_rejects_corruption() {
        let enc = encode_vb_meta(&vb_meta());
        for cut in 0..enc.len() {
            assert!(decode_vb_meta(&enc[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = enc.clone();
        bad[1] = 9; // no such state
        assert!(decode_vb_meta(&bad).is_err());
        let mut bad = enc.clone();
        bad[34..38].copy_from_slice(&0u32.to_be_bytes()); // empty log
        assert!(decode_vb_meta(&bad[..VB_META_HEADER_LEN]).is_err());
        let mut bad = enc.clone();
        bad[34..38].copy_from_slice(&u32::MAX.to_be_bytes()); // absurd count
        assert!(decode_vb_meta(&bad).is_err());
        let mut bad = enc;
        bad[38..46].copy_from_slice(&0u64.to_be_bytes()); // uuid 0
        assert!(decode_vb_meta(&bad).is_err());
    }
}
