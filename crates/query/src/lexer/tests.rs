//! Tokenizer tests.

use super::*;

fn toks(s: &str) -> Vec<Tok> {
    tokenize(s).into_iter().map(|t| t.tok).collect()
}

#[test]
fn words_numbers_and_strings() {
    assert_eq!(
        toks("SeLeCt `a``b`, 'it''s', \"q\\\"\\u00e9\" 1.5 2e3 0"),
        vec![
            Tok::Keyword("SELECT"),
            Tok::QuotedIdent("a`b".into()),
            Tok::Punct(Punct::Comma),
            Tok::Str("it's".into()),
            Tok::Punct(Punct::Comma),
            Tok::Str("q\"é".into()),
            Tok::Float(1.5),
            Tok::Float(2000.0),
            Tok::Int(0),
            Tok::Eof,
        ]
    );
}

#[test]
fn numbers_follow_couchbase_rules() {
    assert_eq!(
        toks("007"),
        vec![Tok::Int(0), Tok::Int(0), Tok::Int(7), Tok::Eof]
    );
    assert_eq!(toks("12ab"), vec![Tok::Error("invalid number"), Tok::Eof]);
    assert_eq!(toks("1e5x"), vec![Tok::Error("invalid number"), Tok::Eof]);
    assert_eq!(
        toks("9223372036854775808"),
        vec![Tok::Float(9.223372036854776e18), Tok::Eof]
    );
    assert_eq!(toks("1e999"), vec![Tok::Error("invalid number"), Tok::Eof]);
}

#[test]
fn parameters_comments_and_operators() {
    assert_eq!(
        toks("$1 $name @n ? -- c\n/* b */ <> != || <= == ."),
        vec![
            Tok::PositionalParam(1),
            Tok::NamedParam("name".into()),
            Tok::NamedParam("n".into()),
            Tok::NextParam,
            Tok::Punct(Punct::Ne),
            Tok::Punct(Punct::Ne),
            Tok::Punct(Punct::Concat),
            Tok::Punct(Punct::Le),
            Tok::Punct(Punct::DoubleEq),
            Tok::Punct(Punct::Dot),
            Tok::Eof,
        ]
    );
}

#[test]
fn errors_stop_the_stream() {
    assert_eq!(
        toks("'abc"),
        vec![
            Tok::Error("invalid quoted string - missing closing quote"),
            Tok::Eof
        ]
    );
    assert_eq!(
        toks("\"\\q\" 1"),
        vec![
            Tok::Error("invalid quoted string - invalid escape sequence"),
            Tok::Eof
        ]
    );
}

#[test]
fn positions_are_lines_and_char_columns() {
    let t = tokenize("é\n  x");
    assert_eq!((t[0].line, t[0].column), (0, 0));
    assert_eq!((t[1].line, t[1].column, t[1].start), (1, 2, 5));
}
