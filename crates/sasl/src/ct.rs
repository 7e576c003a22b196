//! Constant-time comparison.
//!
//! Proofs, signatures and password digests are compared without early exit so that the
//! time taken does not reveal how many leading bytes an attacker guessed right.

/// Returns `true` iff `a == b`, in time that depends only on the lengths.
///
/// Lengths are not secret here (they are digest lengths fixed by the mechanism), so a
/// length mismatch may return early.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // black_box keeps the optimiser from turning the fold back into a short-circuit.
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::ct_eq;

    #[test]
    fn equal_and_unequal() {
        assert!(ct_eq(b"", b""));
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
    }
}
