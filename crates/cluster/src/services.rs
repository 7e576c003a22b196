//! The services a node runs: the data service (`kv`, Couchbase's "data"), the index service
//! and the query service. Couchbase lets each node run any non-empty set of them
//! (`couchbase-cli server-add --services data,index,query`); so does Sluice, and every
//! node runs all three unless told otherwise.
//!
//! What the set decides, everywhere else:
//! - only `kv` nodes are given vbuckets (the map's chains name no other node) and appear in
//!   the bucket map's `serverList`;
//! - only `index` nodes are given index copies (`metadata::index_placement`);
//! - only `query` nodes answer `/query/service` and are listed as `n1ql` in `nodesExt`,
//!   which is where the SDKs send queries.
//!
//! Fixed for a node's life, as in Couchbase: a node that restarts asking for another set is
//! refused (`Rejection::ServicesChanged`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// One service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Service {
    /// The data service: vbuckets, the memcached-binary port, DCP.
    Kv,
    /// Index copies fed by DCP.
    Index,
    /// SQL++ over `/query/service`.
    Query,
}

impl Service {
    pub const ALL: [Service; 3] = [Service::Kv, Service::Index, Service::Query];

    /// Sluice's name, as `--services` takes it and the metadata stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            Service::Kv => "kv",
            Service::Index => "index",
            Service::Query => "query",
        }
    }

    /// Sluice's name, or Couchbase's (`data`, `n1ql`) for the same service.
    pub fn parse(word: &str) -> Option<Service> {
        match word {
            "kv" | "data" => Some(Service::Kv),
            "index" => Some(Service::Index),
            "query" | "n1ql" => Some(Service::Query),
            _ => None,
        }
    }

    /// The name Couchbase's REST uses in `/pools/default`'s `services` (`kv`, `index`, `n1ql`).
    pub fn rest_name(self) -> &'static str {
        match self {
            Service::Kv => "kv",
            Service::Index => "index",
            Service::Query => "n1ql",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Service::Kv => 1,
            Service::Index => 2,
            Service::Query => 4,
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A non-empty set of services. Serialized as the list of their names, in the order of
/// [`Service::ALL`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Services(u8);

/// A `--services` list that names no set of services.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServicesError {
    #[error("no service named: a node runs at least one of kv, index, query")]
    Empty,
    #[error("unknown service {0:?}: the services are kv (or data), index and query (or n1ql)")]
    Unknown(String),
    #[error("{0} is named twice")]
    Twice(Service),
}

impl Services {
    /// Every service: what a node runs unless told otherwise.
    pub const ALL: Services = Services(0b111);

    /// The set of `services`, or why it is none (empty, or a service named twice).
    pub fn of(services: &[Service]) -> Result<Services, ServicesError> {
        let mut bits = 0u8;
        for s in services {
            if bits & s.bit() != 0 {
                return Err(ServicesError::Twice(*s));
            }
            bits |= s.bit();
        }
        match bits {
            0 => Err(ServicesError::Empty),
            b => Ok(Services(b)),
        }
    }

    /// A comma-separated list (`kv,index,query`; Couchbase's `data` and `n1ql` too).
    pub fn parse(list: &str) -> Result<Services, ServicesError> {
        let named = list
            .split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .map(|w| Service::parse(w).ok_or_else(|| ServicesError::Unknown(w.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        Services::of(&named)
    }

    pub fn has(self, service: Service) -> bool {
        self.0 & service.bit() != 0
    }

    pub fn is_all(&self) -> bool {
        *self == Services::ALL
    }

    /// The services in the set, in the order of [`Service::ALL`].
    pub fn iter(self) -> impl Iterator<Item = Service> {
        Service::ALL.into_iter().filter(move |s| self.has(*s))
    }
}

impl Default for Services {
    fn default() -> Services {
        Services::ALL
    }
}

impl fmt::Display for Services {
    /// `kv,index,query`: what `parse` reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(Service::as_str).collect();
        f.write_str(&names.join(","))
    }
}

impl fmt::Debug for Services {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Services({self})")
    }
}

impl Serialize for Services {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter().map(Service::as_str))
    }
}

impl<'de> Deserialize<'de> for Services {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Services, D::Error> {
        let names = Vec::<String>::deserialize(d)?;
        let services = names
            .iter()
            .map(|n| Service::parse(n).ok_or_else(|| ServicesError::Unknown(n.clone())))
            .collect::<Result<Vec<_>, _>>()
            .map_err(serde::de::Error::custom)?;
        Services::of(&services).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_in_either_vocabulary() {
        assert_eq!(Services::parse("kv,index,query"), Ok(Services::ALL));
        assert_eq!(Services::parse("query, data ,index"), Ok(Services::ALL));
        let kv = Services::parse("data").unwrap();
        assert!(kv.has(Service::Kv) && !kv.has(Service::Index) && !kv.has(Service::Query));
        let iq = Services::parse("n1ql,index").unwrap();
        assert_eq!(iq.to_string(), "index,query");
        assert_eq!(Services::parse(&iq.to_string()), Ok(iq));
    }

    #[test]
    fn bad_lists_say_what_is_wrong() {
        assert_eq!(Services::parse(""), Err(ServicesError::Empty));
        assert_eq!(Services::parse(" , "), Err(ServicesError::Empty));
        assert_eq!(
            Services::parse("kv,fts"),
            Err(ServicesError::Unknown("fts".into()))
        );
        assert_eq!(
            Services::parse("kv,data"),
            Err(ServicesError::Twice(Service::Kv))
        );
        assert!(Services::parse("kv,fts")
            .unwrap_err()
            .to_string()
            .contains("kv (or data), index and query"));
    }

    #[test]
    fn serialized_as_names() {
        let s = Services::parse("index,kv").unwrap();
        assert_eq!(serde_json::to_string(&s).unwrap(), r#"["kv","index"]"#);
        assert_eq!(
            serde_json::from_str::<Services>(r#"["kv","index"]"#).unwrap(),
            s
        );
        assert!(serde_json::from_str::<Services>("[]").is_err());
        assert!(serde_json::from_str::<Services>(r#"["kv","kv"]"#).is_err());
        assert!(serde_json::from_str::<Services>(r#"["eventing"]"#).is_err());
    }
}
