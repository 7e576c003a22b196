//! Sans-IO SASL for Sluice: SCRAM-SHA512/256/1 (RFC 5802, RFC 7677) and PLAIN (RFC 4616).
//!
//! Nothing here touches sockets or clocks: every function takes bytes and returns bytes
//! or a typed outcome, and every source of randomness (nonces, salts) is an explicit
//! parameter. That keeps the memcached binary-protocol layer (`SASL_AUTH`/`SASL_STEP`)
//! a thin adapter and makes every exchange reproducible in tests.
//!
//! Layout:
//! - [`mechanism`](Mechanism): mechanism names as Couchbase spells them.
//! - `credentials` / `store`: what the server keeps per user (derived SCRAM keys, never
//!   the password) and how it looks users up.
//! - `scram::{messages, saslname, nonce, hash}`: wire-format parsing and the SCRAM maths.
//! - `scram::{server, client}` and `plain`: the per-mechanism state machines.
//! - `server` / `client`: the mechanism-agnostic sessions callers drive.
//!
//! # Example
//!
//! ```
//! use rand::rngs::OsRng;
//! use sluice_sasl::{ClientSession, ClientStep, MemoryCredentialStore, Mechanism, ServerSession, Step};
//!
//! let mut store = MemoryCredentialStore::new(&mut OsRng);
//! store.add_user("alice", "s3cret", &mut OsRng)?; // PBKDF2 runs here, once
//!
//! let mut client = ClientSession::new(Mechanism::ScramSha512, "alice", "s3cret", &mut OsRng)?;
//! // SASL_AUTH
//! let (mut server, step) =
//!     ServerSession::start(client.mechanism().name(), client.initial_message(), &store, &mut OsRng);
//! let Step::Continue(server_first) = step else { panic!("{step:?}") };
//! // SASL_STEP
//! let ClientStep::Continue(client_final) = client.step(&server_first) else { panic!() };
//! let Step::Success { username, final_message } = server.step(&client_final) else { panic!() };
//! assert_eq!(username, "alice");
//! assert_eq!(client.step(&final_message), ClientStep::Done); // server signature verified
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Fuzzing entry points: [`parse_client_first`], [`parse_client_final`],
//! [`parse_server_first`], [`parse_server_final`] and [`parse_plain`] decode untrusted
//! bytes and only ever return `Err` on bad input.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod basic;
mod client;
mod credentials;
mod ct;
mod error;
mod mechanism;
mod plain;
mod scram;
mod server;
mod store;

pub use basic::{basic_header, parse_basic_header};
pub use client::{ClientSession, ClientStep, DEFAULT_MAX_ITERATIONS};
pub use credentials::{
    PlainCredentials, ScramCredentials, UserCredentials, DEFAULT_ITERATIONS, DEFAULT_SALT_LEN,
};
pub use error::{AuthError, CredentialError, ParseError};
pub use mechanism::{mechanisms_list, mechanisms_list_cleartext, Mechanism};
pub use plain::{parse_plain, PlainMessage};
pub use scram::hash::ScramHash;
pub use scram::messages::{
    parse_client_final, parse_client_first, parse_server_final, parse_server_first, ChannelBinding,
    ClientFinal, ClientFirst, Gs2Header, ServerFinal, ServerFirst,
};
pub use scram::saslname::{decode_saslname, encode_saslname};
pub use server::{ServerSession, Step};
pub use store::{CredentialStore, DecoyParams, MemoryCredentialStore};
