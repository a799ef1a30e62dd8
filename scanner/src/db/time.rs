//! Times in the advisory DB: the text every stored time is written as
//! (import runs, applied migrations), and reading it back along with the
//! OSV timestamps records carry. Shared by `store.rs` and `schema.rs`, which
//! both write times, so that neither depends on the other for it.

use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};

/// Parses an OSV timestamp: RFC 3339, or (leniently, as some older exports
/// wrote them) the same without an offset, read as UTC as the schema says.
/// Returns the time and its nanoseconds since the epoch.
pub(super) fn parse_time(text: &str) -> Result<(DateTime<Utc>, i64), String> {
    let time = match DateTime::parse_from_rfc3339(text) {
        Ok(time) => time.with_timezone(&Utc),
        Err(rfc3339_error) => NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
            .map(|naive| naive.and_utc())
            .map_err(|_| format!("not an RFC 3339 time: {rfc3339_error}"))?,
    };
    let nanos = time.timestamp_nanos_opt().ok_or_else(|| "outside the years 1677 to 2262".to_owned())?;
    Ok((time, nanos))
}

/// The current time as stored in the DB.
pub(super) fn now_text() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osv_times_parse_to_comparable_nanoseconds() {
        let (_, z) = parse_time("2023-11-08T04:05:08.868477Z").expect("rfc3339");
        let (_, offset) = parse_time("2023-11-08T06:05:08.868477+02:00").expect("offset");
        assert_eq!(z, offset);
        let (_, nanos) = parse_time("2026-07-08T04:32:24.548042624Z").expect("nanoseconds");
        let (_, micros) = parse_time("2026-07-08T04:32:24.548042Z").expect("microseconds");
        assert_eq!(nanos - micros, 624);
        let (_, naive) = parse_time("2023-11-08T04:05:08").expect("no offset, read as UTC");
        assert_eq!(naive, parse_time("2023-11-08T04:05:08Z").expect("utc").1);
        assert!(parse_time("yesterday").is_err());
        assert!(parse_time("2023-13-01T00:00:00Z").is_err());
        assert!(parse_time("3000-01-01T00:00:00Z").is_err(), "beyond i64 nanoseconds");
    }

    #[test]
    fn stored_times_read_back() {
        let (time, _) = parse_time(&now_text()).expect("the DB reads what it writes");
        assert!((Utc::now() - time).num_seconds() < 60, "{time}");
    }
}
