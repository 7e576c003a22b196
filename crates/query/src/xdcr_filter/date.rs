//! `DATE()`: a date written as `YYYY-MM-DD` or in RFC 3339 (`2019-01-25T18:40:37Z`,
//! `2018-01-01T12:00+02:00`, with or without seconds and their fraction) as milliseconds
//! since the Unix epoch, so dates compare as numbers. Anything else is not a date.

/// Milliseconds since 1970-01-01T00:00:00Z, or `None` if `text` is not such a date.
pub(super) fn millis(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let year = digits(b, 0, 4)?;
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let (month, day) = (digits(b, 5, 2)?, digits(b, 8, 2)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    if b.len() == 10 {
        return Some(days * 86_400_000);
    }
    if !matches!(b.get(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    let (hour, minute) = (digits(b, 11, 2)?, digits(b, 14, 2)?);
    if b.get(13) != Some(&b':') || hour > 23 || minute > 59 {
        return None;
    }
    let mut at = 16;
    let (mut second, mut ms) = (0, 0);
    if b.get(at) == Some(&b':') {
        second = digits(b, at + 1, 2)?;
        if second > 60 {
            return None;
        }
        at += 3;
        if b.get(at) == Some(&b'.') {
            let frac = b[at + 1..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
            if frac == 0 {
                return None;
            }
            // Milliseconds: the first three digits, padded.
            ms = (0..3).fold(0, |acc, i| {
                let d = if i < frac {
                    i64::from(b[at + 1 + i] - b'0')
                } else {
                    0
                };
                acc * 10 + d
            });
            at += 1 + frac;
        }
    }
    let offset_minutes = match b.get(at) {
        Some(b'Z' | b'z') if b.len() == at + 1 => 0,
        Some(sign @ (b'+' | b'-')) if b.len() == at + 6 && b[at + 3] == b':' => {
            let (h, m) = (digits(b, at + 1, 2)?, digits(b, at + 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let off = h * 60 + m;
            if *sign == b'-' {
                -off
            } else {
                off
            }
        }
        _ => return None,
    };
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1000 + ms)
}

fn digits(b: &[u8], at: usize, n: usize) -> Option<i64> {
    let s = b.get(at..at + n)?;
    s.iter().try_fold(0i64, |acc, c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::millis;

    #[test]
    fn dates_and_times() {
        assert_eq!(millis("1970-01-01"), Some(0));
        assert_eq!(millis("1970-01-02"), Some(86_400_000));
        assert_eq!(millis("2019-01-25"), Some(1_548_374_400_000));
        assert_eq!(millis("2019-01-25T18:40:37Z"), Some(1_548_441_637_000));
        assert_eq!(millis("2019-01-25T18:40:37.5Z"), Some(1_548_441_637_500));
        assert_eq!(
            millis("2019-01-25T18:40:37.123456Z"),
            Some(1_548_441_637_123)
        );
        assert_eq!(millis("2018-01-01T12:00Z"), Some(1_514_808_000_000));
        assert_eq!(millis("2018-01-01T14:00+02:00"), Some(1_514_808_000_000));
        assert_eq!(millis("2018-01-01T10:00-02:00"), Some(1_514_808_000_000));
        assert_eq!(millis("2024-02-29"), Some(1_709_164_800_000));
        assert_eq!(millis("1969-12-31"), Some(-86_400_000));
    }

    #[test]
    fn not_dates() {
        for bad in [
            "",
            "2019",
            "2019-1-25",
            "2019-13-01",
            "2019-02-29",
            "2019-01-32",
            "2019-01-25T",
            "2019-01-25T24:00Z",
            "2019-01-25T18:40",
            "2019-01-25T18:40:37",
            "2019-01-25T18:40:37.Z",
            "2019-01-25T18:40Zx",
            "2019-01-25T18:40+0200",
            "2019-01-25x",
            "２０１９-01-25",
        ] {
            assert_eq!(millis(bad), None, "{bad:?}");
        }
    }
}
