//! An unsupported mechanism is a typed failure, and the returned session is finished.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{rng, store};
use sluice_sasl::{AuthError, ServerSession, Step};

#[test]
fn unknown_mechanism_is_typed_error() {
    let store = store();
    for name in ["CRAM-MD5", "SCRAM-SHA-1-PLUS", "", "plain", "SCRAM-SHA384"] {
        let (mut session, step) = ServerSession::start(name, b"n,,n=a,r=b", &store, &mut rng(1));
        assert_eq!(
            step,
            Step::Failure(AuthError::UnknownMechanism(name.into()))
        );
        assert_eq!(session.mechanism(), None);
        assert_eq!(
            session.step(b"anything"),
            Step::Failure(AuthError::SessionFinished)
        );
    }
}
