//! The mechanism-agnostic client session (used by Sluice's own client and bench tool).
//!
//! Flow: send [`ClientSession::initial_message`] with `SASL_AUTH`, then pass each server
//! response body to [`ClientSession::step`] until it returns [`ClientStep::Done`].

use rand::{CryptoRng, RngCore};

use crate::error::AuthError;
use crate::mechanism::Mechanism;
use crate::plain;
use crate::scram::client::ScramClient;
use crate::scram::nonce::generate_nonce;

/// Upper bound on server-demanded PBKDF2 iterations: a hostile or misconfigured server
/// could otherwise pin the client's CPU for minutes. Far above any sane deployment
/// (Couchbase defaults are in the low tens of thousands).
pub const DEFAULT_MAX_ITERATIONS: u32 = 1_000_000;

/// The outcome of feeding one server message to a client session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientStep {
    /// Send these bytes to the server (`SASL_STEP`).
    Continue(Vec<u8>),
    /// Authenticated; for SCRAM the server's signature was verified.
    Done,
    /// Authentication failed (or the server could not prove it knows the password).
    Failure(AuthError),
}

enum State {
    Scram(ScramClient),
    Plain,
    Finished,
}

/// One client-side authentication attempt (`Send + Sync`).
pub struct ClientSession {
    mechanism: Mechanism,
    initial: Vec<u8>,
    state: State,
}

impl ClientSession {
    /// Starts an exchange, drawing the client nonce from `rng` (SCRAM only).
    pub fn new<R: RngCore + CryptoRng + ?Sized>(
        mechanism: Mechanism,
        username: &str,
        password: &str,
        rng: &mut R,
    ) -> Result<Self, AuthError> {
        let nonce = match mechanism {
            Mechanism::Plain => String::new(),
            _ => generate_nonce(rng),
        };
        Self::with_nonce(mechanism, username, password, &nonce)
    }

    /// Like [`new`](Self::new) with a fixed client nonce (ignored for PLAIN), for
    /// known-answer tests and interop tests that mimic other clients' nonces.
    pub fn with_nonce(
        mechanism: Mechanism,
        username: &str,
        password: &str,
        client_nonce: &str,
    ) -> Result<Self, AuthError> {
        crate::credentials::check_username(username)?;
        crate::credentials::check_password(password)?;
        let (initial, state) = match mechanism.scram_hash() {
            Some(hash) => {
                let scram = ScramClient::new(
                    hash,
                    username,
                    password,
                    client_nonce,
                    DEFAULT_MAX_ITERATIONS,
                )
                .map_err(|e| match e {
                    AuthError::Malformed(_) => AuthError::InvalidLocalNonce,
                    other => other,
                })?;
                (scram.client_first().into_bytes(), State::Scram(scram))
            }
            None => (plain::encode(None, username, password)?, State::Plain),
        };
        Ok(Self {
            mechanism,
            initial,
            state,
        })
    }

    /// Overrides [`DEFAULT_MAX_ITERATIONS`] for SCRAM.
    pub fn with_max_iterations(mut self, max_iterations: u32) -> Self {
        if let State::Scram(scram) = &mut self.state {
            scram.set_max_iterations(max_iterations);
        }
        self
    }

    /// The mechanism name to send with `SASL_AUTH` is `mechanism().name()`.
    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// The first message (SCRAM client-first, or the whole PLAIN message).
    pub fn initial_message(&self) -> &[u8] {
        &self.initial
    }

    /// Feeds the server's response body. PLAIN finishes on the first call (the server's
    /// success status is the whole answer); SCRAM needs server-first then server-final.
    pub fn step(&mut self, server_message: &[u8]) -> ClientStep {
        match std::mem::replace(&mut self.state, State::Finished) {
            State::Plain => ClientStep::Done,
            State::Scram(mut scram) => match scram.step(server_message) {
                Ok(Some(reply)) => {
                    self.state = State::Scram(scram);
                    ClientStep::Continue(reply)
                }
                Ok(None) => ClientStep::Done,
                Err(e) => ClientStep::Failure(e),
            },
            State::Finished => ClientStep::Failure(AuthError::SessionFinished),
        }
    }
}

/// Shows only the mechanism and whether the exchange is over (never the password).
impl std::fmt::Debug for ClientSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSession")
            .field("mechanism", &self.mechanism)
            .field("finished", &matches!(self.state, State::Finished))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_is_send_and_sync_and_debug_hides_password() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ClientSession>();
        let s = ClientSession::with_nonce(Mechanism::Plain, "u", "hunter2", "").unwrap();
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
