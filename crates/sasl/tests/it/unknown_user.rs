//! Unknown users fail. SCRAM answers them with a stable decoy challenge first, so a
//! client cannot tell "no such user" from "wrong password" by the first response.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{client, rng, run, store};
use sluice_sasl::{
    AuthError, CredentialStore, Mechanism, ScramHash, ServerSession, Step, UserCredentials,
};
use std::sync::Arc;

#[test]
fn unknown_user_fails_for_each_mechanism() {
    let store = store();
    for mechanism in Mechanism::ALL {
        let outcome = run(client(mechanism, "mallory", "whatever", 3), &store, 4);
        assert_eq!(
            outcome.server,
            Step::Failure(AuthError::UnknownUser),
            "{mechanism}"
        );
    }
}

#[test]
fn decoy_salt_is_stable_across_attempts() {
    let store = store();
    let first = b"n,,n=mallory,r=abc";
    let (_, a) = ServerSession::start("SCRAM-SHA512", first, &store, &mut rng(1));
    let (_, b) = ServerSession::start("SCRAM-SHA512", first, &store, &mut rng(2));
    let salt = |s: &Step| match s {
        Step::Continue(c) => String::from_utf8(c.clone())
            .unwrap()
            .split(',')
            .nth(1)
            .unwrap()
            .to_owned(),
        other => panic!("{other:?}"),
    };
    assert_eq!(salt(&a), salt(&b));
}

/// A store without decoys fails SCRAM immediately.
struct NoDecoy;

impl CredentialStore for NoDecoy {
    fn lookup(&self, _: &str) -> Option<Arc<UserCredentials>> {
        None
    }
}

#[test]
fn store_without_decoys_fails_at_first_step() {
    let (session, step) =
        ServerSession::start("SCRAM-SHA1", b"n,,n=ghost,r=abc", &NoDecoy, &mut rng(1));
    assert_eq!(step, Step::Failure(AuthError::UnknownUser));
    assert!(session.is_finished());
    assert_eq!(NoDecoy.decoy("ghost", ScramHash::Sha1), None);
}
