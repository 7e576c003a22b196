//! The server half of a SCRAM exchange.
//!
//! Two steps: client-first → server-first (look the user up, pick the nonce), then
//! client-final → server-final (check the proof, prove we know the keys too). The state
//! between them is [`AwaitingClientFinal`], which holds exactly what the second step
//! needs so the credential store is not consulted twice.

use crate::credentials::ScramCredentials;
use crate::ct::ct_eq;
use crate::error::{AuthError, ParseError};
use crate::scram::hash::{xor, ScramHash};
use crate::scram::messages::{parse_client_final, parse_client_first, ServerFinal, ServerFirst};
use crate::scram::nonce::is_valid_nonce;
use crate::store::CredentialStore;

/// What the proof is checked against.
enum Verifier {
    /// A real user.
    Known(ScramCredentials),
    /// An unknown user shown a decoy salt; always fails at the final step.
    Decoy,
}

/// Server state after sending server-first.
pub(crate) struct AwaitingClientFinal {
    hash: ScramHash,
    username: String,
    verifier: Verifier,
    gs2_header_raw: String,
    nonce: String,
    client_first_bare: String,
    server_first: String,
}

/// Handles client-first; returns server-first and the state awaiting client-final.
pub(crate) fn handle_client_first<S: CredentialStore + ?Sized>(
    hash: ScramHash,
    client_first: &[u8],
    store: &S,
    server_nonce: &str,
) -> Result<(Vec<u8>, AwaitingClientFinal), AuthError> {
    if !is_valid_nonce(server_nonce) {
        return Err(AuthError::InvalidLocalNonce);
    }
    let first = parse_client_first(client_first)?;
    let username = first.username();
    if first.gs2_header().authzid().is_some_and(|a| a != username) {
        return Err(AuthError::AuthzidNotPermitted);
    }

    let (verifier, salt, iterations) = match store.lookup(username) {
        Some(user) => {
            let creds = user.scram(hash).clone();
            let (salt, iterations) = (creds.salt().to_vec(), creds.iterations());
            (Verifier::Known(creds), salt, iterations)
        }
        None => match store.decoy(username, hash) {
            Some(decoy) => (Verifier::Decoy, decoy.salt, decoy.iterations),
            None => return Err(AuthError::UnknownUser),
        },
    };

    let nonce = format!("{}{server_nonce}", first.nonce());
    let server_first = ServerFirst::new(&nonce, &salt, iterations)?;
    let message = server_first.raw().as_bytes().to_vec();
    Ok((
        message,
        AwaitingClientFinal {
            hash,
            username: username.to_owned(),
            verifier,
            gs2_header_raw: first.gs2_header_raw().to_owned(),
            nonce,
            client_first_bare: first.bare().to_owned(),
            server_first: server_first.raw().to_owned(),
        },
    ))
}

impl AwaitingClientFinal {
    /// Handles client-final; on success returns the username and server-final (`v=...`).
    pub(crate) fn handle_client_final(
        self,
        client_final: &[u8],
    ) -> Result<(String, Vec<u8>), AuthError> {
        let fin = parse_client_final(client_final)?;
        // Without channel binding, c= is just the GS2 header echoed back; a difference
        // means the header was tampered with (e.g. a `y` flag downgraded to `n`).
        if fin.channel_binding() != self.gs2_header_raw.as_bytes() {
            return Err(AuthError::ChannelBindingMismatch);
        }
        if fin.nonce() != self.nonce {
            return Err(AuthError::NonceMismatch);
        }
        if fin.proof().len() != self.hash.output_len() {
            return Err(ParseError::BadProofLength.into());
        }
        let creds = match self.verifier {
            Verifier::Known(creds) => creds,
            Verifier::Decoy => return Err(AuthError::UnknownUser),
        };

        let auth_message: [&[u8]; 5] = [
            self.client_first_bare.as_bytes(),
            b",",
            self.server_first.as_bytes(),
            b",",
            fin.without_proof().as_bytes(),
        ];
        // ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage); valid iff
        // H(ClientKey) == StoredKey.
        let client_signature = self.hash.hmac(creds.stored_key(), &auth_message);
        let client_key = xor(fin.proof(), &client_signature);
        if !ct_eq(&self.hash.digest(&client_key), creds.stored_key()) {
            return Err(AuthError::WrongPassword);
        }
        let server_signature = self.hash.hmac(creds.server_key(), &auth_message);
        let final_message = ServerFinal::Verifier(server_signature).encode();
        Ok((self.username, final_message.into_bytes()))
    }
}
