//! DCP's decisions, without I/O: the server's producer and consumer and the client feed
//! these types events and carry out the actions they return.
//!
//! Layout:
//! - `rollback` — does a stream request need a rollback, and to where;
//! - `stream_request` — accept or refuse a DCP_STREAM_REQ, in the reference order;
//! - `control` — DCP_CONTROL keys and values, typed;
//! - `flow_control` — the connection's byte window;
//! - `noop` — idle noops and dead-connection detection;
//! - `change` — a change as streams see it;
//! - `filter` — which collections a stream sends, how it spells their keys, and stream
//!   request filters; `system_event`: scope and collection records as SYSTEM_EVENTs;
//! - `stream` — the active stream state machine (backfill ⇄ memory, markers, ending);
//! - `producer` — one producer connection: settings, streams, fair and flow-controlled output;
//! - `stream_key` — which stream of a connection: its vbucket, and its id with `enable_stream_id`;
//! - `slot` — per stream, what a producer connection holds beside the stream (id, cursor);
//! - `backfill` — a producer connection's backfills: which to start and read, within bounds;
//! - `passive` — the consumer's decisions: retries of refused streams, rollback, acks;
//! - `seqno_acks` — when a replica acknowledges applied and persisted seqnos;
//! - `sent_stamps` — which encoded documents a socket write took (replication's "sent" stage);
//! - `durability` — the active's SyncWrites: which prepares to commit or abort, and when.
#![deny(unsafe_code)]
// A decoder never panics on what it reads: every index is checked (`get`, `split_at_checked`).
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

pub mod backfill;
pub mod change;
pub mod control;
pub mod durability;
pub mod filter;
pub mod flow_control;
pub mod noop;
pub mod passive;
pub mod producer;
pub mod rollback;
pub mod sent_stamps;
pub mod seqno_acks;
pub mod slot;
pub mod stream;
pub mod stream_key;
pub mod stream_request;
pub mod system_event;
