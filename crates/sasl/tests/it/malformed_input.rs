//! Malformed input at every step fails cleanly: a typed `Failure`, never a panic.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use crate::common;

use common::{rng, store, XorShift, PASSWORD, USER};
use sluice_sasl::{
    parse_client_final, parse_client_first, parse_plain, parse_server_final, parse_server_first,
    AuthError, ClientSession, ClientStep, Mechanism, ParseError, ServerSession, Step,
};

const SCRAM: [&str; 3] = ["SCRAM-SHA512", "SCRAM-SHA256", "SCRAM-SHA1"];

fn start(mech: &str, first: &[u8]) -> Step {
    ServerSession::start(mech, first, &store(), &mut rng(1)).1
}

fn is_malformed(step: &Step) -> bool {
    matches!(step, Step::Failure(AuthError::Malformed(_)))
}

#[test]
fn bad_client_first_messages() {
    let cases: &[&[u8]] = &[
        b"",
        b"n",
        b"n,,",
        b"n,,n=alice",
        b"n,,r=abc",
        b"n,,n=alice,r=",
        b"n,,n=al=ice,r=abc",
        b"x,,n=alice,r=abc",
        b"n,,n=alice,r=a\x00b",
        b"\xc3\x28,,n=alice,r=abc",
        b"n,,m=ext,n=alice,r=abc",
    ];
    for mech in SCRAM {
        for input in cases {
            let step = start(mech, input);
            assert!(is_malformed(&step), "{mech} {input:?}: {step:?}");
        }
    }
}

/// Completes the first step honestly, then sends a broken client-final.
fn final_step(mech: &str, client_final: impl FnOnce(&str) -> Vec<u8>) -> Step {
    let store = store();
    let first = format!("n,,n={USER},r=cnonce");
    let (mut session, step) = ServerSession::start(mech, first.as_bytes(), &store, &mut rng(7));
    let Step::Continue(challenge) = step else {
        panic!("{step:?}");
    };
    let text = String::from_utf8(challenge).unwrap();
    let nonce = text.split(',').next().unwrap().strip_prefix("r=").unwrap();
    let step = session.step(&client_final(nonce));
    assert!(session.is_finished());
    step
}

/// Builds a client-final from the server's combined nonce.
type MakeFinal = Box<dyn Fn(&str) -> Vec<u8>>;

#[test]
fn bad_client_final_messages() {
    for mech in SCRAM {
        let cases: Vec<(MakeFinal, AuthError)> = vec![
            (Box::new(|_| Vec::new()), ParseError::Empty.into()),
            (
                Box::new(|n| format!("c=biws,r={n}").into_bytes()),
                ParseError::MissingAttribute('p').into(),
            ),
            (
                Box::new(|n| format!("c=biws,r={n},p=not base64!").into_bytes()),
                ParseError::BadBase64('p').into(),
            ),
            (
                Box::new(|n| format!("c=bi*s,r={n},p=AAAA").into_bytes()),
                ParseError::BadBase64('c').into(),
            ),
            (
                Box::new(|n| format!("c=biws,r={n},p=AAAA").into_bytes()),
                ParseError::BadProofLength.into(),
            ),
            (
                Box::new(|_| b"c=biws,r=cnonceSOMETHINGELSE,p=AAAA".to_vec()),
                AuthError::NonceMismatch,
            ),
            (
                Box::new(|_| b"c=biws,r=cnonce,p=AAAA".to_vec()),
                AuthError::NonceMismatch,
            ),
        ];
        for (i, (make, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                final_step(mech, make),
                Step::Failure(expected),
                "{mech} case {i}"
            );
        }
    }
}

#[test]
fn truncated_messages_never_succeed() {
    let store = store();
    for mech in [
        Mechanism::ScramSha512,
        Mechanism::ScramSha256,
        Mechanism::ScramSha1,
    ] {
        let mut client = ClientSession::with_nonce(mech, USER, PASSWORD, "tnonce").unwrap();
        let first = client.initial_message().to_vec();
        // Cutting inside the nonce still leaves a valid (shorter-nonce) client-first;
        // every cut up to and including "r=" must fail.
        let nonce_start = first.len() - "tnonce".len();
        for cut in 0..first.len() {
            let step = start(mech.name(), &first[..cut]);
            if cut < nonce_start + 1 {
                assert!(
                    matches!(step, Step::Failure(_)),
                    "{mech} first[..{cut}]: {step:?}"
                );
            } else {
                assert!(matches!(step, Step::Continue(_)), "{mech} first[..{cut}]");
            }
        }
        let (_, step) = ServerSession::start(mech.name(), &first, &store, &mut rng(8));
        let Step::Continue(challenge) = step else {
            panic!("{step:?}");
        };
        let ClientStep::Continue(fin) = client.step(&challenge) else {
            panic!("client rejected challenge");
        };
        for cut in 0..fin.len() {
            let (mut server, _) = ServerSession::start(mech.name(), &first, &store, &mut rng(8));
            let step = server.step(&fin[..cut]);
            assert!(
                matches!(step, Step::Failure(_)),
                "{mech} final[..{cut}]: {step:?}"
            );
        }
        // Truncated server messages are rejected by a client, too.
        for cut in 0..challenge.len() {
            let mut c = ClientSession::with_nonce(mech, USER, PASSWORD, "tnonce").unwrap();
            assert!(
                !matches!(c.step(&challenge[..cut]), ClientStep::Done),
                "{mech} challenge[..{cut}]"
            );
        }
    }
}

/// Random bytes from a deterministic PRNG, plus random mutations of valid messages, fed
/// to every parser and to both session steps. The assertion is simply "no panic, and
/// nothing random authenticates".
#[test]
fn random_bytes_do_not_panic() {
    let store = store();
    let mut prng = XorShift(0x5eed_cafe_f00d_d00d);
    let valid_first = format!("n,,n={USER},r=abcdef");
    for round in 0..3000 {
        let mut input = prng.bytes(96);
        if round % 2 == 0 {
            // Mutate a valid message instead: flip/insert a byte, keeping most structure.
            input = valid_first.clone().into_bytes();
            let pos = (prng.next_u64() as usize) % input.len();
            input[pos] = prng.next_u64() as u8;
            if round % 4 == 0 {
                input.insert(pos, b',');
            }
        }
        let _ = parse_client_first(&input);
        let _ = parse_client_final(&input);
        let _ = parse_server_first(&input);
        let _ = parse_server_final(&input);
        let _ = parse_plain(&input);

        for mech in ["SCRAM-SHA512", "SCRAM-SHA256", "SCRAM-SHA1", "PLAIN"] {
            let (mut session, step) = ServerSession::start(mech, &input, &store, &mut rng(round));
            assert!(!matches!(step, Step::Success { .. }), "{mech} {input:?}");
            let garbage = prng.bytes(128);
            assert!(!matches!(session.step(&garbage), Step::Success { .. }));
        }

        let mut client =
            ClientSession::with_nonce(Mechanism::ScramSha1, USER, PASSWORD, "c").unwrap();
        if let ClientStep::Continue(_) = client.step(&input) {
            assert_ne!(client.step(&prng.bytes(64)), ClientStep::Done);
        }
    }
}

#[test]
fn client_rejects_hostile_server_first() {
    let cases: &[(&[u8], AuthError)] = &[
        (b"r=other,s=c2FsdA==,i=4096", AuthError::NonceMismatch),
        (b"r=cn,s=c2FsdA==,i=4096", AuthError::NonceMismatch),
        (
            b"r=cnX,s=c2FsdA==,i=4000000000",
            AuthError::TooManyIterations(4_000_000_000),
        ),
        (
            b"r=cnX,s=%%%,i=4096",
            AuthError::Malformed(ParseError::BadBase64('s')),
        ),
        (
            b"r=cnX,s=c2FsdA==",
            AuthError::Malformed(ParseError::MissingAttribute('i')),
        ),
    ];
    for (input, expected) in cases {
        let mut client =
            ClientSession::with_nonce(Mechanism::ScramSha256, USER, PASSWORD, "cn").unwrap();
        assert_eq!(client.step(input), ClientStep::Failure(expected.clone()));
        assert_eq!(
            client.step(b"v=AAAA"),
            ClientStep::Failure(AuthError::SessionFinished)
        );
    }
}
