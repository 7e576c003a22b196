//! The data set, the same for both systems: document `i` of `n` is a function of the seed and
//! `i` alone (no state, no order), so the loaders, the query clients (which pick existing
//! emails and `k`s at random) and the writers all agree on it without sharing anything.
//!
//! Fields: `email` (unique: it holds `i`), `k` (unique integer: a permutation of `0..n`, so
//! that `k` order is not the load order, which would favour PostgreSQL's heap), `city` (one
//! of [`CITIES`]), `age`, `rev` (bumped by the update writer) and `pad`, filling the
//! document to [`DOC_BYTES`].

use std::fmt::Write;

/// Every generated document is this long (its JSON text).
pub const DOC_BYTES: usize = 1024;
/// Distinct `city` values.
pub const CITIES: u64 = 1000;

/// The documents of one data set.
#[derive(Debug, Clone, Copy)]
pub struct DocSet {
    seed: u64,
    /// Base documents: `0..n`.
    n: u64,
    /// `k = i * mult mod n`: a bijection of `0..n` because `mult` is coprime with `n`.
    mult: u64,
}

/// What varies between two versions of a document (the writers' updates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Revision(pub u64);

impl DocSet {
    pub fn new(seed: u64, n: u64) -> DocSet {
        assert!(n > 0, "a data set has documents");
        DocSet {
            seed,
            n,
            mult: coprime_multiplier(n),
        }
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    /// Base document `i`'s key (the same id in both systems).
    pub fn key(&self, i: u64) -> String {
        format!("u{i:08}")
    }

    pub fn email(&self, i: u64) -> String {
        let h = self.hash(i, 1);
        format!(
            "user{i}.{:06x}@example{}.com",
            h & 0xff_ffff,
            (h >> 24) % 97
        )
    }

    pub fn k(&self, i: u64) -> i64 {
        // n ≤ u64, mult < n: the product fits in u128 and the result in i64 for any data
        // set that fits in memory.
        let k = (u128::from(i) * u128::from(self.mult) % u128::from(self.n)) as u64;
        i64::try_from(k).expect("k < n fits an i64")
    }

    /// Base document `i` at revision `rev` (the load writes revision 0).
    pub fn doc(&self, i: u64, rev: Revision) -> String {
        let h = self.hash(i, 2);
        let city = h % CITIES;
        let age = 18 + (h >> 16) % 70;
        fields_doc(&self.email(i), self.k(i), city, age, rev.0, h)
    }

    /// A document of the freshness writers: key `w{slot}`, whose `email` is new at every
    /// `seq` (so each write moves its index entry) and whose `k` is negative (below every
    /// range the range queries scan).
    pub fn churn(&self, slot: u64, seq: u64) -> (String, String) {
        let h = self.hash(slot, 3);
        let email = churn_email(slot, seq);
        let k = -1 - i64::try_from(slot).unwrap_or(i64::MAX - 1);
        (
            format!("w{slot:08}"),
            fields_doc(&email, k, h % CITIES, 18 + (h >> 16) % 70, seq, h),
        )
    }

    /// A random existing base document's index.
    pub fn pick(&self, r: u64) -> u64 {
        r % self.n
    }

    /// A `k` whose range of 100 is full: `k >= lo` then has at least `rows` base documents.
    pub fn range_start(&self, r: u64, rows: u64) -> i64 {
        let span = self.n.saturating_sub(rows).max(1);
        i64::try_from(r % span).expect("k < n fits an i64")
    }

    fn hash(&self, i: u64, field: u64) -> u64 {
        splitmix(self.seed ^ splitmix(i.wrapping_mul(4).wrapping_add(field)))
    }
}

/// The prober's documents' email: unique per run, rate and sample.
pub fn probe_email(tag: &str, n: u64) -> String {
    format!("probe.{tag}.{n}@fresh.example")
}

fn churn_email(slot: u64, seq: u64) -> String {
    format!("w{slot}.{seq}@churn.example")
}

/// The JSON text of a document with these fields, padded to [`DOC_BYTES`] (a longer one is
/// left as it is: only a very long email does that).
pub fn fields_doc(email: &str, k: i64, city: u64, age: u64, rev: u64, h: u64) -> String {
    let mut doc = String::with_capacity(DOC_BYTES);
    // Field values are ASCII letters, digits, `.`, `@`: nothing to escape in JSON or COPY.
    let _ = write!(
        doc,
        "{{\"email\":\"{email}\",\"k\":{k},\"city\":\"city{city:03}\",\"age\":{age},\"rev\":{rev},\"pad\":\""
    );
    let closing = "\"}";
    let fill = DOC_BYTES.saturating_sub(doc.len() + closing.len());
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut x = h | 1;
    for _ in 0..fill {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        doc.push(char::from(alphabet[(x % alphabet.len() as u64) as usize]));
    }
    doc.push_str(closing);
    doc
}

/// The first odd number from a fixed large start that shares no factor with `n`.
fn coprime_multiplier(n: u64) -> u64 {
    if n <= 2 {
        return 1;
    }
    let mut m = (0x9e37_79b9_7f4a_7c15_u64 % n) | 1;
    while gcd(m, n) != 1 || m == 0 {
        m = (m + 2) % n;
    }
    m
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn the_same_seed_gives_the_same_documents() {
        let (a, b) = (DocSet::new(7, 1000), DocSet::new(7, 1000));
        for i in [0, 1, 500, 999] {
            assert_eq!(a.doc(i, Revision(0)), b.doc(i, Revision(0)));
            assert_eq!(a.email(i), b.email(i));
        }
        let other = DocSet::new(8, 1000);
        assert_ne!(a.doc(3, Revision(0)), other.doc(3, Revision(0)));
        assert_ne!(a.doc(3, Revision(0)), a.doc(3, Revision(1)));
    }

    #[test]
    fn documents_are_json_of_one_kib_with_the_fields() {
        let s = DocSet::new(1, 10_000);
        for i in [0, 9_999] {
            let text = s.doc(i, Revision(2));
            assert_eq!(text.len(), DOC_BYTES);
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["email"], s.email(i));
            assert_eq!(v["k"], s.k(i));
            assert_eq!(v["rev"], 2);
            assert!(v["city"].as_str().unwrap().starts_with("city"));
            let age = v["age"].as_u64().unwrap();
            assert!((18..88).contains(&age));
        }
        let (key, churn) = s.churn(5, 9);
        assert_eq!(key, "w00000005");
        let v: serde_json::Value = serde_json::from_str(&churn).unwrap();
        assert_eq!(v["email"], "w5.9@churn.example");
        assert!(v["k"].as_i64().unwrap() < 0);
    }

    #[test]
    fn emails_and_ks_are_unique_and_k_covers_the_range() {
        for n in [1u64, 2, 10, 1000, 4096, 10_000] {
            let s = DocSet::new(3, n);
            let emails: HashSet<String> = (0..n).map(|i| s.email(i)).collect();
            let ks: HashSet<i64> = (0..n).map(|i| s.k(i)).collect();
            assert_eq!(emails.len() as u64, n);
            assert_eq!(ks.len() as u64, n, "k is a permutation for n = {n}");
            assert!(ks.iter().all(|&k| k >= 0 && (k as u64) < n));
        }
        // Not the identity: k order is not the load order.
        let s = DocSet::new(3, 1000);
        assert!((0..1000).filter(|&i| s.k(i) == i as i64).count() < 10);
    }

    #[test]
    fn range_starts_leave_a_full_page() {
        let s = DocSet::new(3, 1000);
        for r in [0, 899, 900, 12_345, u64::MAX] {
            assert!(s.range_start(r, 100) <= 900);
        }
        assert_eq!(DocSet::new(3, 50).range_start(7, 100), 0);
    }
}
