//! A column of the seeds' replication tables: what else reads the bucket's change streams
//! while the replication is measured. Seed 000/001's columns are replication only, with
//! views, with XDCR, with views and XDCR, and with 1, 5, 10 or 25 external DCP clients.
//!
//! Written `replication`, `views` (one index), `views:N` (N indexes), `xdcr`, `clients:N`,
//! or a `+` of several (`views:5+xdcr`).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// External DCP clients per column, at most (each opens one connection per node).
pub const CLIENTS_MAX: u16 = 64;
/// Indexes per views column, at most (one per indexed field of the documents).
pub const VIEWS_MAX: u8 = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct Column {
    /// Real GSI indexes defined through the query service before the column's ladder (0:
    /// none), each fed by DCP from every node, with a light query loop against them: the
    /// seeds' views.
    pub views: u8,
    /// Streams opened and closed continuously over 16 connections per node, as XDCR in
    /// 3.0.2 did (its source side only: nothing is written to another cluster).
    pub xdcr: bool,
    /// External DCP clients, each streaming every vbucket from seqno 0 and then following,
    /// consuming without delay.
    pub clients: u16,
}

impl Column {
    pub const REPLICATION: Column = Column {
        views: 0,
        xdcr: false,
        clients: 0,
    };

    pub fn is_replication_only(&self) -> bool {
        *self == Column::REPLICATION
    }

    /// The column's label in the tables, after the target's (`sluice + 5 indexes`).
    pub fn label(&self, target: &str) -> String {
        let mut parts = vec![target.to_string()];
        match self.views {
            0 => {}
            1 => parts.push("1 index".into()),
            n => parts.push(format!("{n} indexes")),
        }
        if self.xdcr {
            parts.push("XDCR".into());
        }
        match self.clients {
            0 => {}
            1 => parts.push("1 DCP client".into()),
            n => parts.push(format!("{n} DCP clients")),
        }
        parts.join(" + ")
    }
}

impl fmt::Display for Column {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        match self.views {
            0 => {}
            1 => parts.push("views".to_string()),
            n => parts.push(format!("views:{n}")),
        }
        if self.xdcr {
            parts.push("xdcr".to_string());
        }
        if self.clients > 0 {
            parts.push(format!("clients:{}", self.clients));
        }
        if parts.is_empty() {
            parts.push("replication".into());
        }
        f.write_str(&parts.join("+"))
    }
}

impl FromStr for Column {
    type Err = String;

    fn from_str(s: &str) -> Result<Column, String> {
        let mut c = Column::default();
        for part in s.split('+').map(str::trim) {
            match part {
                "replication" => {}
                "views" if c.views == 0 => c.views = 1,
                p if p.starts_with("views:") && c.views == 0 => {
                    let n: u8 = p["views:".len()..]
                        .parse()
                        .map_err(|_| format!("`{p}`: views:N takes a number of indexes"))?;
                    if !(1..=VIEWS_MAX).contains(&n) {
                        return Err(format!("`{p}`: 1 to {VIEWS_MAX} indexes"));
                    }
                    c.views = n;
                }
                "xdcr" if !c.xdcr => c.xdcr = true,
                p if p.starts_with("clients:") && c.clients == 0 => {
                    let n: u16 = p["clients:".len()..]
                        .parse()
                        .map_err(|_| format!("`{p}`: clients:N takes a number"))?;
                    if !(1..=CLIENTS_MAX).contains(&n) {
                        return Err(format!("`{p}`: 1 to {CLIENTS_MAX} clients"));
                    }
                    c.clients = n;
                }
                p => {
                    return Err(format!(
                        "`{p}` in `{s}`: a column is replication, views, views:N, xdcr, \
                         clients:N, or several joined by + (each once)"
                    ))
                }
            }
        }
        Ok(c)
    }
}

impl From<Column> for String {
    fn from(c: Column) -> String {
        c.to_string()
    }
}

impl TryFrom<String> for Column {
    type Error = String;

    fn try_from(s: String) -> Result<Column, String> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_parse_print_and_label() {
        let c: Column = "views+xdcr".parse().unwrap();
        assert!(c.views == 1 && c.xdcr && c.clients == 0);
        assert_eq!(c.to_string(), "views+xdcr");
        assert_eq!(c.label("sluice"), "sluice + 1 index + XDCR");
        let five: Column = "views:5".parse().unwrap();
        assert_eq!((five.views, five.xdcr, five.clients), (5, false, 0));
        assert_eq!(five.label("sluice"), "sluice + 5 indexes");
        assert_eq!(
            "views:1".parse::<Column>().unwrap(),
            "views".parse::<Column>().unwrap(),
            "views is one index"
        );
        assert_eq!("views:1".parse::<Column>().unwrap().to_string(), "views");
        assert_eq!(
            "views:16+xdcr+clients:2"
                .parse::<Column>()
                .unwrap()
                .label("s"),
            "s + 16 indexes + XDCR + 2 DCP clients"
        );
        let r: Column = "replication".parse().unwrap();
        assert!(r.is_replication_only());
        assert_eq!(
            (r.to_string(), r.label("sluice")),
            ("replication".into(), "sluice".into())
        );
        let k: Column = "clients:25".parse().unwrap();
        assert_eq!(k.label("sluice"), "sluice + 25 DCP clients");
        assert_eq!(
            "clients:1".parse::<Column>().unwrap().label("s"),
            "s + 1 DCP client"
        );
        for round in [
            "replication",
            "views",
            "xdcr",
            "clients:5",
            "views+xdcr+clients:10",
            "views:5",
            "views:16+xdcr",
            "views:10+clients:1",
        ] {
            assert_eq!(round.parse::<Column>().unwrap().to_string(), round);
        }
    }

    #[test]
    fn bad_columns_are_refused() {
        for bad in [
            "",
            "view",
            "clients:0",
            "clients:x",
            "clients:65",
            "views+views",
            "views:0",
            "views:17",
            "views:x",
            "views:",
            "views:2+views",
            "views+views:3",
        ] {
            assert!(bad.parse::<Column>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn columns_travel_as_strings_in_json() {
        let c: Column = "xdcr+clients:5".parse().unwrap();
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(json, "\"xdcr+clients:5\"");
        assert_eq!(serde_json::from_str::<Column>(&json).unwrap(), c);
        assert!(serde_json::from_str::<Column>("\"nope\"").is_err());
        let v: Column = serde_json::from_str("\"views:10+xdcr\"").unwrap();
        assert_eq!((v.views, v.xdcr), (10, true));
    }
}
