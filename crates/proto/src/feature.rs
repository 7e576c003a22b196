//! HELLO features.

macro_rules! features {
    ($($name:ident = $val:expr),* $(,)?) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum Feature { $($name = $val),* }
        impl Feature {
            pub fn from_u16(v: u16) -> Option<Feature> {
                match v { $($val => Some(Feature::$name),)* _ => None }
            }
        }
    };
}

features! {
    TcpNodelay = 0x03, MutationSeqno = 0x04, Xattr = 0x06, Xerror = 0x07, SelectBucket = 0x08,
    Snappy = 0x0a, Json = 0x0b, Duplex = 0x0c, ClustermapChangeNotification = 0x0d,
    UnorderedExecution = 0x0e, Tracing = 0x0f, AltRequestSupport = 0x10, SyncReplication = 0x11,
    Collections = 0x12, SnappyEverywhere = 0x13, PreserveTtl = 0x14, CreateAsDeleted = 0x17,
    ReplaceBodyWithXattr = 0x19, SubdocReplicaRead = 0x1c,
    GetClusterConfigWithKnownVersion = 0x1d, DedupeNotMyVbucketClustermap = 0x1e,
    ClustermapChangeNotificationBrief = 0x1f,
}

impl Feature {
    pub fn code(self) -> u16 {
        self as u16
    }
}

/// The features a session has negotiated, as a bit set over the u16 codes below 64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeatureSet(u64);

impl FeatureSet {
    pub fn insert(&mut self, f: Feature) {
        self.0 |= 1 << (f.code() & 63);
    }
    pub fn contains(self, f: Feature) -> bool {
        self.0 & (1 << (f.code() & 63)) != 0
    }
}
