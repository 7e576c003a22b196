//! Random documents and index catalogs for the planner's property test. Small
//! pools of values on purpose: collisions (`1` and `1.0`, `"a"` and `"a%"`, `[null]`)
//! and type boundaries are where a span goes wrong.

use serde_json::{json, Value as J};

use super::test_util::{index, partial};
use super::IndexInfo;

/// splitmix64: a seed per case, so any failure replays from its seed alone.
pub(crate) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }
}

/// A field value; None is MISSING.
pub(crate) fn value(rng: &mut Rng) -> Option<J> {
    let pool = [
        json!(null),
        json!(true),
        json!(false),
        json!(0),
        json!(-0.0),
        json!(1),
        json!(1.0),
        json!(-1),
        json!(2),
        json!(2.5),
        json!(-1.5),
        json!(0.5),
        json!(10),
        // Where f64 and integers part ways.
        json!(9_007_199_254_740_993_i64),
        json!(9_007_199_254_740_992.0),
        json!(u64::MAX),
        json!(-1e300),
        json!(1e-300),
        json!(""),
        json!("a"),
        json!("ab"),
        json!("abc"),
        json!("a%"),
        json!("a_c"),
        json!("ac"),
        json!("b"),
        json!("B"),
        json!("é"),
        json!([]),
        json!([1]),
        json!([1, 2]),
        json!(["a"]),
        json!([null]),
        json!([1, null]),
        json!({}),
        json!({"x": 1}),
        json!({"x": null}),
        json!({"x": "a"}),
    ];
    if rng.chance(6) {
        None
    } else {
        Some(rng.pick(&pool))
    }
}

/// A document key; often one of the query's string constants, which is where a key range
/// has its edges.
pub(crate) fn doc_key(rng: &mut Rng, used: &[J]) -> String {
    let strings: Vec<&str> = used
        .iter()
        .filter_map(J::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    if !strings.is_empty() && rng.chance(2) {
        return rng.pick(&strings).to_owned();
    }
    let keys = [
        "k1", "k2", "a", "ab", "abc", "b", "user:1", "user:2", "a%", "é", "k1\u{0}",
    ];
    rng.pick(&keys).to_owned()
}

/// A document with fields a, b, c each maybe MISSING; now and then not an object at all.
/// Fields often take a constant of the query (`used`): the edges of its ranges.
pub(crate) fn document(rng: &mut Rng, used: &[J]) -> J {
    let field = |rng: &mut Rng| {
        if !used.is_empty() && rng.chance(3) {
            Some(rng.pick(used))
        } else {
            value(rng)
        }
    };
    if rng.chance(25) {
        return field(rng).unwrap_or(json!("scalar"));
    }
    let mut m = serde_json::Map::new();
    for f in ["a", "b", "c"] {
        if let Some(v) = field(rng) {
            let v = match v {
                // `a.x` is a key too.
                J::Object(_) => v,
                // Sometimes with a sibling: `a.x` then holds less than `a`.
                v if rng.chance(8) => match rng.chance(2) {
                    true => json!({ "x": v }),
                    false => json!({ "x": v, "y": 1 }),
                },
                v => v,
            };
            m.insert(f.into(), v);
        }
    }
    J::Object(m)
}

/// The indexes a case plans against: a random subset, a few of them offline.
pub(crate) fn indexes(rng: &mut Rng) -> Vec<IndexInfo> {
    let catalog = [
        index("ia", &["a"]),
        index("iab", &["a", "b"]),
        index("ib", &["b"]),
        index("iba", &["b", "a"]),
        index("iabc", &["a", "b", "c"]),
        index("iam", &["a!", "b"]),
        index("iax", &["a.x"]),
        index("ilow", &["LOWER(a)"]),
        index("imeta", &["META().id", "a"]),
        partial("ipart", &["a"], "c = 1"),
        partial("ipart2", &["b", "a"], "a IS NOT NULL AND default.c"),
        IndexInfo::primary("#primary"),
    ];
    let mut out = Vec::new();
    for ix in catalog {
        if rng.chance(2) {
            let online = !rng.chance(8);
            out.push(IndexInfo { online, ..ix });
        }
    }
    out
}
