//! `<lastmod>` values: the W3C Datetime profile of ISO 8601 that sitemaps.org names ("This
//! date should be in W3C Datetime format. This format allows you to omit the time portion, if
//! desired, and use YYYY-MM-DD").
//!
//! The six forms of the W3C note (https://www.w3.org/TR/NOTE-datetime) are read: `YYYY`,
//! `YYYY-MM`, `YYYY-MM-DD`, `YYYY-MM-DDThh:mmTZD`, `YYYY-MM-DDThh:mm:ssTZD` and
//! `YYYY-MM-DDThh:mm:ss.sTZD`, TZD being `Z` or `+hh:mm` / `-hh:mm`. A date without a time is
//! the start of that day (of that month, of that year) in UTC. Anything else is no date.

/// The Unix time (seconds, UTC, fractions dropped) of a W3C Datetime, or `None` when `s` is
/// not one.
pub fn parse_w3c_datetime(s: &str) -> Option<i64> {
    let s = s.trim();
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    let year = num(0, 4)?;
    let (mut month, mut day) = (1, 1);
    let mut i = 4;
    if b.get(i) == Some(&b'-') {
        month = num(5, 2)?;
        i = 7;
        if b.get(i) == Some(&b'-') {
            day = num(8, 2)?;
            i = 10;
        }
    }
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let mut secs = days_from_civil(year, month, day) * 86_400;
    if i == b.len() {
        return Some(secs);
    }
    // A time needs the full date and a time zone designator (the note's "TZD").
    if i != 10 || b[i] != b'T' {
        return None;
    }
    let (hh, mm) = (num(11, 2)?, num(14, 2)?);
    if b.get(13) != Some(&b':') || hh > 23 || mm > 59 {
        return None;
    }
    secs += hh * 3600 + mm * 60;
    i = 16;
    if b.get(i) == Some(&b':') {
        let ss = num(17, 2)?;
        if ss > 59 {
            return None;
        }
        secs += ss;
        i = 19;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 {
                return None;
            }
            i += digits;
        }
    }
    match b.get(i)? {
        b'Z' if i + 1 == b.len() => Some(secs),
        sign @ (b'+' | b'-') if i + 6 == b.len() => {
            let (oh, om) = (num(i + 1, 2)?, num(i + 4, 2)?);
            if b[i + 3] != b':' || oh > 23 || om > 59 {
                return None;
            }
            let offset = oh * 3600 + om * 60;
            // The local time is `offset` ahead of UTC for `+`.
            Some(if *sign == b'+' {
                secs - offset
            } else {
                secs + offset
            })
        }
        _ => None,
    }
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

/// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::parse_w3c_datetime as p;

    /// The examples of the W3C note, and sitemaps.org's `2005-01-01`.
    #[test]
    fn every_form_of_the_w3c_note() {
        // 2005-01-01T00:00:00Z
        assert_eq!(p("2005-01-01"), Some(1_104_537_600));
        assert_eq!(p("1997"), Some(852_076_800));
        assert_eq!(p("1997-07"), Some(867_715_200));
        assert_eq!(p("1997-07-16"), Some(869_011_200));
        // 1997-07-16T19:20+01:00 is 18:20 UTC.
        assert_eq!(
            p("1997-07-16T19:20+01:00"),
            Some(869_011_200 + 18 * 3600 + 20 * 60)
        );
        assert_eq!(
            p("1997-07-16T19:20:30+01:00"),
            Some(869_011_200 + 18 * 3600 + 20 * 60 + 30)
        );
        assert_eq!(
            p("1997-07-16T19:20:30.45+01:00"),
            Some(869_011_200 + 18 * 3600 + 20 * 60 + 30)
        );
        assert_eq!(p("1997-07-16T19:20:30Z"), Some(869_011_200 + 69_630));
        assert_eq!(
            p("1997-07-16T19:20:30-05:30"),
            Some(869_011_200 + 69_630 + 19_800)
        );
        assert_eq!(p(" 2026-11-25T10:00:00Z\n"), Some(1_795_600_800));
        assert_eq!(p("2024-02-29"), Some(1_709_164_800));
    }

    #[test]
    fn what_is_not_a_w3c_datetime_is_no_date() {
        for bad in [
            "",
            "yesterday",
            "97-07-16",
            "1997-13-01",
            "1997-02-30",
            "2023-02-29",
            "1997-07-16T19:20",
            "1997-07-16T19:20:30",
            "1997-07-16 19:20:30Z",
            "1997-07-16T25:20Z",
            "1997-07-16T19:20:30.Z",
            "1997-07-16T19:20:30+0100",
            "1997-07-16T19:20:30Zjunk",
            "Wed, 25 Nov 2026 10:00:00 GMT",
            "1997-7-16",
        ] {
            assert_eq!(p(bad), None, "{bad:?}");
        }
    }
}
