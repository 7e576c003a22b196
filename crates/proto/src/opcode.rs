//! Opcodes this server knows, with their wire values.

macro_rules! opcodes {
    ($($name:ident = $val:expr),* $(,)?) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Opcode { $($name = $val),* }

        impl Opcode {
            pub fn from_byte(b: u8) -> Option<Opcode> {
                match b { $($val => Some(Opcode::$name),)* _ => None }
            }
        }
    };
}

opcodes! {
    Get = 0x00, Set = 0x01, Add = 0x02, Replace = 0x03, Delete = 0x04,
    Increment = 0x05, Decrement = 0x06, Quit = 0x07, Flush = 0x08, GetQ = 0x09,
    Noop = 0x0a, Version = 0x0b, GetK = 0x0c, GetKQ = 0x0d, Append = 0x0e, Prepend = 0x0f,
    Stat = 0x10, SetQ = 0x11, AddQ = 0x12, ReplaceQ = 0x13, DeleteQ = 0x14,
    IncrementQ = 0x15, DecrementQ = 0x16, QuitQ = 0x17, FlushQ = 0x18, AppendQ = 0x19,
    PrependQ = 0x1a, Verbosity = 0x1b, Touch = 0x1c, Gat = 0x1d, GatQ = 0x1e, Hello = 0x1f,
    SaslListMechs = 0x20, SaslAuth = 0x21, SaslStep = 0x22,
    SetVbucket = 0x3d, GetVbucket = 0x3e, DelVbucket = 0x3f, GetAllVbSeqnos = 0x48,
    DcpOpen = 0x50, DcpAddStream = 0x51, DcpCloseStream = 0x52, DcpStreamReq = 0x53,
    DcpGetFailoverLog = 0x54, DcpStreamEnd = 0x55, DcpSnapshotMarker = 0x56,
    DcpMutation = 0x57, DcpDeletion = 0x58, DcpExpiration = 0x59,
    DcpSetVbucketState = 0x5b, DcpNoop = 0x5c, DcpBufferAck = 0x5d, DcpControl = 0x5e,
    DcpSystemEvent = 0x5f, DcpPrepare = 0x60, DcpSeqnoAcknowledged = 0x61, DcpCommit = 0x62,
    DcpAbort = 0x63, DcpSeqnoAdvanced = 0x64, DcpOsoSnapshot = 0x65,
    GetReplica = 0x83, ListBuckets = 0x87, SelectBucket = 0x89, ObserveSeqno = 0x91,
    Observe = 0x92, GetLocked = 0x94, UnlockKey = 0x95, GetFailoverLog = 0x96,
    GetMeta = 0xa0, GetqMeta = 0xa1, SetWithMeta = 0xa2, SetqWithMeta = 0xa3,
    AddWithMeta = 0xa4, AddqWithMeta = 0xa5, DelWithMeta = 0xa8, DelqWithMeta = 0xa9,
    GetClusterConfig = 0xb5, GetRandomKey = 0xb6, SeqnoPersistence = 0xb7,
    CollectionsGetManifest = 0xba, CollectionsGetId = 0xbb, CollectionsGetScopeId = 0xbc,
    SubdocGet = 0xc5, SubdocExists = 0xc6, SubdocDictAdd = 0xc7, SubdocDictUpsert = 0xc8,
    SubdocDelete = 0xc9, SubdocReplace = 0xca, SubdocArrayPushLast = 0xcb,
    SubdocArrayPushFirst = 0xcc, SubdocArrayInsert = 0xcd, SubdocArrayAddUnique = 0xce,
    SubdocCounter = 0xcf, SubdocMultiLookup = 0xd0, SubdocMultiMutation = 0xd1,
    SubdocGetCount = 0xd2, SubdocReplaceBodyWithXattr = 0xd3,
    GetErrorMap = 0xfe,
}

impl Opcode {
    pub fn byte(self) -> u8 {
        self as u8
    }

    /// Quiet variants suppress the uninteresting reply (a miss for gets, success otherwise).
    pub fn is_quiet(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            GetQ | GetKQ
                | SetQ
                | AddQ
                | ReplaceQ
                | DeleteQ
                | IncrementQ
                | DecrementQ
                | QuitQ
                | FlushQ
                | AppendQ
                | PrependQ
                | GatQ
                | GetqMeta
                | SetqWithMeta
                | AddqWithMeta
                | DelqWithMeta
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_roundtrips_or_is_unknown() {
        for b in 0..=255u8 {
            if let Some(op) = Opcode::from_byte(b) {
                assert_eq!(op.byte(), b);
            }
        }
        assert_eq!(Opcode::from_byte(0x0a), Some(Opcode::Noop));
        assert_eq!(Opcode::from_byte(0xee), None);
    }
}
