//! Aligned text tables for stdout and the same rows as Markdown for report.md.

pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        assert_eq!(row.len(), self.header.len(), "a cell per column");
        self.rows.push(row);
    }

    /// First column left-aligned (names), the rest right-aligned (numbers).
    pub fn to_text(&self) -> String {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|c| {
                std::iter::once(&self.header)
                    .chain(&self.rows)
                    .map(|r| r[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |row: &[String]| {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (cell, w))| {
                    let pad = " ".repeat(w - cell.chars().count());
                    if c == 0 {
                        format!("{cell}{pad}")
                    } else {
                        format!("{pad}{cell}")
                    }
                })
                .collect();
            cells.join("  ").trim_end().to_string()
        };
        let mut out = line(&self.header);
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        out
    }

    pub fn to_markdown(&self) -> String {
        let mut out = format!("| {} |\n", self.header.join(" | "));
        let rule: Vec<&str> = (0..self.header.len())
            .map(|c| if c == 0 { "---" } else { "---:" })
            .collect();
        out.push_str(&format!("| {} |\n", rule.join(" | ")));
        for row in &self.rows {
            out.push_str(&format!("| {} |\n", row.join(" | ")));
        }
        out
    }
}

/// 123456.7 → "123,457".
pub fn thousands(v: f64) -> String {
    let n = v.round().max(0.0) as u64;
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_numbers_right_align() {
        let mut t = Table::new(&["target", "ops/s"]);
        t.push(vec!["sluice".into(), "1,234".into()]);
        t.push(vec!["memcached".into(), "98".into()]);
        assert_eq!(
            t.to_text(),
            "target     ops/s\nsluice     1,234\nmemcached     98\n"
        );
        assert!(t
            .to_markdown()
            .starts_with("| target | ops/s |\n| --- | ---: |\n"));
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(140_309.0), "140,309");
        assert_eq!(thousands(12_345_678.0), "12,345,678");
    }
}
