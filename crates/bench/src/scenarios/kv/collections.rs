//! `--collections N`: the bench makes scope `bench` with collections `c0`…`c{N-1}` on the
//! Sluice it started (the REST API the SDKs' collection managers use) and learns their ids,
//! so the load spreads its keys over them.

use sluice_client::admin_http::{self, AdminAnswer, Body, Method};
use sluice_client::net::Dial;
use sluice_client::Credentials;
use std::net::SocketAddr;
use std::time::Duration;

use crate::error::BenchError;

const SCOPE: &str = "bench";
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Makes the collections and returns their ids, `c0` first.
pub async fn make(
    admin: SocketAddr,
    who: &Credentials,
    bucket: &str,
    n: u32,
) -> Result<Vec<u32>, BenchError> {
    let addr = admin.to_string();
    let scopes = format!("/pools/default/buckets/{bucket}/scopes");
    let call = |method: Method, path: String, form: Vec<(&'static str, String)>| {
        let addr = addr.clone();
        async move {
            let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let body = match pairs.is_empty() {
                true => Body::None,
                false => Body::Form(&pairs),
            };
            let a = admin_http::send(
                &Dial::default(),
                &addr,
                who,
                method,
                &path,
                body,
                CALL_TIMEOUT,
            )
            .await
            .map_err(|e| BenchError::Collections(e.to_string()))?;
            refused(&path, a)
        }
    };
    call(
        Method::POST,
        scopes.clone(),
        vec![("name", SCOPE.to_string())],
    )
    .await?;
    for i in 0..n {
        let path = format!("{scopes}/{SCOPE}/collections");
        call(Method::POST, path, vec![("name", format!("c{i}"))]).await?;
    }
    let manifest = call(Method::GET, scopes, Vec::new()).await?;
    ids(&manifest.body, n)
}

fn refused(path: &str, a: AdminAnswer) -> Result<AdminAnswer, BenchError> {
    match a.ok() {
        true => Ok(a),
        false => Err(BenchError::Collections(format!(
            "{path} answered {}: {}",
            a.status, a.body
        ))),
    }
}

/// The ids of `bench.c0`…`bench.c{n-1}` in a manifest's JSON.
fn ids(manifest: &serde_json::Value, n: u32) -> Result<Vec<u32>, BenchError> {
    let missing = |what: String| BenchError::Collections(format!("the manifest lacks {what}"));
    let scope = manifest["scopes"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == SCOPE))
        .ok_or_else(|| missing(format!("scope {SCOPE}")))?;
    (0..n)
        .map(|i| {
            let name = format!("c{i}");
            scope["collections"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["name"] == name.as_str()))
                .and_then(|c| c["uid"].as_str())
                .and_then(|uid| u32::from_str_radix(uid, 16).ok())
                .ok_or_else(|| missing(format!("{SCOPE}.{name}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_from_the_manifest_in_name_order() {
        let m = serde_json::json!({"uid": "3", "scopes": [
            {"name": "_default", "uid": "0", "collections": [{"name": "_default", "uid": "0"}]},
            {"name": "bench", "uid": "8", "collections": [
                {"name": "c1", "uid": "9"}, {"name": "c0", "uid": "8"}]}]});
        assert_eq!(ids(&m, 2).unwrap(), vec![8, 9]);
        assert!(ids(&m, 3).is_err());
    }
}
