//! Typed errors.
//!
//! Three layers, because callers react differently to each: [`ParseError`] says the peer
//! sent bytes that are not a valid message (useful for fuzzing and debugging clients),
//! [`AuthError`] is the outcome of an authentication attempt (what the protocol layer
//! maps to `AUTH_ERROR`), and [`CredentialError`] is a local configuration mistake when
//! creating users.

use thiserror::Error;

/// A SASL message could not be decoded.
///
/// Each variant names the wire-level rule that was broken so a misbehaving client can be
/// diagnosed from a log line; none of them carry the raw input (it may contain secrets).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    /// The message was empty.
    #[error("empty message")]
    Empty,
    /// SCRAM messages are UTF-8 text (RFC 5802 §7).
    #[error("message is not valid UTF-8")]
    NotUtf8,
    /// The GS2 header (`n,,` / `y,,` / `p=...`) is missing or malformed.
    #[error("malformed GS2 header")]
    BadGs2Header,
    /// The client asked for channel binding (`p=`), which Sluice does not offer.
    #[error("channel binding (p=) is not supported")]
    ChannelBindingRequested,
    /// A required attribute was absent or out of order.
    #[error("missing attribute '{0}='")]
    MissingAttribute(char),
    /// An attribute was present but not of the `x=value` form.
    #[error("malformed attribute")]
    BadAttribute,
    /// An attribute that must be base64 did not decode.
    #[error("attribute '{0}=' is not valid base64")]
    BadBase64(char),
    /// A username or authzid used `=` other than as `=2C` / `=3D`.
    #[error("invalid '=' escape in SASL name")]
    BadSaslName,
    /// The username (authcid) was empty.
    #[error("empty username")]
    EmptyUsername,
    /// A nonce was empty or contained a comma or non-printable byte.
    #[error("invalid nonce")]
    BadNonce,
    /// The salt was empty.
    #[error("empty salt")]
    EmptySalt,
    /// The iteration count was not a positive decimal integer.
    #[error("invalid iteration count")]
    BadIterationCount,
    /// The proof did not have the digest length of the negotiated hash.
    #[error("proof has wrong length")]
    BadProofLength,
    /// `m=` marks a mandatory extension we cannot honour (RFC 5802 §5.1).
    #[error("unsupported mandatory extension (m=)")]
    MandatoryExtension,
    /// PLAIN messages are `[authzid] NUL authcid NUL passwd` (RFC 4616 §2).
    #[error("PLAIN message must have exactly three NUL-separated fields")]
    PlainFieldCount,
    /// PLAIN with an empty password.
    #[error("empty password")]
    EmptyPassword,
}

/// Why an authentication exchange did not succeed.
///
/// The server should not forward the variant to the client (that would tell an attacker
/// whether a user exists); it is meant for logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AuthError {
    /// The requested mechanism is not one of [`crate::mechanisms_list`].
    #[error("unknown SASL mechanism {0:?}")]
    UnknownMechanism(String),
    /// The peer's message could not be decoded.
    #[error("malformed SASL message: {0}")]
    Malformed(#[from] ParseError),
    /// No such user.
    #[error("unknown user")]
    UnknownUser,
    /// The password (PLAIN) or proof (SCRAM) was wrong.
    #[error("wrong password")]
    WrongPassword,
    /// The client-final nonce is not the one the server issued.
    #[error("nonce mismatch")]
    NonceMismatch,
    /// The client-final `c=` does not echo the GS2 header of client-first.
    #[error("channel binding data mismatch")]
    ChannelBindingMismatch,
    /// The authzid names a different identity; Sluice has no proxy-authorization model,
    /// so acting as another user is refused rather than silently ignored.
    #[error("authorization identity differs from authentication identity")]
    AuthzidNotPermitted,
    /// `step` was called on a session that has already succeeded or failed.
    #[error("SASL session already finished")]
    SessionFinished,
    /// A locally supplied nonce (test injection) was not valid SCRAM nonce text.
    #[error("invalid locally supplied nonce")]
    InvalidLocalNonce,
    /// Client side: the server-first iteration count exceeds the client's limit.
    #[error("server demands {0} PBKDF2 iterations, above the client limit")]
    TooManyIterations(u32),
    /// Client side: the server's `v=` signature is wrong, so the server does not know
    /// the password either (possible impostor).
    #[error("server signature verification failed")]
    InvalidServerSignature,
    /// Client side: the server answered `e=<reason>`.
    #[error("server reported error: {0}")]
    ServerError(String),
    /// Client side: the username or password given to the session is unusable.
    #[error("invalid local credentials: {0}")]
    Credential(#[from] CredentialError),
}

/// A user could not be created from the supplied parameters.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CredentialError {
    /// Usernames must be non-empty.
    #[error("empty username")]
    EmptyUsername,
    /// Passwords must be non-empty (PLAIN cannot carry an empty one).
    #[error("empty password")]
    EmptyPassword,
    /// Usernames and passwords travel NUL-separated in PLAIN, so NUL cannot appear.
    #[error("username or password contains NUL")]
    ContainsNul,
    /// PBKDF2 needs at least one iteration.
    #[error("iteration count must be at least 1")]
    ZeroIterations,
    /// An empty salt would make every user with the same password share keys.
    #[error("salt must not be empty")]
    EmptySalt,
    /// Pre-computed keys must have the digest length of their hash.
    #[error("key length does not match the hash output length")]
    KeyLength,
    /// A verifier was supplied for a different hash than the slot it was given for.
    #[error("SCRAM credentials are for a different hash")]
    HashMismatch,
}
