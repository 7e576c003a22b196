use super::*;
use serde_json::json;

fn json_req(v: serde_json::Value) -> Result<QueryRequest, RequestError> {
    parse(v.to_string().as_bytes(), false)
}

#[test]
fn a_json_request_with_what_the_sdks_send() {
    let req = json_req(json!({
        "statement": "SELECT * FROM default WHERE a = $a AND b = $1",
        "$a": "x",
        "args": [2],
        "client_context_id": "ctx-1",
        "timeout": "74999ms",
        "scan_consistency": "request_plus",
        "readonly": true,
        "pretty": false,
    }))
    .unwrap();
    assert_eq!(req.params.named["a"], json!("x"));
    assert_eq!(req.params.positional, vec![json!(2)]);
    assert_eq!(req.client_context_id.as_deref(), Some("ctx-1"));
    assert_eq!(req.timeout, Some(Duration::from_millis(74_999)));
    assert_eq!(req.consistency, Consistency::RequestPlus);
    assert!(req.readonly && req.metrics);
}

#[test]
fn at_plus_carries_the_tokens_by_bucket() {
    let req = json_req(json!({
        "statement": "SELECT 1",
        "scan_consistency": "at_plus",
        "scan_vectors": {"default:travel": {"12": [41, "1234567"]}},
    }))
    .unwrap();
    let Consistency::AtPlus(v) = req.consistency else {
        panic!("at_plus")
    };
    assert_eq!(
        v["travel"][&VbId(12)],
        VbToken {
            seqno: Seqno(41),
            vb_uuid: 1_234_567
        }
    );
    let missing = json_req(json!({"statement": "SELECT 1", "scan_consistency": "at_plus"}));
    assert_eq!(missing.unwrap_err().code(), 1040);
}

#[test]
fn refusals_carry_couchbases_codes() {
    let unknown = json_req(json!({"statement": "SELECT 1", "bogus": 1})).unwrap_err();
    assert_eq!(unknown.code(), 1065);
    assert_eq!(
        unknown.to_string(),
        "Unrecognized parameter in request: bogus"
    );
    assert_eq!(json_req(json!({"args": []})).unwrap_err().code(), 1050);
    assert_eq!(
        json_req(json!({"statement": "x", "timeout": "5 parsecs"}))
            .unwrap_err()
            .code(),
        1040
    );
    assert_eq!(
        json_req(json!({"statement": "x", "txid": "t1"}))
            .unwrap_err()
            .code(),
        1020
    );
    // A prepared statement's name stands in for the statement; neither is 1050.
    let by_name = json_req(json!({"prepared": "p1", "encoded_plan": "ignored"})).unwrap();
    assert_eq!(
        (by_name.statement.as_str(), by_name.prepared.as_deref()),
        ("", Some("p1"))
    );
    assert_eq!(json_req(json!({"prepared": ""})).unwrap_err().code(), 1050);
    let auto = json_req(json!({"statement": "PREPARE SELECT 1", "auto_execute": true})).unwrap();
    assert!(auto.auto_execute);
    assert_eq!(parse(b"[1]", false).unwrap_err().code(), 1100);
    assert_eq!(parse(b"{", false).unwrap_err().code(), 1100);
}

#[test]
fn a_form_request_takes_json_only_where_couchbase_does() {
    let body = b"statement=SELECT+%2A+FROM+b+WHERE+x%3D%24v&%24v=%22a%26b%22&args=%5B1%5D&readonly=true&client_context_id=123";
    let req = parse(body, true).unwrap();
    assert_eq!(req.statement, "SELECT * FROM b WHERE x=$v");
    assert_eq!(req.params.named["v"], json!("a&b"));
    assert_eq!(req.params.positional, vec![json!(1)]);
    assert!(req.readonly);
    assert_eq!(req.client_context_id.as_deref(), Some("123"));
    assert_eq!(
        parse(b"statement=x&%24v=not-json", true)
            .unwrap_err()
            .code(),
        1040
    );
    assert_eq!(parse(b"statement=%zz", true).unwrap_err().code(), 1100);
}

#[test]
fn go_durations() {
    let d = |t: &str| duration("timeout", t);
    assert_eq!(d("75s").unwrap(), Duration::from_secs(75));
    assert_eq!(d("1m30s").unwrap(), Duration::from_secs(90));
    assert_eq!(d("2.5ms").unwrap(), Duration::from_micros(2500));
    assert_eq!(d("1.5h").unwrap(), Duration::from_secs(5400));
    assert_eq!(d("75000000000ns").unwrap(), Duration::from_secs(75));
    assert!(d("1..5s").is_err() && d(".s").is_err() && d("99999999999999999999999h").is_err());
    assert_eq!(d("0").unwrap(), Duration::ZERO);
    assert!(d("").is_err() && d("10").is_err() && d("1x").is_err() && d("-1s").is_err());
}
