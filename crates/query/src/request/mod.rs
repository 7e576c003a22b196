//! A `POST /query/service` request as Couchbase's query service takes it: a JSON object, or
//! a form whose values are strings (JSON text for `args` and the named parameters). Pure:
//! the HTTP handler hands it the body and whether it is a form.
//!
//! Parameters this service acts on: `statement`, `prepared` (the name of a prepared
//! statement to run, instead of a statement), `auto_execute` (with a `PREPARE`: run it
//! too), `args`, `$name`, `client_context_id`, `timeout`, `readonly`, `scan_consistency`,
//! `scan_vectors` / `scan_vector`, `scan_wait`, `query_context`, `metrics`. Others
//! Couchbase defines are accepted and have no effect here (see [`ACCEPTED`]), among them
//! `encoded_plan`, which Couchbase too ignores since its prepared statements became
//! names; those that would change what a statement means and are not built
//! (transactions) are refused with a message that says so. A name that is no parameter at
//! all is error 1065, as Couchbase answers it.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_types::{Seqno, VbId};

use crate::eval::Params;

/// The longest statement text taken; the parser has its own bound too.
pub const STATEMENT_BYTES_MAX: usize = crate::parse::MAX_STATEMENT_BYTES;

/// Parameters Couchbase defines that change nothing here: output formatting, tuning knobs
/// of its executor, and options of features this service does not have.
pub const ACCEPTED: &[&str] = &[
    "pretty",
    "creds",
    "signature",
    "max_parallelism",
    "scan_cap",
    "pipeline_batch",
    "pipeline_cap",
    "profile",
    "controls",
    "compression",
    "encoding",
    "format",
    "namespace",
    "encoded_plan",
    "use_fts",
    "use_cbo",
    "memory_quota",
    "sort_projection",
    "use_replica",
    "preserve_expiry",
    "kvtimeout",
    "atrcollection",
    "numatrs",
    "durability_level",
    "max_parallelism",
];

/// Parameters that would change a statement's meaning, not built here.
const REFUSED: &[(&str, &str)] = &[
    (
        "txid",
        "transactions through the query service are not supported by Sluice",
    ),
    (
        "tximplicit",
        "transactions through the query service are not supported by Sluice",
    ),
    (
        "txdata",
        "transactions through the query service are not supported by Sluice",
    ),
    (
        "txstmtnum",
        "transactions through the query service are not supported by Sluice",
    ),
    (
        "txtimeout",
        "transactions through the query service are not supported by Sluice",
    ),
];

/// One vbucket's point a scan must include: the mutation token's seqno and branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VbToken {
    pub seqno: Seqno,
    pub vb_uuid: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Consistency {
    /// Whatever the index holds now.
    #[default]
    NotBounded,
    /// Every change acknowledged before the request: each vbucket up to its high seqno.
    RequestPlus,
    /// The changes of these mutation tokens, by bucket.
    AtPlus(BTreeMap<String, BTreeMap<VbId, VbToken>>),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueryRequest {
    /// Empty when the request names a prepared statement instead.
    pub statement: String,
    /// The prepared statement to run (when `statement` is empty).
    pub prepared: Option<String>,
    /// With a `PREPARE` statement: run the prepared statement too, and name it in the
    /// response's `prepared` field (what the SDKs send for `adhoc = false`).
    pub auto_execute: bool,
    pub params: Params,
    pub client_context_id: Option<String>,
    pub timeout: Option<Duration>,
    pub readonly: bool,
    pub consistency: Consistency,
    /// How long a consistent scan may wait for the index (Couchbase's `scan_wait`).
    pub scan_wait: Option<Duration>,
    /// `bucket.scope` (or `default:bucket.scope`) that relative keyspaces are in.
    pub query_context: Option<String>,
    /// Whether the response carries `metrics` (default true).
    pub metrics: bool,
}

/// Why a request was refused before its statement ran, with Couchbase's codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("Unrecognized parameter in request: {0}")]
    UnknownParameter(String),
    #[error("No statement or prepared value")]
    NoStatement,
    #[error("Invalid value for {name}: {why}")]
    BadValue { name: String, why: String },
    #[error("{0}")]
    NotSupported(&'static str),
    #[error("Invalid request body: {0}")]
    BadBody(String),
}

impl RequestError {
    pub fn code(&self) -> u32 {
        match self {
            RequestError::UnknownParameter(_) => 1065,
            RequestError::NoStatement => 1050,
            RequestError::BadValue { .. } => 1040,
            RequestError::NotSupported(_) => 1020,
            RequestError::BadBody(_) => 1100,
        }
    }
}

fn bad(name: &str, why: impl Into<String>) -> RequestError {
    RequestError::BadValue {
        name: name.to_string(),
        why: why.into(),
    }
}

/// Parses a request body. `form`: the body is `application/x-www-form-urlencoded`, else
/// JSON.
pub fn parse(body: &[u8], form: bool) -> Result<QueryRequest, RequestError> {
    let fields: Vec<(String, serde_json::Value)> = if form {
        form_fields(body)?
    } else {
        match serde_json::from_slice(body) {
            Ok(serde_json::Value::Object(m)) => m.into_iter().collect(),
            Ok(_) => return Err(RequestError::BadBody("not a JSON object".into())),
            Err(e) => return Err(RequestError::BadBody(e.to_string())),
        }
    };
    let mut req = QueryRequest {
        metrics: true,
        ..QueryRequest::default()
    };
    let mut vectors = None;
    let mut consistency = None;
    for (name, value) in fields {
        let lower = name.to_ascii_lowercase();
        if let Some(param) = name.strip_prefix('$') {
            req.params.named.insert(param.to_string(), value);
            continue;
        }
        match lower.as_str() {
            "statement" => req.statement = string(&name, value)?,
            "prepared" => req.prepared = Some(string(&name, value)?),
            "auto_execute" => req.auto_execute = boolean(&name, value)?,
            "args" => match value {
                serde_json::Value::Array(a) => req.params.positional = a,
                _ => return Err(bad(&name, "args must be an array")),
            },
            "client_context_id" => req.client_context_id = Some(string(&name, value)?),
            "timeout" => req.timeout = Some(duration(&name, &string(&name, value)?)?),
            "scan_wait" => req.scan_wait = Some(duration(&name, &string(&name, value)?)?),
            "readonly" => req.readonly = boolean(&name, value)?,
            "metrics" => req.metrics = boolean(&name, value)?,
            "query_context" => req.query_context = Some(string(&name, value)?),
            "scan_consistency" => consistency = Some(string(&name, value)?),
            "scan_vectors" | "scan_vector" => vectors = Some((name, value)),
            _ if ACCEPTED.contains(&lower.as_str()) => {}
            _ => match REFUSED.iter().find(|(n, _)| *n == lower) {
                Some((_, why)) => return Err(RequestError::NotSupported(why)),
                None => return Err(RequestError::UnknownParameter(name)),
            },
        }
    }
    if req.statement.trim().is_empty() && req.prepared.as_deref().is_none_or(str::is_empty) {
        return Err(RequestError::NoStatement);
    }
    if req.statement.len() > STATEMENT_BYTES_MAX {
        return Err(bad(
            "statement",
            format!("longer than {STATEMENT_BYTES_MAX} bytes"),
        ));
    }
    req.consistency = match consistency
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("not_bounded") | Some("none") => Consistency::NotBounded,
        Some("request_plus") | Some("statement_plus") => Consistency::RequestPlus,
        Some("at_plus") => {
            let (name, value) =
                vectors.ok_or_else(|| bad("scan_vectors", "at_plus needs scan_vectors"))?;
            Consistency::AtPlus(scan_vectors(&name, value)?)
        }
        Some(other) => return Err(bad("scan_consistency", format!("unknown value {other}"))),
    };
    Ok(req)
}

/// Form values are strings: `args`, the named parameters and the scan vectors are JSON
/// text, the others are taken as they are (`readonly=true` reads as the boolean).
fn form_fields(body: &[u8]) -> Result<Vec<(String, serde_json::Value)>, RequestError> {
    form_pairs(body)?
        .into_iter()
        .map(|(k, v)| {
            let json = k.starts_with('$') || k == "args" || k.starts_with("scan_vector");
            let value = if json {
                serde_json::from_str(&v).map_err(|e| bad(&k, format!("not JSON: {e}")))?
            } else {
                serde_json::Value::String(v)
            };
            Ok((k, value))
        })
        .collect()
}

fn form_pairs(body: &[u8]) -> Result<Vec<(String, String)>, RequestError> {
    let text = std::str::from_utf8(body).map_err(|_| RequestError::BadBody("not UTF-8".into()))?;
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((percent_decode(k)?, percent_decode(v)?))
        })
        .collect()
}

fn percent_decode(s: &str) -> Result<String, RequestError> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = |b: Option<u8>| match b {
                    Some(c @ b'0'..=b'9') => Ok(c - b'0'),
                    Some(c @ b'a'..=b'f') => Ok(c - b'a' + 10),
                    Some(c @ b'A'..=b'F') => Ok(c - b'A' + 10),
                    _ => Err(RequestError::BadBody("bad percent escape".into())),
                };
                let hi = hex(bytes.next())?;
                let lo = hex(bytes.next())?;
                out.push(hi << 4 | lo);
            }
            _ => out.push(b),
        }
    }
    String::from_utf8(out).map_err(|_| RequestError::BadBody("form value is not UTF-8".into()))
}

fn string(name: &str, v: serde_json::Value) -> Result<String, RequestError> {
    match v {
        serde_json::Value::String(s) => Ok(s),
        _ => Err(bad(name, "must be a string")),
    }
}

fn boolean(name: &str, v: serde_json::Value) -> Result<bool, RequestError> {
    match v {
        serde_json::Value::Bool(b) => Ok(b),
        serde_json::Value::String(s) if s.eq_ignore_ascii_case("true") => Ok(true),
        serde_json::Value::String(s) if s.eq_ignore_ascii_case("false") => Ok(false),
        _ => Err(bad(name, "must be true or false")),
    }
}

/// A Go duration, as Couchbase takes it: `75s`, `1m30s`, `2500ms`, `1.5s`, `10us`, `1h`.
/// Counted in whole nanoseconds (a fraction below a nanosecond is dropped), so the same
/// text always gives the same duration.
pub fn duration(name: &str, text: &str) -> Result<Duration, RequestError> {
    let whole = text.trim();
    let bad_text = |why: &str| bad(name, format!("{text}: {why}"));
    if whole.is_empty() {
        return Err(bad(name, "empty duration"));
    }
    if whole == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = whole;
    let mut nanos: u128 = 0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| bad_text("a number without a unit"))?;
        let (num, after) = rest.split_at(num_len);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let unit_ns: u128 = match unit {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad_text(&format!("unknown unit {unit:?}"))),
        };
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        if (int.is_empty() && frac.is_empty()) || frac.contains('.') || int.len() > 20 {
            return Err(bad_text("not a duration"));
        }
        let int: u128 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| bad_text("not a duration"))?
        };
        // The fraction's digits beyond a nanosecond of this unit cannot count.
        let frac = &frac[..frac.len().min(18)];
        let frac_ns = if frac.is_empty() {
            0
        } else {
            let digits: u128 = frac.parse().map_err(|_| bad_text("not a duration"))?;
            digits * unit_ns / 10u128.pow(frac.len() as u32)
        };
        nanos = int
            .checked_mul(unit_ns)
            .and_then(|n| n.checked_add(frac_ns))
            .and_then(|n| n.checked_add(nanos))
            .ok_or_else(|| bad_text("out of range"))?;
        rest = next;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| bad_text("out of range"))?;
    Ok(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

/// `{"bucket": {"vb": [seqno, "uuid"], ...}}` (`scan_vectors`), or one bucket's map alone
/// (`scan_vector`, named after the statement's keyspace: kept under the empty name).
fn scan_vectors(
    name: &str,
    value: serde_json::Value,
) -> Result<BTreeMap<String, BTreeMap<VbId, VbToken>>, RequestError> {
    let serde_json::Value::Object(outer) = value else {
        return Err(bad(name, "must be an object"));
    };
    if name == "scan_vector" {
        return Ok([(String::new(), vector(name, outer)?)].into());
    }
    outer
        .into_iter()
        .map(|(keyspace, v)| match v {
            serde_json::Value::Object(m) => {
                // `default:bucket` and `bucket` name the same bucket.
                let bucket = keyspace.rsplit(':').next().unwrap_or(&keyspace).to_string();
                Ok((bucket, vector(name, m)?))
            }
            _ => Err(bad(name, format!("{keyspace}: must be an object"))),
        })
        .collect()
}

fn vector(
    name: &str,
    m: serde_json::Map<String, serde_json::Value>,
) -> Result<BTreeMap<VbId, VbToken>, RequestError> {
    m.into_iter()
        .map(|(vb, entry)| {
            let vb: u16 = vb
                .parse()
                .map_err(|_| bad(name, format!("vbucket {vb:?} is not a number")))?;
            let token = match entry {
                serde_json::Value::Array(a) => match a.as_slice() {
                    [seqno, uuid] => VbToken {
                        seqno: Seqno(seqno.as_u64().ok_or_else(|| bad(name, "seqno"))?),
                        vb_uuid: match uuid {
                            serde_json::Value::String(s) => {
                                s.parse().map_err(|_| bad(name, "vbuuid"))?
                            }
                            serde_json::Value::Number(n) => {
                                n.as_u64().ok_or_else(|| bad(name, "vbuuid"))?
                            }
                            _ => return Err(bad(name, "vbuuid")),
                        },
                    },
                    _ => return Err(bad(name, "each vbucket is [seqno, vbuuid]")),
                },
                _ => return Err(bad(name, "each vbucket is [seqno, vbuuid]")),
            };
            Ok((VbId(vb), token))
        })
        .collect()
}

#[cfg(test)]
mod tests;
