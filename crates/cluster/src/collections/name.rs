//! What a scope or collection name may be (Couchbase's rules): 1 to [`NAME_BYTES_MAX`]
//! bytes of `A-Z a-z 0-9 _ - %`, not starting with `_` or `%`, a prefix Couchbase keeps for
//! system names; `_default` is the one such name, and it is never created, only there.

use crate::collections::error::ManifestError;
use crate::collections::manifest::DEFAULT_NAME;

/// The longest scope or collection name (Couchbase's limit).
pub const NAME_BYTES_MAX: usize = 251;

/// Checks `name` against the rules above. `_default` passes: whether it may be created where
/// it is asked for is the change's decision.
pub fn check_name(name: &str) -> Result<(), ManifestError> {
    let len = name.len();
    if len == 0 || len > NAME_BYTES_MAX {
        return Err(ManifestError::NameLength {
            len,
            max: NAME_BYTES_MAX,
        });
    }
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'%');
    if !name.bytes().all(allowed) {
        return Err(ManifestError::NameChars {
            name: name.to_string(),
        });
    }
    if name != DEFAULT_NAME && (name.starts_with('_') || name.starts_with('%')) {
        return Err(ManifestError::NameStart {
            name: name.to_string(),
        });
    }
    Ok(())
}
