//! Roles and what they allow, in Couchbase's names and meanings where they exist. Pure: the
//! server asks `allows(roles, privilege)` on each request it guards.
//!
//! | role | allows |
//! |---|---|
//! | `admin` | everything |
//! | `cluster_admin` | everything but managing users |
//! | `bucket_admin[b]` | bucket b's settings and flush, its stats; not its documents |
//! | `data_reader[b]` | reading b's documents |
//! | `data_writer[b]` | writing b's documents (not reading them) |
//! | `data_dcp_reader[b]` | b's change stream (DCP), and reading b's documents |
//! | `replication_target[b]` | writing versions made elsewhere into b (`*_WITH_META`, as XDCR does), and reading their metadata |
//! | `replication_admin` | cross-cluster replication settings; reading the cluster's state |
//! | `ro_admin` | reading the cluster's state and stats, changing nothing |
//! | `stats_reader` | `/metrics` and stats |
//!
//! `[*]` names every bucket. A role that names a bucket is written `name[bucket]`, a list of
//! roles comma-separated, as Couchbase's REST API takes them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Which buckets a role covers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Buckets {
    All,
    One(String),
}

impl Buckets {
    fn covers(&self, bucket: &str) -> bool {
        match self {
            Buckets::All => true,
            Buckets::One(b) => b == bucket,
        }
    }
}

/// A role a user holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Role {
    Admin,
    ClusterAdmin,
    BucketAdmin(Buckets),
    DataReader(Buckets),
    DataWriter(Buckets),
    DataDcpReader(Buckets),
    ReplicationTarget(Buckets),
    ReplicationAdmin,
    RoAdmin,
    StatsReader,
}

/// Something a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Privilege<'a> {
    /// Read a bucket's documents.
    Read(&'a str),
    /// Write a bucket's documents.
    Write(&'a str),
    /// Open a change stream of a bucket.
    Dcp(&'a str),
    /// Store versions made elsewhere, with their own CAS and revision (`*_WITH_META`).
    MetaWrite(&'a str),
    /// Manage a bucket (settings, flush).
    ManageBucket(&'a str),
    /// Any access to a bucket: enough to select it and ask about its vbuckets.
    AnyOfBucket(&'a str),
    /// Read the cluster's state (its nodes, map, rebalance progress).
    ClusterRead,
    /// Change the cluster (place, fail over, rebalance, admit nodes).
    ClusterWrite,
    /// Read stats and `/metrics`.
    Stats,
    /// Manage cross-cluster replication.
    Replication,
    /// Manage users.
    Security,
}

/// A role list that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleError {
    #[error("unknown role {0:?}")]
    Unknown(String),
    #[error("role {0} takes a bucket: {0}[BUCKET] or {0}[*]")]
    NeedsBucket(String),
    #[error("role {0} takes no bucket")]
    TakesNoBucket(String),
    #[error("{0:?} is not a role: NAME or NAME[BUCKET]")]
    Malformed(String),
    #[error("no role given")]
    Empty,
}

impl Role {
    fn allows(&self, p: Privilege<'_>) -> bool {
        use Privilege as P;
        match self {
            Role::Admin => true,
            Role::ClusterAdmin => !matches!(p, P::Security),
            Role::BucketAdmin(b) => match p {
                P::ManageBucket(x) | P::AnyOfBucket(x) => b.covers(x),
                P::Stats => true,
                _ => false,
            },
            Role::DataReader(b) => match p {
                P::Read(x) | P::AnyOfBucket(x) => b.covers(x),
                _ => false,
            },
            Role::DataWriter(b) => match p {
                P::Write(x) | P::AnyOfBucket(x) => b.covers(x),
                _ => false,
            },
            Role::DataDcpReader(b) => match p {
                P::Dcp(x) | P::Read(x) | P::AnyOfBucket(x) => b.covers(x),
                _ => false,
            },
            Role::ReplicationTarget(b) => match p {
                P::MetaWrite(x) | P::AnyOfBucket(x) => b.covers(x),
                _ => false,
            },
            Role::ReplicationAdmin => matches!(p, P::Replication | P::ClusterRead),
            Role::RoAdmin => matches!(p, P::ClusterRead | P::Stats),
            Role::StatsReader => matches!(p, P::Stats),
        }
    }

    /// The role's name without its bucket (`data_reader`).
    pub fn name(&self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::ClusterAdmin => "cluster_admin",
            Role::BucketAdmin(_) => "bucket_admin",
            Role::DataReader(_) => "data_reader",
            Role::DataWriter(_) => "data_writer",
            Role::DataDcpReader(_) => "data_dcp_reader",
            Role::ReplicationTarget(_) => "replication_target",
            Role::ReplicationAdmin => "replication_admin",
            Role::RoAdmin => "ro_admin",
            Role::StatsReader => "stats_reader",
        }
    }

    /// The bucket the role names, if it takes one (`*`: every bucket).
    pub fn bucket(&self) -> Option<&str> {
        match self {
            Role::BucketAdmin(b)
            | Role::DataReader(b)
            | Role::DataWriter(b)
            | Role::DataDcpReader(b)
            | Role::ReplicationTarget(b) => Some(match b {
                Buckets::All => "*",
                Buckets::One(name) => name,
            }),
            _ => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.bucket() {
            Some(b) => write!(f, "{}[{b}]", self.name()),
            None => f.write_str(self.name()),
        }
    }
}

impl std::str::FromStr for Role {
    type Err = RoleError;

    fn from_str(text: &str) -> Result<Role, RoleError> {
        let text = text.trim();
        let (name, bucket) = match text.split_once('[') {
            None => (text, None),
            Some((name, rest)) => {
                let b = rest
                    .strip_suffix(']')
                    .filter(|b| !b.is_empty() && !b.contains(['[', ']']))
                    .ok_or_else(|| RoleError::Malformed(text.to_string()))?;
                (name, Some(b))
            }
        };
        let scope = || match bucket {
            Some("*") => Ok(Buckets::All),
            Some(b) => Ok(Buckets::One(b.to_string())),
            None => Err(RoleError::NeedsBucket(name.to_string())),
        };
        let plain = |role: Role| match bucket {
            None => Ok(role),
            Some(_) => Err(RoleError::TakesNoBucket(name.to_string())),
        };
        match name {
            "admin" => plain(Role::Admin),
            "cluster_admin" => plain(Role::ClusterAdmin),
            "replication_admin" => plain(Role::ReplicationAdmin),
            "ro_admin" => plain(Role::RoAdmin),
            "stats_reader" => plain(Role::StatsReader),
            "bucket_admin" => Ok(Role::BucketAdmin(scope()?)),
            "data_reader" => Ok(Role::DataReader(scope()?)),
            "data_writer" => Ok(Role::DataWriter(scope()?)),
            "data_dcp_reader" => Ok(Role::DataDcpReader(scope()?)),
            "replication_target" => Ok(Role::ReplicationTarget(scope()?)),
            _ => Err(RoleError::Unknown(name.to_string())),
        }
    }
}

/// Parses a comma-separated role list (`data_reader[default],ro_admin`), sorted and without
/// repeats.
pub fn parse_roles(text: &str) -> Result<Vec<Role>, RoleError> {
    let mut roles = text
        .split(',')
        .filter(|r| !r.trim().is_empty())
        .map(str::parse)
        .collect::<Result<Vec<Role>, _>>()?;
    if roles.is_empty() {
        return Err(RoleError::Empty);
    }
    roles.sort();
    roles.dedup();
    Ok(roles)
}

/// Whether any of `roles` allows `p`.
pub fn allows(roles: &[Role], p: Privilege<'_>) -> bool {
    roles.iter().any(|r| r.allows(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Privilege as P;

    #[test]
    fn roles_parse_and_print_as_couchbase_writes_them() {
        let roles = parse_roles("ro_admin, data_reader[default],data_writer[*],ro_admin").unwrap();
        let text: Vec<String> = roles.iter().map(Role::to_string).collect();
        assert_eq!(text, ["data_reader[default]", "data_writer[*]", "ro_admin"]);
        for (bad, err) in [
            ("", RoleError::Empty),
            ("reader", RoleError::Unknown("reader".into())),
            ("data_reader", RoleError::NeedsBucket("data_reader".into())),
            ("admin[default]", RoleError::TakesNoBucket("admin".into())),
            (
                "data_reader[default",
                RoleError::Malformed("data_reader[default".into()),
            ),
            (
                "data_reader[]",
                RoleError::Malformed("data_reader[]".into()),
            ),
        ] {
            assert_eq!(parse_roles(bad), Err(err), "{bad:?}");
        }
    }

    #[test]
    fn each_role_allows_what_its_row_says() {
        let b = "default";
        let all = [
            P::Read(b),
            P::Write(b),
            P::Dcp(b),
            P::MetaWrite(b),
            P::ManageBucket(b),
            P::AnyOfBucket(b),
            P::ClusterRead,
            P::ClusterWrite,
            P::Stats,
            P::Replication,
            P::Security,
        ];
        // One row per role: which of `all` it allows, in that order.
        let table = [
            ("admin", "RWDXMA CcSRs"),
            ("cluster_admin", "RWDXMA CcSR-"),
            ("bucket_admin[default]", "----MA --S--"),
            ("data_reader[default]", "R----A -----"),
            ("data_writer[default]", "-W---A -----"),
            ("data_dcp_reader[default]", "R-D--A -----"),
            ("replication_target[default]", "---X-A -----"),
            ("replication_admin", "------ C--R-"),
            ("ro_admin", "------ C-S--"),
            ("stats_reader", "------ --S--"),
            ("data_reader[other]", "------ -----"),
            ("data_reader[*]", "R----A -----"),
        ];
        for (role, row) in table {
            let roles = parse_roles(role).unwrap();
            let got: String = all
                .iter()
                .zip(row.chars().filter(|c| *c != ' '))
                .map(|(p, want)| match (allows(&roles, *p), want) {
                    (true, '-') => panic!("{role} allows {p:?}"),
                    (false, c) if c != '-' => panic!("{role} does not allow {p:?}"),
                    _ => want,
                })
                .collect();
            assert_eq!(got.len(), all.len(), "{role}");
        }
    }
}
