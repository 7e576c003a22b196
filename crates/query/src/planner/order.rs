//! Whether an access path hands the rows over in the ORDER BY's order already. Then the
//! executor streams them and stops once OFFSET + LIMIT rows are out, where it would
//! otherwise read every match and sort it: `ORDER BY k LIMIT 100` on an index over `k`
//! reads about 100 entries, not the whole range.
//!
//! An index scan yields its entries in byte order, which `index_key` makes collation order
//! (keys encoded ascending whatever their DESC), and a plan's spans are sorted and never
//! overlap; an index has one entry per document. So the rows come in the order of the
//! index keys, ties in document-key order. That serves an ORDER BY whose terms are the
//! index's leading keys, in order, each ascending with NULL and MISSING first (the
//! default); the stable sort it replaces would have kept exactly that order. A primary
//! index's entries are document keys in byte order, which is how `META().id` strings
//! collate, so it serves `ORDER BY META().id`.
//!
//! A document is fetched after its entry was read: one changed in between comes where its
//! old value sorted, as in Couchbase, which also skips the sort when its index provides the
//! order. Anything this module does not recognise (a term naming a projection alias, an
//! expression with no canonical form, DESC, NULLS LAST, grouping) keeps the sort.

use super::access::Access;
use super::index::IndexInfo;
use super::normalize::canonical;
use crate::ast::{Expr, Ident, NullsOrder, Projection, ResultTerm, Select};

/// Whether `access` (planned for `select` over `indexes`) yields rows in `select`'s ORDER
/// BY order. False without an ORDER BY: there is no order to serve.
pub fn access_is_ordered(select: &Select, access: &Access, indexes: &[IndexInfo]) -> bool {
    let Some(from) = &select.from else {
        return false;
    };
    if select.order_by.is_empty() || !select.group_by.is_empty() {
        return false;
    }
    let keys: Vec<Expr> = match access {
        Access::IndexScan { index, .. } => {
            let Some(ix) = indexes.iter().find(|ix| &ix.name == index && !ix.primary) else {
                return false;
            };
            let index_alias = from.keyspace.default_alias();
            match ix
                .keys
                .iter()
                .map(|k| canonical(&k.expr, index_alias))
                .collect::<Option<Vec<_>>>()
            {
                Some(keys) => keys,
                None => return false,
            }
        }
        Access::PrimaryScan { .. } => vec![Expr::field(Expr::Meta { keyspace: None }, "id")],
        Access::None | Access::KeyLookup { .. } => return false,
    };
    if select.order_by.len() > keys.len() {
        return false;
    }
    let aliases = explicit_aliases(&select.projection);
    select.order_by.iter().zip(&keys).all(|(term, key)| {
        let default_nulls = matches!(term.nulls, None | Some(NullsOrder::First));
        !term.descending
            && default_nulls
            && !root_is(&term.expr, &aliases)
            && canonical(&term.expr, from.alias()).as_ref() == Some(key)
    })
}

/// The names the projection gives its results (ORDER BY may refer to them).
pub(super) fn explicit_aliases(p: &Projection) -> Vec<&Ident> {
    match p {
        Projection::Raw { alias, .. } => alias.iter().collect(),
        Projection::Terms(terms) => terms
            .iter()
            .filter_map(|t| match t {
                ResultTerm::Expr { alias, .. } => alias.as_ref(),
                _ => None,
            })
            .collect(),
    }
}

/// Whether the path `e` starts at one of `names`.
pub(super) fn root_is(e: &Expr, names: &[&Ident]) -> bool {
    match e {
        Expr::Ident(name) => names.contains(&name),
        Expr::Field { base, .. } | Expr::DynamicField { base, .. } | Expr::Element { base, .. } => {
            root_is(base, names)
        }
        _ => false,
    }
}
