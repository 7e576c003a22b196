//! A user name and password, as the admin port's HTTP Basic authentication and the KV port's
//! SASL take them.

use std::fmt;

/// Who a call is made as. The password stays out of `Debug`, so it never reaches a log.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl Credentials {
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Credentials {
        Credentials {
            username: username.into(),
            password: password.into(),
        }
    }

    /// The `Authorization` header's value for HTTP Basic (RFC 7617).
    pub fn basic_header(&self) -> String {
        sluice_sasl::basic_header(&self.username, &self.password)
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_header_is_rfc_7617s_example() {
        // RFC 7617 §2: user "Aladdin", password "open sesame".
        let c = Credentials::new("Aladdin", "open sesame");
        assert_eq!(c.basic_header(), "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
        assert!(!format!("{c:?}").contains("sesame"));
    }
}
