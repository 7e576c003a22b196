//! Every integration test of this crate in one test binary (`cargo test -p sluice-sasl --test it`),
//! one module per former test file: each test binary links the crate and its dependencies
//! again, and CI builds them all. Filter by module: `--test it MODULE::`.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

mod common;

mod channel_binding;
mod cpp_sdk_nonce;
mod malformed_input;
mod plain;
mod rfc5802_sha1_vector;
mod rfc7677_sha256_vector;
mod roundtrip;
mod server_signature;
mod unknown_mechanism;
mod unknown_user;
mod wrong_password;
