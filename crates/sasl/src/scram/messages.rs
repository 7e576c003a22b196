//! SCRAM wire messages (RFC 5802 §7): parsing untrusted bytes and formatting our own.
//!
//! Parsing is strict about structure (attribute order, base64, escapes) because the
//! AuthMessage that both sides sign is built from the raw text, so any leniency here
//! would have to be mirrored exactly by every peer. The one deliberate leniency is the
//! nonce alphabet (see [`crate::scram::nonce`]).
//!
//! Every parser returns `Err` on bad input and never panics, so these double as fuzz
//! entry points.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::error::ParseError;
use crate::scram::nonce::is_valid_nonce;
use crate::scram::saslname::{decode_saslname, encode_saslname};

/// The GS2 channel-binding flag.
///
/// `p=<cb-name>` (channel binding in use) is not representable: Sluice offers no
/// `-PLUS` mechanisms, so such a message is rejected during parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelBinding {
    /// `n`: the client does not support channel binding.
    NotSupported,
    /// `y`: the client supports channel binding but thinks the server does not.
    SupportedNotUsed,
}

/// The GS2 header that prefixes client-first: channel-binding flag and optional authzid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gs2Header {
    channel_binding: ChannelBinding,
    authzid: Option<String>,
}

impl Gs2Header {
    /// A header with the given flag and (unescaped) authzid.
    pub fn new(channel_binding: ChannelBinding, authzid: Option<String>) -> Self {
        Self {
            channel_binding,
            authzid,
        }
    }

    /// The channel-binding flag.
    pub fn channel_binding(&self) -> ChannelBinding {
        self.channel_binding
    }

    /// The authorization identity, unescaped; `None` when the client left it empty.
    pub fn authzid(&self) -> Option<&str> {
        self.authzid.as_deref()
    }

    /// Wire form, e.g. `n,,` or `n,a=admin,`.
    pub fn encode(&self) -> String {
        let flag = match self.channel_binding {
            ChannelBinding::NotSupported => "n",
            ChannelBinding::SupportedNotUsed => "y",
        };
        match &self.authzid {
            Some(a) => format!("{flag},a={},", encode_saslname(a)),
            None => format!("{flag},,"),
        }
    }
}

/// A parsed client-first message: `gs2-header client-first-message-bare`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    gs2_header: Gs2Header,
    gs2_header_raw: String,
    username: String,
    nonce: String,
    bare: String,
}

impl ClientFirst {
    /// Builds the message a client sends. Fails if `nonce` is not valid nonce text.
    pub fn new(gs2_header: Gs2Header, username: &str, nonce: &str) -> Result<Self, ParseError> {
        if username.is_empty() {
            return Err(ParseError::EmptyUsername);
        }
        if !is_valid_nonce(nonce) {
            return Err(ParseError::BadNonce);
        }
        Ok(Self {
            gs2_header_raw: gs2_header.encode(),
            gs2_header,
            username: username.to_owned(),
            nonce: nonce.to_owned(),
            bare: format!("n={},r={nonce}", encode_saslname(username)),
        })
    }

    /// The GS2 header.
    pub fn gs2_header(&self) -> &Gs2Header {
        &self.gs2_header
    }

    /// The GS2 header exactly as sent; client-final's `c=` must be its base64.
    pub fn gs2_header_raw(&self) -> &str {
        &self.gs2_header_raw
    }

    /// The authentication identity, unescaped (`=2C` → `,`, `=3D` → `=`).
    pub fn username(&self) -> &str {
        &self.username
    }

    /// The client nonce, opaque.
    pub fn nonce(&self) -> &str {
        &self.nonce
    }

    /// `client-first-message-bare` as sent: the first part of the AuthMessage.
    pub fn bare(&self) -> &str {
        &self.bare
    }

    /// The full wire message.
    pub fn encode(&self) -> String {
        format!("{}{}", self.gs2_header_raw, self.bare)
    }
}

/// A parsed server-first message: `r=<nonce>,s=<salt>,i=<iterations>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFirst {
    nonce: String,
    salt: Vec<u8>,
    iterations: u32,
    raw: String,
}

impl ServerFirst {
    /// Builds the message a server sends; `nonce` is client nonce + server nonce.
    pub fn new(nonce: &str, salt: &[u8], iterations: u32) -> Result<Self, ParseError> {
        if !is_valid_nonce(nonce) {
            return Err(ParseError::BadNonce);
        }
        if salt.is_empty() {
            return Err(ParseError::EmptySalt);
        }
        if iterations == 0 {
            return Err(ParseError::BadIterationCount);
        }
        Ok(Self {
            raw: format!("r={nonce},s={},i={iterations}", STANDARD.encode(salt)),
            nonce: nonce.to_owned(),
            salt: salt.to_vec(),
            iterations,
        })
    }

    /// The combined nonce (client nonce followed by server nonce).
    pub fn nonce(&self) -> &str {
        &self.nonce
    }

    /// The user's salt, decoded.
    pub fn salt(&self) -> &[u8] {
        &self.salt
    }

    /// The PBKDF2 iteration count.
    pub fn iterations(&self) -> u32 {
        self.iterations
    }

    /// The message exactly as sent: the second part of the AuthMessage.
    pub fn raw(&self) -> &str {
        &self.raw
    }
}

/// A parsed client-final message: `c=<cb>,r=<nonce>[,ext],p=<proof>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFinal {
    channel_binding: Vec<u8>,
    nonce: String,
    proof: Vec<u8>,
    without_proof: String,
}

impl ClientFinal {
    /// `client-final-message-without-proof` for the given GS2 header and nonce; the
    /// client signs this before it can compute the proof.
    pub fn without_proof_for(gs2_header_raw: &str, nonce: &str) -> String {
        format!("c={},r={nonce}", STANDARD.encode(gs2_header_raw))
    }

    /// Appends the proof to a message built by [`ClientFinal::without_proof_for`].
    pub fn encode_with_proof(without_proof: &str, proof: &[u8]) -> String {
        format!("{without_proof},p={}", STANDARD.encode(proof))
    }

    /// The decoded `c=` value (GS2 header plus channel-binding data, if any).
    pub fn channel_binding(&self) -> &[u8] {
        &self.channel_binding
    }

    /// The combined nonce echoed back.
    pub fn nonce(&self) -> &str {
        &self.nonce
    }

    /// The decoded client proof.
    pub fn proof(&self) -> &[u8] {
        &self.proof
    }

    /// Everything before `,p=`: the third part of the AuthMessage.
    pub fn without_proof(&self) -> &str {
        &self.without_proof
    }
}

/// A parsed server-final message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerFinal {
    /// `v=<base64 ServerSignature>`.
    Verifier(Vec<u8>),
    /// `e=<server-error-value>`.
    Error(String),
}

impl ServerFinal {
    /// Wire form.
    pub fn encode(&self) -> String {
        match self {
            ServerFinal::Verifier(sig) => format!("v={}", STANDARD.encode(sig)),
            ServerFinal::Error(e) => format!("e={e}"),
        }
    }
}

/// Decodes a client-first message (fuzz entry point).
pub fn parse_client_first(bytes: &[u8]) -> Result<ClientFirst, ParseError> {
    let text = as_text(bytes)?;
    let (flag, rest) = text.split_once(',').ok_or(ParseError::BadGs2Header)?;
    let channel_binding = match flag {
        "n" => ChannelBinding::NotSupported,
        "y" => ChannelBinding::SupportedNotUsed,
        f if f.starts_with("p=") => return Err(ParseError::ChannelBindingRequested),
        _ => return Err(ParseError::BadGs2Header),
    };
    let (authz_raw, bare) = rest.split_once(',').ok_or(ParseError::BadGs2Header)?;
    let authzid = if authz_raw.is_empty() {
        None
    } else {
        let name = authz_raw
            .strip_prefix("a=")
            .ok_or(ParseError::BadGs2Header)?;
        let name = decode_saslname(name)?;
        if name.is_empty() {
            return Err(ParseError::BadGs2Header);
        }
        Some(name)
    };
    let gs2_header_raw = &text[..text.len() - bare.len()];

    let mut parts = bare.split(',');
    let first = parts.next().unwrap_or_default();
    if first.starts_with("m=") {
        return Err(ParseError::MandatoryExtension);
    }
    let username = decode_saslname(attribute(first, 'n')?)?;
    if username.is_empty() {
        return Err(ParseError::EmptyUsername);
    }
    let nonce = nonce_attribute(parts.next())?;
    check_extensions(parts)?;

    Ok(ClientFirst {
        gs2_header: Gs2Header::new(channel_binding, authzid),
        gs2_header_raw: gs2_header_raw.to_owned(),
        username,
        nonce: nonce.to_owned(),
        bare: bare.to_owned(),
    })
}

/// Decodes a server-first message (fuzz entry point; used by the client).
pub fn parse_server_first(bytes: &[u8]) -> Result<ServerFirst, ParseError> {
    let text = as_text(bytes)?;
    let mut parts = text.split(',');
    let first = parts.next().unwrap_or_default();
    if first.starts_with("m=") {
        return Err(ParseError::MandatoryExtension);
    }
    let nonce = nonce_attribute(Some(first))?;
    let salt = base64_attribute(parts.next(), 's')?;
    if salt.is_empty() {
        return Err(ParseError::EmptySalt);
    }
    let iterations = parse_iterations(attribute(
        parts.next().ok_or(ParseError::MissingAttribute('i'))?,
        'i',
    )?)?;
    check_extensions(parts)?;
    Ok(ServerFirst {
        nonce: nonce.to_owned(),
        salt,
        iterations,
        raw: text.to_owned(),
    })
}

/// Decodes a client-final message (fuzz entry point).
pub fn parse_client_final(bytes: &[u8]) -> Result<ClientFinal, ParseError> {
    let text = as_text(bytes)?;
    // The proof is always last and base64 has no commas, so the last comma splits it off.
    let (without_proof, proof_part) = text
        .rsplit_once(',')
        .ok_or(ParseError::MissingAttribute('p'))?;
    let proof = base64_attribute(Some(proof_part), 'p')?;
    if proof.is_empty() {
        return Err(ParseError::BadProofLength);
    }
    let mut parts = without_proof.split(',');
    let channel_binding = base64_attribute(parts.next(), 'c')?;
    let nonce = nonce_attribute(parts.next())?;
    check_extensions(parts)?;
    Ok(ClientFinal {
        channel_binding,
        nonce: nonce.to_owned(),
        proof,
        without_proof: without_proof.to_owned(),
    })
}

/// Decodes a server-final message (fuzz entry point; used by the client).
pub fn parse_server_final(bytes: &[u8]) -> Result<ServerFinal, ParseError> {
    let text = as_text(bytes)?;
    let mut parts = text.split(',');
    let first = parts.next().unwrap_or_default();
    let result = if let Some(err) = first.strip_prefix("e=") {
        ServerFinal::Error(err.to_owned())
    } else {
        ServerFinal::Verifier(base64_attribute(Some(first), 'v')?)
    };
    check_extensions(parts)?;
    Ok(result)
}

fn as_text(bytes: &[u8]) -> Result<&str, ParseError> {
    if bytes.is_empty() {
        return Err(ParseError::Empty);
    }
    std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)
}

/// The value of `name=value`, or `MissingAttribute(name)` if `part` is another attribute.
fn attribute(part: &str, name: char) -> Result<&str, ParseError> {
    part.strip_prefix(name)
        .and_then(|rest| rest.strip_prefix('='))
        .ok_or(ParseError::MissingAttribute(name))
}

fn nonce_attribute(part: Option<&str>) -> Result<&str, ParseError> {
    let nonce = attribute(part.ok_or(ParseError::MissingAttribute('r'))?, 'r')?;
    if is_valid_nonce(nonce) {
        Ok(nonce)
    } else {
        Err(ParseError::BadNonce)
    }
}

fn base64_attribute(part: Option<&str>, name: char) -> Result<Vec<u8>, ParseError> {
    let value = attribute(part.ok_or(ParseError::MissingAttribute(name))?, name)?;
    STANDARD
        .decode(value)
        .map_err(|_| ParseError::BadBase64(name))
}

/// A positive decimal `u32` without sign or whitespace (`str::parse` would take `+5`).
fn parse_iterations(value: &str) -> Result<u32, ParseError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::BadIterationCount);
    }
    match value.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(ParseError::BadIterationCount),
    }
}

/// Optional trailing extensions must look like `x=value`; `m=` is mandatory-to-understand
/// and therefore refused, any other extension is ignored as RFC 5802 allows.
fn check_extensions<'a>(parts: impl Iterator<Item = &'a str>) -> Result<(), ParseError> {
    for part in parts {
        let mut chars = part.chars();
        match (chars.next(), chars.next()) {
            (Some('m'), Some('=')) => return Err(ParseError::MandatoryExtension),
            (Some(c), Some('=')) if c.is_ascii_alphabetic() => {}
            _ => return Err(ParseError::BadAttribute),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_first_basic() {
        let m = parse_client_first(b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL").unwrap();
        assert_eq!(
            m.gs2_header().channel_binding(),
            ChannelBinding::NotSupported
        );
        assert_eq!(m.gs2_header().authzid(), None);
        assert_eq!(m.gs2_header_raw(), "n,,");
        assert_eq!(m.username(), "user");
        assert_eq!(m.nonce(), "fyko+d2lbbFgONRv9qkxdawL");
        assert_eq!(m.bare(), "n=user,r=fyko+d2lbbFgONRv9qkxdawL");
    }

    #[test]
    fn client_first_authzid_escapes_and_y_flag() {
        let m = parse_client_first(b"y,a=ad=2Cmin,n=us=3Der,r=abc,x=ext").unwrap();
        assert_eq!(
            m.gs2_header().channel_binding(),
            ChannelBinding::SupportedNotUsed
        );
        assert_eq!(m.gs2_header().authzid(), Some("ad,min"));
        assert_eq!(m.gs2_header_raw(), "y,a=ad=2Cmin,");
        assert_eq!(m.username(), "us=er");
        assert_eq!(m.bare(), "n=us=3Der,r=abc,x=ext");
    }

    #[test]
    fn client_first_roundtrips_through_encode() {
        let built = ClientFirst::new(
            Gs2Header::new(ChannelBinding::NotSupported, Some("a,b".into())),
            "x=y",
            "nonce",
        )
        .unwrap();
        assert_eq!(built.encode(), "n,a=a=2Cb,n=x=3Dy,r=nonce");
        assert_eq!(parse_client_first(built.encode().as_bytes()), Ok(built));
    }

    #[test]
    fn client_first_errors() {
        let cases: &[(&[u8], ParseError)] = &[
            (b"", ParseError::Empty),
            (b"\xff,,n=u,r=x", ParseError::NotUtf8),
            (b"n", ParseError::BadGs2Header),
            (b"n,", ParseError::BadGs2Header),
            (b"q,,n=u,r=x", ParseError::BadGs2Header),
            (
                b"p=tls-unique,,n=u,r=x",
                ParseError::ChannelBindingRequested,
            ),
            (b"n,b=x,n=u,r=x", ParseError::BadGs2Header),
            (b"n,a=,n=u,r=x", ParseError::BadGs2Header),
            (b"n,,r=x", ParseError::MissingAttribute('n')),
            (b"n,,n=u", ParseError::MissingAttribute('r')),
            (b"n,,n=u,x=y", ParseError::MissingAttribute('r')),
            (b"n,,n=,r=x", ParseError::EmptyUsername),
            (b"n,,n=a=b,r=x", ParseError::BadSaslName),
            (b"n,,n=u,r=", ParseError::BadNonce),
            (b"n,,n=u,r=a\tb", ParseError::BadNonce),
            (b"n,,m=x,n=u,r=x", ParseError::MandatoryExtension),
            (b"n,,n=u,r=x,m=y", ParseError::MandatoryExtension),
            (b"n,,n=u,r=x,", ParseError::BadAttribute),
        ];
        for (input, err) in cases {
            assert_eq!(
                parse_client_first(input).as_ref().err(),
                Some(err),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn server_first_roundtrip_and_errors() {
        let m = ServerFirst::new("abcdef", b"salt", 4096).unwrap();
        assert_eq!(m.raw(), "r=abcdef,s=c2FsdA==,i=4096");
        assert_eq!(parse_server_first(m.raw().as_bytes()), Ok(m));

        let cases: &[(&[u8], ParseError)] = &[
            (b"", ParseError::Empty),
            (b"s=c2FsdA==,i=1", ParseError::MissingAttribute('r')),
            (b"r=a", ParseError::MissingAttribute('s')),
            (b"r=a,s=!!,i=1", ParseError::BadBase64('s')),
            (b"r=a,s=,i=1", ParseError::EmptySalt),
            (b"r=a,s=c2FsdA==", ParseError::MissingAttribute('i')),
            (b"r=a,s=c2FsdA==,i=0", ParseError::BadIterationCount),
            (b"r=a,s=c2FsdA==,i=+5", ParseError::BadIterationCount),
            (
                b"r=a,s=c2FsdA==,i=99999999999",
                ParseError::BadIterationCount,
            ),
            (b"m=1,r=a,s=c2FsdA==,i=1", ParseError::MandatoryExtension),
        ];
        for (input, err) in cases {
            assert_eq!(parse_server_first(input).as_ref().err(), Some(err));
        }
    }

    #[test]
    fn client_final_parse() {
        let m = parse_client_final(b"c=biws,r=abc,p=AAEC").unwrap();
        assert_eq!(m.channel_binding(), b"n,,");
        assert_eq!(m.nonce(), "abc");
        assert_eq!(m.proof(), &[0, 1, 2]);
        assert_eq!(m.without_proof(), "c=biws,r=abc");
        assert_eq!(
            ClientFinal::encode_with_proof(
                &ClientFinal::without_proof_for("n,,", "abc"),
                &[0, 1, 2]
            ),
            "c=biws,r=abc,p=AAEC"
        );

        let cases: &[(&[u8], ParseError)] = &[
            (b"c=biws", ParseError::MissingAttribute('p')),
            (b"c=biws,r=abc", ParseError::MissingAttribute('p')),
            (b"c=biws,r=abc,p=", ParseError::BadProofLength),
            (b"c=biws,r=abc,p=@@", ParseError::BadBase64('p')),
            (b"c=b!ws,r=abc,p=AAEC", ParseError::BadBase64('c')),
            (b"r=abc,p=AAEC", ParseError::MissingAttribute('c')),
            (b"c=biws,p=AAEC", ParseError::MissingAttribute('r')),
            (b"c=biws,r=abc,m=1,p=AAEC", ParseError::MandatoryExtension),
        ];
        for (input, err) in cases {
            assert_eq!(parse_client_final(input).as_ref().err(), Some(err));
        }
    }

    #[test]
    fn server_final_parse() {
        assert_eq!(
            parse_server_final(b"v=AAEC"),
            Ok(ServerFinal::Verifier(vec![0, 1, 2]))
        );
        assert_eq!(
            parse_server_final(b"e=invalid-proof"),
            Ok(ServerFinal::Error("invalid-proof".into()))
        );
        assert_eq!(
            ServerFinal::Verifier(vec![0, 1, 2]).encode(),
            "v=AAEC".to_string()
        );
        assert_eq!(parse_server_final(b""), Err(ParseError::Empty));
        assert_eq!(
            parse_server_final(b"x=1"),
            Err(ParseError::MissingAttribute('v'))
        );
        assert_eq!(parse_server_final(b"v=*"), Err(ParseError::BadBase64('v')));
    }
}
