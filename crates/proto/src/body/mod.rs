//! Response bodies that more than one side reads or writes: the server encodes them, the
//! client (and any tool) decodes them, with one definition of each layout.
//!
//! - `failover_log` — GET_FAILOVER_LOG's answer and a DCP stream request's success value;
//! - `vb_seqnos` — GET_ALL_VB_SEQNOS's answer.

pub mod failover_log;
pub mod vb_seqnos;
