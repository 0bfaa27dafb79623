//! Signed timestamps: where a scheme reads them, the units senders write them in, and the
//! tolerance check. Everything is compared in milliseconds, so a sender writing milliseconds
//! is held to the same edges as one writing seconds.

/// How a timestamp is written. In configuration: `s`, `ms` or `rfc3339`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[non_exhaustive]
pub enum TimestampUnit {
    /// Unix seconds, plain decimal digits.
    #[cfg_attr(feature = "serde", serde(rename = "s"))]
    Seconds,
    /// Unix milliseconds, plain decimal digits.
    #[cfg_attr(feature = "serde", serde(rename = "ms"))]
    Millis,
    /// RFC 3339, e.g. `2023-07-19T14:56:51.634234626Z` (Twitch); fractions below a millisecond
    /// are dropped.
    #[cfg_attr(feature = "serde", serde(rename = "rfc3339"))]
    Rfc3339,
}

/// Which side of now a timestamp may be on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Tolerance {
    /// Only age is checked: a timestamp in the future is accepted (Stripe's and HubSpot's
    /// libraries do this).
    Past(u64),
    /// Both directions, as the Standard Webhooks specification and most libraries do.
    Both(u64),
}

impl Tolerance {
    /// The tolerance in seconds.
    pub fn secs(self) -> u64 {
        match self {
            Tolerance::Past(s) | Tolerance::Both(s) => s,
        }
    }

    /// Whether a timestamp of `at_ms` (unix milliseconds) is acceptable at unix second `now`.
    pub(super) fn accepts(self, at_ms: i64, now: i64) -> bool {
        // i128: no subtraction or multiplication here can overflow.
        let age_ms = i128::from(now) * 1000 - i128::from(at_ms);
        let limit = i128::from(self.secs()) * 1000;
        match self {
            Tolerance::Past(_) => age_ms <= limit,
            Tolerance::Both(_) => age_ms.abs() <= limit,
        }
    }
}

/// Plain decimal digits: no sign, no fraction, no space, no overflow of `i64`.
pub(super) fn parse_digits(text: &str) -> Option<i64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A timestamp in unix milliseconds, or `None` when `text` is not written in `unit`.
pub(super) fn parse_millis(text: &str, unit: TimestampUnit) -> Option<i64> {
    match unit {
        TimestampUnit::Seconds => parse_digits(text)?.checked_mul(1000),
        TimestampUnit::Millis => parse_digits(text),
        TimestampUnit::Rfc3339 => parse_rfc3339(text),
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` in unix milliseconds. Strict: every field has its
/// digits, dates exist, and a leap second (`:60`) is read as the next second.
fn parse_rfc3339(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = b.get(range)?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(digits.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let sep = |i: usize, allowed: &[u8]| b.get(i).is_some_and(|c| allowed.contains(c));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut millis = 0;
    if sep(i, b".") {
        let start = i + 1;
        let mut end = start;
        while b.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        if end == start {
            return None;
        }
        // Up to three digits count; the rest (Twitch sends nanoseconds) are dropped.
        let kept = &b[start..end.min(start + 3)];
        millis = kept.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0'));
        millis *= 10_i64.pow(3 - kept.len() as u32);
        i = end;
    }
    let offset_secs = match b.get(i)? {
        b'Z' | b'z' if b.len() == i + 1 => 0,
        sign @ (b'+' | b'-') if b.len() == i + 6 && b[i + 3] == b':' => {
            let (h, m) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            let offset = h * 3600 + m * 60;
            if *sign == b'+' {
                offset
            } else {
                -offset
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
    Some(secs * 1000 + millis)
}

/// Unix milliseconds as RFC 3339 in UTC: `YYYY-MM-DDTHH:MM:SSZ`, with `.mmm` before the `Z`
/// when there are milliseconds.
#[cfg(feature = "sign")]
pub(crate) fn format_rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    let second_of_day = secs.rem_euclid(86_400);
    let (hour, minute, second) = (
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60,
    );
    let fraction = if millis == 0 {
        String::new()
    } else {
        format!(".{millis:03}")
    };
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{fraction}Z")
}

/// The proleptic Gregorian date of a day counted from 1970-01-01: `days_from_civil` inverted.
#[cfg(feature = "sign")]
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_reads_what_providers_send_and_refuses_the_rest() {
        let table: &[(&str, Option<i64>)] = &[
            ("1970-01-01T00:00:00Z", Some(0)),
            ("2026-01-01T00:00:00Z", Some(1_767_225_600_000)),
            ("2026-01-01T00:00:00.5Z", Some(1_767_225_600_500)),
            // Twitch's nanoseconds: below a millisecond is dropped.
            ("2023-07-19T14:56:51.634234626Z", Some(1_689_778_611_634)),
            ("2026-01-01T01:00:00+01:00", Some(1_767_225_600_000)),
            ("2025-12-31T23:00:00-01:00", Some(1_767_225_600_000)),
            ("2024-02-29T00:00:00Z", Some(1_709_164_800_000)),
            ("2016-12-31T23:59:60Z", Some(1_483_228_800_000)),
            ("2023-02-29T00:00:00Z", None),
            ("2026-13-01T00:00:00Z", None),
            ("2026-01-01 00:00:00Z", None),
            ("2026-01-01T00:00:00", None),
            ("2026-01-01T00:00:00.Z", None),
            ("2026-01-01T24:00:00Z", None),
            ("2026-01-01T00:00:00+0100", None),
            ("2026-01-01T00:00:00Zjunk", None),
            ("+026-01-01T00:00:00Z", None),
            ("", None),
        ];
        for (text, expected) in table {
            assert_eq!(parse_rfc3339(text), *expected, "{text}");
        }
    }

    #[test]
    fn units_and_tolerance_edges() {
        assert_eq!(
            parse_millis("1767225600", TimestampUnit::Seconds),
            Some(1_767_225_600_000)
        );
        assert_eq!(
            parse_millis("1767225600123", TimestampUnit::Millis),
            Some(1_767_225_600_123)
        );
        assert_eq!(parse_millis("-1", TimestampUnit::Seconds), None);
        assert_eq!(parse_millis("1.5", TimestampUnit::Millis), None);
        assert_eq!(
            parse_millis(&i64::MAX.to_string(), TimestampUnit::Seconds),
            None
        );
        let now = 1_000_000;
        let both = Tolerance::Both(300);
        assert!(both.accepts((now - 300) * 1000, now));
        assert!(!both.accepts((now - 300) * 1000 - 1, now));
        assert!(both.accepts((now + 300) * 1000, now));
        assert!(!both.accepts((now + 300) * 1000 + 1, now));
        let past = Tolerance::Past(300);
        assert!(past.accepts((now + 100_000) * 1000, now));
        assert!(!past.accepts((now - 301) * 1000, now));
        assert!(!both.accepts(i64::MIN, i64::MAX));
    }

    #[cfg(feature = "sign")]
    #[test]
    fn rfc3339_written_for_signing_reads_back_to_the_same_millisecond() {
        let table: &[(i64, &str)] = &[
            (0, "1970-01-01T00:00:00Z"),
            (1_767_225_600_000, "2026-01-01T00:00:00Z"),
            (1_689_778_611_634, "2023-07-19T14:56:51.634Z"),
            (1_709_164_800_005, "2024-02-29T00:00:00.005Z"),
            (951_782_399_999, "2000-02-28T23:59:59.999Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
        ];
        for (ms, text) in table {
            assert_eq!(format_rfc3339(*ms), *text);
            assert_eq!(parse_rfc3339(text), Some(*ms), "{text}");
        }
        // Every day of four years, through a leap day.
        for day in 0..4 * 366 {
            let ms = 1_704_067_200_000 + day * 86_400_000 + day * 1_001;
            assert_eq!(parse_rfc3339(&format_rfc3339(ms)), Some(ms), "{ms}");
        }
    }
}
