//! A whole server-side SASL exchange (`ServerSession::start`, then `step`s) driven by fuzz
//! bytes, against a `MemoryCredentialStore` holding one user.
//!
//! Input layout:
//! - byte 0, low 3 bits: the mechanism name: 0..=6 pick from [`NAMES`] (Couchbase and IANA
//!   spellings); 7 takes the name from the first segment instead (unknown names included);
//! - byte 1, the mode: bit 0 = *honest client*, bit 1 = *nonce substitution* (raw mode only);
//! - the rest: segments separated by 0xff (a byte that never occurs in UTF-8): the optional
//!   mechanism name, the SASL_AUTH message, then up to [`MAX_STEPS`] SASL_STEP messages.
//!
//! Raw mode sends the segments as they are (with nonce substitution, every `@@` in a step
//! message becomes the combined nonce of the server's last challenge, so the fuzzer can get
//! past the nonce check). Honest mode runs a real `ClientSession` for the user with the right
//! password and uses each segment as an XOR patch over the client's next message (bytes past
//! its end are appended), so empty segments make an untampered, successful exchange.
//!
//! Checks, besides "never panics":
//! - every step's outcome is consistent with the session state (`Continue` only from
//!   `start`; after `Success`/`Failure` the session is finished and a further step is
//!   `Failure(SessionFinished)`); `mechanism()` is `Some` exactly for known names;
//! - every SCRAM challenge is a valid server-first echoing the client nonce, with a 16-byte
//!   salt and the store's iteration count, for unknown users (decoys) as for the real one;
//! - authentication: only the stored user ever succeeds; PLAIN succeeds exactly when the
//!   message carries that user's name and password (authzid empty or the same user); SCRAM
//!   never succeeds from raw bytes (that would be a forged proof), and in honest mode it
//!   succeeds exactly when no message was tampered with, and the client then accepts the
//!   server's signature.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rand::rngs::StdRng;
use rand::SeedableRng;
use sluice_sasl::{
    parse_client_first, parse_plain, parse_server_final, parse_server_first, AuthError,
    ClientSession, ClientStep, Mechanism, MemoryCredentialStore, ServerFinal, ServerSession, Step,
    DEFAULT_SALT_LEN,
};

/// The one user. Its name needs SCRAM saslname escaping (`,` and `=`).
const USER: &str = "u,ser=1";
const PASSWORD: &str = "pencil";
/// PBKDF2 iterations for the stored user and the decoys: tiny, so the honest client's
/// key derivation does not dominate each run.
const ITERATIONS: u32 = 2;
/// The honest client's nonce.
const CLIENT_NONCE: &str = "fyko+d2lbbFgONRv9qkxdawL";
const MAX_STEPS: usize = 4;
const NAMES: [&str; 7] = [
    "SCRAM-SHA512",
    "SCRAM-SHA256",
    "SCRAM-SHA1",
    "PLAIN",
    "SCRAM-SHA-512",
    "SCRAM-SHA-256",
    "SCRAM-SHA-1",
];

fn store() -> &'static MemoryCredentialStore {
    static STORE: OnceLock<MemoryCredentialStore> = OnceLock::new();
    STORE.get_or_init(|| {
        let mut rng = StdRng::seed_from_u64(42);
        let mut store = MemoryCredentialStore::new(&mut rng)
            .with_iterations(ITERATIONS)
            .expect("non-zero iterations");
        store
            .add_user(USER, PASSWORD, &mut rng)
            .expect("valid user");
        store
    })
}

fuzz_target!(|data: &[u8]| {
    let [sel, mode, rest @ ..] = data else {
        return;
    };
    let mut segments = rest.split(|&b| b == 0xff);
    let name = match usize::from(sel & 7) {
        7 => String::from_utf8_lossy(segments.next().unwrap_or_default()).into_owned(),
        i => NAMES[i].to_owned(),
    };
    let mechanism = Mechanism::from_name(&name).ok();
    let segments: Vec<&[u8]> = segments.take(1 + MAX_STEPS).collect();
    match mechanism {
        Some(m) if mode & 1 != 0 => honest(m, &name, &segments),
        _ => raw(mechanism, &name, mode & 2 != 0, &segments),
    }
});

/// Sends the segments as they are.
fn raw(mechanism: Option<Mechanism>, name: &str, substitute_nonce: bool, segments: &[&[u8]]) {
    let first = segments.first().copied().unwrap_or_default();
    let (mut session, mut step) = start(name, first);
    assert_eq!(session.mechanism(), mechanism);
    if mechanism.is_none() {
        assert_eq!(
            step,
            Step::Failure(AuthError::UnknownMechanism(name.to_owned()))
        );
    }
    for msg in segments.iter().skip(1) {
        let Step::Continue(challenge) = &step else {
            break;
        };
        let nonce = parse_server_first(challenge)
            .expect("checked")
            .nonce()
            .to_owned();
        let msg = if substitute_nonce {
            replace(msg, b"@@", nonce.as_bytes())
        } else {
            msg.to_vec()
        };
        step = session.step(&msg);
        check_after_step(&step);
    }
    match &step {
        Step::Success { .. } => match mechanism {
            Some(Mechanism::Plain) => assert!(plain_ok(first)),
            m => panic!("{m:?} authenticated from raw bytes: forged proof? {step:?}"),
        },
        Step::Failure(_) if mechanism == Some(Mechanism::Plain) => assert!(!plain_ok(first)),
        _ => {}
    }
    check_finished(&mut session, &step);
}

/// Runs a real client with the right password; segments are XOR patches over its messages.
fn honest(mechanism: Mechanism, name: &str, segments: &[&[u8]]) {
    let mut client =
        ClientSession::with_nonce(mechanism, USER, PASSWORD, CLIENT_NONCE).expect("valid client");
    let mut patches = segments.iter().copied();
    let original = client.initial_message().to_vec();
    let first = patch(&original, patches.next().unwrap_or_default());
    let mut tampered = first != original;
    let (mut session, mut step) = start(name, &first);
    assert_eq!(session.mechanism(), Some(mechanism));
    while let Step::Continue(challenge) = &step {
        match client.step(challenge) {
            ClientStep::Continue(reply) => {
                let sent = patch(&reply, patches.next().unwrap_or_default());
                tampered |= sent != reply;
                step = session.step(&sent);
                check_after_step(&step);
            }
            ClientStep::Failure(e) => {
                assert!(tampered, "honest client rejected the challenge: {e:?}");
                break;
            }
            ClientStep::Done => panic!("client done before the server's final message"),
        }
    }
    match &step {
        Step::Success { final_message, .. } => {
            if mechanism == Mechanism::Plain {
                assert!(plain_ok(&first));
            } else {
                assert!(!tampered, "a tampered SCRAM exchange authenticated");
                assert_eq!(client.step(final_message), ClientStep::Done);
            }
        }
        Step::Failure(e) => {
            assert!(tampered, "an untampered exchange failed: {e:?}");
            if mechanism == Mechanism::Plain {
                assert!(!plain_ok(&first));
            }
        }
        Step::Continue(_) => assert!(tampered),
    }
    check_finished(&mut session, &step);
}

fn start(name: &str, first: &[u8]) -> (ServerSession, Step) {
    let (session, step) = ServerSession::start(name, first, store(), &mut StdRng::seed_from_u64(0));
    match &step {
        Step::Continue(challenge) => {
            assert!(!session.is_finished());
            let mech = session.mechanism().expect("a known mechanism");
            assert!(mech.scram_hash().is_some(), "{mech:?} sent a challenge");
            let sf = parse_server_first(challenge).expect("server-first parses");
            let cf = parse_client_first(first).expect("server accepted client-first");
            assert!(sf.nonce().starts_with(cf.nonce()));
            assert!(sf.nonce().len() > cf.nonce().len());
            // The same shape for the real user and for decoys: no user enumeration.
            assert_eq!(sf.salt().len(), DEFAULT_SALT_LEN);
            assert_eq!(sf.iterations(), ITERATIONS);
        }
        other => check_outcome(&session, other),
    }
    (session, step)
}

fn check_after_step(step: &Step) {
    assert!(
        !matches!(step, Step::Continue(_)),
        "a second challenge: {step:?}"
    );
}

fn check_outcome(session: &ServerSession, step: &Step) {
    assert!(session.is_finished());
    if let Step::Success {
        username,
        final_message,
    } = step
    {
        assert_eq!(username, USER);
        match session.mechanism().and_then(|m| m.scram_hash()) {
            None => assert!(final_message.is_empty()),
            Some(hash) => match parse_server_final(final_message) {
                Ok(ServerFinal::Verifier(sig)) => assert_eq!(sig.len(), hash.output_len()),
                other => panic!("bad server-final {other:?}"),
            },
        }
    }
}

/// Once an exchange is over, the session only answers `SessionFinished`.
fn check_finished(session: &mut ServerSession, step: &Step) {
    if matches!(step, Step::Continue(_)) {
        assert!(!session.is_finished());
        return;
    }
    check_outcome(session, step);
    assert_eq!(
        session.step(b"c=biws,r=x,p=AAAA"),
        Step::Failure(AuthError::SessionFinished)
    );
}

/// Whether PLAIN must accept `msg`.
fn plain_ok(msg: &[u8]) -> bool {
    parse_plain(msg).is_ok_and(|m| {
        m.authcid() == USER && m.password() == PASSWORD && m.authzid().is_none_or(|a| a == USER)
    })
}

fn patch(original: &[u8], patch: &[u8]) -> Vec<u8> {
    let mut out = original.to_vec();
    for (i, &b) in patch.iter().enumerate() {
        match out.get_mut(i) {
            Some(o) => *o ^= b,
            None => out.push(b),
        }
    }
    out
}

fn replace(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}
