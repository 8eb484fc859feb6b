//! Wall-clock timestamps for records (RFC 3339, UTC), without a date crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// `2026-11-30T05:09:09.123Z` for `t`.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, dd) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{dd:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// `20261130T050909Z`: for folder names.
pub fn compact(t: SystemTime) -> String {
    let s = rfc3339(t);
    let mut out: String = s[..19].chars().filter(|c| *c != '-' && *c != ':').collect();
    out.push('Z');
    out
}

/// Gregorian (year, month, day) of a day count since 1970-01-01
/// (Howard Hinnant's days-from-civil inverse, re-derived here).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_796_015_349_123);
        assert_eq!(rfc3339(t), "2026-11-30T05:09:09.123Z");
        assert_eq!(compact(t), "20261130T050909Z");
        // A leap day.
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(t), "2000-02-29T00:00:00.000Z");
    }
}
