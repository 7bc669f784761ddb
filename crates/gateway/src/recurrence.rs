//! When a recurring task's times fall (`kanban schedule ID --every 2h|CRON`): the rules the
//! core stores ([`board_core::recurrence`]) read against the clock and a time zone's
//! rules, which is why this lives outside the core and the planner. The CLI asks it for a
//! rule's first time; the dispatcher's read asks it, for a template whose time came, for
//! the next time and how many were missed.

use board_core::recurrence::{next_period, Every};
use board_core::Timestamp;
use board_home::config::parse_duration;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use jiff::tz::TimeZone;

/// Missed times counted at most: a rule that fires every minute, down for a month, says
/// "at least this many".
pub const MISSED_COUNT_MAX: i64 = 10_000;

/// A five-field cron expression (minute hour day-of-month month day-of-week, Vixie cron's
/// meaning: day 0 and 7 are Sunday, names allowed, `@daily` and the like too), or why not.
pub fn parse_cron(expr: &str) -> Result<Cron, String> {
    let parser = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build();
    parser.parse(expr).map_err(|e| {
        format!("not a cron expression: {expr:?} ({e}; expected five fields, e.g. \"0 9 * * 1-5\")")
    })
}

/// The time zone an IANA name stands for.
pub fn zone(name: &str) -> Result<TimeZone, String> {
    TimeZone::get(name).map_err(|_| format!("not a time zone here: {name:?}"))
}

/// A rule's first time after `now`: a period after now, or the expression's next match.
pub fn first(every: &Every, now: Timestamp) -> Result<Timestamp, String> {
    match every {
        Every::Seconds(s) => Ok(now.saturating_add(*s)),
        Every::Cron { expr, zone: name } => {
            let cron = parse_cron(expr)?;
            next_match(&cron, &zone(name)?, now)
        }
    }
}

/// For a template whose time `due` came: its next time after `now`, and how many of its
/// times after `due` and up to `now` were missed (folded into the one copy made now), at
/// most [`MISSED_COUNT_MAX`].
pub fn next(every: &Every, due: Timestamp, now: Timestamp) -> Result<(Timestamp, i64), String> {
    match every {
        Every::Seconds(s) => Ok(next_period(due, *s, now)),
        Every::Cron { expr, zone: name } => {
            let cron = parse_cron(expr)?;
            let tz = zone(name)?;
            let mut missed = 0;
            let mut at = next_match(&cron, &tz, due)?;
            while at <= now && missed < MISSED_COUNT_MAX {
                missed += 1;
                at = next_match(&cron, &tz, at)?;
            }
            if at <= now {
                at = next_match(&cron, &tz, now)?;
            }
            Ok((at, missed))
        }
    }
}

/// The expression's first match strictly after `after`, in `tz`.
fn next_match(cron: &Cron, tz: &TimeZone, after: Timestamp) -> Result<Timestamp, String> {
    let start = jiff::Timestamp::from_second(after)
        .map_err(|e| format!("a time out of range: {e}"))?
        .to_zoned(tz.clone());
    cron.find_next_occurrence(&start, false)
        .map(|z| z.timestamp().as_second())
        .map_err(|e| format!("{} never matches again ({e})", cron.pattern))
}

/// The rule `--every` names: a duration (`90s`, `15m`, `2h`, `1d`, as `--in` takes) or a
/// cron expression read in `zone`.
pub fn every(text: &str, zone_name: &str) -> Result<Every, String> {
    if let Ok(seconds) = parse_duration(text.trim()) {
        return Ok(Every::Seconds(seconds));
    }
    if text.split_whitespace().count() < 2 && !text.trim_start().starts_with('@') {
        return Err(format!(
            "not a period or a cron expression: {text:?} (expected e.g. 2h, 1d or \"0 9 * * 1-5\")"
        ));
    }
    parse_cron(text)?;
    zone(zone_name)?;
    Ok(Every::Cron {
        expr: text.trim().to_owned(),
        zone: zone_name.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MON_2026_12_07_0800_UTC: i64 = 1_796_630_400;

    fn cron(expr: &str, zone: &str) -> Every {
        Every::Cron {
            expr: expr.into(),
            zone: zone.into(),
        }
    }

    #[test]
    fn weekday_mornings_follow_vixie_cron_and_the_zone() {
        let now = MON_2026_12_07_0800_UTC;
        let weekdays = cron("0 9 * * 1-5", "UTC");
        assert_eq!(first(&weekdays, now).unwrap(), now + 3600);
        // Friday 09:00 -> Monday 09:00: Saturday and Sunday are not 1-5.
        let friday = now + 4 * 86_400 + 3600;
        assert_eq!(first(&weekdays, friday).unwrap(), friday + 3 * 86_400);
        // 0 and 7 are both Sunday.
        for sunday in ["0 9 * * 0", "0 9 * * 7", "0 9 * * SUN"] {
            assert_eq!(first(&cron(sunday, "UTC"), now).unwrap(), now + 6 * 86_400 + 3600);
        }
        // 09:00 in Paris is 08:00 UTC in December.
        assert_eq!(first(&cron("0 9 * * *", "Europe/Paris"), now - 1).unwrap(), now);
    }

    #[test]
    fn missed_times_are_counted_and_the_next_falls_after_now() {
        let hourly = cron("0 * * * *", "UTC");
        let due = MON_2026_12_07_0800_UTC;
        assert_eq!(next(&hourly, due, due).unwrap(), (due + 3600, 0));
        assert_eq!(
            next(&hourly, due, due + 3 * 3600 + 5).unwrap(),
            (due + 4 * 3600, 3)
        );
        let every_minute = cron("* * * * *", "UTC");
        let (at, missed) = next(&every_minute, due, due + 30 * 86_400).unwrap();
        assert_eq!((at, missed), (due + 30 * 86_400 + 60, MISSED_COUNT_MAX));
        assert_eq!(
            next(&Every::Seconds(600), due, due + 1800).unwrap(),
            (due + 2400, 3)
        );
    }

    #[test]
    fn bad_rules_are_refused_in_one_line() {
        assert_eq!(every("2h", "UTC").unwrap(), Every::Seconds(7200));
        assert_eq!(every(" 0 9 * * 1-5 ", "UTC").unwrap(), cron("0 9 * * 1-5", "UTC"));
        assert_eq!(every("@daily", "UTC").unwrap(), cron("@daily", "UTC"));
        for (text, zone, why) in [
            ("often", "UTC", "not a period or a cron expression"),
            ("0 9 * *", "UTC", "not a cron expression"),
            ("every day", "UTC", "not a cron expression"),
            ("0 0 9 * * 1-5", "UTC", "not a cron expression"),
            ("61 9 * * *", "UTC", "not a cron expression"),
            ("0 9 * * *", "Mars/Olympus", "not a time zone here"),
        ] {
            let e = every(text, zone).unwrap_err();
            assert!(e.contains(why) && !e.contains('\n'), "{text}: {e}");
        }
        assert!(first(&cron("0 0 30 2 *", "UTC"), MON_2026_12_07_0800_UTC).is_err());
    }
}
