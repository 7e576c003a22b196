//! DCP's decisions, without I/O: the server's producer and consumer and the client feed
//! these types events and carry out the actions they return.
//!
//! Layout:
//! - `rollback` — does a stream request need a rollback, and to where;
//! - `control` — DCP_CONTROL keys and values, typed;
//! - `flow_control` — the connection's byte window;
#![deny(unsafe_code)]

pub mod control;
pub mod flow_control;
pub mod rollback;
