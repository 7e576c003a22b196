//! What a session's roles let it do with the bucket it selected: each command needs one
//! privilege (`needs`), checked before it runs; a refusal answers EACCESS (0x24).
//!
//! | commands | need |
//! |---|---|
//! | GET, GET_REPLICA | read |
//! | GET_META | read, or write with meta |
//! | SET / ADD / DEL_WITH_META | write with meta (`replication_target`, as XDCR's target user) |
//! | SET, ADD, REPLACE, DELETE, APPEND, PREPEND, TOUCH | write |
//! | GAT, INCR, DECR (they write and answer the value) | read and write |
//! | FLUSH | manage the bucket |
//! | vbucket queries (seqnos, observe, failover log) | any role on the bucket |
//! | DCP_OPEN | the change stream |
//!
//! Roles are read when the session logs in and when it selects the bucket; a change of a
//! user's roles applies to its new connections (and to a new SELECT_BUCKET).

use crate::session::Session;
use sluice_cluster::rbac::{allows, Privilege, Role};
use sluice_proto::request::{Command, DcpCommand, KvCommand};

/// What a session may do with its bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketAccess {
    pub read: bool,
    pub write: bool,
    pub dcp: bool,
    /// `*_WITH_META` writes (versions made elsewhere, with their own CAS and revision).
    pub meta_write: bool,
    pub manage: bool,
    /// Any role on the bucket: enough to select it.
    pub any: bool,
}

impl BucketAccess {
    /// Everything (the cluster identity, the memcached port).
    pub const ALL: BucketAccess = BucketAccess {
        read: true,
        write: true,
        dcp: true,
        meta_write: true,
        manage: true,
        any: true,
    };

    /// What `roles` allow on `bucket`.
    pub fn of(roles: &[Role], bucket: &str) -> BucketAccess {
        BucketAccess {
            read: allows(roles, Privilege::Read(bucket)),
            write: allows(roles, Privilege::Write(bucket)),
            dcp: allows(roles, Privilege::Dcp(bucket)),
            meta_write: allows(roles, Privilege::MetaWrite(bucket)),
            manage: allows(roles, Privilege::ManageBucket(bucket)),
            any: allows(roles, Privilege::AnyOfBucket(bucket)),
        }
    }
}

/// Why `command` is refused to `session`, if it is.
pub fn refused(session: &Session, command: &Command<'_>) -> Option<&'static str> {
    let a = session.access;
    let (ok, why) = match command {
        Command::Kv(kv) => match kv {
            KvCommand::GetMeta { .. } => (
                a.read || a.meta_write,
                "reading metadata needs data_reader or replication_target",
            ),
            KvCommand::WithMeta { .. } => (
                a.meta_write,
                "writing versions with their metadata needs replication_target",
            ),
            KvCommand::Get { .. }
            | KvCommand::GetReplica { .. }
            | KvCommand::GetLocked { .. }
            | KvCommand::Unlock { .. }
            | KvCommand::GetRandom { .. }
            | KvCommand::Observe { .. } => (a.read, "reading documents needs data_reader"),
            KvCommand::CollectionsManifest | KvCommand::CollectionsGetId { .. } => {
                (a.any, "no role on this bucket")
            }
            KvCommand::GetAndTouch { .. } | KvCommand::Arithmetic { .. } => (
                a.read && a.write,
                "this command reads and writes: it needs data_reader and data_writer",
            ),
            KvCommand::Touch { .. }
            | KvCommand::Store { .. }
            | KvCommand::Delete { .. }
            | KvCommand::Concat { .. } => (a.write, "writing documents needs data_writer"),
            KvCommand::Flush { .. } => (a.manage, "flushing needs bucket_admin"),
            KvCommand::Subdoc(s) if s.is_mutation() => {
                (a.write, "writing documents needs data_writer")
            }
            KvCommand::Subdoc(_) => (a.read, "reading documents needs data_reader"),
        },
        Command::Vbucket(_) => (a.any, "no role on this bucket"),
        Command::Dcp(DcpCommand::Open { .. }) => (a.dcp, "DCP needs data_dcp_reader"),
        Command::Dcp(_) | Command::Session(_) => (true, ""),
    };
    (!ok).then_some(why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_cluster::rbac::parse_roles;

    #[test]
    fn roles_give_the_access_their_names_say() {
        let of = |roles: &str| BucketAccess::of(&parse_roles(roles).unwrap(), "default");
        let reader = of("data_reader[default]");
        assert!(reader.read && !reader.write && !reader.dcp && reader.any);
        let writer = of("data_writer[default]");
        assert!(!writer.read && writer.write && writer.any);
        let dcp = of("data_dcp_reader[default]");
        assert!(dcp.read && dcp.dcp && !dcp.write);
        let target = of("replication_target[default]");
        assert!(target.meta_write && !target.write && !target.read && target.any);
        assert!(!writer.meta_write);
        assert_eq!(of("admin"), BucketAccess::ALL);
        assert_eq!(of("data_reader[other]"), BucketAccess::default());
        assert_eq!(of("ro_admin"), BucketAccess::default());
    }
}
