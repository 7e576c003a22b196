//! SASL mechanism names.
//!
//! Couchbase spells the SCRAM mechanisms without the dash IANA uses (`SCRAM-SHA512`, not
//! `SCRAM-SHA-512`); clients such as the Java DCP client and the C++ SDK pick from the
//! list verbatim, so [`Mechanism::name`] uses the Couchbase spelling. Parsing also accepts
//! the IANA spelling, since a standard SASL library may send it.

use std::fmt;
use std::str::FromStr;

use crate::error::AuthError;
use crate::scram::hash::ScramHash;

/// The mechanisms offered, strongest first, space separated, exactly as the memcached
/// `SASL_LIST_MECHS` response carries them. Clients pick the first one they support, so
/// the order is the preference order.
pub fn mechanisms_list() -> &'static str {
    "SCRAM-SHA512 SCRAM-SHA256 SCRAM-SHA1 PLAIN"
}

/// The mechanisms offered on a connection without TLS: PLAIN sends the password in the
/// clear, so it is not offered there (a client that sends it unasked is still answered).
pub fn mechanisms_list_cleartext() -> &'static str {
    "SCRAM-SHA512 SCRAM-SHA256 SCRAM-SHA1"
}

/// A supported SASL mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// SCRAM with SHA-512 (Couchbase extension of RFC 5802).
    ScramSha512,
    /// SCRAM with SHA-256 (RFC 7677).
    ScramSha256,
    /// SCRAM with SHA-1 (RFC 5802).
    ScramSha1,
    /// PLAIN (RFC 4616): the password travels in the clear, so only use it over TLS.
    Plain,
}

impl Mechanism {
    /// All mechanisms, in the order of [`mechanisms_list`].
    pub const ALL: [Mechanism; 4] = [
        Mechanism::ScramSha512,
        Mechanism::ScramSha256,
        Mechanism::ScramSha1,
        Mechanism::Plain,
    ];

    /// The name as it appears on the wire (Couchbase spelling).
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::ScramSha512 => "SCRAM-SHA512",
            Mechanism::ScramSha256 => "SCRAM-SHA256",
            Mechanism::ScramSha1 => "SCRAM-SHA1",
            Mechanism::Plain => "PLAIN",
        }
    }

    /// Looks a mechanism up by name (Couchbase or IANA spelling, case-sensitive as
    /// RFC 4422 §3.1 specifies upper-case names).
    pub fn from_name(name: &str) -> Result<Self, AuthError> {
        match name {
            "SCRAM-SHA512" | "SCRAM-SHA-512" => Ok(Mechanism::ScramSha512),
            "SCRAM-SHA256" | "SCRAM-SHA-256" => Ok(Mechanism::ScramSha256),
            "SCRAM-SHA1" | "SCRAM-SHA-1" => Ok(Mechanism::ScramSha1),
            "PLAIN" => Ok(Mechanism::Plain),
            other => Err(AuthError::UnknownMechanism(other.to_owned())),
        }
    }

    /// The hash behind a SCRAM mechanism, `None` for PLAIN.
    pub fn scram_hash(self) -> Option<ScramHash> {
        match self {
            Mechanism::ScramSha512 => Some(ScramHash::Sha512),
            Mechanism::ScramSha256 => Some(ScramHash::Sha256),
            Mechanism::ScramSha1 => Some(ScramHash::Sha1),
            Mechanism::Plain => None,
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mechanism {
    type Err = AuthError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mechanism::from_name(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_matches_all_and_roundtrips() {
        let names: Vec<&str> = Mechanism::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(names.join(" "), mechanisms_list());
        for m in Mechanism::ALL {
            assert_eq!(Mechanism::from_name(m.name()), Ok(m));
        }
    }

    #[test]
    fn iana_spelling_accepted_unknown_rejected() {
        assert_eq!(
            "SCRAM-SHA-256".parse::<Mechanism>(),
            Ok(Mechanism::ScramSha256)
        );
        assert_eq!(
            Mechanism::from_name("CRAM-MD5"),
            Err(AuthError::UnknownMechanism("CRAM-MD5".into()))
        );
        assert!(Mechanism::from_name("plain").is_err());
    }
}
