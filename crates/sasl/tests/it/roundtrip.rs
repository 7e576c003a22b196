//! A full client↔server exchange succeeds for every advertised mechanism, and the client
//! verifies the server's final signature.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{client, run, store, PASSWORD, USER};
use sluice_sasl::{mechanisms_list, ClientStep, Mechanism, Step};

#[test]
fn every_mechanism_authenticates() {
    let store = store();
    for (i, name) in mechanisms_list().split(' ').enumerate() {
        let mechanism: Mechanism = name.parse().expect("listed mechanism parses");
        let outcome = run(
            client(mechanism, USER, PASSWORD, i as u64),
            &store,
            100 + i as u64,
        );
        match &outcome.server {
            Step::Success {
                username,
                final_message,
            } => {
                assert_eq!(username, USER, "{name}");
                if mechanism == Mechanism::Plain {
                    assert!(final_message.is_empty());
                } else {
                    assert!(final_message.starts_with(b"v="), "{name}");
                }
            }
            other => panic!("{name}: server {other:?}"),
        }
        assert_eq!(outcome.client, Some(ClientStep::Done), "{name}");
    }
}

#[test]
fn escaped_username_authenticates() {
    let store = store();
    for mechanism in Mechanism::ALL {
        let outcome = run(client(mechanism, "we,ird=name", "pw", 1), &store, 2);
        assert!(
            matches!(&outcome.server, Step::Success { username, .. } if username == "we,ird=name"),
            "{mechanism}: {outcome:?}"
        );
        assert_eq!(outcome.client, Some(ClientStep::Done));
    }
}
