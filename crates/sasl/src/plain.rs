//! PLAIN (RFC 4616): `[authzid] NUL authcid NUL passwd` in a single message.
//!
//! The password crosses the wire in the clear, so this is only safe over TLS; it is
//! offered because some clients (and simple tooling) support nothing else.

use std::fmt;

use crate::error::{AuthError, CredentialError, ParseError};
use crate::store::CredentialStore;

/// A decoded PLAIN message.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainMessage {
    authzid: Option<String>,
    authcid: String,
    password: String,
}

impl PlainMessage {
    /// The authorization identity, `None` when empty.
    pub fn authzid(&self) -> Option<&str> {
        self.authzid.as_deref()
    }

    /// The authentication identity (username).
    pub fn authcid(&self) -> &str {
        &self.authcid
    }

    /// The password.
    pub fn password(&self) -> &str {
        &self.password
    }
}

/// Never print the password.
impl fmt::Debug for PlainMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainMessage")
            .field("authzid", &self.authzid)
            .field("authcid", &self.authcid)
            .finish_non_exhaustive()
    }
}

/// Decodes a PLAIN message (fuzz entry point).
pub fn parse_plain(bytes: &[u8]) -> Result<PlainMessage, ParseError> {
    if bytes.is_empty() {
        return Err(ParseError::Empty);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
    let mut fields = text.split('\0');
    let (Some(authzid), Some(authcid), Some(password), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(ParseError::PlainFieldCount);
    };
    if authcid.is_empty() {
        return Err(ParseError::EmptyUsername);
    }
    if password.is_empty() {
        return Err(ParseError::EmptyPassword);
    }
    Ok(PlainMessage {
        authzid: (!authzid.is_empty()).then(|| authzid.to_owned()),
        authcid: authcid.to_owned(),
        password: password.to_owned(),
    })
}

/// Verifies a PLAIN message; returns the authenticated username.
pub(crate) fn authenticate<S: CredentialStore + ?Sized>(
    message: &[u8],
    store: &S,
) -> Result<String, AuthError> {
    let msg = parse_plain(message)?;
    if msg.authzid().is_some_and(|a| a != msg.authcid()) {
        return Err(AuthError::AuthzidNotPermitted);
    }
    let user = store.lookup(msg.authcid()).ok_or(AuthError::UnknownUser)?;
    if user.plain().verify(msg.password()) {
        Ok(msg.authcid)
    } else {
        Err(AuthError::WrongPassword)
    }
}

/// Encodes a PLAIN message for the client side.
pub(crate) fn encode(
    authzid: Option<&str>,
    username: &str,
    password: &str,
) -> Result<Vec<u8>, CredentialError> {
    crate::credentials::check_username(username)?;
    crate::credentials::check_password(password)?;
    if authzid.is_some_and(|a| a.contains('\0')) {
        return Err(CredentialError::ContainsNul);
    }
    Ok(format!("{}\0{username}\0{password}", authzid.unwrap_or_default()).into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_with_and_without_authzid() {
        let m = parse_plain(b"\0user\0pass").unwrap();
        assert_eq!(
            (m.authzid(), m.authcid(), m.password()),
            (None, "user", "pass")
        );
        let m = parse_plain(b"admin\0user\0pass").unwrap();
        assert_eq!(m.authzid(), Some("admin"));
        assert!(!format!("{m:?}").contains("pass\""));
    }

    #[test]
    fn rejects_malformed() {
        let cases: &[(&[u8], ParseError)] = &[
            (b"", ParseError::Empty),
            (b"user\0pass", ParseError::PlainFieldCount),
            (b"a\0b\0c\0d", ParseError::PlainFieldCount),
            (b"\0\0pass", ParseError::EmptyUsername),
            (b"\0user\0", ParseError::EmptyPassword),
            (b"\0us\xffer\0pass", ParseError::NotUtf8),
        ];
        for (input, err) in cases {
            assert_eq!(parse_plain(input).as_ref().err(), Some(err));
        }
    }

    #[test]
    fn encode_roundtrips() {
        let bytes = encode(Some("u"), "u", "p").unwrap();
        assert_eq!(bytes, b"u\0u\0p");
        assert_eq!(encode(None, "u", "p").unwrap(), b"\0u\0p");
        assert_eq!(encode(None, "u\0", "p"), Err(CredentialError::ContainsNul));
    }
}
