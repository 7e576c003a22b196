//! The names of the identities that are not users.

/// The user name a node authenticates as to its peers: on their admin ports (HTTP Basic) and
/// on their KV ports (SCRAM), with the cluster's secret as its password. Only this identity
/// may drive Raft, rebalance internals, takeover streams and seqno acks. User names that
/// begin with `@` are reserved for such identities, as Couchbase reserves them.
pub const CLUSTER_USER: &str = "@cluster";

/// Whether `name` is reserved (not a name a user may have).
pub fn is_reserved_user(name: &str) -> bool {
    name.starts_with('@')
}
