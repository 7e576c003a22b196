//! Bit sets carried by DCP_OPEN, DCP_STREAM_REQ / DCP_ADD_STREAM and SNAPSHOT_MARKER.

macro_rules! bitset {
    ($(#[$doc:meta])* $name:ident { $($(#[$cdoc:meta])* $c:ident = $v:expr,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
        pub struct $name(pub u32);

        impl $name {
            $($(#[$cdoc])* pub const $c: $name = $name($v);)*
            /// Every bit this type names.
            pub const KNOWN: u32 = 0 $(| $v)*;

            pub fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }

            pub fn with(self, other: $name) -> $name {
                $name(self.0 | other.0)
            }

            pub fn without(self, other: $name) -> $name {
                $name(self.0 & !other.0)
            }

            /// Bits set that this type does not name.
            pub fn unknown_bits(self) -> u32 {
                self.0 & !Self::KNOWN
            }
        }
    };
}

bitset! {
    /// DCP_OPEN flags (second extras word).
    OpenFlags {
        /// Set: the server produces (the client consumes). Clear: the server consumes.
        PRODUCER = 0x001,
        /// Obsolete notifier connections; rejected.
        NOTIFIER = 0x002,
        INCLUDE_XATTRS = 0x004,
        NO_VALUE = 0x008,
        INCLUDE_DELETE_TIMES = 0x020,
        NO_VALUE_WITH_UNDERLYING_DATATYPE = 0x040,
        /// Old point-in-time recovery flag; rejected.
        PITR = 0x080,
        INCLUDE_DELETED_USER_XATTRS = 0x100,
        SKIP_DELETES_IN_INITIAL_BACKFILL = 0x200,
    }
}

bitset! {
    /// DCP_STREAM_REQ and DCP_ADD_STREAM flags.
    StreamFlags {
        TAKEOVER = 0x01,
        DISK_ONLY = 0x02,
        TO_LATEST = 0x04,
        /// Removed from the protocol (use the open flag); rejected.
        NO_VALUE = 0x08,
        ACTIVE_VB_ONLY = 0x10,
        STRICT_VB_UUID = 0x20,
        FROM_LATEST = 0x40,
        IGNORE_PURGED_TOMBSTONES = 0x80,
    }
}

bitset! {
    /// SNAPSHOT_MARKER flags.
    SnapshotFlags {
        MEMORY = 0x01,
        DISK = 0x02,
        CHECKPOINT = 0x04,
        ACK = 0x08,
        HISTORY = 0x10,
        MAY_CONTAIN_DUPLICATES = 0x20,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_operations() {
        let f = OpenFlags::PRODUCER.with(OpenFlags::NO_VALUE);
        assert!(f.contains(OpenFlags::PRODUCER));
        assert!(!f.contains(OpenFlags::INCLUDE_XATTRS));
        assert_eq!(f.without(OpenFlags::NO_VALUE), OpenFlags::PRODUCER);
        assert_eq!(OpenFlags(0x8000_0001).unknown_bits(), 0x8000_0000);
        assert_eq!(SnapshotFlags(0x3f).unknown_bits(), 0);
    }
}
