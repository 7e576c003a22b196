//! Sluice's indexes: what the index service keeps for the query service to scan.
//!
//! An index is fed by DCP like every other consumer of a bucket's changes. This crate is the
//! part that knows no sockets: a feeder (in the server) reads the stream and hands each
//! vbucket's changes here in seqno order, with the stream position they reach; the store
//! applies them and saves that position in the same atomic fjall batch as the entries, so
//! after a crash the entries and the position agree and the feeder resumes from there.
//!
//! - `definition`: an index as `CREATE INDEX` defines it (keys, partial-index condition,
//!   primary or not) and its JSON form in the store.
//! - `entry`: the one entry a document gives an index, or none (GSI leaves out documents
//!   whose leading key is MISSING, and those a partial index's condition rejects).
//! - `position`: a vbucket's stream position as the store saves it.
//! - `store/`: the fjall store: definitions, entries, the back index from a document to
//!   its entry (so an update removes the old entry, and a rollback clears one vbucket),
//!   positions, and range scans.
//!
//! Entries are the bytes `sluice_query::index_key::encode_key` writes (the document key
//! last), so a scan of a byte range is a scan of a range of index keys. A primary index's
//! entries are the document keys themselves.
#![deny(unsafe_code)]

pub mod definition;
pub mod entry;
pub mod error;
pub mod position;
pub mod store;

pub use definition::{IndexDef, IndexId, IndexState};
pub use entry::{entry_of, Doc};
pub use error::IndexError;
pub use position::VbPosition;
pub use store::{Change, IndexStore, ScanEntry, ScanPage, StoreMemory, VbChanges};
