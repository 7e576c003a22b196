//! Random WHERE clauses for the planner's property test: every sargable form, in every
//! spelling (alias or not, constant on either side, literal or parameter), mixed with
//! AND/OR/NOT and terms the planner cannot read.

use serde_json::{json, Value as J};

use super::prop_gen::{value, Rng};
use crate::eval::Params;

/// Builds WHERE clauses, binding some constants as parameters.
pub(crate) struct WhereGen<'a> {
    pub rng: &'a mut Rng,
    /// `d` for `FROM default d`, `default` without an alias.
    pub alias: &'static str,
    pub params: Params,
    /// Every constant the clause holds, list items included.
    pub used: Vec<J>,
    next_param: usize,
}

impl<'a> WhereGen<'a> {
    pub fn new(rng: &'a mut Rng, alias: &'static str) -> Self {
        WhereGen {
            rng,
            alias,
            params: Params::new(),
            used: Vec::new(),
            next_param: 0,
        }
    }

    pub fn condition(&mut self, depth: usize) -> String {
        if depth == 0 || self.rng.chance(3) {
            let atom = self.atom();
            return if self.rng.chance(4) {
                format!("NOT ({atom})")
            } else {
                atom
            };
        }
        match self.rng.below(4) {
            0 => format!(
                "({} AND {})",
                self.condition(depth - 1),
                self.condition(depth - 1)
            ),
            1 => format!(
                "({} OR {})",
                self.condition(depth - 1),
                self.condition(depth - 1)
            ),
            2 => format!("NOT ({})", self.condition(depth - 1)),
            _ => format!("{} AND {}", self.condition(depth - 1), self.atom()),
        }
    }

    /// A key in one of its spellings.
    fn key(&mut self) -> String {
        let field = self.rng.pick(&["a", "a", "b", "b", "c", "a.x"]);
        match self.rng.below(8) {
            0 => format!("META({}).id", self.alias),
            1 => "META().id".to_owned(),
            2 => format!("LOWER({}.a)", self.alias),
            _ => self.spell(field),
        }
    }

    /// A field as a bare name or through the alias.
    fn spell(&mut self, field: &str) -> String {
        if self.rng.chance(2) {
            format!("{}.{field}", self.alias)
        } else {
            field.to_owned()
        }
    }

    /// A constant as text, a literal or a bound parameter.
    fn constant(&mut self) -> String {
        let extra = [
            json!(3),
            json!("aa"),
            json!("abd"),
            json!("user:"),
            json!("k"),
        ];
        let v = if self.rng.chance(5) {
            Some(self.rng.pick(&extra))
        } else {
            value(self.rng)
        };
        match v {
            None => "MISSING".to_owned(),
            Some(v) if self.rng.chance(4) => {
                self.used.push(v.clone());
                self.param(v)
            }
            Some(v) => {
                self.used.push(v.clone());
                v.to_string()
            }
        }
    }

    fn param(&mut self, v: J) -> String {
        self.next_param += 1;
        let name = format!("p{}", self.next_param);
        self.params = std::mem::take(&mut self.params).with_named(&name, v);
        format!("${name}")
    }

    fn atom(&mut self) -> String {
        let k = self.key();
        let not = if self.rng.chance(4) { "NOT " } else { "" };
        match self.rng.below(11) {
            // A leading key pinned, then anything: what composite spans narrow on.
            9 | 10 => {
                let lead = self.rng.pick(&["a", "b"]);
                let lead = self.spell(lead);
                let pin = if self.rng.chance(3) {
                    format!("IN [{}, {}]", self.constant(), self.constant())
                } else {
                    format!("= {}", self.constant())
                };
                format!("{lead} {pin} AND {}", self.atom())
            }
            0 | 1 => {
                let op = self
                    .rng
                    .pick(&["=", "==", "!=", "<>", "<", "<=", ">", ">="]);
                let c = self.constant();
                if self.rng.chance(3) {
                    format!("{c} {op} {k}")
                } else {
                    format!("{k} {op} {c}")
                }
            }
            2 => format!(
                "{k} {not}BETWEEN {} AND {}",
                self.constant(),
                self.constant()
            ),
            3 => {
                let n = self.rng.below(4);
                let items: Vec<String> = (0..n).map(|_| self.constant()).collect();
                if self.rng.chance(30) {
                    // Past MAX_SPANS: the planner falls back to one range over them.
                    let mut list: Vec<J> = (0..1_100).map(|i| json!(i - 500)).collect();
                    list.extend((0..n).filter_map(|_| value(self.rng)));
                    self.used.extend(list.iter().rev().take(8).cloned());
                    let p = self.param(J::Array(list));
                    format!("{k} {not}IN {p}")
                } else if self.rng.chance(4) {
                    let list: Vec<J> = (0..n).filter_map(|_| value(self.rng)).collect();
                    self.used.extend(list.iter().cloned());
                    let p = self.param(J::Array(list));
                    format!("{k} {not}IN {p}")
                } else {
                    format!("{k} {not}IN [{}]", items.join(", "))
                }
            }
            4 => {
                let pats = [
                    "a%", "ab%", "a", "", "%", "%b", "a_", "a\\_%", "user:%", "é%", "k1%",
                ];
                let pat = self.rng.pick(&pats);
                // Strings at the pattern's edges: its prefix, and the prefix extended.
                let prefix: String = pat.chars().take_while(|c| *c != '%' && *c != '_').collect();
                self.used.push(J::String(prefix.replace('\\', "")));
                self.used.push(J::String(format!("{prefix}\u{10FFFF}")));
                let p = J::String(pat.to_owned()).to_string();
                let p = if self.rng.chance(10) {
                    self.constant()
                } else {
                    p
                };
                format!("{k} {not}LIKE {p}")
            }
            5 => {
                let test = [
                    "NULL",
                    "NOT NULL",
                    "MISSING",
                    "NOT MISSING",
                    "VALUED",
                    "NOT VALUED",
                ];
                format!("{k} IS {}", self.rng.pick(&test))
            }
            6 => {
                let a = self.alias;
                let opaque = [
                    format!("{a}.a = {a}.b"),
                    "a + 0 = 1".to_owned(),
                    "IFMISSING(a, 1) = 1".to_owned(),
                    "c".to_owned(),
                    "ANY x IN a SATISFIES x = 1 END".to_owned(),
                    "TRUE".to_owned(),
                    "FALSE".to_owned(),
                    "NULL".to_owned(),
                    "1 = 1".to_owned(),
                    format!("{a}.a"),
                ];
                self.rng.pick(&opaque)
            }
            7 => format!("c = 1 AND {k} = {}", self.constant()),
            _ => format!("{k} = {}", self.constant()),
        }
    }
}
