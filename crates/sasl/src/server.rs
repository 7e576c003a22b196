//! The mechanism-agnostic server session the protocol layer drives.
//!
//! memcached maps onto it directly: `SASL_AUTH` (mechanism + first message) is
//! [`ServerSession::start`], each `SASL_STEP` is [`ServerSession::step`], and the
//! [`Step`] decides the response status (`AUTH_CONTINUE`, success, `AUTH_ERROR`).

use rand::{CryptoRng, RngCore};

use crate::error::AuthError;
use crate::mechanism::Mechanism;
use crate::plain;
use crate::scram::nonce::generate_nonce;
use crate::scram::server::{handle_client_first, AwaitingClientFinal};
use crate::store::CredentialStore;

/// The outcome of feeding one client message to a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send this challenge to the client and wait for its next message.
    Continue(Vec<u8>),
    /// Authenticated. Send `final_message` (SCRAM: `v=<server signature>`, which the
    /// client verifies; PLAIN: empty) with a success status.
    Success {
        /// The authenticated user.
        username: String,
        /// The last server message.
        final_message: Vec<u8>,
    },
    /// Authentication failed. Log the reason, but tell the client only "auth error".
    Failure(AuthError),
}

/// Boxed so a finished session (the common resting state per connection) stays small.
enum State {
    AwaitingScramFinal(Box<AwaitingClientFinal>),
    Finished,
}

/// One authentication attempt on one connection.
///
/// `Send + Sync`, so it can sit in per-connection state of an async server.
pub struct ServerSession {
    mechanism: Option<Mechanism>,
    state: State,
}

impl ServerSession {
    /// Starts an exchange with the client's chosen mechanism and first message. A fresh
    /// server nonce is drawn from `rng` for SCRAM.
    ///
    /// Always returns a session (so a later `step` gets a clean `SessionFinished`
    /// instead of the caller having to track "no session").
    pub fn start<S, R>(
        mechanism: &str,
        first_message: &[u8],
        creds: &S,
        rng: &mut R,
    ) -> (Self, Step)
    where
        S: CredentialStore + ?Sized,
        R: RngCore + CryptoRng + ?Sized,
    {
        Self::begin(mechanism, first_message, creds, || generate_nonce(rng))
    }

    /// Like [`start`](Self::start) but with a fixed server nonce, for known-answer tests.
    /// Production code must use `start`: a predictable nonce enables replay.
    pub fn start_with_nonce<S>(
        mechanism: &str,
        first_message: &[u8],
        creds: &S,
        server_nonce: &str,
    ) -> (Self, Step)
    where
        S: CredentialStore + ?Sized,
    {
        Self::begin(mechanism, first_message, creds, || server_nonce.to_owned())
    }

    fn begin<S>(
        mechanism: &str,
        first_message: &[u8],
        creds: &S,
        nonce: impl FnOnce() -> String,
    ) -> (Self, Step)
    where
        S: CredentialStore + ?Sized,
    {
        let mech = match Mechanism::from_name(mechanism) {
            Ok(m) => m,
            Err(e) => return (Self::finished(None), Step::Failure(e)),
        };
        let finished = Self::finished(Some(mech));
        match mech.scram_hash() {
            None => match plain::authenticate(first_message, creds) {
                Ok(username) => (
                    finished,
                    Step::Success {
                        username,
                        final_message: Vec::new(),
                    },
                ),
                Err(e) => (finished, Step::Failure(e)),
            },
            Some(hash) => match handle_client_first(hash, first_message, creds, &nonce()) {
                Ok((challenge, next)) => (
                    Self {
                        mechanism: Some(mech),
                        state: State::AwaitingScramFinal(Box::new(next)),
                    },
                    Step::Continue(challenge),
                ),
                Err(e) => (finished, Step::Failure(e)),
            },
        }
    }

    fn finished(mechanism: Option<Mechanism>) -> Self {
        Self {
            mechanism,
            state: State::Finished,
        }
    }

    /// Feeds the client's next message (`SASL_STEP`). After `Success` or `Failure` the
    /// session is finished and further steps fail with [`AuthError::SessionFinished`].
    pub fn step(&mut self, client_message: &[u8]) -> Step {
        match std::mem::replace(&mut self.state, State::Finished) {
            State::AwaitingScramFinal(awaiting) => {
                match awaiting.handle_client_final(client_message) {
                    Ok((username, final_message)) => Step::Success {
                        username,
                        final_message,
                    },
                    Err(e) => Step::Failure(e),
                }
            }
            State::Finished => Step::Failure(AuthError::SessionFinished),
        }
    }

    /// The mechanism in use; `None` if the requested one was unknown.
    pub fn mechanism(&self) -> Option<Mechanism> {
        self.mechanism
    }

    /// Whether the exchange is over (no further `step` will succeed).
    pub fn is_finished(&self) -> bool {
        matches!(self.state, State::Finished)
    }
}

/// Shows only the mechanism and whether the exchange is over (the rest is key material).
impl std::fmt::Debug for ServerSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSession")
            .field("mechanism", &self.mechanism)
            .field("finished", &self.is_finished())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ServerSession>();
    }
}
