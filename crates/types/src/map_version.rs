use std::fmt;

/// A cluster map's place in history: `(revEpoch, rev)`, ordered lexicographically (epoch
/// first). Clients send it with GET_CLUSTER_CONFIG and read it from every map; a client only
/// ever replaces its map with a strictly newer one, and a server skips sending a map the client
/// already holds. Signed, as on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MapVersion {
    /// `revEpoch`; 0 when a server sends none (servers before epochs).
    pub epoch: i64,
    pub rev: i64,
}

impl fmt::Display for MapVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.epoch, self.rev)
    }
}
