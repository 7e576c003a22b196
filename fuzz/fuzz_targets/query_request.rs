//! A query service request body (`sluice_query::request::parse`) as JSON and as a form, on
//! arbitrary bytes. Checks: never a panic; an accepted request has a statement within the
//! size limit; and an accepted JSON request, written back as JSON from what was parsed,
//! parses to the same request.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_query::serde_json;
use sluice_query::request::{parse, Consistency, QueryRequest, STATEMENT_BYTES_MAX};

fuzz_target!(|data: &[u8]| {
    for form in [false, true] {
        if let Ok(req) = parse(data, form) {
            assert!(!req.statement.trim().is_empty());
            assert!(req.statement.len() <= STATEMENT_BYTES_MAX);
            if !form {
                let again = parse(to_json(&req).as_bytes(), false).expect("re-encoded request parses");
                assert_eq!(again, req);
            }
        }
    }
});

fn to_json(req: &QueryRequest) -> String {
    let mut m = serde_json::Map::new();
    m.insert("statement".into(), req.statement.clone().into());
    m.insert("args".into(), req.params.positional.clone().into());
    for (k, v) in &req.params.named {
        m.insert(format!("${k}"), v.clone());
    }
    if let Some(c) = &req.client_context_id {
        m.insert("client_context_id".into(), c.clone().into());
    }
    if let Some(t) = req.timeout {
        m.insert("timeout".into(), go_duration(t).into());
    }
    if let Some(t) = req.scan_wait {
        m.insert("scan_wait".into(), go_duration(t).into());
    }
    m.insert("readonly".into(), req.readonly.into());
    m.insert("metrics".into(), req.metrics.into());
    if let Some(q) = &req.query_context {
        m.insert("query_context".into(), q.clone().into());
    }
    match &req.consistency {
        Consistency::NotBounded => {}
        Consistency::RequestPlus => {
            m.insert("scan_consistency".into(), "request_plus".into());
        }
        Consistency::AtPlus(v) => {
            m.insert("scan_consistency".into(), "at_plus".into());
            let mut outer = serde_json::Map::new();
            for (bucket, vbs) in v {
                let mut inner = serde_json::Map::new();
                for (vb, t) in vbs {
                    inner.insert(
                        vb.0.to_string(),
                        serde_json::json!([t.seqno.0, t.vb_uuid.to_string()]),
                    );
                }
                outer.insert(bucket.clone(), inner.into());
            }
            m.insert("scan_vectors".into(), outer.into());
        }
    }
    serde_json::Value::Object(m).to_string()
}

fn go_duration(d: std::time::Duration) -> String {
    format!("{}s{}ns", d.as_secs(), d.subsec_nanos())
}
