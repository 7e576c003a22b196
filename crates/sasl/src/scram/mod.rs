//! SCRAM (RFC 5802, RFC 7677): wire messages, key derivation, and the two state machines.

pub(crate) mod client;
pub(crate) mod hash;
pub(crate) mod messages;
pub(crate) mod nonce;
pub(crate) mod saslname;
pub(crate) mod server;
