//! Values that carry an xattr section (datatype XATTR, HELLO XATTR) over a real socket:
//! stored whole after a full check, read back as the body alone, and kept in front of the
//! body by the commands that change the body in place (append, prepend, increment).

use crate::common::kv_peer::{Answer, Kv};
use sluice_proto::encode::Packet;
use sluice_types::vbucket_of;

const VBS: u16 = 16;
const XATTR: u16 = 0x06;
const JSON: u16 = 0x0b;
const DT_XATTR: u8 = 0x04;

fn vb(key: &[u8]) -> u16 {
    vbucket_of(key, VBS).0
}

/// `u32 total, (u32 pair_len, key NUL value NUL)…` then the body.
pub(crate) fn with_section(pairs: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut section = Vec::new();
    for (k, v) in pairs {
        let pair = [k.as_bytes(), b"\0", v.as_bytes(), b"\0"].concat();
        section.extend_from_slice(&(pair.len() as u32).to_be_bytes());
        section.extend_from_slice(&pair);
    }
    let mut out = (section.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&section);
    out.extend_from_slice(body);
    out
}

async fn set_with_datatype(kv: &mut Kv, key: &[u8], datatype: u8, value: &[u8]) -> Answer {
    kv.call(
        Packet::request(0x01, vb(key), 1)
            .key(key)
            .extras(&[0; 8])
            .datatype(datatype)
            .value(value),
    )
    .await
}

/// One xattr path read with a single-path lookup.
pub(crate) async fn xattr(kv: &mut Kv, key: &[u8], path: &[u8]) -> Answer {
    let mut extras = (path.len() as u16).to_be_bytes().to_vec();
    extras.push(0x04);
    kv.call(
        Packet::request(0xc5, vb(key), 2)
            .key(key)
            .extras(&extras)
            .value(path),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_with_an_xattr_section_is_checked_stored_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let c =
        crate::common::loopback_config(dir.path(), sluice_engine::BucketType::Couchbase, VBS, 64);
    let node = sluice_manager::start(c).await.unwrap();
    // HELLO acknowledges XATTR (the helper asserts every asked feature is acked).
    let mut kv =
        Kv::open_with_features(node.kv_addr, "Administrator", "password", &[XATTR, JSON]).await;

    let value = with_section(&[("_sys", r#"{"v":1}"#), ("user", "\"u\"")], b"10");
    assert_eq!(
        set_with_datatype(&mut kv, b"c", DT_XATTR, &value)
            .await
            .status,
        0
    );
    let got = kv.get(b"c", vb(b"c")).await;
    assert_eq!(
        (got.status, &got.value[..]),
        (0, &b"10"[..]),
        "GET shows the body only"
    );
    assert_eq!(xattr(&mut kv, b"c", b"user").await.value, b"\"u\"");

    // The body changes in place; the section stays in front of it.
    let incr = kv
        .call(
            Packet::request(0x05, vb(b"c"), 3)
                .key(b"c")
                .extras(&[0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        )
        .await;
    assert_eq!((incr.status, incr.value), (0, 15u64.to_be_bytes().to_vec()));
    for (op, extra) in [(0x0e, &b"0"[..]), (0x0f, b"9")] {
        let a = kv
            .call(Packet::request(op, vb(b"c"), 4).key(b"c").value(extra))
            .await;
        assert_eq!(a.status, 0, "append/prepend");
    }
    assert_eq!(kv.get(b"c", vb(b"c")).await.value, b"9150");
    assert_eq!(xattr(&mut kv, b"c", b"_sys.v").await.value, b"1");
    assert_eq!(xattr(&mut kv, b"c", b"user").await.value, b"\"u\"");

    // Malformed sections: XATTR_EINVAL (0x87), and nothing stored.
    let bad_key = with_section(&[("#k", "1")], b"{}");
    let bad_value = with_section(&[("k", "not json")], b"{}");
    let mut short = with_section(&[("k", "1")], b"");
    short[3] += 1; // the section claims one byte more than its pairs hold
    let mut too_long = with_section(&[("k", "1")], b"");
    too_long[3] += 40; // and here more than the whole value
    for (what, v) in [
        ("bad key", bad_key),
        ("value not JSON", bad_value),
        ("pairs and length disagree", short),
        ("section past the value", too_long),
    ] {
        let a = set_with_datatype(&mut kv, b"bad", DT_XATTR, &v).await;
        assert_eq!(a.status, 0x87, "{what}");
    }
    assert_eq!(kv.get(b"bad", vb(b"bad")).await.status, 0x01);

    // Without HELLO XATTR the datatype bit is refused.
    let mut plain = Kv::open(node.kv_addr).await;
    let a = set_with_datatype(&mut plain, b"p", DT_XATTR, &value).await;
    assert_eq!(a.status, 0x04);
    node.shutdown().await.unwrap();
}
