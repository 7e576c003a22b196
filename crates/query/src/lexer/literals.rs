//! Literal tokens: numbers, quoted strings and identifiers, parameters.

use super::{Lexer, Tok};

impl Lexer<'_> {
    pub(super) fn parameter(&mut self, sigil: char) -> Tok {
        match self.peek_at(1) {
            Some('a'..='z' | 'A'..='Z' | '_') => {
                self.bump();
                Tok::NamedParam(self.word())
            }
            Some('1'..='9') => {
                self.bump();
                let digits = self.digits();
                match digits.parse::<u32>() {
                    Ok(n) => Tok::PositionalParam(n),
                    Err(_) => Tok::Error("positional parameter out of range"),
                }
            }
            _ => {
                self.bump();
                Tok::Unknown(sigil)
            }
        }
    }

    fn digits(&mut self) -> String {
        let mut s = String::new();
        while let Some(c @ '0'..='9') = self.peek() {
            s.push(c);
            self.bump();
        }
        s
    }

    /// Numbers follow Couchbase's rules: no leading zeros (`007` is three tokens), an
    /// optional fraction and exponent, and digits running into letters are an error unless a
    /// longer valid number ends first (`1e5` is a number, `1e5x` and `12ab` are errors).
    pub(super) fn number(&mut self) -> Tok {
        let rest = self.rest();
        let bytes = rest.as_bytes();
        let digit_run = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
        let int_len = if bytes.first() == Some(&b'0') {
            1
        } else {
            digit_run
        };
        let mut len = int_len;
        let mut is_float = false;
        if bytes.get(len) == Some(&b'.') && bytes.get(len + 1).is_some_and(u8::is_ascii_digit) {
            len += 1 + bytes[len + 1..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            is_float = true;
        }
        if matches!(bytes.get(len), Some(b'e' | b'E')) {
            let mut e = len + 1;
            if matches!(bytes.get(e), Some(b'+' | b'-')) {
                e += 1;
            }
            let exp_digits = bytes
                .get(e..)
                .map_or(0, |b| b.iter().take_while(|b| b.is_ascii_digit()).count());
            if exp_digits > 0 {
                len = e + exp_digits;
                is_float = true;
            }
        }
        let word_char = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
        if bytes
            .get(digit_run)
            .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_')
        {
            let invalid_len = digit_run
                + bytes[digit_run..]
                    .iter()
                    .take_while(|b| word_char(b))
                    .count();
            if invalid_len > len {
                self.bump_n(invalid_len);
                return Tok::Error("invalid number");
            }
        }
        let text = rest.get(..len).unwrap_or("").to_owned();
        self.bump_n(len);
        if !is_float {
            if let Ok(n) = text.parse::<i64>() {
                return Tok::Int(n);
            }
        }
        match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Tok::Float(f),
            _ => Tok::Error("invalid number"),
        }
    }

    pub(super) fn quoted(&mut self, quote: char) -> Tok {
        self.bump();
        let mut out = String::new();
        loop {
            let Some(c) = self.bump() else {
                return Tok::Error(if quote == '`' {
                    "invalid escaped identifier - missing closing quote"
                } else {
                    "invalid quoted string - missing closing quote"
                });
            };
            if c == quote {
                // Doubling escapes a quote in single quotes and backticks, not in double quotes.
                if quote != '"' && self.peek() == Some(quote) {
                    self.bump();
                    out.push(quote);
                    continue;
                }
                return Tok::Str(out);
            }
            if c != '\\' {
                out.push(c);
                continue;
            }
            match self.escape() {
                Some(ch) => out.push(ch),
                None => {
                    return Tok::Error(if quote == '`' {
                        "invalid escaped identifier - invalid escape sequence"
                    } else {
                        "invalid quoted string - invalid escape sequence"
                    })
                }
            }
        }
    }

    /// After a backslash: the escaped character, or None for an invalid escape.
    fn escape(&mut self) -> Option<char> {
        let c = self.bump()?;
        Some(match c {
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '/' | '\\' | '"' | '\'' | '`' => c,
            'u' => {
                let first = self.hex4()?;
                if !(0xD800..0xE000).contains(&first) {
                    return char::from_u32(first);
                }
                // A surrogate must be followed by its pair; anything else decodes to U+FFFD,
                // as Couchbase's escape processing does.
                if self.rest().starts_with("\\u") {
                    self.bump_n(2);
                    let second = self.hex4()?;
                    let pair = char::decode_utf16([first as u16, second as u16])
                        .collect::<Result<String, _>>()
                        .ok()
                        .and_then(|s| s.chars().next());
                    return Some(pair.unwrap_or(char::REPLACEMENT_CHARACTER));
                }
                char::REPLACEMENT_CHARACTER
            }
            _ => return None,
        })
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.rest().get(..4)?;
        // from_str_radix alone would take a sign.
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let n = u32::from_str_radix(digits, 16).ok()?;
        self.bump_n(4);
        Some(n)
    }
}
