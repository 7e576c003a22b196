//! The tokenizer. It follows Couchbase's lexer (`parser/n1ql/n1ql.nex`) in what it accepts
//! and in how it fails, because error messages quote the offending token's raw text and
//! position: longest match wins, keywords are case-insensitive, strings take JSON escapes
//! plus `\'` and `` \` ``, `''` doubles a quote inside single quotes and ``` `` ``` inside
//! backticks.
//!
//! A lexical error does not stop the parser at once: it becomes an [`Tok::Error`] token, and
//! the parser reports it when it reaches it, as Couchbase's yacc parser does.

use crate::keywords;

mod literals;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Punct {
    Dot,
    Plus,
    Minus,
    Star,
    Div,
    Mod,
    Pow,
    DoubleEq,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Concat,
    LParen,
    RParen,
    LBrace,
    RBrace,
    Comma,
    Colon,
    LBracket,
    RBracket,
    Semi,
    Bang,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    /// A reserved word, in its canonical upper-case spelling.
    Keyword(&'static str),
    Ident(String),
    QuotedIdent(String),
    Str(String),
    Int(i64),
    Float(f64),
    NamedParam(String),
    PositionalParam(u32),
    /// `?`: the parser numbers these in order of appearance.
    NextParam,
    Punct(Punct),
    /// A character no token starts with.
    Unknown(char),
    /// What went wrong, in Couchbase's words (`invalid quoted string - ...`).
    Error(&'static str),
    Eof,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub tok: Tok,
    /// Byte range of the raw text in the (trimmed) statement.
    pub start: usize,
    pub end: usize,
    /// 0-based line, and 0-based column in characters.
    pub line: u32,
    pub column: u32,
}

/// Tokenizes `text` up to and including the first error, always ending with [`Tok::Eof`].
pub(crate) fn tokenize(text: &str) -> Vec<Token> {
    let mut lexer = Lexer {
        text,
        pos: 0,
        line: 0,
        column: 0,
    };
    let mut tokens = Vec::new();
    loop {
        lexer.skip_trivia();
        let (start, line, column) = (lexer.pos, lexer.line, lexer.column);
        let tok = if lexer.pos >= text.len() {
            Tok::Eof
        } else {
            lexer.next_token()
        };
        let done = matches!(tok, Tok::Eof | Tok::Error(_));
        tokens.push(Token {
            tok,
            start,
            end: lexer.pos,
            line,
            column,
        });
        if done {
            if !matches!(tokens.last().map(|t| &t.tok), Some(Tok::Eof)) {
                let at = lexer.pos;
                tokens.push(Token {
                    tok: Tok::Eof,
                    start: at,
                    end: at,
                    line: lexer.line,
                    column: lexer.column,
                });
            }
            return tokens;
        }
    }
}

struct Lexer<'a> {
    text: &'a str,
    pos: usize,
    line: u32,
    column: u32,
}

impl Lexer<'_> {
    pub(super) fn rest(&self) -> &str {
        self.text.get(self.pos..).unwrap_or("")
    }

    pub(super) fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    pub(super) fn peek_at(&self, n: usize) -> Option<char> {
        self.rest().chars().nth(n)
    }

    pub(super) fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line = self.line.saturating_add(1);
            self.column = 0;
        } else {
            self.column = self.column.saturating_add(1);
        }
        Some(c)
    }

    pub(super) fn bump_n(&mut self, n: usize) {
        for _ in 0..n {
            self.bump();
        }
    }

    fn skip_trivia(&mut self) {
        loop {
            let rest = self.rest();
            if rest.starts_with("--") {
                while !matches!(self.peek(), None | Some('\n' | '\r')) {
                    self.bump();
                }
            } else if rest.starts_with("/*") {
                // An unclosed `/*` is no comment: it lexes as `/` then `*`, as Couchbase's does.
                match rest.get(2..).and_then(|r| r.find("*/")) {
                    Some(close) => {
                        let len = rest.get(..close + 4).map_or(0, |s| s.chars().count());
                        self.bump_n(len);
                    }
                    None => return,
                }
            } else if matches!(self.peek(), Some(' ' | '\t' | '\n' | '\r' | '\u{c}')) {
                self.bump();
            } else {
                return;
            }
        }
    }

    fn next_token(&mut self) -> Tok {
        let Some(c) = self.peek() else {
            return Tok::Eof;
        };
        match c {
            '"' | '\'' => self.quoted(c),
            '`' => match self.quoted('`') {
                Tok::Str(s) => Tok::QuotedIdent(s),
                other => other,
            },
            '0'..='9' => self.number(),
            'a'..='z' | 'A'..='Z' | '_' => {
                let word = self.word();
                match keywords::lookup(&word) {
                    Some(kw) => Tok::Keyword(kw),
                    None => Tok::Ident(word),
                }
            }
            '$' | '@' => self.parameter(c),
            '?' => {
                self.bump();
                Tok::NextParam
            }
            _ => self.punct(c),
        }
    }

    pub(super) fn word(&mut self) -> String {
        let mut word = String::new();
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == '_' {
                word.push(c);
                self.bump();
            } else {
                break;
            }
        }
        word
    }

    fn punct(&mut self, c: char) -> Tok {
        let next = self.peek_at(1);
        let (p, len) = match (c, next) {
            ('=', Some('=')) => (Punct::DoubleEq, 2),
            ('!', Some('=')) => (Punct::Ne, 2),
            ('<', Some('>')) => (Punct::Ne, 2),
            ('<', Some('=')) => (Punct::Le, 2),
            ('>', Some('=')) => (Punct::Ge, 2),
            ('|', Some('|')) => (Punct::Concat, 2),
            ('.', _) => (Punct::Dot, 1),
            ('+', _) => (Punct::Plus, 1),
            ('-', _) => (Punct::Minus, 1),
            ('*', _) => (Punct::Star, 1),
            ('/', _) => (Punct::Div, 1),
            ('%', _) => (Punct::Mod, 1),
            ('^', _) => (Punct::Pow, 1),
            ('=', _) => (Punct::Eq, 1),
            ('<', _) => (Punct::Lt, 1),
            ('>', _) => (Punct::Gt, 1),
            ('(', _) => (Punct::LParen, 1),
            (')', _) => (Punct::RParen, 1),
            ('{', _) => (Punct::LBrace, 1),
            ('}', _) => (Punct::RBrace, 1),
            (',', _) => (Punct::Comma, 1),
            (':', _) => (Punct::Colon, 1),
            ('[', _) => (Punct::LBracket, 1),
            (']', _) => (Punct::RBracket, 1),
            (';', _) => (Punct::Semi, 1),
            ('!', _) => (Punct::Bang, 1),
            _ => {
                self.bump();
                return Tok::Unknown(c);
            }
        };
        self.bump_n(len);
        Tok::Punct(p)
    }
}

#[cfg(test)]
mod tests;
