//! The SASL wire parsers on arbitrary bytes: `parse_client_first`, `parse_client_final`,
//! `parse_server_first`, `parse_server_final`, `parse_plain`, and the saslname escaping.
//!
//! Every input is given to every parser (they are cheap and reject each other's messages
//! early). Checks: never a panic, and what a parser accepts is consistent with the encoders:
//! - client-first: the GS2 header re-encodes to its raw text (escapes are canonical), the
//!   bare message starts with `n=<escaped user>,r=<nonce>`, and `ClientFirst::new` from the
//!   parsed parts gives back the parsed message when there are no extensions;
//! - server-first: `ServerFirst::new` from the parsed parts is accepted and parses back to
//!   the same nonce, salt and iteration count;
//! - client-final: re-encoding with `encode_with_proof` reproduces the input exactly
//!   (base64 is canonical), and without extensions the text before the proof is
//!   `c=<base64 cb>,r=<nonce>`;
//! - server-final: without extensions, `encode` reproduces the input;
//! - PLAIN: `authzid NUL authcid NUL passwd` reproduces the input;
//! - saslname: `decode(encode(s)) == s`, and `encode(decode(s)) == s` for comma-free `s`.
#![no_main]

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use libfuzzer_sys::fuzz_target;
use sluice_sasl::{
    decode_saslname, encode_saslname, parse_client_final, parse_client_first, parse_plain,
    parse_server_final, parse_server_first, ClientFinal, ClientFirst, ServerFinal, ServerFirst,
};

fuzz_target!(|data: &[u8]| {
    client_first(data);
    server_first(data);
    client_final(data);
    server_final(data);
    plain(data);
    saslname(data);
});

fn client_first(data: &[u8]) {
    let Ok(m) = parse_client_first(data) else {
        return;
    };
    assert_eq!(m.encode().as_bytes(), data);
    assert_eq!(m.gs2_header().encode(), m.gs2_header_raw());
    assert!(!m.username().is_empty());
    let prefix = format!("n={},r={}", encode_saslname(m.username()), m.nonce());
    assert!(
        m.bare() == prefix || m.bare().starts_with(&format!("{prefix},")),
        "bare {:?} vs {prefix:?}",
        m.bare()
    );
    let rebuilt = ClientFirst::new(m.gs2_header().clone(), m.username(), m.nonce())
        .expect("parsed parts are valid");
    if m.bare() == prefix {
        assert_eq!(rebuilt, m);
    }
}

fn server_first(data: &[u8]) {
    let Ok(m) = parse_server_first(data) else {
        return;
    };
    assert_eq!(m.raw().as_bytes(), data);
    assert!(!m.salt().is_empty() && m.iterations() > 0);
    let rebuilt = ServerFirst::new(m.nonce(), m.salt(), m.iterations()).expect("valid parts");
    let again = parse_server_first(rebuilt.raw().as_bytes()).expect("own encoding parses");
    assert_eq!(
        (again.nonce(), again.salt(), again.iterations()),
        (m.nonce(), m.salt(), m.iterations())
    );
}

fn client_final(data: &[u8]) {
    let Ok(m) = parse_client_final(data) else {
        return;
    };
    assert!(!m.proof().is_empty());
    assert_eq!(
        ClientFinal::encode_with_proof(m.without_proof(), m.proof()).as_bytes(),
        data
    );
    let head = format!("c={},r={}", STANDARD.encode(m.channel_binding()), m.nonce());
    assert!(
        m.without_proof() == head || m.without_proof().starts_with(&format!("{head},")),
        "{:?} vs {head:?}",
        m.without_proof()
    );
}

fn server_final(data: &[u8]) {
    let Ok(m) = parse_server_final(data) else {
        return;
    };
    if !data.contains(&b',') {
        assert_eq!(m.encode().as_bytes(), data);
    }
    if let ServerFinal::Error(e) = &m {
        assert!(!e.contains(','));
    }
}

fn plain(data: &[u8]) {
    let Ok(m) = parse_plain(data) else {
        return;
    };
    assert!(!m.authcid().is_empty() && !m.password().is_empty());
    assert_ne!(m.authzid(), Some(""));
    let enc = format!(
        "{}\0{}\0{}",
        m.authzid().unwrap_or_default(),
        m.authcid(),
        m.password()
    );
    assert_eq!(enc.as_bytes(), data);
}

fn saslname(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    assert_eq!(decode_saslname(&encode_saslname(s)).as_deref(), Ok(s));
    if let Ok(name) = decode_saslname(s) {
        if !s.contains(',') {
            assert_eq!(encode_saslname(&name), s);
        }
    }
}
