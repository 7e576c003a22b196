//! A wrong password fails for every mechanism, on the server side, with `WrongPassword`.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{client, run, store, USER};
use sluice_sasl::{AuthError, Mechanism, Step};

#[test]
fn wrong_password_fails_for_each_mechanism() {
    let store = store();
    for mechanism in Mechanism::ALL {
        let outcome = run(client(mechanism, USER, "Tr0ub4dor&3", 9), &store, 10);
        assert_eq!(
            outcome.server,
            Step::Failure(AuthError::WrongPassword),
            "{mechanism}"
        );
        assert_eq!(outcome.client, None, "{mechanism}");
    }
}
