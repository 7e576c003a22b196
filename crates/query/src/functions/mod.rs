//! The function catalog: which names the parser accepts as functions and aggregates, with
//! their argument counts (Couchbase rejects unknown names and wrong counts while parsing,
//! with a code 3000 error), and the scalar functions' evaluation (`scalar`).

mod scalar;

pub(crate) use scalar::call;

/// The scalar functions this crate knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Func {
    Lower,
    Upper,
    Length,
    Contains,
    Substr,
    ArrayLength,
    ArrayContains,
    IfMissing,
    IfNull,
    IfMissingOrNull,
    ToString,
    ToNumber,
    Type,
    Abs,
    Round,
    Floor,
    Ceil,
}

/// Couchbase lets the "first non-MISSING/NULL" functions take any number of arguments.
const VARIADIC: usize = usize::MAX;

/// Name (lower case, as Couchbase's registry spells it), function, min and max arguments.
/// Aliases (`tostr`, `tonum`, `typename`) map to the same function.
const SCALARS: &[(&str, Func, usize, usize)] = &[
    ("abs", Func::Abs, 1, 1),
    ("array_contains", Func::ArrayContains, 2, 2),
    ("array_length", Func::ArrayLength, 1, 1),
    ("ceil", Func::Ceil, 1, 1),
    ("contains", Func::Contains, 2, 2),
    ("floor", Func::Floor, 1, 1),
    ("ifmissing", Func::IfMissing, 2, VARIADIC),
    ("ifmissingornull", Func::IfMissingOrNull, 2, VARIADIC),
    ("ifnull", Func::IfNull, 2, VARIADIC),
    ("length", Func::Length, 1, 1),
    ("lower", Func::Lower, 1, 1),
    ("round", Func::Round, 1, 2),
    ("substr", Func::Substr, 2, 3),
    ("to_number", Func::ToNumber, 1, 2),
    ("to_string", Func::ToString, 1, 1),
    ("tonum", Func::ToNumber, 1, 2),
    ("tostr", Func::ToString, 1, 1),
    ("type", Func::Type, 1, 1),
    ("typename", Func::Type, 1, 1),
    ("upper", Func::Upper, 1, 1),
];

impl Func {
    /// Case-insensitive lookup.
    pub fn lookup(name: &str) -> Option<Func> {
        let lower = name.to_ascii_lowercase();
        SCALARS
            .iter()
            .find(|(n, ..)| *n == lower)
            .map(|(_, f, ..)| *f)
    }

    /// The canonical (rendered) name.
    pub fn name(self) -> &'static str {
        match self {
            Func::Lower => "LOWER",
            Func::Upper => "UPPER",
            Func::Length => "LENGTH",
            Func::Contains => "CONTAINS",
            Func::Substr => "SUBSTR",
            Func::ArrayLength => "ARRAY_LENGTH",
            Func::ArrayContains => "ARRAY_CONTAINS",
            Func::IfMissing => "IFMISSING",
            Func::IfNull => "IFNULL",
            Func::IfMissingOrNull => "IFMISSINGORNULL",
            Func::ToString => "TO_STRING",
            Func::ToNumber => "TO_NUMBER",
            Func::Type => "TYPE",
            Func::Abs => "ABS",
            Func::Round => "ROUND",
            Func::Floor => "FLOOR",
            Func::Ceil => "CEIL",
        }
    }

    /// Minimum and maximum argument counts (`usize::MAX`: no maximum).
    pub fn arity(self) -> (usize, usize) {
        SCALARS
            .iter()
            .find(|(_, f, ..)| *f == self)
            .map_or((0, 0), |&(_, _, min, max)| (min, max))
    }

    /// Every function, for generators and tests.
    pub fn all() -> impl Iterator<Item = Func> {
        let mut seen = Vec::new();
        for (_, f, ..) in SCALARS {
            if !seen.contains(f) {
                seen.push(*f);
            }
        }
        seen.into_iter()
    }
}

/// The aggregates. Each takes one argument, optionally `DISTINCT`; `COUNT` also takes `*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AggFunc {
    Count,
    Sum,
    Min,
    Max,
    Avg,
    ArrayAgg,
}

impl AggFunc {
    pub fn lookup(name: &str) -> Option<AggFunc> {
        Some(match name.to_ascii_lowercase().as_str() {
            "count" => AggFunc::Count,
            "sum" => AggFunc::Sum,
            "min" => AggFunc::Min,
            "max" => AggFunc::Max,
            "avg" => AggFunc::Avg,
            "array_agg" => AggFunc::ArrayAgg,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            AggFunc::Count => "COUNT",
            AggFunc::Sum => "SUM",
            AggFunc::Min => "MIN",
            AggFunc::Max => "MAX",
            AggFunc::Avg => "AVG",
            AggFunc::ArrayAgg => "ARRAY_AGG",
        }
    }

    pub const ALL: [AggFunc; 6] = [
        AggFunc::Count,
        AggFunc::Sum,
        AggFunc::Min,
        AggFunc::Max,
        AggFunc::Avg,
        AggFunc::ArrayAgg,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_function_round_trips_through_its_name() {
        for f in Func::all() {
            assert_eq!(Func::lookup(f.name()), Some(f));
            let (min, max) = f.arity();
            assert!(min >= 1 && min <= max);
        }
        for a in AggFunc::ALL {
            assert_eq!(AggFunc::lookup(a.name()), Some(a));
        }
        assert_eq!(Func::lookup("ToStr"), Some(Func::ToString));
        assert_eq!(Func::lookup("nope"), None);
    }
}
