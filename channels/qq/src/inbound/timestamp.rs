//! RFC 3339 timestamps as QQ writes them (`2024-10-15T16:33:15+08:00`), to the instant
//! they name; and back, for the fake and the tests.
//!
//! Written by hand: the adapter needs one parse of one shape, not a date library. A
//! timestamp without an offset names no instant (the spec drops such messages), so it is
//! refused, as is anything out of range.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The instant an RFC 3339 date-time names: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` (`T`
/// may be `t` or a space, `Z` may be `z`). `None` for anything else, or before 1970.
pub fn parse(text: &str) -> Option<SystemTime> {
    let b = text.trim().as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = b.get(range)?;
        if digits.iter().all(u8::is_ascii_digit) {
            std::str::from_utf8(digits).ok()?.parse().ok()
        } else {
            None
        }
    };
    let sep = |i: usize, allowed: &[u8]| b.get(i).is_some_and(|c| allowed.contains(c));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => return None,
    };
    if day < 1 || day > days_in_month || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos: u32 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            if i - start < 9 {
                nanos = nanos * 10 + u32::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start)..9 {
            nanos = nanos.saturating_mul(10);
        }
    }
    let offset = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), rest @ ..] if rest.len() == 5 && rest[2] == b':' => {
            let hours = num(i + 1..i + 3)?;
            let minutes = num(i + 4..i + 6)?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            let secs = hours * 3600 + minutes * 60;
            if *sign == b'+' { secs } else { -secs }
        }
        _ => return None,
    };
    let unix =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    let unix = u64::try_from(unix).ok()?;
    UNIX_EPOCH.checked_add(Duration::new(unix, nanos))
}

/// `time` as RFC 3339 at a UTC `offset` in minutes (QQ writes `+08:00`), whole seconds.
pub fn format(time: SystemTime, offset_minutes: i32) -> String {
    let unix = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 2));
    let local = unix + i64::from(offset_minutes) * 60;
    let (days, secs) = (local.div_euclid(86_400), local.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    let sign = if offset_minutes < 0 { '-' } else { '+' };
    let off = offset_minutes.unsigned_abs();
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}{sign}{:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60,
        off / 60,
        off % 60
    )
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

/// The date of a day count since 1970-01-01.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn unix(t: SystemTime) -> u64 {
        t.duration_since(UNIX_EPOCH).unwrap().as_secs()
    }

    #[test]
    fn qq_timestamps_name_their_instant() {
        // The official SDK's example event: 2024-10-15T16:33:15+08:00 is 08:33:15 UTC.
        assert_eq!(
            unix(parse("2024-10-15T16:33:15+08:00").unwrap()),
            1_728_981_195
        );
        assert_eq!(unix(parse("2024-10-15T08:33:15Z").unwrap()), 1_728_981_195);
        assert_eq!(
            unix(parse("2024-10-15 03:03:15-05:30").unwrap()),
            1_728_981_195
        );
        assert_eq!(unix(parse("1970-01-01T00:00:00Z").unwrap()), 0);
        assert_eq!(unix(parse("2000-02-29T00:00:00Z").unwrap()), 951_782_400);
        let frac = parse("2024-10-15T08:33:15.25Z").unwrap();
        assert_eq!(
            frac.duration_since(UNIX_EPOCH).unwrap(),
            Duration::new(1_728_981_195, 250_000_000)
        );
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "2024-10-15T16:33:15",
            "2024-10-15T16:33:15+0800",
            "2024-13-15T16:33:15Z",
            "2023-02-29T16:33:15Z",
            "2024-10-15T24:00:00Z",
            "2024-10-15T16:33:15.Z",
            "1969-12-31T23:59:59Z",
            "1728981195",
            "",
            "２０２４-10-15T16:33:15Z",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn formatting_round_trips() {
        let t = UNIX_EPOCH + Duration::from_secs(1_728_981_195);
        assert_eq!(format(t, 480), "2024-10-15T16:33:15+08:00");
        assert_eq!(format(t, 0), "2024-10-15T08:33:15+00:00");
        assert_eq!(format(t, -330), "2024-10-15T03:03:15-05:30");
        for secs in [0, 951_782_400, 1_728_981_195, 4_102_444_800] {
            let t = UNIX_EPOCH + Duration::from_secs(secs);
            assert_eq!(parse(&format(t, 480)), Some(t));
        }
    }
}
