//! Macro expansion in xattr values: `"${Mutation.CAS}"`, `"${Mutation.seqno}"` and
//! `"${Mutation.value_crc32c}"` become the mutation's own CAS, seqno and body checksum as
//! hex strings. The CAS and seqno are only known when the engine writes the document, so a
//! mutation first inserts a placeholder of the final length (a string absent from
//! everything else it writes), and the places it lands are filled in later.

/// A macro an xattr mutation may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Macro {
    Cas,
    Seqno,
    ValueCrc32c,
}

impl Macro {
    pub const ALL: [Macro; 3] = [Macro::Cas, Macro::Seqno, Macro::ValueCrc32c];

    /// The macro a spec's value names: exactly its JSON string, whitespace around allowed.
    pub fn parse(value: &[u8]) -> Option<Macro> {
        match crate::value::trimmed(value) {
            b"\"${Mutation.CAS}\"" => Some(Macro::Cas),
            b"\"${Mutation.seqno}\"" => Some(Macro::Seqno),
            b"\"${Mutation.value_crc32c}\"" => Some(Macro::ValueCrc32c),
            _ => None,
        }
    }

    /// How many hex digits its value has (after `0x`).
    pub fn digits(self) -> usize {
        match self {
            Macro::Cas | Macro::Seqno => 16,
            Macro::ValueCrc32c => 8,
        }
    }
}

/// One placeholder per macro, each a JSON string `"0x…"` of its macro's final length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholders {
    digits: [String; 3],
}

impl Placeholders {
    /// Placeholders that occur in none of `texts` (everything the mutation will write).
    pub fn unused_in(texts: &[&[u8]]) -> Placeholders {
        let absent = |d: &str| !texts.iter().any(|t| contains(t, d.as_bytes()));
        let mut n = 0u64;
        let mut pick = |width: usize, taken: &[String]| loop {
            // Digits unlikely in real data first; the loop only guarantees absence.
            let d = format!("{:0width$x}", 0xface_0000_0000_0000u64.wrapping_add(n))
                [16 - width.min(16)..]
                .to_string();
            n += 1;
            if absent(&d) && !taken.contains(&d) {
                return d;
            }
        };
        let cas = pick(16, &[]);
        let seqno = pick(16, std::slice::from_ref(&cas));
        let crc = pick(8, &[cas.clone(), seqno.clone()]);
        Placeholders {
            digits: [cas, seqno, crc],
        }
    }

    fn digits_of(&self, m: Macro) -> &str {
        let i = Macro::ALL
            .iter()
            .position(|x| *x == m)
            .expect("every macro is listed");
        &self.digits[i]
    }

    /// The JSON text a spec inserts in place of the macro.
    pub fn text(&self, m: Macro) -> Vec<u8> {
        format!("\"0x{}\"", self.digits_of(m)).into_bytes()
    }

    /// Where the macro's digits landed in `value`: the offset of each occurrence's first
    /// digit.
    pub fn find(&self, m: Macro, value: &[u8]) -> Vec<usize> {
        let needle = format!("\"0x{}\"", self.digits_of(m));
        let mut out = Vec::new();
        let mut from = 0;
        while let Some(i) = find_from(value, needle.as_bytes(), from) {
            out.push(i + 3);
            from = i + needle.len();
        }
        out
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find_from(hay, needle, 0).is_some()
}

fn find_from(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_only_exact_macros() {
        assert_eq!(Macro::parse(b"\"${Mutation.CAS}\""), Some(Macro::Cas));
        assert_eq!(Macro::parse(b" \"${Mutation.seqno}\" "), Some(Macro::Seqno));
        assert_eq!(
            Macro::parse(b"\"${Mutation.value_crc32c}\""),
            Some(Macro::ValueCrc32c)
        );
        assert_eq!(Macro::parse(b"\"${Mutation.cas}\""), None);
        assert_eq!(Macro::parse(b"${Mutation.CAS}"), None);
        assert_eq!(Macro::parse(b"\"x\""), None);
    }

    #[test]
    fn placeholders_are_unique_and_found() {
        let first = Placeholders::unused_in(&[]);
        let busy = first.text(Macro::Cas);
        let p = Placeholders::unused_in(&[&busy]);
        assert_ne!(
            p.text(Macro::Cas),
            busy,
            "a placeholder already in the data is skipped"
        );
        assert_ne!(p.text(Macro::Cas), p.text(Macro::Seqno));
        assert_eq!(p.text(Macro::Cas).len(), 2 + 2 + 16);
        assert_eq!(p.text(Macro::ValueCrc32c).len(), 2 + 2 + 8);
        let mut v = b"{\"a\":".to_vec();
        v.extend(p.text(Macro::Cas));
        v.extend(b",\"b\":");
        v.extend(p.text(Macro::Cas));
        v.push(b'}');
        assert_eq!(p.find(Macro::Cas, &v), vec![8, 33]);
        assert!(p.find(Macro::Seqno, &v).is_empty());
    }
}
