use std::fmt::{self, Display, Formatter};

use super::expr::List;
use crate::ast::Ident;
use crate::ast::{
    BuildIndex, CreateIndex, CreatePrimaryIndex, Delete, DropIndex, DropPrimaryIndex, FromTerm,
    IndexKey, Insert, InsertVerb, KeyValue, NullsOrder, Projection, ResultTerm, Select, SetTerm,
    SortTerm, Statement, Update,
};

impl Display for Statement {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Statement::Select(s) => write!(f, "{s}"),
            Statement::Explain(s) => write!(f, "EXPLAIN {s}"),
            Statement::Insert(s) => write!(f, "{s}"),
            Statement::Update(s) => write!(f, "{s}"),
            Statement::Delete(s) => write!(f, "{s}"),
            Statement::CreateIndex(s) => write!(f, "{s}"),
            Statement::CreatePrimaryIndex(s) => write!(f, "{s}"),
            Statement::DropIndex(s) => write!(f, "{s}"),
            Statement::DropPrimaryIndex(s) => write!(f, "{s}"),
            Statement::BuildIndex(s) => write!(f, "{s}"),
            Statement::Prepare(p) => {
                f.write_str("PREPARE ")?;
                if p.force {
                    f.write_str("FORCE ")?;
                }
                if let Some(name) = &p.name {
                    write!(f, "{} AS ", Ident::new(name.as_str()))?;
                }
                write!(f, "{}", p.statement)
            }
            Statement::Execute(e) => {
                write!(f, "EXECUTE {}", Ident::new(e.name.as_str()))?;
                if let Some(using) = &e.using {
                    write!(f, " USING {using}")?;
                }
                Ok(())
            }
        }
    }
}

impl Display for ResultTerm {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            ResultTerm::Star => f.write_str("*"),
            ResultTerm::ExprStar(e) => write!(f, "{e}.*"),
            ResultTerm::Expr { expr, alias: None } => write!(f, "{expr}"),
            ResultTerm::Expr {
                expr,
                alias: Some(a),
            } => write!(f, "{expr} AS {a}"),
        }
    }
}

impl Display for Projection {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Projection::Terms(terms) => write!(f, "{}", List(terms)),
            Projection::Raw { expr, alias: None } => write!(f, "RAW {expr}"),
            Projection::Raw {
                expr,
                alias: Some(a),
            } => write!(f, "RAW {expr} AS {a}"),
        }
    }
}

impl Display for FromTerm {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.keyspace)?;
        if let Some(a) = &self.alias {
            write!(f, " AS {a}")?;
        }
        if let Some(k) = &self.use_keys {
            write!(f, " USE KEYS {k}")?;
        }
        Ok(())
    }
}

impl Display for SortTerm {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.expr)?;
        if self.descending {
            f.write_str(" DESC")?;
        }
        match self.nulls {
            Some(NullsOrder::First) => f.write_str(" NULLS FIRST"),
            Some(NullsOrder::Last) => f.write_str(" NULLS LAST"),
            None => Ok(()),
        }
    }
}

impl Display for Select {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str("SELECT ")?;
        if self.distinct {
            f.write_str("DISTINCT ")?;
        }
        write!(f, "{}", self.projection)?;
        if let Some(from) = &self.from {
            write!(f, " FROM {from}")?;
        }
        if let Some(w) = &self.filter {
            write!(f, " WHERE {w}")?;
        }
        if !self.group_by.is_empty() {
            write!(f, " GROUP BY {}", List(&self.group_by))?;
        }
        if let Some(h) = &self.having {
            write!(f, " HAVING {h}")?;
        }
        if !self.order_by.is_empty() {
            write!(f, " ORDER BY {}", List(&self.order_by))?;
        }
        if let Some(l) = &self.limit {
            write!(f, " LIMIT {l}")?;
        }
        if let Some(o) = &self.offset {
            write!(f, " OFFSET {o}")?;
        }
        Ok(())
    }
}

fn returning(f: &mut Formatter<'_>, r: &Option<Projection>) -> fmt::Result {
    match r {
        Some(p) => write!(f, " RETURNING {p}"),
        None => Ok(()),
    }
}

impl Display for KeyValue {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {})", self.key, self.value)
    }
}

impl Display for Insert {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let verb = match self.verb {
            InsertVerb::Insert => "INSERT",
            InsertVerb::Upsert => "UPSERT",
        };
        write!(f, "{verb} INTO {}", self.keyspace)?;
        if let Some(a) = &self.alias {
            write!(f, " AS {a}")?;
        }
        write!(f, " (KEY, VALUE) VALUES {}", List(&self.values))?;
        returning(f, &self.returning)
    }
}

impl Display for SetTerm {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {}", self.path, self.value)
    }
}

impl Display for Update {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "UPDATE {}", self.keyspace)?;
        if let Some(a) = &self.alias {
            write!(f, " AS {a}")?;
        }
        if let Some(k) = &self.use_keys {
            write!(f, " USE KEYS {k}")?;
        }
        if !self.set.is_empty() {
            write!(f, " SET {}", List(&self.set))?;
        }
        if !self.unset.is_empty() {
            write!(f, " UNSET {}", List(&self.unset))?;
        }
        if let Some(w) = &self.filter {
            write!(f, " WHERE {w}")?;
        }
        if let Some(l) = &self.limit {
            write!(f, " LIMIT {l}")?;
        }
        returning(f, &self.returning)
    }
}

impl Display for Delete {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "DELETE FROM {}", self.keyspace)?;
        if let Some(a) = &self.alias {
            write!(f, " AS {a}")?;
        }
        if let Some(k) = &self.use_keys {
            write!(f, " USE KEYS {k}")?;
        }
        if let Some(w) = &self.filter {
            write!(f, " WHERE {w}")?;
        }
        if let Some(l) = &self.limit {
            write!(f, " LIMIT {l}")?;
        }
        returning(f, &self.returning)
    }
}

fn using(f: &mut Formatter<'_>, using_gsi: bool) -> fmt::Result {
    if using_gsi {
        f.write_str(" USING GSI")?;
    }
    Ok(())
}

fn with(f: &mut Formatter<'_>, with: &Option<serde_json::Value>) -> fmt::Result {
    match with {
        // JSON text is a valid SQL++ constructor for the same value.
        Some(v) => write!(f, " WITH {v}"),
        None => Ok(()),
    }
}

impl Display for IndexKey {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.expr)?;
        if self.descending {
            f.write_str(" DESC")?;
        }
        if self.include_missing {
            f.write_str(" INCLUDE MISSING")?;
        }
        Ok(())
    }
}

impl Display for CreateIndex {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "CREATE INDEX {}", self.name)?;
        if self.if_not_exists {
            f.write_str(" IF NOT EXISTS")?;
        }
        write!(f, " ON {}({})", self.keyspace, List(&self.keys))?;
        if let Some(w) = &self.filter {
            write!(f, " WHERE {w}")?;
        }
        using(f, self.using_gsi)?;
        with(f, &self.with)
    }
}

impl Display for CreatePrimaryIndex {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str("CREATE PRIMARY INDEX")?;
        if let Some(n) = &self.name {
            write!(f, " {n}")?;
        }
        if self.if_not_exists {
            f.write_str(" IF NOT EXISTS")?;
        }
        write!(f, " ON {}", self.keyspace)?;
        using(f, self.using_gsi)?;
        with(f, &self.with)
    }
}

impl Display for DropIndex {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "DROP INDEX {}", self.name)?;
        if self.if_exists {
            f.write_str(" IF EXISTS")?;
        }
        write!(f, " ON {}", self.keyspace)?;
        using(f, self.using_gsi)
    }
}

impl Display for DropPrimaryIndex {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str("DROP PRIMARY INDEX")?;
        if let Some(n) = &self.name {
            write!(f, " {n}")?;
        }
        if self.if_exists {
            f.write_str(" IF EXISTS")?;
        }
        write!(f, " ON {}", self.keyspace)?;
        using(f, self.using_gsi)
    }
}

impl Display for BuildIndex {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "BUILD INDEX ON {}({})", self.keyspace, List(&self.names))?;
        using(f, self.using_gsi)
    }
}
