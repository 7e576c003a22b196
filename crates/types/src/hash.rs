//! Key → vbucket, exactly as every Couchbase SDK computes it.

use crate::VbId;

/// `((crc32(key) >> 16) & 0x7fff) % num_vbuckets`, with zlib's CRC-32.
///
/// `num_vbuckets` must be non-zero; the server refuses to start with zero vbuckets.
pub fn vbucket_of(key: &[u8], num_vbuckets: u16) -> VbId {
    assert!(num_vbuckets > 0, "a bucket has at least one vbucket");
    let crc = crc32fast::hash(key);
    VbId((((crc >> 16) & 0x7fff) % u32::from(num_vbuckets)) as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_known_sdk_values() {
        // crc32("hello") = 0x3610a686 → (0x3610 & 0x7fff) = 0x3610 = 13840; 13840 % 1024 = 528.
        assert_eq!(vbucket_of(b"hello", 1024), VbId(528));
        assert_eq!(vbucket_of(b"hello", 64), VbId(13840 % 64));
        // The empty key hashes to crc 0 → vbucket 0.
        assert_eq!(vbucket_of(b"", 1024), VbId(0));
    }
}
