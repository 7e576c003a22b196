//! Writes the seed corpora, `fuzz/seeds/<target>/<name>`, from the crates' own encoders and
//! a real SASL exchange, so the seeds stay valid as the formats evolve:
//!
//!     cd fuzz && cargo +nightly run --example gen_seeds
//!
//! The output is deterministic (fixed nonces and RNG seeds), so re-running it only shows a
//! diff when an encoding really changed.

use std::fs;
use std::path::Path;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rand::rngs::StdRng;
use rand::SeedableRng;
use sluice_proto::encode::Packet;
use sluice_proto::frame_info::encode_frame_info;
use sluice_proto::Opcode;
use sluice_sasl::{
    ChannelBinding, ClientFirst, ClientSession, ClientStep, Gs2Header, Mechanism,
    MemoryCredentialStore, ServerFinal, ServerSession, Step,
};
use sluice_storage::codec::{encode_record, encode_vb_meta};
use sluice_subdoc::xattr::encode_pairs;
use sluice_storage::VbMeta;
use sluice_types::{Cas, Datatype, Expiry, FailoverLog, ItemMeta, Seqno, VbState, VbUuid};

// Must match fuzz_targets/sasl_server.rs.
const SASL_USER: &str = "u,ser=1";
const SASL_PASSWORD: &str = "pencil";
const SASL_CLIENT_NONCE: &str = "fyko+d2lbbFgONRv9qkxdawL";
const SEP: u8 = 0xff;
const MODE_RAW: u8 = 0;
const MODE_HONEST: u8 = 1;
const MODE_RAW_NONCE: u8 = 2;

/// (file name, contents) of each seed of one target.
type Seeds = Vec<(&'static str, Vec<u8>)>;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let targets: [(&str, Seeds); 10] = [
        ("frame", frame_seeds()),
        ("frame_info", frame_info_seeds()),
        ("storage_record", record_seeds()),
        ("storage_vb_meta", vb_meta_seeds()),
        ("sasl_messages", sasl_message_seeds()),
        ("sasl_server", sasl_server_seeds()),
        ("subdoc_path", subdoc_path_seeds()),
        ("subdoc_document", subdoc_document_seeds()),
        ("xattr_section", xattr_section_seeds()),
        ("collection_key", collection_key_seeds()),
    ];
    for (target, seeds) in targets {
        let dir = root.join(target);
        if dir.exists() {
            fs::remove_dir_all(&dir).expect("remove old seeds");
        }
        fs::create_dir_all(&dir).expect("create seed dir");
        for (name, bytes) in &seeds {
            fs::write(dir.join(name), bytes).expect("write seed");
        }
        println!("{target}: {} seeds", seeds.len());
    }
}

fn subdoc_path_seeds() -> Seeds {
    vec![
        ("root", b"".to_vec()),
        ("keys", b"a.b.c".to_vec()),
        ("indexes", b"a[0][-1].b".to_vec()),
        ("root_array", b"[3].x".to_vec()),
        ("quoted", b"`a.b`.`c``d`".to_vec()),
    ]
}

/// Must match fuzz_targets/subdoc_document.rs: `op, mkdir_p, path_len, value_len, path,
/// value, document`.
fn subdoc_document_seeds() -> Seeds {
    let doc: &[u8] = br#"{"a": {"b": [1, 2, {"c": "x"}]}, "n": 41, "s": "t"}"#;
    let seed = |op: u8, mkdir_p: u8, path: &[u8], value: &[u8]| {
        let mut v = vec![op, mkdir_p, path.len() as u8, value.len() as u8];
        v.extend_from_slice(path);
        v.extend_from_slice(value);
        v.extend_from_slice(doc);
        v
    };
    vec![
        ("dict_upsert", seed(1, 0, b"a.d", b"{\"e\":[]}")),
        ("mkdir_p", seed(1, 1, b"x.y.z", b"1")),
        ("delete", seed(2, 0, b"a.b[1]", b"")),
        ("push_last", seed(4, 0, b"a.b", b"3,4")),
        ("insert", seed(6, 0, b"a.b[0]", b"0")),
        ("counter", seed(8, 0, b"n", b"-42")),
    ]
}

fn collection_key_seeds() -> Seeds {
    let record = sluice_types::system_event::SystemEvent::Collection {
        dropped: false,
        manifest_uid: 2,
        scope: 8,
        collection: 9,
        max_ttl_s: 60,
        name: b"hotel".to_vec(),
    };
    let mut record_seed = b"\x01c\x09\x00".to_vec();
    record_seed.extend_from_slice(&record.encode());
    vec![
        ("default_key", b"\x00doc".to_vec()),
        ("two_byte_prefix", b"\xd5\x0adoc".to_vec()),
        ("record", record_seed),
        ("filter", br#"{"uid":"2","collections":["8","9"]}"#.to_vec()),
        ("scope_filter", br#"{"scope":"8"}"#.to_vec()),
    ]
}

fn xattr_section_seeds() -> Seeds {
    let section = |pairs: &[(&[u8], &[u8])]| encode_pairs(pairs.iter().copied());
    vec![
        ("one_user", section(&[(b"meta", b"{\"tag\":\"blue\"}")])),
        ("system_and_user", section(&[(b"_sync", b"{\"rev\":\"1-a\"}"), (b"u", b"[1,2]")])),
        ("empty", section(&[])),
    ]
}

fn frame_seeds() -> Seeds {
    let op = |o: Opcode| o.byte();
    let get = Packet::request(op(Opcode::Get), 7, 0xdead_beef)
        .key(b"user::1")
        .to_vec();

    let mut set_extras = Vec::new();
    set_extras.extend_from_slice(&0x0200_0006u32.to_be_bytes()); // flags
    set_extras.extend_from_slice(&3600u32.to_be_bytes()); // expiry
    let set = Packet::request(op(Opcode::Set), 12, 2)
        .datatype(Datatype::JSON)
        .extras(&set_extras)
        .key(b"user::1")
        .value(br#"{"name":"ada","age":36}"#)
        .to_vec();

    // Durability majority with a 500 ms timeout (frame info id 1, length 3).
    let mut durability = Vec::new();
    encode_frame_info(&mut durability, 1, &[1, 0x01, 0xf4]);
    let alt_set = Packet::request(op(Opcode::Set), 12, 3)
        .cas(0x0001_0002_0003_0004)
        .extras(&set_extras)
        .key(b"user::2")
        .value(b"hello")
        .framing_extras(&durability)
        .to_vec();

    // Barrier + durability persist-to-majority without timeout + preserve TTL, on a DELETE.
    let mut infos = Vec::new();
    encode_frame_info(&mut infos, 0, &[]);
    encode_frame_info(&mut infos, 1, &[3]);
    encode_frame_info(&mut infos, 5, &[]);
    let alt_delete = Packet::request(op(Opcode::Delete), 1, 4)
        .key(b"user::3")
        .framing_extras(&infos)
        .to_vec();

    let features: Vec<u8> = [
        0x03u16, 0x06, 0x07, 0x08, 0x0a, 0x0b, 0x10, 0x11, 0x12, 0x14,
    ]
    .iter()
    .flat_map(|f| f.to_be_bytes())
    .collect();
    let hello = Packet::request(op(Opcode::Hello), 0, 5)
        .key(br#"{"a":"sluice-fuzz/0.1","i":"0000000000000001/0000000000000001"}"#)
        .value(&features)
        .to_vec();

    let mut incr_extras = Vec::new();
    incr_extras.extend_from_slice(&1u64.to_be_bytes()); // delta
    incr_extras.extend_from_slice(&100u64.to_be_bytes()); // initial
    incr_extras.extend_from_slice(&0u32.to_be_bytes()); // expiry
    let incr = Packet::request(op(Opcode::Increment), 3, 6)
        .extras(&incr_extras)
        .key(b"counter")
        .to_vec();

    // A session's opening: HELLO, SASL_AUTH PLAIN, SELECT_BUCKET, GET_ERROR_MAP, GET, NOOP.
    let mut session = hello.clone();
    session.extend(
        Packet::request(op(Opcode::SaslAuth), 0, 7)
            .key(b"PLAIN")
            .value(b"\0admin\0password")
            .to_vec(),
    );
    session.extend(
        Packet::request(op(Opcode::SelectBucket), 0, 8)
            .key(b"default")
            .to_vec(),
    );
    session.extend(
        Packet::request(op(Opcode::GetErrorMap), 0, 9)
            .value(&2u16.to_be_bytes())
            .to_vec(),
    );
    session.extend(&get);
    session.extend(Packet::request(op(Opcode::Noop), 0, 10).to_vec());

    vec![
        ("get", get),
        ("set_with_extras", set),
        ("alt_set_durability", alt_set),
        ("alt_delete_frame_infos", alt_delete),
        ("hello", hello),
        ("increment", incr),
        ("session_opening", session),
    ]
}

fn frame_info_seeds() -> Seeds {
    let one = |id: u8, data: &[u8]| {
        let mut v = Vec::new();
        encode_frame_info(&mut v, id, data);
        v
    };
    let mut all = one(0, &[]);
    all.extend(one(1, &[2, 0x27, 0x10]));
    all.extend(one(2, &7u16.to_be_bytes()));
    all.extend(one(5, &[]));
    // Escaped id (15 + 1 = 16, unknown) and escaped length (15 + 1 = 16 bytes).
    let mut escaped = vec![0xff, 0x01, 0x01];
    escaped.extend_from_slice(&[0; 16]);
    vec![
        ("durability_majority", one(1, &[1])),
        ("durability_timeout", one(1, &[3, 0x01, 0xf4])),
        ("barrier_stream_preserve_ttl", all),
        ("escaped_id_and_length", escaped),
    ]
}

fn record_seeds() -> Seeds {
    let doc = ItemMeta {
        seqno: Seqno(1042),
        rev_seqno: 3,
        cas: Cas(0x1790_0000_0000_0001),
        flags: 0x0200_0006,
        expiry: Expiry(0),
        datatype: Datatype(Datatype::JSON),
        deleted: false,
        delete_time: 0,
    };
    let tombstone = ItemMeta {
        seqno: Seqno(1043),
        rev_seqno: 4,
        cas: Cas(0x1790_0000_0000_0002),
        deleted: true,
        delete_time: 1_700_000_000,
        datatype: Datatype::RAW,
        ..doc
    };
    let xattr = ItemMeta {
        seqno: Seqno(7),
        expiry: Expiry(1_900_000_000),
        datatype: Datatype(Datatype::XATTR | Datatype::SNAPPY),
        ..doc
    };
    vec![
        (
            "json_document",
            encode_record(b"user::1", &doc, br#"{"name":"ada","age":36}"#)
                .expect("encode")
                .to_vec(),
        ),
        (
            "tombstone",
            encode_record(b"user::2", &tombstone, b"")
                .expect("encode")
                .to_vec(),
        ),
        (
            "binary_value",
            encode_record(b"blob", &xattr, &[0, 1, 2, 0xff, 0xfe])
                .expect("encode")
                .to_vec(),
        ),
    ]
}

fn vb_meta_seeds() -> Seeds {
    let mut log = FailoverLog::new(VbUuid(0x1111_2222_3333_4444), Seqno(0));
    log.new_branch(VbUuid(0x5555_6666_7777_8888), Seqno(1200));
    let replica = VbMeta {
        state: VbState::Replica,
        failover_log: log,
        high_seqno: Seqno(1500),
        purge_seqno: Seqno(20),
        max_cas: 0x1790_0000_0000_0009,
        high_completed_seqno: Seqno(1400),
    };
    let active = VbMeta {
        state: VbState::Active,
        failover_log: FailoverLog::new(VbUuid(42), Seqno(0)),
        high_seqno: Seqno(0),
        purge_seqno: Seqno(0),
        max_cas: 0,
        high_completed_seqno: Seqno(0),
    };
    vec![
        ("replica_two_entries", encode_vb_meta(&replica)),
        ("active_fresh", encode_vb_meta(&active)),
    ]
}

/// A real SCRAM exchange for `mechanism` between a client and a server with a fixed nonce.
fn scram_exchange(mechanism: Mechanism) -> [Vec<u8>; 4] {
    let mut rng = StdRng::seed_from_u64(7);
    let mut store = MemoryCredentialStore::new(&mut rng);
    store
        .add_user("user", "pencil", &mut rng)
        .expect("valid user");
    let mut client = ClientSession::with_nonce(mechanism, "user", "pencil", "rOprNGfwEbeRWgbNEkqO")
        .expect("valid client");
    let client_first = client.initial_message().to_vec();
    let (mut server, step) = ServerSession::start_with_nonce(
        mechanism.name(),
        &client_first,
        &store,
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    );
    let Step::Continue(server_first) = step else {
        panic!("{step:?}")
    };
    let ClientStep::Continue(client_final) = client.step(&server_first) else {
        panic!("client rejected server-first")
    };
    let Step::Success { final_message, .. } = server.step(&client_final) else {
        panic!("server rejected client-final")
    };
    assert_eq!(client.step(&final_message), ClientStep::Done);
    [client_first, server_first, client_final, final_message]
}

fn sasl_message_seeds() -> Seeds {
    let [cf512, sf512, cfin512, sfin512] = scram_exchange(Mechanism::ScramSha512);
    let [cf1, sf1, cfin1, sfin1] = scram_exchange(Mechanism::ScramSha1);
    let authz = ClientFirst::new(
        Gs2Header::new(ChannelBinding::SupportedNotUsed, Some("ad,min".into())),
        "we,ird=name",
        "0x02 0xffffff9b 0x05 0x6a",
    )
    .expect("valid client-first");
    let mut cf_ext = authz.encode().into_bytes();
    cf_ext.extend_from_slice(b",x=extension");
    vec![
        ("client_first_sha512", cf512),
        ("server_first_sha512", sf512),
        ("client_final_sha512", cfin512),
        ("server_final_sha512", sfin512),
        ("client_first_sha1", cf1),
        ("server_first_sha1", sf1),
        ("client_final_sha1", cfin1),
        ("server_final_sha1", sfin1),
        ("client_first_authzid_escapes_ext", cf_ext),
        (
            "server_final_error",
            ServerFinal::Error("invalid-proof".into())
                .encode()
                .into_bytes(),
        ),
        ("plain", b"\0user\0pencil".to_vec()),
        ("plain_authzid", b"admin\0user\0pencil".to_vec()),
    ]
}

fn sasl_server_input(selector: u8, mode: u8, segments: &[&[u8]]) -> Vec<u8> {
    let mut v = vec![selector, mode];
    for (i, s) in segments.iter().enumerate() {
        if i > 0 {
            v.push(SEP);
        }
        v.extend_from_slice(s);
    }
    v
}

fn sasl_server_seeds() -> Seeds {
    let client_first = |m: Mechanism| {
        ClientSession::with_nonce(m, SASL_USER, SASL_PASSWORD, SASL_CLIENT_NONCE)
            .expect("valid client")
            .initial_message()
            .to_vec()
    };
    // Right length for SHA-512 / SHA-256, wrong value: reaches the proof check.
    let proof64 = format!("c=biws,r=@@,p={}", STANDARD.encode([0x5a; 64]));
    let proof32 = format!("c=biws,r=@@,p={}", STANDARD.encode([0x5a; 32]));
    let plain_ok = format!("\0{SASL_USER}\0{SASL_PASSWORD}");
    vec![
        // Honest client, no tampering: full successful exchanges.
        (
            "honest_scram_sha512",
            sasl_server_input(0, MODE_HONEST, &[]),
        ),
        (
            "honest_scram_sha256",
            sasl_server_input(1, MODE_HONEST, &[]),
        ),
        ("honest_scram_sha1", sasl_server_input(2, MODE_HONEST, &[])),
        ("honest_plain", sasl_server_input(3, MODE_HONEST, &[])),
        // Honest client whose client-final gets one byte flipped (in its nonce).
        (
            "honest_scram_sha256_tampered_final",
            sasl_server_input(1, MODE_HONEST, &[b"", &[&[0u8; 60][..], &[1]].concat()]),
        ),
        // Raw messages: the real user with a wrong proof, an unknown user (decoy), PLAIN.
        (
            "raw_scram_sha512_wrong_proof",
            sasl_server_input(
                0,
                MODE_RAW_NONCE,
                &[&client_first(Mechanism::ScramSha512), proof64.as_bytes()],
            ),
        ),
        (
            "raw_scram_sha256_unknown_user",
            sasl_server_input(
                5,
                MODE_RAW_NONCE,
                &[b"n,,n=ghost,r=abcdef", proof32.as_bytes()],
            ),
        ),
        (
            "raw_plain",
            sasl_server_input(3, MODE_RAW, &[plain_ok.as_bytes()]),
        ),
        // Mechanism name taken from the input.
        (
            "raw_named_mechanism",
            sasl_server_input(
                7,
                MODE_RAW,
                &[b"SCRAM-SHA-1", &client_first(Mechanism::ScramSha1)],
            ),
        ),
    ]
}
