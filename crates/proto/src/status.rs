//! Response status codes (bytes 6..8 of a response header).

macro_rules! statuses {
    ($($name:ident = $val:expr, $desc:expr, [$($attr:expr),*];)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum Status { $($name = $val),* }

        impl Status {
            pub fn from_u16(v: u16) -> Option<Status> {
                match v { $($val => Some(Status::$name),)* _ => None }
            }
            /// Every status, for the error map.
            pub const ALL: &'static [Status] = &[$(Status::$name),*];
            /// Human text for the error map and logs.
            pub fn description(self) -> &'static str {
                match self { $(Status::$name => $desc),* }
            }
            /// Error-map attributes, telling a client how to react.
            pub fn attrs(self) -> &'static [&'static str] {
                match self { $(Status::$name => &[$($attr),*]),* }
            }
        }
    };
}

statuses! {
    Success = 0x00, "Success", ["success"];
    KeyEnoent = 0x01, "Not Found", ["item-only"];
    KeyEexists = 0x02, "key already exists, or CAS mismatch", ["item-only"];
    E2big = 0x03, "Value is too big", ["item-only", "invalid-input"];
    Einval = 0x04, "Invalid packet", ["internal", "invalid-input"];
    NotStored = 0x05, "Not stored", ["item-only"];
    DeltaBadval = 0x06, "Existing document not a number", ["item-only", "invalid-input"];
    NotMyVbucket = 0x07, "Server which received the request is not responsible for the object", ["fetch-config", "invalid-input"];
    NoBucket = 0x08, "Not connected to a bucket", ["conn-state-invalidated"];
    Locked = 0x09, "Requested resource is locked", ["item-locked", "item-only", "retry-now"];
    NotLocked = 0x0e, "The document is not locked", ["item-only"];
    AuthStale = 0x1f, "Reauthenticate", ["conn-state-invalidated", "auth"];
    AuthError = 0x20, "Authentication failed", ["conn-state-invalidated", "auth"];
    AuthContinue = 0x21, "Continue authentication", ["special-handling"];
    Erange = 0x22, "Outside range", ["invalid-input"];
    Rollback = 0x23, "Rollback required", ["dcp"];
    Eaccess = 0x24, "No access", ["conn-state-invalidated", "auth"];
    NotInitialized = 0x25, "The node is still initializing", ["temp", "retry-later"];
    UnknownFrameInfo = 0x80, "Unknown frame info", ["internal", "invalid-input"];
    UnknownCommand = 0x81, "Unknown command", ["internal", "support"];
    Enomem = 0x82, "Out of memory", ["temp", "retry-later"];
    NotSupported = 0x83, "Not supported", ["internal", "support"];
    Einternal = 0x84, "Internal error", ["internal"];
    Ebusy = 0x85, "System is busy", ["temp", "retry-later"];
    Etmpfail = 0x86, "Temporary failure", ["temp", "retry-later"];
    XattrEinval = 0x87, "Invalid xattr section or key", ["item-only", "invalid-input"];
    UnknownCollection = 0x88, "Unknown collection", ["fetch-config", "invalid-input"];
    UnknownScope = 0x8c, "Unknown scope", ["fetch-config", "invalid-input"];
    DcpStreamIdInvalid = 0x8d, "Invalid DCP stream id", ["invalid-input"];
    DurabilityInvalidLevel = 0xa0, "Invalid durability level", ["invalid-input"];
    DurabilityImpossible = 0xa1, "Durability requirement cannot be met", ["item-only"];
    SyncWriteInProgress = 0xa2, "A synchronous write is in progress on the key", ["item-only", "retry-later"];
    SyncWriteAmbiguous = 0xa3, "The outcome of the synchronous write is unknown", ["item-only"];
    SyncWriteReCommitInProgress = 0xa4, "A synchronous write of the key is being re-committed by a new active", ["item-only", "retry-later"];
    SubdocPathEnoent = 0xc0, "Sub-document path does not exist", ["item-only", "subdoc"];
    SubdocPathMismatch = 0xc1, "Sub-document path does not match the document", ["item-only", "subdoc"];
    SubdocPathEinval = 0xc2, "Invalid sub-document path", ["item-only", "subdoc", "invalid-input"];
    SubdocPathE2big = 0xc3, "Sub-document path too long or too deep", ["item-only", "subdoc", "invalid-input"];
    SubdocDocE2deep = 0xc4, "The document is nested too deeply", ["item-only", "subdoc"];
    SubdocValueCantinsert = 0xc5, "The value cannot be inserted at the path", ["item-only", "subdoc", "invalid-input"];
    SubdocDocNotJson = 0xc6, "The document is not JSON", ["item-only", "subdoc"];
    SubdocNumErange = 0xc7, "The number at the path is outside the 64-bit range", ["item-only", "subdoc"];
    SubdocDeltaEinval = 0xc8, "Invalid counter delta", ["item-only", "subdoc", "invalid-input"];
    SubdocPathEexists = 0xc9, "Sub-document path already exists", ["item-only", "subdoc"];
    SubdocValueEtoodeep = 0xca, "The value would nest the document too deeply", ["item-only", "subdoc", "invalid-input"];
    SubdocInvalidCombo = 0xcb, "Invalid combination of sub-document operations", ["subdoc", "invalid-input"];
    SubdocMultiPathFailure = 0xcc, "One or more paths of a multi-path command failed", ["item-only", "subdoc"];
    SubdocSuccessDeleted = 0xcd, "Success on a deleted document", ["success", "subdoc"];
    SubdocXattrInvalidFlagCombo = 0xce, "Invalid xattr flag combination", ["item-only", "subdoc", "invalid-input"];
    SubdocXattrInvalidKeyCombo = 0xcf, "Invalid xattr key combination", ["item-only", "subdoc", "invalid-input"];
    SubdocXattrUnknownMacro = 0xd0, "Unknown xattr macro", ["item-only", "subdoc", "invalid-input"];
    SubdocXattrUnknownVattr = 0xd1, "Unknown virtual xattr", ["item-only", "subdoc", "invalid-input"];
    SubdocXattrCantModifyVattr = 0xd2, "Virtual xattrs cannot be modified", ["item-only", "subdoc", "invalid-input"];
    SubdocMultiPathFailureDeleted = 0xd3, "One or more paths failed on a deleted document", ["item-only", "subdoc"];
    SubdocInvalidXattrOrder = 0xd4, "Xattr paths must come before body paths", ["item-only", "subdoc", "invalid-input"];
    SubdocXattrUnknownVattrMacro = 0xd5, "Unknown virtual xattr macro", ["item-only", "subdoc", "invalid-input"];
    SubdocCanOnlyReviveDeletedDocuments = 0xd6, "Only a deleted document can be revived", ["item-only", "subdoc", "invalid-input"];
    SubdocDeletedDocumentCantHaveValue = 0xd7, "A deleted document cannot have a body", ["item-only", "subdoc", "invalid-input"];
}

impl Status {
    pub fn code(self) -> u16 {
        self as u16
    }
}
