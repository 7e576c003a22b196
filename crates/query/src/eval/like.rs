//! LIKE patterns: `%` matches any run of characters, `_` exactly one, and a backslash makes
//! the next character literal (a trailing backslash is itself literal).

#[derive(Clone, Copy, PartialEq)]
enum Pat {
    Lit(char),
    One,
    Any,
}

fn compile(pattern: &str) -> Vec<Pat> {
    let mut out = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        out.push(match c {
            '%' => Pat::Any,
            '_' => Pat::One,
            '\\' => Pat::Lit(chars.next().unwrap_or('\\')),
            c => Pat::Lit(c),
        });
    }
    out
}

/// Whether `s` matches `pattern`, in O(len(s) * len(pattern)) at worst: on a mismatch
/// only the latest `%` is retried one character further, never earlier ones.
pub(super) fn like(s: &str, pattern: &str) -> bool {
    let p = compile(pattern);
    let s: Vec<char> = s.chars().collect();
    let (mut si, mut pi) = (0, 0);
    let mut retry: Option<(usize, usize)> = None;
    while si < s.len() {
        match p.get(pi) {
            Some(Pat::One) => {
                si += 1;
                pi += 1;
            }
            Some(Pat::Lit(c)) if s.get(si) == Some(c) => {
                si += 1;
                pi += 1;
            }
            Some(Pat::Any) => {
                retry = Some((pi + 1, si));
                pi += 1;
            }
            _ => match retry {
                Some((after_any, from)) => {
                    pi = after_any;
                    si = from + 1;
                    retry = Some((after_any, from + 1));
                }
                None => return false,
            },
        }
    }
    p.get(pi..)
        .is_some_and(|rest| rest.iter().all(|x| *x == Pat::Any))
}

#[cfg(test)]
mod tests {
    use super::like;

    #[test]
    fn wildcards_and_escapes() {
        let cases = [
            ("United States", "United%", true),
            ("United", "United%", true),
            ("Unite", "United%", false),
            ("abc", "a_c", true),
            ("ac", "a_c", false),
            ("abc", "%", true),
            ("", "%", true),
            ("", "_", false),
            ("50%", "50\\%", true),
            ("500", "50\\%", false),
            ("a_b", "a\\_b", true),
            ("axb", "a\\_b", false),
            ("x\\", "x\\", true),
            ("mississippi", "%iss%pi", true),
            ("mississippi", "%iss%pix", false),
            ("é€", "__", true),
            ("ABC", "abc", false),
            ("a\nb", "a%b", true),
        ];
        for (s, p, want) in cases {
            assert_eq!(like(s, p), want, "{s:?} LIKE {p:?}");
        }
    }

    #[test]
    fn many_wildcards_stay_fast() {
        let s = "a".repeat(2000);
        let p = format!("{}b", "%a".repeat(200));
        assert!(!like(&s, &p));
    }
}
