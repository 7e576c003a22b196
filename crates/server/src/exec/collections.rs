//! COLLECTIONS_GET_ID and COLLECTIONS_GET_SCOPE_ID: a name in the bucket's manifest → its
//! id, with the manifest's uid, so a client can build keys without fetching the manifest.

use super::Responder;
use sluice_cluster::{Lookup, Manifest};
use sluice_proto::Status;

const DEFAULT: &str = "_default";

/// Answers the id of `path`: `scope.collection`, or `scope` alone when `scope_only`. An
/// empty part names `_default`, as in Couchbase (`.` is the default collection).
pub fn get_id(manifest: &Manifest, path: &[u8], scope_only: bool, r: &mut Responder<'_>) {
    let Some((scope, collection)) = parse(path, scope_only) else {
        r.error(
            Status::Einval,
            "the path is `scope.collection` (`scope` for a scope id)",
        );
        return;
    };
    let found = match scope_only {
        true => manifest.scope_id(scope),
        false => manifest.collection_id(scope, collection),
    };
    match found {
        Ok(id) => {
            let mut extras = [0u8; 12];
            extras[..8].copy_from_slice(&manifest.uid().to_be_bytes());
            extras[8..].copy_from_slice(&id.to_be_bytes());
            let p = r.packet(Status::Success).extras(&extras);
            r.send(p);
        }
        Err(Lookup::UnknownScope) => r.unknown_collection(
            Status::UnknownScope,
            manifest.uid(),
            "the scope is not in the bucket's manifest",
        ),
        Err(Lookup::UnknownCollection) => r.unknown_collection(
            Status::UnknownCollection,
            manifest.uid(),
            "the collection is not in the bucket's manifest",
        ),
    }
}

/// `part`, or `_default` when it is empty.
fn name(part: &str) -> &str {
    match part.is_empty() {
        true => DEFAULT,
        false => part,
    }
}

/// The scope and collection names `path` gives (the collection is `_default` for a scope
/// lookup). `None` when it is not UTF-8 or has more parts than it may.
fn parse(path: &[u8], scope_only: bool) -> Option<(&str, &str)> {
    let path = std::str::from_utf8(path).ok()?;
    let mut parts = path.split('.');
    let scope = parts.next().unwrap_or("");
    let collection = parts.next();
    if parts.next().is_some() {
        return None;
    }
    match (scope_only, collection) {
        // A scope lookup takes `scope` or `scope.` (what some clients send).
        (true, None) | (true, Some("")) => Some((name(scope), DEFAULT)),
        (true, Some(_)) => None,
        (false, None) => None,
        (false, Some(c)) => Some((name(scope), name(c))),
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    /// (path, scope lookup, the names it gives)
    type Case = (&'static str, bool, Option<(&'static str, &'static str)>);

    #[test]
    fn paths_name_a_scope_and_a_collection_with_empty_parts_defaulted() {
        let cases: &[Case] = &[
            ("s.c", false, Some(("s", "c"))),
            (".", false, Some(("_default", "_default"))),
            ("_default._default", false, Some(("_default", "_default"))),
            ("s.", false, Some(("s", "_default"))),
            (".c", false, Some(("_default", "c"))),
            ("s", false, None),
            ("s.c.x", false, None),
            ("s", true, Some(("s", "_default"))),
            ("", true, Some(("_default", "_default"))),
            ("s.", true, Some(("s", "_default"))),
            ("s.c", true, None),
        ];
        for &(path, scope_only, want) in cases {
            assert_eq!(parse(path.as_bytes(), scope_only), want, "{path:?}");
        }
        assert_eq!(parse(b"\xff.c", false), None);
    }
}
