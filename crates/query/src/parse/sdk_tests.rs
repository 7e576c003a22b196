//! The statements Couchbase SDKs send for their query index managers, exactly as their
//! code builds them (spacing quirks included), must parse.
//!
//! Sources:
//! - couchbase-cxx-client (the core of the Python SDK 4.6.3 installed here; the same
//!   format strings are in its `pycbc_core/_core.so`): `core/operations/management/`
//!   `query_index_get_all.cxx`, `query_index_get_all_deferred.cxx`, `query_index_create.cxx`,
//!   `query_index_drop.cxx`, `query_index_build.cxx`; keyspaces from `core/utils/keyspace.hxx`
//!   (`default:`b`` or `default:`b`.`s`.`c``).
//! - gocb: `queryindexprovider_core.go`.
//! - couchbase-jvm-clients: `core-io/.../manager/CoreQueryIndexManager.java`.

use super::parse;
use crate::ast::{DropIndex, Ident, KeyspaceRef, Namespace, Statement};

fn parses(statements: &[&str]) {
    for s in statements {
        let stmt = parse(s).unwrap_or_else(|e| panic!("{s}\n  -> {e}"));
        // And the canonical rendering is stable.
        let again = parse(&stmt.to_string()).unwrap_or_else(|e| panic!("{stmt}\n  -> {e}"));
        assert_eq!(again, stmt, "{s}");
    }
}

#[test]
fn cxx_client_and_python_sdk() {
    // get_all: bucket, scope, collection and _default collection forms.
    let get_all = |cond: &str| {
        format!("SELECT `idx`.* FROM system:indexes AS idx WHERE {cond} AND `using` = \"gsi\" ORDER BY is_primary DESC, name ASC")
    };
    let deferred = |cond: &str| {
        format!(
            "SELECT RAW name FROM system:indexes WHERE {cond} AND state = \"deferred\" AND `using` = \"gsi\" ORDER BY is_primary DESC, name ASC"
        )
    };
    let default_cond = "(bucket_id IS MISSING AND keyspace_id = $bucket_name)";
    let conds = [
        format!("(bucket_id = $bucket_name OR {default_cond})"),
        format!("((bucket_id = $bucket_name AND scope_id = $scope_name) OR {default_cond})"),
        "((bucket_id = $bucket_name AND scope_id = $scope_name) AND keyspace_id = $collection_name)".to_owned(),
        format!("(((bucket_id = $bucket_name AND scope_id = $scope_name) AND keyspace_id = $collection_name) OR {default_cond})"),
    ];
    for c in &conds {
        parses(&[&get_all(c), &deferred(c)]);
    }
    parses(&[
        // create (empty WHERE and WITH leave double and trailing spaces)
        "CREATE INDEX `idx` ON default:`b`(`f1`, `f2`)  USING GSI ",
        "CREATE INDEX `idx` ON default:`b`.`s`.`c`(`f1`, `nested`.`f`) WHERE `f1` > 1 USING GSI WITH {\"defer_build\":true,\"num_replica\":1}",
        "CREATE INDEX `idx` ON default:`b`.`_default`.`_default`(`f`)  USING GSI WITH {\"defer_build\":false}",
        "CREATE PRIMARY INDEX  ON default:`b` USING GSI ",
        "CREATE PRIMARY INDEX `p` ON default:`b`.`s`.`c` USING GSI WITH {\"defer_build\":true,\"num_replica\":2}",
        // drop
        "DROP PRIMARY INDEX ON default:`b` USING GSI",
        "DROP PRIMARY INDEX ON default:`b`.`s`.`c` USING GSI",
        "DROP INDEX `idx` ON default:`b`.`s`.`c` USING GSI",
        "DROP INDEX `b`.`idx` USING GSI",
        // build
        "BUILD INDEX ON default:`b` (`i1`,`i2`)",
        "BUILD INDEX ON default:`b`.`s`.`c` (`i1`)",
    ]);
    assert_eq!(
        parse("DROP INDEX `b`.`idx` USING GSI").unwrap(),
        Statement::DropIndex(DropIndex {
            name: Ident::new("idx"),
            if_exists: false,
            keyspace: KeyspaceRef::Bucket {
                namespace: None,
                bucket: Ident::new("b")
            },
            using_gsi: true,
        })
    );
    match parse("CREATE PRIMARY INDEX  ON default:`b` USING GSI ").unwrap() {
        Statement::CreatePrimaryIndex(c) => {
            assert_eq!(c.name, None);
            assert_eq!(c.keyspace.namespace(), Some(Namespace::Default));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn gocb() {
    let default_cond = "(bucket_id IS MISSING AND keyspace_id = $bucketName)";
    let get_all = |cond: &str| {
        format!("SELECT `idx`.* FROM system:indexes AS idx WHERE {cond} AND `using` = \"gsi\" ORDER BY is_primary DESC, name ASC")
    };
    parses(&[
        &get_all(&format!("(bucket_id = $bucketName OR {default_cond})")),
        &get_all(&format!("((bucket_id = $bucketName AND scope_id = $scopeName) OR {default_cond})")),
        &get_all(
            "((bucket_id=$bucketName AND scope_id=$scopeName AND keyspace_id=$collectionName) OR (bucket_id IS MISSING and keyspace_id=$bucketName)) ",
        ),
        &get_all("(bucket_id=$bucketName AND scope_id=$scopeName AND keyspace_id=$collectionName)"),
        "SELECT RAW name from system:indexes WHERE (keyspace_id = $bucketName AND bucket_id IS MISSING) AND state = \"deferred\"",
        "SELECT RAW name from system:indexes WHERE bucket_id = $bucketName AND scope_id = $scopeName AND keyspace_id = $collectionName AND state = \"deferred\"",
        "CREATE INDEX `idx` ON `b` (`f1`, `f2`) WITH {\"defer_build\":true,\"num_replica\":1}",
        "CREATE INDEX `idx` ON `b`.`s`.`c` (`f1`)",
        "CREATE PRIMARY INDEX ON `b`",
        "CREATE PRIMARY INDEX `p` ON `b`.`_default`.`_default` WITH {\"defer_build\":true}",
        "DROP PRIMARY INDEX ON `b`",
        "DROP INDEX `b`.`idx`",
        "DROP INDEX `idx` ON `b`.`s`.`c`",
        "BUILD INDEX ON `b`(`i1`, `i2`)",
    ]);
}

#[test]
fn java_sdk() {
    parses(&[
        "SELECT idx.* FROM system:indexes AS idx WHERE ((bucket_id = $bucketName) OR (bucket_id IS MISSING AND keyspace_id = $bucketName)) AND `using` = \"gsi\" ORDER BY is_primary DESC, name ASC",
        "SELECT idx.* FROM system:indexes AS idx WHERE ((((bucket_id = $bucketName) AND scope_id = $scopeName) AND keyspace_id = $collectionName) OR (bucket_id IS MISSING AND keyspace_id = $bucketName)) AND `using` = \"gsi\" ORDER BY is_primary DESC, name ASC",
        "SELECT idx.* FROM system:indexes AS idx WHERE (((bucket_id = $bucketName) AND scope_id = $scopeName) AND keyspace_id = $collectionName) AND `using` = \"gsi\" ORDER BY is_primary DESC, name ASC",
        "CREATE INDEX `idx` ON `b`(fieldA,fieldB) WITH {\"num_replica\":1,\"defer_build\":true}",
        "CREATE INDEX `idx` ON `b`.`s`.`c`(`a`.`b`)",
        "CREATE PRIMARY INDEX ON `b`",
        "CREATE PRIMARY INDEX `p` ON `b`.`s`.`c` WITH {\"defer_build\":true}",
        "DROP PRIMARY INDEX ON `b`",
        "DROP INDEX `b`.`idx`",
        "DROP INDEX `idx` ON `b`.`s`.`c`",
        "BUILD INDEX ON `b` (`i1`,`i2`)",
    ]);
}
