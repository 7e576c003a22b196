//! PLAIN (RFC 4616): `\0user\0pass`, and an authzid, which is accepted only when it
//! names the authenticating user itself.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{rng, store, PASSWORD, USER};
use sluice_sasl::{AuthError, ParseError, ServerSession, Step};

fn plain(message: &[u8]) -> Step {
    let store = store();
    let (session, step) = ServerSession::start("PLAIN", message, &store, &mut rng(1));
    assert!(session.is_finished(), "PLAIN is a single round trip");
    step
}

#[test]
fn without_authzid() {
    let msg = format!("\0{USER}\0{PASSWORD}");
    assert_eq!(
        plain(msg.as_bytes()),
        Step::Success {
            username: USER.into(),
            final_message: Vec::new()
        }
    );
}

#[test]
fn with_own_authzid() {
    let msg = format!("{USER}\0{USER}\0{PASSWORD}");
    assert!(matches!(plain(msg.as_bytes()), Step::Success { username, .. } if username == USER));
}

#[test]
fn with_foreign_authzid_is_refused() {
    let msg = format!("admin\0{USER}\0{PASSWORD}");
    assert_eq!(
        plain(msg.as_bytes()),
        Step::Failure(AuthError::AuthzidNotPermitted)
    );
}

#[test]
fn wrong_password_and_malformed() {
    assert_eq!(
        plain(format!("\0{USER}\0nope").as_bytes()),
        Step::Failure(AuthError::WrongPassword)
    );
    assert_eq!(
        plain(format!("{USER}\0{PASSWORD}").as_bytes()),
        Step::Failure(AuthError::Malformed(ParseError::PlainFieldCount))
    );
    assert_eq!(
        plain(b""),
        Step::Failure(AuthError::Malformed(ParseError::Empty))
    );
}
