//! The hash table's key: short keys stored inside the table's slot, longer ones on the heap.
//!
//! A lookup that must follow a pointer to compare the key pays a cache miss on top of the
//! slot's own; most document keys are short (memaslap's are 32 bytes, the SDKs' usually
//! under 40), so keeping them in the slot saves that miss and the key's allocation.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// Keys up to this many bytes live in the slot. With the length byte and the variant tag the
/// key takes 40 bytes, against 16 for a boxed key plus the key's own allocation.
pub const INLINE_KEY_BYTES: usize = 38;

#[derive(Clone)]
pub enum TableKey {
    Inline {
        len: u8,
        bytes: [u8; INLINE_KEY_BYTES],
    },
    Heap(Box<[u8]>),
}

impl TableKey {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            TableKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            TableKey::Heap(b) => b,
        }
    }
}

impl From<&[u8]> for TableKey {
    fn from(key: &[u8]) -> TableKey {
        if key.len() <= INLINE_KEY_BYTES {
            let mut bytes = [0u8; INLINE_KEY_BYTES];
            bytes[..key.len()].copy_from_slice(key);
            TableKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            TableKey::Heap(key.into())
        }
    }
}

// Hash, Eq and Borrow all go through the bytes, so a `&[u8]` finds its `TableKey` whichever
// way the key is stored (the contract `Borrow` asks for).
impl Hash for TableKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl PartialEq for TableKey {
    fn eq(&self, other: &TableKey) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for TableKey {}

impl Borrow<[u8]> for TableKey {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::fmt::Debug for TableKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;

    fn hash_of<T: Hash + ?Sized>(t: &T) -> u64 {
        let mut h = DefaultHasher::new();
        t.hash(&mut h);
        h.finish()
    }

    #[test]
    fn short_keys_stay_inline_long_ones_go_to_the_heap_and_both_read_back() {
        let short = [7u8; INLINE_KEY_BYTES];
        let long = vec![9u8; INLINE_KEY_BYTES + 1];
        let empty: &[u8] = b"";
        for key in [&short[..], &long[..], empty, b"k"] {
            let k = TableKey::from(key);
            assert_eq!(k.as_slice(), key);
            assert_eq!(hash_of(&k), hash_of(key), "hashes like the bytes");
            let inline = matches!(k, TableKey::Inline { .. });
            assert_eq!(inline, key.len() <= INLINE_KEY_BYTES);
        }
        // A key of the same bytes is equal however it was built; a prefix is not.
        assert_eq!(
            TableKey::from(&long[..]),
            TableKey::Heap(long.clone().into())
        );
        assert_ne!(TableKey::from(&short[..5]), TableKey::from(&short[..6]));
        assert_eq!(std::mem::size_of::<TableKey>(), 40);
    }

    #[test]
    fn a_map_keyed_by_table_keys_is_found_by_byte_slices() {
        let mut m: hashbrown::HashMap<TableKey, u32> = hashbrown::HashMap::new();
        let long = [b'x'; 200];
        m.insert(TableKey::from(&b"short"[..]), 1);
        m.insert(TableKey::from(&long[..]), 2);
        assert_eq!(m.get(&b"short"[..]), Some(&1));
        assert_eq!(m.get(&long[..]), Some(&2));
        assert_eq!(m.get(&b"shor"[..]), None);
    }
}
