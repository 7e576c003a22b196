//! The client half of a SCRAM exchange.
//!
//! The client must verify the server's `v=` signature: it is the only thing that proves
//! the server holds the user's keys, i.e. that we are not talking to an impostor that
//! merely accepted whatever proof we sent.

use crate::ct::ct_eq;
use crate::error::AuthError;
use crate::scram::hash::{xor, ScramHash};
use crate::scram::messages::{
    parse_server_final, parse_server_first, ChannelBinding, ClientFinal, ClientFirst, Gs2Header,
    ServerFinal,
};

/// Where the client is in the exchange.
enum State {
    /// client-first sent; the password is still needed to answer server-first.
    AwaitingServerFirst { password: String },
    /// client-final sent; the server must prove it knows the keys.
    AwaitingServerFinal { expected_signature: Vec<u8> },
    /// Succeeded or failed; nothing more to do.
    Finished,
}

/// Client-side SCRAM state machine.
pub(crate) struct ScramClient {
    hash: ScramHash,
    first: ClientFirst,
    max_iterations: u32,
    state: State,
}

impl ScramClient {
    /// Prepares client-first. The password is used as its raw UTF-8 bytes (no SASLprep),
    /// matching Couchbase servers and SDKs.
    pub(crate) fn new(
        hash: ScramHash,
        username: &str,
        password: &str,
        nonce: &str,
        max_iterations: u32,
    ) -> Result<Self, AuthError> {
        let gs2 = Gs2Header::new(ChannelBinding::NotSupported, None);
        let first = ClientFirst::new(gs2, username, nonce)?;
        Ok(Self {
            hash,
            first,
            max_iterations,
            state: State::AwaitingServerFirst {
                password: password.to_owned(),
            },
        })
    }

    /// Changes the iteration cap checked against server-first.
    pub(crate) fn set_max_iterations(&mut self, max_iterations: u32) {
        self.max_iterations = max_iterations;
    }

    /// The client-first message.
    pub(crate) fn client_first(&self) -> String {
        self.first.encode()
    }

    /// Feeds the next server message. `Ok(Some(bytes))`: send `bytes` (client-final);
    /// `Ok(None)`: authenticated, server verified.
    pub(crate) fn step(&mut self, server_message: &[u8]) -> Result<Option<Vec<u8>>, AuthError> {
        match std::mem::replace(&mut self.state, State::Finished) {
            State::AwaitingServerFirst { password } => {
                let (client_final, expected_signature) =
                    self.client_final(server_message, &password)?;
                self.state = State::AwaitingServerFinal { expected_signature };
                Ok(Some(client_final))
            }
            State::AwaitingServerFinal { expected_signature } => {
                match parse_server_final(server_message)? {
                    ServerFinal::Error(e) => Err(AuthError::ServerError(e)),
                    ServerFinal::Verifier(sig) if ct_eq(&sig, &expected_signature) => Ok(None),
                    ServerFinal::Verifier(_) => Err(AuthError::InvalidServerSignature),
                }
            }
            State::Finished => Err(AuthError::SessionFinished),
        }
    }

    /// Computes client-final and the server signature we expect back.
    fn client_final(
        &self,
        server_first: &[u8],
        password: &str,
    ) -> Result<(Vec<u8>, Vec<u8>), AuthError> {
        let sf = parse_server_first(server_first)?;
        // The server must extend our nonce, not replace it, or this could be a replay.
        let client_nonce = self.first.nonce();
        if !sf.nonce().starts_with(client_nonce) || sf.nonce().len() == client_nonce.len() {
            return Err(AuthError::NonceMismatch);
        }
        if sf.iterations() > self.max_iterations {
            return Err(AuthError::TooManyIterations(sf.iterations()));
        }

        let without_proof = ClientFinal::without_proof_for(self.first.gs2_header_raw(), sf.nonce());
        let auth_message: [&[u8]; 5] = [
            self.first.bare().as_bytes(),
            b",",
            sf.raw().as_bytes(),
            b",",
            without_proof.as_bytes(),
        ];
        let h = self.hash;
        let salted = h.salted_password(password.as_bytes(), sf.salt(), sf.iterations());
        let client_key = h.client_key(&salted);
        let stored_key = h.digest(&client_key);
        let client_signature = h.hmac(&stored_key, &auth_message);
        let proof = xor(&client_key, &client_signature);
        let server_signature = h.hmac(&h.server_key(&salted), &auth_message);

        let message = ClientFinal::encode_with_proof(&without_proof, &proof);
        Ok((message.into_bytes(), server_signature))
    }
}
