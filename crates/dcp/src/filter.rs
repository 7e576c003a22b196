//! Which collections a stream sends, how it spells their keys, and how it shows the
//! vbucket's scope and collection records (`sluice_engine::system_events`).
//!
//! The engine holds collection-qualified keys (`sluice_types::collection`). Three kinds of
//! consumer read them ([`KeyMode`]):
//! - one without collections knows only the default collection: it sees that collection's
//!   changes alone, with the prefix taken off;
//! - a collection-aware one gets keys as they are, and each scope or collection record as
//!   a SYSTEM_EVENT; it may ask for some collections, or one scope, only ([`StreamFilter`],
//!   from the stream request's JSON value);
//! - Sluice's own replication gets the vbucket as stored, records as plain mutations.
//!
//! Changes a stream does not send still move its position, as prepares do for consumers
//! without sync writes, so a stream whose end seqno falls on a change it does not show
//! still ends.

use bytes::Bytes;
use serde::Deserialize;
use sluice_types::collection::{collection_of, decode_prefix, CollectionId};
use sluice_types::system_event::SystemEvent;
use std::collections::BTreeSet;

/// How a consumer reads collections (see the module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum KeyMode {
    /// Every collection, keys and records as stored: Sluice's own replication.
    #[default]
    Raw,
    /// A collection-aware consumer: every collection (or its filter's), keys with their
    /// prefix, records as system events.
    Aware,
    /// A consumer without collections: the default collection, keys without prefix.
    Legacy,
}

impl KeyMode {
    /// `key` as this mode's consumer reads it.
    pub fn wire_key(self, key: &Bytes) -> Bytes {
        match (self, decode_prefix(key)) {
            (KeyMode::Legacy, Ok((_, n))) => key.slice(n..),
            _ => key.clone(),
        }
    }
}

/// What a collection-aware consumer asked a stream for: some collections, or one scope
/// (then also the collections made in it while the stream runs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamFilter {
    collections: BTreeSet<CollectionId>,
    scope: Option<u32>,
}

impl StreamFilter {
    /// Collections `ids` only.
    pub fn collections(ids: impl IntoIterator<Item = CollectionId>) -> StreamFilter {
        StreamFilter {
            collections: ids.into_iter().collect(),
            scope: None,
        }
    }

    /// Scope `sid`, whose collections are `ids` now.
    pub fn scope(sid: u32, ids: impl IntoIterator<Item = CollectionId>) -> StreamFilter {
        StreamFilter {
            collections: ids.into_iter().collect(),
            scope: Some(sid),
        }
    }

    /// Whether a document of `cid` passes.
    pub fn admits_collection(&self, cid: CollectionId) -> bool {
        self.collections.contains(&cid)
    }

    /// Whether the record of collection `cid` in scope `sid` passes; a scope filter takes
    /// in the collections made in its scope from here on.
    pub fn admits_collection_record(&mut self, sid: u32, cid: CollectionId) -> bool {
        if self.scope == Some(sid) {
            self.collections.insert(cid);
        }
        self.collections.contains(&cid)
    }

    /// Whether the record of scope `sid` passes: only to a filter of that scope.
    pub fn admits_scope_record(&self, sid: u32) -> bool {
        self.scope == Some(sid)
    }

    /// A record this filter passed is being sent: a dropped collection leaves the filter.
    /// `true`: nothing is left to stream (a collection filter's last collection, or a
    /// scope filter's scope, was dropped).
    pub fn on_record(&mut self, record: &SystemEvent) -> bool {
        match record {
            SystemEvent::Collection {
                dropped: true,
                collection,
                ..
            } => {
                self.collections.remove(&CollectionId(*collection));
                self.scope.is_none() && self.collections.is_empty()
            }
            SystemEvent::Scope {
                dropped: true,
                scope,
                ..
            } => self.scope == Some(*scope),
            _ => false,
        }
    }
}

/// A stream request's JSON value, as collection-aware consumers send it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterRequest {
    /// Collection ids, in hex.
    #[serde(default)]
    pub collections: Option<Vec<String>>,
    /// A scope id, in hex.
    #[serde(default)]
    pub scope: Option<String>,
    /// The manifest uid the client knows (hex); not used.
    #[serde(default)]
    pub uid: Option<String>,
    /// A stream id (1..=65535; 0 is none): only with `enable_stream_id`.
    #[serde(default)]
    pub sid: Option<u64>,
    /// Decimal, as the client last saw it; not used.
    #[serde(default)]
    pub purge_seqno: Option<String>,
}

/// Why a stream request's value is refused: not the JSON above, both `collections` and
/// `scope`, an id that is not hex, or a stream id past 65535.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError;

/// What a stream request's value asks for, its ids read.
#[derive(Debug, Default)]
pub struct StreamValue {
    /// The stream's id, if it names one (whether it may is the caller's check).
    pub sid: Option<u16>,
    /// The collections it wants; `None`: every one.
    pub wanted: Option<Wanted>,
}

/// Some collections, or one scope.
#[derive(Debug)]
pub enum Wanted {
    Collections(Vec<CollectionId>),
    Scope(u32),
}

impl FilterRequest {
    /// Reads a stream request's value (empty: no filter and no id, as `{}`).
    pub fn parse(value: &[u8]) -> Result<StreamValue, FilterError> {
        if value.is_empty() {
            return Ok(StreamValue::default());
        }
        let req: FilterRequest = serde_json::from_slice(value).map_err(|_| FilterError)?;
        let sid = match req.sid {
            None | Some(0) => None,
            Some(n) => Some(u16::try_from(n).map_err(|_| FilterError)?),
        };
        let hex = |s: &str| u32::from_str_radix(s, 16).map_err(|_| FilterError);
        let wanted = match (req.collections, req.scope) {
            (Some(_), Some(_)) => return Err(FilterError),
            (Some(ids), None) => Some(Wanted::Collections(
                ids.iter()
                    .map(|s| hex(s).map(CollectionId))
                    .collect::<Result<_, _>>()?,
            )),
            (None, Some(s)) => Some(Wanted::Scope(hex(&s)?)),
            (None, None) => None,
        };
        Ok(StreamValue { sid, wanted })
    }
}

/// Whether a legacy consumer sees the change to `key`.
pub fn legacy_admits(key: &[u8]) -> bool {
    collection_of(key) == CollectionId::DEFAULT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legacy_consumer_reads_keys_without_prefix() {
        let default = Bytes::from_static(b"\x00doc");
        assert!(
            legacy_admits(&default) && !legacy_admits(b"\x08doc") && !legacy_admits(b"\x01c\x08")
        );
        assert_eq!(
            KeyMode::Legacy.wire_key(&default),
            Bytes::from_static(b"doc")
        );
        assert_eq!(KeyMode::Aware.wire_key(&default), default);
    }

    #[test]
    fn a_scope_filter_takes_in_collections_made_in_its_scope() {
        let mut f = StreamFilter::scope(8, [CollectionId(8)]);
        assert!(f.admits_collection(CollectionId(8)) && !f.admits_collection(CollectionId(9)));
        assert!(f.admits_collection_record(8, CollectionId(9)));
        assert!(f.admits_collection(CollectionId(9)));
        assert!(!f.admits_collection_record(10, CollectionId(11)));
        assert!(f.admits_scope_record(8) && !f.admits_scope_record(10));
        let c = StreamFilter::collections([CollectionId(8)]);
        assert!(!c.admits_scope_record(8));
    }

    #[test]
    fn stream_request_values_parse_as_couchbase_sends_them() {
        for empty in [&b""[..], b"{}", br#"{"sid":0}"#] {
            let v = FilterRequest::parse(empty).unwrap();
            assert!(v.sid.is_none() && v.wanted.is_none());
        }
        match FilterRequest::parse(br#"{"uid":"3","collections":["8","a"]}"#) {
            Ok(StreamValue {
                sid: None,
                wanted: Some(Wanted::Collections(ids)),
            }) => {
                assert_eq!(ids, vec![CollectionId(8), CollectionId(10)])
            }
            other => panic!("collections: {other:?}"),
        }
        assert!(matches!(
            FilterRequest::parse(br#"{"scope":"8"}"#),
            Ok(StreamValue {
                wanted: Some(Wanted::Scope(8)),
                ..
            })
        ));
        assert!(matches!(
            FilterRequest::parse(br#"{"sid":65535,"collections":["8"]}"#),
            Ok(StreamValue {
                sid: Some(65535),
                wanted: Some(Wanted::Collections(_)),
            })
        ));
        assert!(matches!(
            FilterRequest::parse(br#"{"sid":3}"#),
            Ok(StreamValue {
                sid: Some(3),
                wanted: None,
            })
        ));
        let refused: &[&[u8]] = &[
            br#"{"scope":"8","collections":["8"]}"#,
            br#"{"collections":["zz"]}"#,
            br#"{"sid":65536}"#,
            br#"{"sid":-1}"#,
            br#"{"what":1}"#,
            b"not json",
        ];
        for v in refused {
            assert_eq!(FilterRequest::parse(v).err(), Some(FilterError), "{v:?}");
        }
    }

    #[test]
    fn dropping_the_last_collection_or_the_scope_empties_a_filter() {
        let drop_c = |c: u32| SystemEvent::Collection {
            dropped: true,
            manifest_uid: 9,
            scope: 8,
            collection: c,
            max_ttl_s: 0,
            name: Vec::new(),
        };
        let mut f = StreamFilter::collections([CollectionId(8), CollectionId(9)]);
        assert!(!f.on_record(&drop_c(8)), "9 is left");
        assert!(!f.admits_collection(CollectionId(8)));
        assert!(f.on_record(&drop_c(9)));
        let mut s = StreamFilter::scope(8, [CollectionId(8)]);
        assert!(!s.on_record(&drop_c(8)), "a scope outlives its collections");
        let drop_s = |sid: u32| SystemEvent::Scope {
            dropped: true,
            manifest_uid: 10,
            scope: sid,
            name: Vec::new(),
        };
        assert!(!s.on_record(&drop_s(12)));
        assert!(s.on_record(&drop_s(8)));
    }
}
