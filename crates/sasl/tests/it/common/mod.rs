//! Shared test helpers: a seeded store and a driver that runs a full exchange.
#![allow(dead_code)] // each test file uses a different subset

use rand::rngs::StdRng;
use rand::SeedableRng;
use sluice_sasl::{
    ClientSession, ClientStep, Mechanism, MemoryCredentialStore, ServerSession, Step,
};

pub const USER: &str = "alice";
pub const PASSWORD: &str = "correct horse battery staple";

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A store holding `USER`/`PASSWORD` plus a user whose name needs SCRAM escaping.
pub fn store() -> MemoryCredentialStore {
    let mut rng = rng(42);
    let mut store = MemoryCredentialStore::new(&mut rng);
    store
        .add_user(USER, PASSWORD, &mut rng)
        .expect("valid user");
    store
        .add_user("we,ird=name", "pw", &mut rng)
        .expect("valid user");
    store
}

/// Outcome of [`run`] from both sides' point of view.
#[derive(Debug)]
pub struct Outcome {
    pub server: Step,
    pub client: Option<ClientStep>,
}

/// Drives a complete exchange between `client` and a fresh server session.
pub fn run(mut client: ClientSession, store: &MemoryCredentialStore, seed: u64) -> Outcome {
    let (mut server, mut step) = ServerSession::start(
        client.mechanism().name(),
        client.initial_message(),
        store,
        &mut rng(seed),
    );
    loop {
        match step {
            Step::Continue(challenge) => match client.step(&challenge) {
                ClientStep::Continue(reply) => step = server.step(&reply),
                other => {
                    return Outcome {
                        server: Step::Continue(challenge),
                        client: Some(other),
                    }
                }
            },
            Step::Success {
                ref final_message, ..
            } => {
                let client_step = client.step(final_message);
                return Outcome {
                    server: step,
                    client: Some(client_step),
                };
            }
            Step::Failure(_) => {
                return Outcome {
                    server: step,
                    client: None,
                }
            }
        }
    }
}

pub fn client(mechanism: Mechanism, user: &str, password: &str, seed: u64) -> ClientSession {
    ClientSession::new(mechanism, user, password, &mut rng(seed)).expect("valid client")
}

/// xorshift64*: a tiny deterministic PRNG for generating garbage input.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn bytes(&mut self, max_len: usize) -> Vec<u8> {
        let len = (self.next_u64() % (max_len as u64 + 1)) as usize;
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}
