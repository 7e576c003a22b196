//! What a LIKE pattern says about the strings it accepts, read the way `eval::like` reads
//! patterns: `%` and `_` are wildcards, a backslash makes the next character literal (a
//! trailing backslash is itself literal).

/// The strings a pattern can match, as far as a range scan can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LikeShape {
    /// No wildcard: only this exact string.
    Exact(String),
    /// Strings starting with this (non-empty) literal prefix.
    Prefix(String),
    /// A wildcard comes first: any string (not sargable).
    Anything,
}

pub(crate) fn like_shape(pattern: &str) -> LikeShape {
    let mut literal = String::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' | '_' if literal.is_empty() => return LikeShape::Anything,
            '%' | '_' => return LikeShape::Prefix(literal),
            '\\' => literal.push(chars.next().unwrap_or('\\')),
            c => literal.push(c),
        }
    }
    LikeShape::Exact(literal)
}

/// The least string above every string starting with `prefix`: the prefix with its last
/// character stepped up (strings collate by UTF-8 bytes, which is code point order). None
/// when every character is already the largest, so no string is above them all.
pub(crate) fn prefix_successor(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last {
            // The surrogates are not characters; the next one is U+E000.
            '\u{D7FF}' => Some('\u{E000}'),
            c => char::from_u32(u32::from(c) + 1),
        };
        if let Some(n) = next {
            chars.push(n);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_the_evaluator_escapes() {
        assert_eq!(like_shape("abc%"), LikeShape::Prefix("abc".into()));
        assert_eq!(like_shape("ab_c%"), LikeShape::Prefix("ab".into()));
        assert_eq!(like_shape("abc"), LikeShape::Exact("abc".into()));
        assert_eq!(like_shape(""), LikeShape::Exact(String::new()));
        assert_eq!(like_shape("%abc"), LikeShape::Anything);
        assert_eq!(like_shape("_"), LikeShape::Anything);
        assert_eq!(like_shape("50\\%%"), LikeShape::Prefix("50%".into()));
        assert_eq!(like_shape("a\\_b"), LikeShape::Exact("a_b".into()));
        assert_eq!(like_shape("x\\"), LikeShape::Exact("x\\".into()));
        assert_eq!(like_shape("\\%%"), LikeShape::Prefix("%".into()));
    }

    #[test]
    fn successors_bound_every_extension() {
        assert_eq!(prefix_successor("abc").as_deref(), Some("abd"));
        assert_eq!(prefix_successor("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_successor("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(prefix_successor("\u{10FFFF}"), None);
        let succ = prefix_successor("ab").expect("exists");
        for s in ["ab", "ab\u{10FFFF}\u{10FFFF}", "abzzz"] {
            assert!(s < succ.as_str(), "{s}");
        }
        assert!("ac" >= succ.as_str());
    }
}
