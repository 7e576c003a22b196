//! `sluice collection list|create-scope|drop-scope|create|edit|drop`: a bucket's scopes and
//! collections, through any member's admin port (`/pools/default/buckets/B/scopes...`,
//! Couchbase's REST API; `bucket_admin[B]`, `cluster_admin` or `admin` to change them, any
//! role on B to list them). A collection is named `SCOPE.COLLECTION`: names hold no `.`.

use crate::login_args::AdminTarget;
use clap::{Args, Subcommand};
use serde_json::Value;
use sluice_client::admin_http::{self, Method};
use std::time::Duration;

/// A change answers once the member serves the new manifest (up to 5 s on the server).
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Subcommand)]
pub enum CollectionCommand {
    /// List the bucket's scopes and collections, with their ids (hex) and maxTTL.
    List(BucketTarget),
    /// Create a scope.
    CreateScope(ScopeArgs),
    /// Drop a scope and every collection in it.
    DropScope(ScopeArgs),
    /// Create a collection: `sluice collection create SCOPE.COLLECTION`.
    Create(CreateArgs),
    /// Change a collection's maxTTL: `sluice collection edit SCOPE.COLLECTION --max-ttl N`
    /// (documents written before keep their expiry).
    Edit(EditArgs),
    /// Drop a collection: `sluice collection drop SCOPE.COLLECTION`.
    Drop(CollectionArgs),
}

/// The bucket a command works on, and the member it calls.
#[derive(Args)]
pub struct BucketTarget {
    /// The bucket.
    #[arg(long, env = "SLUICE_BUCKET", default_value = "default")]
    pub bucket: String,
    #[command(flatten)]
    pub common: AdminTarget,
}

#[derive(Args)]
pub struct ScopeArgs {
    /// The scope's name (1-251 of `A-Z a-z 0-9 _ - %`, not starting with `_` or `%`).
    pub scope: String,
    #[command(flatten)]
    pub target: BucketTarget,
}

#[derive(Args)]
pub struct CollectionArgs {
    /// The collection, as SCOPE.COLLECTION (`_default.orders`).
    pub collection: String,
    #[command(flatten)]
    pub target: BucketTarget,
}

#[derive(Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub collection: CollectionArgs,
    /// The longest a document of the collection lives, in seconds (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub max_ttl: u32,
}

#[derive(Args)]
pub struct EditArgs {
    #[command(flatten)]
    pub collection: CollectionArgs,
    /// The longest a document written from now on lives, in seconds (0: no limit).
    #[arg(long)]
    pub max_ttl: u32,
}

pub fn run(cmd: CollectionCommand) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let max_ttl;
        let (target, method, path, form) = match &cmd {
            CollectionCommand::List(t) => (t, Method::GET, scopes_path(&t.bucket), vec![]),
            CollectionCommand::CreateScope(a) => {
                let form = vec![("name", a.scope.as_str())];
                (&a.target, Method::POST, scopes_path(&a.target.bucket), form)
            }
            CollectionCommand::DropScope(a) => {
                let path = scope_path(&a.target.bucket, &a.scope);
                (&a.target, Method::DELETE, path, vec![])
            }
            CollectionCommand::Create(a) => {
                let (scope, name) = split(&a.collection.collection)?;
                let path = format!(
                    "{}/collections",
                    scope_path(&a.collection.target.bucket, scope)
                );
                max_ttl = a.max_ttl.to_string();
                let mut form = vec![("name", name)];
                if a.max_ttl != 0 {
                    form.push(("maxTTL", max_ttl.as_str()));
                }
                (&a.collection.target, Method::POST, path, form)
            }
            CollectionCommand::Edit(a) => {
                let path = collection_path(&a.collection)?;
                max_ttl = a.max_ttl.to_string();
                let form = vec![("maxTTL", max_ttl.as_str())];
                (&a.collection.target, Method::PATCH, path, form)
            }
            CollectionCommand::Drop(a) => {
                let path = collection_path(a)?;
                (&a.target, Method::DELETE, path, vec![])
            }
        };
        let answer = target
            .common
            .send(method, &path, &form, HTTP_TIMEOUT)
            .await?;
        let bucket = &target.bucket;
        let uid = answer["uid"].as_str().unwrap_or("?");
        match &cmd {
            CollectionCommand::List(_) => print!("{}", listing(&answer)),
            CollectionCommand::CreateScope(a) => {
                println!(
                    "scope {} created in bucket {bucket} (manifest uid 0x{uid})",
                    a.scope
                )
            }
            CollectionCommand::DropScope(a) => {
                println!(
                    "scope {} dropped from bucket {bucket} (manifest uid 0x{uid})",
                    a.scope
                )
            }
            CollectionCommand::Create(a) => println!(
                "collection {} created in bucket {bucket} (manifest uid 0x{uid})",
                a.collection.collection
            ),
            CollectionCommand::Edit(a) => println!(
                "collection {} of bucket {bucket} now has maxTTL {}s (manifest uid 0x{uid})",
                a.collection.collection, a.max_ttl
            ),
            CollectionCommand::Drop(a) => println!(
                "collection {} dropped from bucket {bucket} (manifest uid 0x{uid})",
                a.collection
            ),
        }
        Ok(())
    })
}

/// The REST path of the collection `a` names.
fn collection_path(a: &CollectionArgs) -> anyhow::Result<String> {
    let (scope, name) = split(&a.collection)?;
    Ok(format!(
        "{}/collections/{}",
        scope_path(&a.target.bucket, scope),
        admin_http::percent_encode(name)
    ))
}

/// `SCOPE.COLLECTION` as its two names.
fn split(collection: &str) -> anyhow::Result<(&str, &str)> {
    match collection.split_once('.') {
        Some((scope, name)) if !scope.is_empty() && !name.is_empty() => Ok((scope, name)),
        _ => anyhow::bail!(
            "{collection:?}: name a collection as SCOPE.COLLECTION (e.g. _default.orders)"
        ),
    }
}

/// The manifest as lines: `uid 0x…`, then each scope (`NAME 0xID`) with its collections
/// indented under it (`NAME 0xID`, and `maxTTL Ns` when it has one).
fn listing(manifest: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or("?").to_string();
    let mut out = format!("uid 0x{}\n", text(&manifest["uid"]));
    for scope in manifest["scopes"].as_array().into_iter().flatten() {
        let collections = scope["collections"].as_array().cloned().unwrap_or_default();
        let empty = if collections.is_empty() {
            " (no collections)"
        } else {
            ""
        };
        out += &format!(
            "{} 0x{}{empty}\n",
            text(&scope["name"]),
            text(&scope["uid"])
        );
        for c in &collections {
            out += &format!("    {} 0x{}", text(&c["name"]), text(&c["uid"]));
            if let Some(ttl) = c["maxTTL"].as_u64() {
                out += &format!(" maxTTL {ttl}s");
            }
            out.push('\n');
        }
    }
    out
}

/// The bucket's scopes path; names are path segments, so they are percent-encoded.
fn scopes_path(bucket: &str) -> String {
    let bucket = admin_http::percent_encode(bucket);
    format!("/pools/default/buckets/{bucket}/scopes")
}

fn scope_path(bucket: &str, scope: &str) -> String {
    format!(
        "{}/{}",
        scopes_path(bucket),
        admin_http::percent_encode(scope)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collection_is_scope_dot_name() {
        assert_eq!(split("_default.orders").unwrap(), ("_default", "orders"));
        for bad in ["orders", ".orders", "s.", ""] {
            assert!(split(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_listing_shows_ids_in_hex_and_max_ttls() {
        let manifest = serde_json::json!({"uid": "a", "scopes": [
            {"name": "_default", "uid": "0", "collections": [
                {"name": "_default", "uid": "0"},
                {"name": "big", "uid": "1f", "maxTTL": 60}]},
            {"name": "s1", "uid": "8", "collections": []}]});
        assert_eq!(
            listing(&manifest),
            "uid 0xa\n_default 0x0\n    _default 0x0\n    big 0x1f maxTTL 60s\n\
             s1 0x8 (no collections)\n"
        );
    }
}
