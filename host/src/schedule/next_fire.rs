//! When a job fires next, and what to do about runs missed while the daemon was down.
//!
//! Everything here is a pure function of the schedule and the clocks passed in.
//!
//! # Missed runs
//! A scheduled time is *on time* if it is the latest one due and at most
//! [`ON_TIME_GRACE`] old; every other due time is *missed*. [`CatchUp::Once`] (the
//! default) runs once for any number of due times; [`CatchUp::Skip`] runs only an
//! on-time fire and drops missed ones. Either way the next fire moves past `now`.

use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, TimeDelta, TimeZone as _, Timelike as _, Utc};
use chrono_tz::Tz;

use super::cron_check;
use super::spec::ScheduleSpec;
use crate::vocab::str_enum;

/// How old the latest due time may be and still count as on time, not missed.
pub const ON_TIME_GRACE: Duration = Duration::from_secs(60);

/// Counting missed cron fires stops here (a 6-field every-second job down for days).
pub const MAX_COUNTED_MISSED: u32 = 10_000;

str_enum!(
    /// What to do with runs missed while the daemon was not running.
    #[derive(Default)]
    CatchUp {
        /// Drop missed runs; only wait for the next one.
        Skip = "skip",
        /// Run once now for all missed runs together.
        #[default]
        Once = "once",
    }
);

str_enum!(
    /// What to do when a job fires while its previous run is still going.
    #[derive(Default)]
    Overlap {
        /// Drop the new fire.
        #[default]
        Skip = "skip",
        /// Start the new run when the previous one ends (at most one waits).
        Queue = "queue",
    }
);

/// What the scheduler does with one fire under an [`Overlap`] policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverlapAction {
    /// Start a run now.
    Start,
    /// Drop this fire.
    Drop,
    /// Start a run after the running one finishes.
    Enqueue,
}

impl Overlap {
    /// Decides one fire; `already_queued` means a run is waiting already.
    pub fn on_fire(self, previous_running: bool, already_queued: bool) -> OverlapAction {
        match (previous_running, self) {
            (false, _) => OverlapAction::Start,
            (true, Self::Skip) => OverlapAction::Drop,
            (true, Self::Queue) if already_queued => OverlapAction::Drop,
            (true, Self::Queue) => OverlapAction::Enqueue,
        }
    }
}

/// The scheduler's decision at one tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirePlan {
    /// Start a run now.
    pub fire_now: bool,
    /// Due times that were not on time (saturates at [`MAX_COUNTED_MISSED`]).
    pub missed: u32,
    /// The next fire after `now`; `None` when the job has ended.
    pub next: Option<DateTime<Utc>>,
    /// The latest due time this plan accounts for (fired or skipped); store it as
    /// the job's last fire so the next plan starts after it and intervals keep
    /// their grid.
    pub due: Option<DateTime<Utc>>,
}

/// The first fire strictly after `after`.
///
/// For [`ScheduleSpec::Every`], `after` is taken as the anchor (the job's creation
/// or last fire time), so the answer is `after + interval`; use [`next_fire_every`]
/// to keep an older anchor's grid. `None` when the job never fires again (a
/// one-shot time that is not after `after`, a cron date that never comes, or an
/// expression that does not check, which [`ScheduleSpec::cron`] never builds).
pub fn next_fire(spec: &ScheduleSpec, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    match spec {
        ScheduleSpec::Cron { expr, tz } => {
            let c = cron_check::compile(expr).ok()?;
            if c.wall_clock {
                return wall_clock_next(&c.cron, tz, after);
            }
            c.cron
                .find_next_occurrence(&after.with_timezone(tz), false)
                .ok()
                .map(|t| t.with_timezone(&Utc))
                // Guards the contract even if the evaluator ever returned an
                // instant from the earlier pass of a repeated hour.
                .filter(|t| *t > after)
        }
        ScheduleSpec::Every(interval) => next_fire_every(after, *interval, after),
        ScheduleSpec::At(at) => (*at > after).then_some(*at),
    }
}

/// Wall-clock times a job at fixed times of day may skip while looking for its next
/// instant (the seconds of one fixed minute repeated by a fall-back: at most a few
/// thousand).
const MAX_WALL_STEPS: usize = 10_000;

/// The instant wall-clock time `wall` in `tz` stands for, for a job at fixed times of
/// day: the first pass of a repeated time, and the first instant after the gap for a
/// time the clock skips.
fn wall_instant(tz: &Tz, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
    use chrono::offset::LocalResult;
    match tz.from_local_datetime(&wall) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Some(t.with_timezone(&Utc)),
        LocalResult::None => {
            // Gaps start and end on a minute: the first minute that exists is the end.
            let mut m = wall.with_second(0)?.with_nanosecond(0)?;
            for _ in 0..48 * 60 {
                m += TimeDelta::minutes(1);
                if let Some(t) = tz.from_local_datetime(&m).earliest() {
                    return Some(t.with_timezone(&Utc));
                }
            }
            None
        }
    }
}

/// The first fire strictly after `after` of a job at fixed times of day: its times are
/// found on the wall clock (the evaluator walks a clock without DST), each then made
/// an instant by [`wall_instant`]; a time that made an instant not after `after` (the
/// second pass of a repeated hour) is passed over.
fn wall_clock_next(cron: &croner::Cron, tz: &Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let mut wall = after.with_timezone(tz).naive_local();
    for _ in 0..MAX_WALL_STEPS {
        wall = cron
            .find_next_occurrence(&Utc.from_utc_datetime(&wall), false)
            .ok()?
            .naive_utc();
        match wall_instant(tz, wall) {
            Some(t) if t > after => return Some(t),
            _ => {}
        }
    }
    None
}

/// The latest fire at or before `upto` of a job at fixed times of day (see
/// [`wall_clock_next`]).
fn wall_clock_latest(cron: &croner::Cron, tz: &Tz, upto: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let mut wall = upto.with_timezone(tz).naive_local();
    let mut inclusive = true;
    for _ in 0..MAX_WALL_STEPS {
        wall = cron
            .find_previous_occurrence(&Utc.from_utc_datetime(&wall), inclusive)
            .ok()?
            .naive_utc();
        inclusive = false;
        match wall_instant(tz, wall) {
            Some(t) if t <= upto => return Some(t),
            _ => {}
        }
    }
    None
}

/// The first `anchor + k * interval` (k ≥ 1) strictly after `after`.
pub fn next_fire_every(
    anchor: DateTime<Utc>,
    interval: Duration,
    after: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let step = interval.as_nanos() as i128;
    if step == 0 {
        return None;
    }
    let k = fires_in(anchor, step, after) + 1;
    let offset = i64::try_from(step.checked_mul(k)?).ok()?;
    anchor.checked_add_signed(TimeDelta::nanoseconds(offset))
}

/// How many grid points `anchor + k * step` (k ≥ 1) lie in `(anchor, until]`.
fn fires_in(anchor: DateTime<Utc>, step: i128, until: DateTime<Utc>) -> i128 {
    let elapsed = until - anchor;
    let nanos = elapsed.num_seconds() as i128 * 1_000_000_000 + elapsed.subsec_nanos() as i128;
    if nanos <= 0 { 0 } else { nanos / step }
}

/// Decides a tick: `last` is the job's last fire (its `due`) or its creation time.
pub fn plan_fires(
    spec: &ScheduleSpec,
    last: DateTime<Utc>,
    now: DateTime<Utc>,
    policy: CatchUp,
) -> FirePlan {
    let (due_count, latest) = due_between(spec, last, now);
    let next = match spec {
        ScheduleSpec::Every(interval) => next_fire_every(last, *interval, now),
        ScheduleSpec::Cron { .. } | ScheduleSpec::At(_) => next_fire(spec, now),
    };
    let Some(latest) = latest else {
        return FirePlan {
            fire_now: false,
            missed: 0,
            next,
            due: None,
        };
    };
    let grace = TimeDelta::from_std(ON_TIME_GRACE).unwrap_or(TimeDelta::MAX);
    let on_time = now - latest <= grace;
    let missed = due_count.saturating_sub(u32::from(on_time));
    let fire_now = match policy {
        CatchUp::Once => true,
        CatchUp::Skip => on_time,
    };
    FirePlan {
        fire_now,
        missed,
        next,
        due: Some(latest),
    }
}

/// Due times in `(last, now]`: how many (saturating) and the latest.
fn due_between(
    spec: &ScheduleSpec,
    last: DateTime<Utc>,
    now: DateTime<Utc>,
) -> (u32, Option<DateTime<Utc>>) {
    match spec {
        ScheduleSpec::At(at) => {
            if last < *at && *at <= now {
                (1, Some(*at))
            } else {
                (0, None)
            }
        }
        ScheduleSpec::Every(interval) => {
            let step = interval.as_nanos() as i128;
            if step == 0 {
                return (0, None);
            }
            let k = fires_in(last, step, now);
            if k == 0 {
                return (0, None);
            }
            let latest = i64::try_from(step * k)
                .ok()
                .and_then(|n| last.checked_add_signed(TimeDelta::nanoseconds(n)));
            (u32::try_from(k).unwrap_or(u32::MAX), latest)
        }
        ScheduleSpec::Cron { expr, tz } => {
            let Ok(c) = cron_check::compile(expr) else {
                return (0, None);
            };
            let latest = if c.wall_clock {
                wall_clock_latest(&c.cron, tz, now)
            } else {
                c.cron
                    .find_previous_occurrence(&now.with_timezone(tz), true)
                    .ok()
                    .map(|t| t.with_timezone(&Utc))
            }
            .filter(|t| *t > last && *t <= now);
            let Some(latest) = latest else {
                return (0, None);
            };
            let mut count = 0;
            let mut cursor = last;
            while count < MAX_COUNTED_MISSED {
                match next_fire(spec, cursor) {
                    Some(t) if t <= now => {
                        count += 1;
                        cursor = t;
                    }
                    _ => break,
                }
            }
            (count.max(1), Some(latest))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use pretty_assertions::assert_eq;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
    }

    fn cron(expr: &str, tz: &str) -> ScheduleSpec {
        ScheduleSpec::cron(expr, Some(tz)).unwrap()
    }

    /// The next `n` fires after `start`, each computed from the previous one.
    fn fires(spec: &ScheduleSpec, start: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        let mut out = Vec::new();
        let mut t = start;
        for _ in 0..n {
            t = next_fire(spec, t).expect("fires");
            out.push(t);
        }
        out
    }

    #[test]
    fn five_field_every_minute_fires_on_second_zero() {
        let spec = cron("* * * * *", "UTC");
        assert_eq!(
            fires(&spec, utc(2030, 1, 1, 0, 0, 30), 3),
            vec![
                utc(2030, 1, 1, 0, 1, 0),
                utc(2030, 1, 1, 0, 2, 0),
                utc(2030, 1, 1, 0, 3, 0)
            ]
        );
    }

    #[test]
    fn six_field_every_second() {
        let spec = cron("* * * * * *", "UTC");
        assert_eq!(
            fires(&spec, utc(2030, 1, 1, 0, 0, 58), 3),
            vec![
                utc(2030, 1, 1, 0, 0, 59),
                utc(2030, 1, 1, 0, 1, 0),
                utc(2030, 1, 1, 0, 1, 1)
            ]
        );
    }

    #[test]
    fn next_fire_is_strictly_after() {
        let spec = cron("0 9 * * *", "UTC");
        assert_eq!(
            next_fire(&spec, utc(2030, 1, 1, 9, 0, 0)),
            Some(utc(2030, 1, 2, 9, 0, 0))
        );
    }

    #[test]
    fn weekday_numbers_follow_unix_cron() {
        // 2030-01-07 is a Monday; `1` must mean Monday, `0` and `7` Sunday.
        let monday = cron("0 9 * * 1", "UTC");
        assert_eq!(
            next_fire(&monday, utc(2030, 1, 1, 0, 0, 0)),
            Some(utc(2030, 1, 7, 9, 0, 0))
        );
        for sunday in ["0 9 * * 0", "0 9 * * 7", "0 9 * * SUN"] {
            assert_eq!(
                next_fire(&cron(sunday, "UTC"), utc(2030, 1, 1, 0, 0, 0)),
                Some(utc(2030, 1, 6, 9, 0, 0)),
                "{sunday}"
            );
        }
    }

    #[test]
    fn daily_in_berlin_follows_the_wall_clock() {
        // 09:00 CET is 08:00 UTC in winter and 07:00 UTC in summer.
        let spec = cron("0 9 * * *", "Europe/Berlin");
        assert_eq!(
            next_fire(&spec, utc(2030, 1, 1, 0, 0, 0)),
            Some(utc(2030, 1, 1, 8, 0, 0))
        );
        assert_eq!(
            next_fire(&spec, utc(2030, 7, 1, 0, 0, 0)),
            Some(utc(2030, 7, 1, 7, 0, 0))
        );
    }

    #[test]
    fn spring_forward_runs_a_skipped_fixed_time_right_after_the_gap() {
        // 2024-03-31 Berlin: 02:00 CET jumps to 03:00 CEST (01:00 UTC); 02:30 does not exist.
        let spec = cron("30 2 * * *", "Europe/Berlin");
        assert_eq!(
            fires(&spec, utc(2024, 3, 30, 12, 0, 0), 2),
            vec![
                // 03:00 CEST, the first instant after the gap.
                utc(2024, 3, 31, 1, 0, 0),
                // 02:30 CEST the day after.
                utc(2024, 4, 1, 0, 30, 0),
            ]
        );
    }

    #[test]
    fn spring_forward_skips_the_missing_hour_for_wildcard_jobs() {
        let spec = cron("30 * * * *", "Europe/Berlin");
        assert_eq!(
            fires(&spec, utc(2024, 3, 30, 23, 45, 0), 3),
            // 01:30 CET, then 03:30 CEST: one real hour apart, no 02:30.
            vec![
                utc(2024, 3, 31, 0, 30, 0),
                utc(2024, 3, 31, 1, 30, 0),
                utc(2024, 3, 31, 2, 30, 0)
            ]
        );
    }

    #[test]
    fn fall_back_runs_a_fixed_time_once() {
        // 2024-10-27 Berlin: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice
        // (00:30 UTC and 01:30 UTC). The job runs at the first and not again that day.
        let spec = cron("30 2 * * *", "Europe/Berlin");
        assert_eq!(
            fires(&spec, utc(2024, 10, 26, 12, 0, 0), 2),
            vec![utc(2024, 10, 27, 0, 30, 0), utc(2024, 10, 28, 1, 30, 0)]
        );
        // Asked from inside the repeated hour (after a restart), it still does not
        // fire the second 02:30.
        assert_eq!(
            next_fire(&spec, utc(2024, 10, 27, 1, 15, 0)),
            Some(utc(2024, 10, 28, 1, 30, 0))
        );
    }

    /// Vixie cron's rule: a job whose minute and hour fields do not start with `*` runs
    /// by the wall clock, lists and ranges included (croner applies it only to single
    /// values, so these fired twice on the fall-back day and lost the fire in the gap).
    #[test]
    fn lists_and_ranges_of_fixed_times_run_by_the_wall_clock_across_dst() {
        // 2027-11-07 New York: 02:00 EDT goes back to 01:00 EST (06:00 UTC).
        let spec = cron("30 1,13 * * *", "America/New_York");
        assert_eq!(
            fires(&spec, utc(2027, 11, 6, 20, 0, 0), 3),
            vec![
                // 01:30 EDT, once; 13:30 EST; 01:30 EST the day after.
                utc(2027, 11, 7, 5, 30, 0),
                utc(2027, 11, 7, 18, 30, 0),
                utc(2027, 11, 8, 6, 30, 0)
            ]
        );
        let spec = cron("0,30 1 * * *", "America/New_York");
        assert_eq!(
            fires(&spec, utc(2027, 11, 6, 20, 0, 0), 3),
            vec![
                utc(2027, 11, 7, 5, 0, 0),
                utc(2027, 11, 7, 5, 30, 0),
                utc(2027, 11, 8, 6, 0, 0)
            ]
        );
        // 2027-03-14: 02:00 EST jumps to 03:00 EDT (07:00 UTC): 02:30 runs at 03:00.
        let spec = cron("30 2,14 * * *", "America/New_York");
        assert_eq!(
            fires(&spec, utc(2027, 3, 13, 20, 0, 0), 2),
            vec![utc(2027, 3, 14, 7, 0, 0), utc(2027, 3, 14, 18, 30, 0)]
        );
        let spec = cron("30 2-3 * * *", "America/New_York");
        assert_eq!(
            fires(&spec, utc(2027, 3, 13, 20, 0, 0), 2),
            vec![utc(2027, 3, 14, 7, 0, 0), utc(2027, 3, 14, 7, 30, 0)]
        );
        // Several seconds of one skipped minute run once, at the gap's end.
        let spec = cron("*/20 30 2 * * *", "America/New_York");
        assert_eq!(
            fires(&spec, utc(2027, 3, 13, 20, 0, 0), 2),
            vec![utc(2027, 3, 14, 7, 0, 0), utc(2027, 3, 15, 6, 30, 0)]
        );
        // Lord Howe moves by 30 minutes (2027-04-04 02:00 back to 01:30, 15:00 UTC).
        let spec = cron("45 1,5 * * *", "Australia/Lord_Howe");
        assert_eq!(
            fires(&spec, utc(2027, 4, 3, 12, 0, 0), 2),
            vec![utc(2027, 4, 3, 14, 45, 0), utc(2027, 4, 3, 19, 15, 0)]
        );
        // The latest due time of a catch-up follows the same rule.
        let (n, latest) = due_between(
            &cron("30 2,14 * * *", "America/New_York"),
            utc(2027, 3, 13, 20, 0, 0),
            utc(2027, 3, 14, 8, 0, 0),
        );
        assert_eq!((n, latest), (1, Some(utc(2027, 3, 14, 7, 0, 0))));
    }

    /// Day of month and day of week: both restricted, either matches; one starting
    /// with `*` (`*/7` too, as cron(8) reads it), both must.
    #[test]
    fn a_day_field_starting_with_a_star_means_both_day_fields_must_match() {
        // The first Sunday of the month.
        let spec = cron("0 9 1-7 * */7", "UTC");
        assert_eq!(
            next_fire(&spec, utc(2026, 12, 7, 0, 0, 0)),
            Some(utc(2027, 1, 3, 9, 0, 0))
        );
        // Mondays only.
        let spec = cron("0 9 */1 * 1", "UTC");
        assert_eq!(
            next_fire(&spec, utc(2026, 12, 8, 0, 0, 0)),
            Some(utc(2026, 12, 14, 9, 0, 0))
        );
        // Both restricted: the 1st or any Monday.
        let spec = cron("0 9 1 * 1", "UTC");
        assert_eq!(
            next_fire(&spec, utc(2026, 12, 8, 0, 0, 0)),
            Some(utc(2026, 12, 14, 9, 0, 0))
        );
        assert_eq!(
            next_fire(&spec, utc(2026, 12, 29, 0, 0, 0)),
            Some(utc(2027, 1, 1, 9, 0, 0))
        );
    }

    /// cron(8) takes `*` as one item of a list, and Sunday as `0` closing a range.
    #[test]
    fn a_star_in_a_list_and_sunday_closing_a_range_as_zero() {
        let spec = cron("*,5 0 * * *", "UTC");
        assert_eq!(
            fires(&spec, utc(2026, 12, 7, 23, 0, 0), 2),
            vec![utc(2026, 12, 8, 0, 0, 0), utc(2026, 12, 8, 0, 1, 0)]
        );
        let spec = cron("0 12 * * 1,*/3", "UTC");
        // Monday, and Sunday, Wednesday, Saturday: 2026-12-07 is a Monday.
        assert_eq!(
            fires(&spec, utc(2026, 12, 7, 0, 0, 0), 3),
            vec![
                utc(2026, 12, 7, 12, 0, 0),
                utc(2026, 12, 9, 12, 0, 0),
                utc(2026, 12, 12, 12, 0, 0)
            ]
        );
        for expr in ["0 0 * * 6-0", "0 0 * * SAT-SUN", "0 0 * * 6-7"] {
            assert_eq!(
                fires(&cron(expr, "UTC"), utc(2026, 12, 7, 0, 0, 0), 2),
                vec![utc(2026, 12, 12, 0, 0, 0), utc(2026, 12, 13, 0, 0, 0)],
                "{expr}"
            );
        }
    }

    #[test]
    fn fall_back_hourly_follows_real_hours() {
        // A wildcard-hour job runs in both passes of the repeated hour: real time
        // keeps one hour between fires.
        let spec = cron("0 * * * *", "Europe/Berlin");
        assert_eq!(
            fires(&spec, utc(2024, 10, 26, 23, 30, 0), 4),
            vec![
                utc(2024, 10, 27, 0, 0, 0),
                utc(2024, 10, 27, 1, 0, 0),
                utc(2024, 10, 27, 2, 0, 0),
                utc(2024, 10, 27, 3, 0, 0)
            ]
        );
    }

    #[test]
    fn thirty_first_skips_shorter_months() {
        let spec = cron("0 0 31 * *", "UTC");
        assert_eq!(
            fires(&spec, utc(2030, 3, 31, 12, 0, 0), 3),
            vec![
                utc(2030, 5, 31, 0, 0, 0),
                utc(2030, 7, 31, 0, 0, 0),
                utc(2030, 8, 31, 0, 0, 0)
            ]
        );
    }

    #[test]
    fn last_day_of_month() {
        let spec = cron("0 0 L * *", "UTC");
        assert_eq!(
            fires(&spec, utc(2030, 1, 31, 12, 0, 0), 2),
            vec![utc(2030, 2, 28, 0, 0, 0), utc(2030, 3, 31, 0, 0, 0)]
        );
    }

    #[test]
    fn leap_day_waits_for_a_leap_year() {
        let spec = cron("0 12 29 2 *", "UTC");
        assert_eq!(
            fires(&spec, utc(2024, 3, 1, 0, 0, 0), 2),
            vec![utc(2028, 2, 29, 12, 0, 0), utc(2032, 2, 29, 12, 0, 0)]
        );
    }

    #[test]
    fn impossible_date_never_fires() {
        // 30 February passes the field checks but never happens (`ScheduleSpec::cron`
        // refuses it; a spec built otherwise still gets no fire).
        let spec = ScheduleSpec::Cron {
            expr: "0 0 30 2 *".into(),
            tz: chrono_tz::Tz::UTC,
        };
        assert_eq!(next_fire(&spec, utc(2030, 1, 1, 0, 0, 0)), None);
    }

    #[test]
    fn aliases() {
        let now = utc(2030, 1, 1, 10, 30, 0);
        let cases = [
            ("@hourly", utc(2030, 1, 1, 11, 0, 0)),
            ("@daily", utc(2030, 1, 2, 0, 0, 0)),
            ("@midnight", utc(2030, 1, 2, 0, 0, 0)),
            // 2030-01-06 is a Sunday.
            ("@weekly", utc(2030, 1, 6, 0, 0, 0)),
            ("@monthly", utc(2030, 2, 1, 0, 0, 0)),
            ("@yearly", utc(2031, 1, 1, 0, 0, 0)),
        ];
        for (alias, want) in cases {
            assert_eq!(next_fire(&cron(alias, "UTC"), now), Some(want), "{alias}");
        }
    }

    #[test]
    fn every_is_anchored_on_a_grid() {
        let anchor = utc(2030, 1, 1, 0, 0, 0);
        let hour = Duration::from_secs(3600);
        assert_eq!(
            next_fire_every(anchor, hour, anchor),
            Some(utc(2030, 1, 1, 1, 0, 0))
        );
        // Late ticks do not drift the grid.
        assert_eq!(
            next_fire_every(anchor, hour, utc(2030, 1, 1, 5, 59, 59)),
            Some(utc(2030, 1, 1, 6, 0, 0))
        );
        assert_eq!(
            next_fire_every(anchor, hour, utc(2030, 1, 1, 6, 0, 0)),
            Some(utc(2030, 1, 1, 7, 0, 0))
        );
        // Before the anchor: the first grid point.
        assert_eq!(
            next_fire_every(anchor, hour, utc(2029, 1, 1, 0, 0, 0)),
            Some(utc(2030, 1, 1, 1, 0, 0))
        );
        assert_eq!(next_fire_every(anchor, Duration::ZERO, anchor), None);
        assert_eq!(
            next_fire(&ScheduleSpec::Every(hour), anchor),
            Some(utc(2030, 1, 1, 1, 0, 0))
        );
    }

    #[test]
    fn at_fires_once() {
        let at = utc(2030, 1, 1, 12, 0, 0);
        let spec = ScheduleSpec::At(at);
        assert_eq!(next_fire(&spec, utc(2030, 1, 1, 0, 0, 0)), Some(at));
        assert_eq!(next_fire(&spec, at), None);
    }

    #[test]
    fn plan_nothing_due() {
        let spec = ScheduleSpec::Every(Duration::from_secs(3600));
        let created = utc(2030, 1, 1, 0, 0, 0);
        for policy in [CatchUp::Once, CatchUp::Skip] {
            assert_eq!(
                plan_fires(&spec, created, utc(2030, 1, 1, 0, 59, 59), policy),
                FirePlan {
                    fire_now: false,
                    missed: 0,
                    next: Some(utc(2030, 1, 1, 1, 0, 0)),
                    due: None
                }
            );
        }
    }

    #[test]
    fn plan_on_time_fire_runs_under_both_policies() {
        let spec = cron("0 * * * *", "UTC");
        let last = utc(2030, 1, 1, 0, 0, 0);
        let now = utc(2030, 1, 1, 1, 0, 2);
        for policy in [CatchUp::Once, CatchUp::Skip] {
            assert_eq!(
                plan_fires(&spec, last, now, policy),
                FirePlan {
                    fire_now: true,
                    missed: 0,
                    next: Some(utc(2030, 1, 1, 2, 0, 0)),
                    due: Some(utc(2030, 1, 1, 1, 0, 0))
                },
                "{policy}"
            );
        }
    }

    #[test]
    fn plan_one_missed() {
        let spec = cron("0 9 * * *", "UTC");
        let last = utc(2030, 1, 1, 9, 0, 0);
        // Down from before 09:00 on the 2nd until 12:00.
        let now = utc(2030, 1, 2, 12, 0, 0);
        let once = plan_fires(&spec, last, now, CatchUp::Once);
        assert_eq!(
            once,
            FirePlan {
                fire_now: true,
                missed: 1,
                next: Some(utc(2030, 1, 3, 9, 0, 0)),
                due: Some(utc(2030, 1, 2, 9, 0, 0))
            }
        );
        let skip = plan_fires(&spec, last, now, CatchUp::Skip);
        assert_eq!(
            skip,
            FirePlan {
                fire_now: false,
                ..once
            }
        );
    }

    #[test]
    fn plan_many_missed_collapse_into_one_run() {
        let spec = cron("0 * * * *", "UTC");
        let last = utc(2030, 1, 1, 0, 0, 0);
        let now = utc(2030, 1, 2, 0, 30, 0);
        let once = plan_fires(&spec, last, now, CatchUp::Once);
        assert_eq!(
            once,
            FirePlan {
                fire_now: true,
                missed: 24,
                next: Some(utc(2030, 1, 2, 1, 0, 0)),
                due: Some(utc(2030, 1, 2, 0, 0, 0))
            }
        );
        assert!(!plan_fires(&spec, last, now, CatchUp::Skip).fire_now);
    }

    #[test]
    fn plan_many_missed_with_an_on_time_latest() {
        // Down for 5 hours, back exactly at a fire time: 4 missed + 1 on time.
        let spec = ScheduleSpec::Every(Duration::from_secs(3600));
        let last = utc(2030, 1, 1, 0, 0, 0);
        let now = utc(2030, 1, 1, 5, 0, 0);
        let skip = plan_fires(&spec, last, now, CatchUp::Skip);
        assert_eq!(
            skip,
            FirePlan {
                fire_now: true,
                missed: 4,
                next: Some(utc(2030, 1, 1, 6, 0, 0)),
                due: Some(now)
            }
        );
        assert_eq!(plan_fires(&spec, last, now, CatchUp::Once), skip);
    }

    #[test]
    fn plan_missed_count_saturates() {
        let spec = cron("* * * * * *", "UTC");
        let last = utc(2030, 1, 1, 0, 0, 0);
        let now = utc(2030, 1, 2, 0, 0, 0);
        let plan = plan_fires(&spec, last, now, CatchUp::Once);
        assert_eq!(plan.missed, MAX_COUNTED_MISSED - 1);
        assert_eq!(plan.due, Some(now));
        assert_eq!(plan.next, Some(utc(2030, 1, 2, 0, 0, 1)));
    }

    #[test]
    fn plan_one_shot() {
        let at = utc(2030, 1, 1, 12, 0, 0);
        let spec = ScheduleSpec::At(at);
        let created = utc(2030, 1, 1, 0, 0, 0);
        let before = plan_fires(&spec, created, utc(2030, 1, 1, 11, 0, 0), CatchUp::Skip);
        assert_eq!((before.fire_now, before.next), (false, Some(at)));
        // Missed by a day: Once still runs it, Skip drops it; either way it ends.
        let late = utc(2030, 1, 2, 12, 0, 0);
        let once = plan_fires(&spec, created, late, CatchUp::Once);
        assert_eq!(
            once,
            FirePlan {
                fire_now: true,
                missed: 1,
                next: None,
                due: Some(at)
            }
        );
        assert!(!plan_fires(&spec, created, late, CatchUp::Skip).fire_now);
        // Once fired (last = at), it never fires again.
        assert!(!plan_fires(&spec, at, late, CatchUp::Once).fire_now);
    }

    #[test]
    fn overlap_policy() {
        assert_eq!(Overlap::default(), Overlap::Skip);
        assert_eq!(CatchUp::default(), CatchUp::Once);
        assert_eq!(Overlap::Skip.on_fire(false, false), OverlapAction::Start);
        assert_eq!(Overlap::Skip.on_fire(true, false), OverlapAction::Drop);
        assert_eq!(Overlap::Queue.on_fire(true, false), OverlapAction::Enqueue);
        assert_eq!(Overlap::Queue.on_fire(true, true), OverlapAction::Drop);
        assert_eq!(CatchUp::parse("skip"), Some(CatchUp::Skip));
        assert_eq!(Overlap::parse("queue"), Some(Overlap::Queue));
    }
}
