//! The fake's clock (real time plus an offset a test advances) and RFC 3339 timestamps as
//! QQ writes them (`2024-10-15T16:33:15+08:00`, Beijing time).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The offset QQ writes its timestamps in, minutes east of UTC.
pub const QQ_OFFSET_MINUTES: i64 = 8 * 60;

/// `time` as QQ writes it, whole seconds at +08:00.
pub fn rfc3339(time: SystemTime) -> String {
    let unix = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0));
    let local = unix + QQ_OFFSET_MINUTES * 60;
    let (days, secs) = (local.div_euclid(86_400), local.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}+08:00",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// The date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Real time moved forward by what the test advanced.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Clock {
    pub(super) offset: Duration,
}

impl Clock {
    pub(super) fn now(&self) -> SystemTime {
        SystemTime::now() + self.offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_beijing_time() {
        let t = UNIX_EPOCH + Duration::from_secs(1_728_981_195);
        assert_eq!(rfc3339(t), "2024-10-15T16:33:15+08:00");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T08:00:00+08:00");
    }
}
