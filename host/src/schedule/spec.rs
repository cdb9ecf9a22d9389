//! Schedule specifications: what a user may write and how it is checked.
//!
//! # Forms
//! - **Cron**: 5 fields `minute hour day-of-month month day-of-week` (fires at second
//!   0 of the minute) or 6 fields with seconds first. Vixie-cron semantics: day of
//!   week is `0..=7` with both 0 and 7 meaning Sunday, names `JAN`..`DEC` and
//!   `SUN`..`SAT` are accepted, and when both day fields are restricted a day matching
//!   either one fires. `*`, lists `a,b`, ranges `a-b` and steps `*/n`, `a-b/n` work in
//!   every field; `L`, `LW`, `nW` (day of month) and `nL`, `n#k` (day of week) are
//!   accepted too. Aliases: `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`,
//!   `@midnight`, `@hourly`; anything else starting with `@` (e.g. `@reboot`) is an
//!   error. Expressions are evaluated in a configured IANA time zone (default UTC).
//! - **Every**: an interval such as `90s`, `5m`, `1h`, `2d`, `1w` or a combination in
//!   descending units (`1h30m`, `1d12h`), at least [`MIN_INTERVAL`].
//! - **At**: a one-shot RFC 3339 time (`--at 2030-01-01T09:00:00+01:00`) that must lie
//!   in the future, or `--in DURATION` from now (any positive duration, same syntax).
//!
//! # Daylight saving time (cron in a zone with DST)
//! A job at a fixed wall-clock time (single second, minute and hour) that falls into
//! the hour skipped by a spring-forward change runs at the first instant after the
//! gap (a 02:30 job in Europe/Berlin runs at 03:00 CEST that day). On a fall-back
//! day such a job runs once, at the earlier of the two instants. Jobs with a
//! wildcard, list, range or step in those fields follow the real clock: they skip
//! the missing hour and run in both passes of the repeated one.
//!
//! # Limits
//! - prompt: 1 to [`MAX_PROMPT_CHARS`] characters (Unicode scalar values);
//! - job name: 1 to [`MAX_JOB_NAME_LEN`] characters from `A-Z a-z 0-9 . _ -`.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::cron_check;

/// The shortest allowed repeat interval; shorter ones belong in a loop, not a schedule.
pub const MIN_INTERVAL: Duration = Duration::from_secs(60);
/// The longest repeat interval: a year. Longer ones are typos, and soon no longer
/// fit a calendar (`99999999999999d` would never fire).
pub const MAX_INTERVAL: Duration = Duration::from_secs(365 * 86_400);
/// The longest prompt a job may carry, in characters.
pub const MAX_PROMPT_CHARS: usize = 20_000;
/// The longest cron expression accepted, in bytes.
pub const MAX_CRON_BYTES: usize = 512;
/// The longest job name, in characters.
pub const MAX_JOB_NAME_LEN: usize = 64;

/// When a job fires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleSpec {
    /// A checked cron expression (as written, trimmed), evaluated in `tz`.
    Cron {
        /// The expression; 5 or 6 fields or an alias.
        expr: String,
        /// The zone whose wall clock the expression describes.
        tz: Tz,
    },
    /// A fixed interval, anchored on the job's creation or last fire time.
    Every(Duration),
    /// Once, at this instant.
    At(DateTime<Utc>),
}

impl ScheduleSpec {
    /// A cron schedule; `tz` is an IANA zone name, UTC when `None`.
    pub fn cron(expr: &str, tz: Option<&str>) -> Result<Self, ScheduleError> {
        let tz = match tz {
            Some(name) => parse_time_zone(name)?,
            None => Tz::UTC,
        };
        // A real expression is a few dozen bytes; the daemon evaluates every job's on
        // each tick, so a huge one is refused here, before it is stored.
        if expr.len() > MAX_CRON_BYTES {
            return Err(ScheduleError::CronTooLong { bytes: expr.len() });
        }
        cron_check::compile(expr)?;
        let spec = Self::Cron {
            expr: expr.split_whitespace().collect::<Vec<_>>().join(" "),
            tz,
        };
        // Fields that each check can still make a date that never comes (`0 0 30 2 *`).
        if super::next_fire::next_fire(&spec, Utc::now()).is_none() {
            return Err(ScheduleError::NeverFires {
                spec: spec.to_string(),
                why: "no date matches its day-of-month, month and day-of-week together".into(),
            });
        }
        Ok(spec)
    }

    /// A repeating schedule from interval text such as `90s` or `1h30m`.
    pub fn every(text: &str) -> Result<Self, ScheduleError> {
        Self::every_duration(parse_interval(text)?)
    }

    /// A repeating schedule from a duration (e.g. read back from the store).
    pub fn every_duration(interval: Duration) -> Result<Self, ScheduleError> {
        if interval < MIN_INTERVAL {
            return Err(ScheduleError::IntervalTooShort {
                interval: format_interval(interval),
            });
        }
        if interval > MAX_INTERVAL {
            return Err(ScheduleError::NeverFires {
                spec: format!("every {}", format_interval(interval)),
                why: "the longest interval is 365d; use a cron expression (`@yearly`) or \
                      `--at` for rarer jobs"
                    .into(),
            });
        }
        Ok(Self::Every(interval))
    }

    /// A one-shot schedule at an RFC 3339 time that must be later than `now`.
    pub fn at(text: &str, now: DateTime<Utc>) -> Result<Self, ScheduleError> {
        let at = DateTime::parse_from_rfc3339(text.trim())
            .map_err(|err| ScheduleError::InvalidTime {
                text: text.to_owned(),
                reason: err.to_string(),
            })?
            .with_timezone(&Utc);
        Self::at_time(at, now)
    }

    /// A one-shot schedule at `at`, which must be later than `now`.
    pub fn at_time(at: DateTime<Utc>, now: DateTime<Utc>) -> Result<Self, ScheduleError> {
        if at <= now {
            return Err(ScheduleError::TimeInPast { at, now });
        }
        Ok(Self::At(at))
    }

    /// A one-shot schedule `text` (e.g. `10m`) after `now`.
    pub fn in_from_now(text: &str, now: DateTime<Utc>) -> Result<Self, ScheduleError> {
        let delay = parse_interval(text)?;
        let delay = chrono::TimeDelta::from_std(delay).map_err(|_| overflow(text))?;
        let at = now
            .checked_add_signed(delay)
            .ok_or_else(|| overflow(text))?;
        Ok(Self::At(at))
    }

    /// One-shot jobs end after firing.
    pub fn is_one_shot(&self) -> bool {
        matches!(self, Self::At(_))
    }
}

impl fmt::Display for ScheduleSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cron { expr, tz } => write!(f, "cron `{expr}` ({tz})"),
            Self::Every(interval) => write!(f, "every {}", format_interval(*interval)),
            Self::At(at) => write!(f, "at {}", at.to_rfc3339()),
        }
    }
}

fn overflow(text: &str) -> ScheduleError {
    ScheduleError::InvalidInterval {
        text: text.to_owned(),
        reason: "too long".to_owned(),
    }
}

/// Parses `90s`, `5m`, `1h`, `2d`, `1w` and descending combinations such as `1h30m`.
pub fn parse_interval(text: &str) -> Result<Duration, ScheduleError> {
    let invalid = |reason: &str| ScheduleError::InvalidInterval {
        text: text.to_owned(),
        reason: reason.to_owned(),
    };
    const UNITS: [(char, u64); 5] = [
        ('w', 7 * 86_400),
        ('d', 86_400),
        ('h', 3_600),
        ('m', 60),
        ('s', 1),
    ];
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(invalid("empty; write e.g. `90s`, `5m`, `1h30m` or `2d`"));
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    // Index into UNITS of the last unit seen, so units must descend and not repeat.
    let mut last_unit: Option<usize> = None;
    for ch in trimmed.chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        let unit = UNITS
            .iter()
            .position(|(u, _)| *u == ch.to_ascii_lowercase())
            .ok_or_else(|| invalid(&format!("unknown unit `{ch}`; use s, m, h, d or w")))?;
        if digits.is_empty() {
            return Err(invalid(&format!("unit `{ch}` without a number before it")));
        }
        if last_unit.is_some_and(|last| unit <= last) {
            return Err(invalid("units must go from largest to smallest, each once"));
        }
        last_unit = Some(unit);
        let n: u64 = digits.parse().map_err(|_| invalid("number too large"))?;
        digits.clear();
        total = n
            .checked_mul(UNITS[unit].1)
            .and_then(|secs| total.checked_add(secs))
            .ok_or_else(|| invalid("too long"))?;
    }
    if !digits.is_empty() {
        return Err(invalid("a number needs a unit (s, m, h, d or w)"));
    }
    if total == 0 {
        return Err(invalid("must be longer than zero"));
    }
    Ok(Duration::from_secs(total))
}

/// Writes an interval the way [`parse_interval`] reads it (`1h30m`, `90s` → `1m30s`).
pub fn format_interval(interval: Duration) -> String {
    let mut secs = interval.as_secs();
    if secs == 0 {
        return format!("{}ms", interval.as_millis());
    }
    let mut out = String::new();
    for (unit, size) in [('d', 86_400), ('h', 3_600), ('m', 60), ('s', 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    out
}

/// Looks up an IANA time zone name such as `Europe/Berlin` (case-sensitive).
pub fn parse_time_zone(name: &str) -> Result<Tz, ScheduleError> {
    name.trim()
        .parse::<Tz>()
        .map_err(|_| ScheduleError::UnknownTimeZone {
            name: name.to_owned(),
        })
}

/// Checks a job name: 1 to 64 characters from `A-Z a-z 0-9 . _ -`.
pub fn validate_job_name(name: &str) -> Result<(), ScheduleError> {
    let bad = |reason: String| ScheduleError::InvalidJobName {
        name: name.to_owned(),
        reason,
    };
    if name.is_empty() {
        return Err(bad("it is empty".to_owned()));
    }
    if let Some(ch) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(bad(format!(
            "character {ch:?} is not allowed (use A-Z, a-z, 0-9, `.`, `_`, `-`)"
        )));
    }
    if name.len() > MAX_JOB_NAME_LEN {
        return Err(bad(format!(
            "{} characters, at most {MAX_JOB_NAME_LEN} allowed",
            name.len()
        )));
    }
    Ok(())
}

/// Checks a job prompt: not blank and at most `MAX_PROMPT_CHARS` characters.
pub fn validate_prompt(prompt: &str) -> Result<(), ScheduleError> {
    if prompt.trim().is_empty() {
        return Err(ScheduleError::EmptyPrompt);
    }
    let chars = prompt.chars().count();
    if chars > MAX_PROMPT_CHARS {
        return Err(ScheduleError::PromptTooLong { chars });
    }
    Ok(())
}

/// A cron field, in the order of a 6-field expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CronField {
    /// Seconds, `0..=59` (6-field expressions only).
    Second,
    /// Minutes, `0..=59`.
    Minute,
    /// Hours, `0..=23`.
    Hour,
    /// Day of month, `1..=31`.
    DayOfMonth,
    /// Month, `1..=12` or `JAN`..`DEC`.
    Month,
    /// Day of week, `0..=7` (0 and 7 are Sunday) or `SUN`..`SAT`.
    DayOfWeek,
}

impl CronField {
    /// Every field, seconds first.
    pub const ALL: [CronField; 6] = [
        Self::Second,
        Self::Minute,
        Self::Hour,
        Self::DayOfMonth,
        Self::Month,
        Self::DayOfWeek,
    ];

    /// The field's name as used in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Second => "seconds",
            Self::Minute => "minute",
            Self::Hour => "hour",
            Self::DayOfMonth => "day-of-month",
            Self::Month => "month",
            Self::DayOfWeek => "day-of-week",
        }
    }

    /// The smallest and largest numeric value.
    pub fn range(self) -> (u32, u32) {
        match self {
            Self::Second | Self::Minute => (0, 59),
            Self::Hour => (0, 23),
            Self::DayOfMonth => (1, 31),
            Self::Month => (1, 12),
            Self::DayOfWeek => (0, 7),
        }
    }
}

impl fmt::Display for CronField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What is wrong with one cron field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FieldProblem {
    /// A list has an empty entry (`1,,2` or a trailing comma).
    #[error("empty list entry")]
    EmptyItem,
    /// Neither a number nor (where allowed) a name.
    #[error("`{token}` is not a number{}", if *names { " or a name" } else { "" })]
    NotAValue {
        /// The offending token.
        token: String,
        /// Whether names are allowed in this field.
        names: bool,
    },
    /// A number outside the field's range.
    #[error("value {value} out of range {min}..={max}")]
    OutOfRange {
        /// The number as written.
        value: String,
        /// Smallest allowed value.
        min: u32,
        /// Largest allowed value.
        max: u32,
    },
    /// A range whose start is after its end.
    #[error("range start {start} is after its end {end}")]
    ReversedRange {
        /// Start value.
        start: u32,
        /// End value.
        end: u32,
    },
    /// A step that is not a whole number within the field's span.
    #[error("step `{step}` must be a whole number from 1 to {max}")]
    BadStep {
        /// The step as written.
        step: String,
        /// Largest sensible step.
        max: u32,
    },
    /// A step after a single value (`5/10`), which cron implementations disagree on.
    #[error("a step needs `*` or a range before it, e.g. `*/5` or `0-30/5`")]
    StepWithoutRange,
    /// `?` outside the two day fields.
    #[error("`?` is only allowed in day-of-month and day-of-week")]
    QuestionMarkNotAllowed,
    /// `n#k` with `k` outside `1..=5`.
    #[error("`#{nth}`: the occurrence must be 1 to 5")]
    BadNth {
        /// The occurrence as written.
        nth: String,
    },
}

/// Why a schedule, job name or prompt was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// One field of a cron expression is wrong.
    #[error("invalid cron expression `{expr}`: field {position} ({field}) `{text}`: {problem}")]
    CronField {
        /// The whole expression.
        expr: String,
        /// 1-based position of the field as written.
        position: usize,
        /// Which field it is.
        field: CronField,
        /// The field's text.
        text: String,
        /// What is wrong with it.
        problem: FieldProblem,
    },
    /// Not 5 or 6 fields.
    #[error(
        "invalid cron expression `{expr}`: {found} fields; expected 5 (minute hour \
         day-of-month month day-of-week) or 6 (seconds first)"
    )]
    CronFieldCount {
        /// The whole expression.
        expr: String,
        /// How many fields it has.
        found: usize,
    },
    /// An `@alias` that is not supported.
    #[error(
        "unknown cron alias `{alias}`; supported: @yearly, @annually, @monthly, @weekly, \
         @daily, @midnight, @hourly"
    )]
    UnknownCronAlias {
        /// The alias as written.
        alias: String,
    },
    /// The cron evaluator refused an expression the field checks let through.
    #[error("invalid cron expression `{expr}`: {message}")]
    CronRejected {
        /// The whole expression.
        expr: String,
        /// The evaluator's message.
        message: String,
    },
    /// Interval text that cannot be read.
    #[error("invalid interval `{text}`: {reason}")]
    InvalidInterval {
        /// The text as written.
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// A schedule that checks field by field but can never fire.
    #[error("{spec} can never fire: {why}")]
    NeverFires {
        /// The schedule as shown.
        spec: String,
        /// Why.
        why: String,
    },
    /// An interval shorter than a minute.
    #[error("interval {interval} is too short; the minimum is 1m")]
    IntervalTooShort {
        /// The interval, formatted.
        interval: String,
    },
    /// A time that is not RFC 3339.
    #[error("invalid time `{text}` (expected RFC 3339, e.g. 2030-01-01T09:00:00Z): {reason}")]
    InvalidTime {
        /// The text as written.
        text: String,
        /// The parser's message.
        reason: String,
    },
    /// A one-shot time that is not in the future.
    #[error("time {at} is not in the future (now is {now})")]
    TimeInPast {
        /// The requested time.
        at: DateTime<Utc>,
        /// The clock it was checked against.
        now: DateTime<Utc>,
    },
    /// A zone name the IANA database does not know.
    #[error(
        "unknown time zone `{}`; use an IANA name such as `Europe/Berlin` or `UTC`",
        crate::text::escape(name)
    )]
    UnknownTimeZone {
        /// The name as written.
        name: String,
    },
    /// A cron expression over [`MAX_CRON_BYTES`].
    #[error("cron expression is {bytes} bytes; at most {MAX_CRON_BYTES} allowed")]
    CronTooLong {
        /// Its length in bytes.
        bytes: usize,
    },
    /// A prompt over 20,000 characters.
    #[error("prompt has {chars} characters; at most {MAX_PROMPT_CHARS} allowed")]
    PromptTooLong {
        /// Its length in characters.
        chars: usize,
    },
    /// An empty or blank prompt.
    #[error("prompt is empty")]
    EmptyPrompt,
    /// A job name outside `[A-Za-z0-9._-]{1,64}`.
    #[error("invalid job name `{}`: {reason}", crate::text::escape(name))]
    InvalidJobName {
        /// The name as written.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use pretty_assertions::assert_eq;

    fn field_err(expr: &str) -> (usize, CronField, String, FieldProblem) {
        match ScheduleSpec::cron(expr, None) {
            Err(ScheduleError::CronField {
                position,
                field,
                text,
                problem,
                ..
            }) => (position, field, text, problem),
            other => panic!("expected a field error for `{expr}`, got {other:?}"),
        }
    }

    #[test]
    fn schedules_that_can_never_fire_are_refused() {
        for expr in [
            "0 0 30 2 *",
            "0 0 31 4 *",
            "0 0 31 2,4,6,9,11 *",
            "0 0 0 30 2 *",
        ] {
            let started = std::time::Instant::now();
            let e = ScheduleSpec::cron(expr, Some("Europe/Berlin")).unwrap_err();
            assert!(matches!(e, ScheduleError::NeverFires { .. }), "{expr}: {e}");
            assert!(e.to_string().contains("can never fire"), "{e}");
            assert!(
                started.elapsed() < std::time::Duration::from_secs(2),
                "{expr}"
            );
        }
        // Rare but real dates, and either day field matching (cron's OR).
        for expr in ["0 0 29 2 *", "0 0 30 2 1", "0 0 L 2 *", "@yearly"] {
            ScheduleSpec::cron(expr, None).unwrap();
        }
        let e = ScheduleSpec::every("99999999999999d").unwrap_err();
        assert!(e.to_string().contains("can never fire"), "{e}");
        let e = ScheduleSpec::every("366d").unwrap_err();
        assert!(e.to_string().contains("365d"), "{e}");
        ScheduleSpec::every("365d").unwrap();
    }

    #[test]
    fn hour_out_of_range_names_field_two() {
        let err = ScheduleSpec::cron("0 25 * * *", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid cron expression `0 25 * * *`: field 2 (hour) `25`: value 25 out of range 0..=23"
        );
    }

    #[test]
    fn six_field_positions_count_seconds_first() {
        assert_eq!(
            field_err("61 * * * * *"),
            (
                1,
                CronField::Second,
                "61".into(),
                FieldProblem::OutOfRange {
                    value: "61".into(),
                    min: 0,
                    max: 59
                }
            )
        );
        let (pos, field, ..) = field_err("0 0 24 * * *");
        assert_eq!((pos, field), (3, CronField::Hour));
    }

    #[test]
    fn each_field_reports_its_own_problem() {
        assert_eq!(field_err("60 * * * *").1, CronField::Minute);
        assert_eq!(field_err("* * 0 * *").1, CronField::DayOfMonth);
        assert_eq!(field_err("* * 32 * *").1, CronField::DayOfMonth);
        assert_eq!(field_err("* * * 13 *").1, CronField::Month);
        assert_eq!(field_err("* * * FOO *").1, CronField::Month);
        assert_eq!(field_err("* * * * 8").1, CronField::DayOfWeek);
        assert_eq!(
            field_err("* * * * 1-3,").3,
            FieldProblem::EmptyItem,
            "trailing comma"
        );
        assert_eq!(
            field_err("5-2 * * * *").3,
            FieldProblem::ReversedRange { start: 5, end: 2 }
        );
        assert_eq!(
            field_err("*/0 * * * *").3,
            FieldProblem::BadStep {
                step: "0".into(),
                max: 60
            }
        );
        assert_eq!(field_err("5/10 * * * *").3, FieldProblem::StepWithoutRange);
        assert_eq!(
            field_err("? * * * *").3,
            FieldProblem::QuestionMarkNotAllowed
        );
        assert_eq!(
            field_err("x * * * *").3,
            FieldProblem::NotAValue {
                token: "x".into(),
                names: false
            }
        );
        assert_eq!(
            field_err("* * * * MON#6").3,
            FieldProblem::BadNth { nth: "6".into() }
        );
    }

    #[test]
    fn valid_forms_are_accepted() {
        for expr in [
            "* * * * *",
            "*/15 9-17 * * MON-FRI",
            "0 0 1,15 * *",
            "0 12 * JAN-MAR sun",
            "0 0 * * 7",
            "0 0 * * MON-SUN",
            "0 0 L * *",
            "0 0 15W * *",
            "0 0 * * 5L",
            "0 0 * * 1#2",
            "0 0 ? * 1",
            "30 0-30/10 * * * *",
            "@daily",
            "@HOURLY",
            "  0   9 * * *  ",
        ] {
            ScheduleSpec::cron(expr, Some("Europe/Berlin"))
                .unwrap_or_else(|e| panic!("`{expr}` should be valid: {e}"));
        }
    }

    #[test]
    fn expression_is_stored_with_single_spaces() {
        let spec = ScheduleSpec::cron("  0   9 * * *  ", None).unwrap();
        assert_eq!(
            spec,
            ScheduleSpec::Cron {
                expr: "0 9 * * *".into(),
                tz: Tz::UTC
            }
        );
    }

    #[test]
    fn wrong_field_count_and_unknown_alias() {
        assert_eq!(
            ScheduleSpec::cron("* * * *", None),
            Err(ScheduleError::CronFieldCount {
                expr: "* * * *".into(),
                found: 4
            })
        );
        assert!(matches!(
            ScheduleSpec::cron("0 0 0 * * * 2030", None),
            Err(ScheduleError::CronFieldCount { found: 7, .. })
        ));
        assert!(matches!(
            ScheduleSpec::cron("", None),
            Err(ScheduleError::CronFieldCount { found: 0, .. })
        ));
        assert_eq!(
            ScheduleSpec::cron("@reboot", None),
            Err(ScheduleError::UnknownCronAlias {
                alias: "@reboot".into()
            })
        );
    }

    #[test]
    fn time_zones() {
        assert!(ScheduleSpec::cron("0 9 * * *", Some("America/New_York")).is_ok());
        let err = ScheduleSpec::cron("0 9 * * *", Some("Mars/Olympus")).unwrap_err();
        assert_eq!(
            err,
            ScheduleError::UnknownTimeZone {
                name: "Mars/Olympus".into()
            }
        );
        assert!(err.to_string().contains("Europe/Berlin"));
    }

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_interval("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_interval("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_interval("2d"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse_interval("1w"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_interval("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_interval("1d2h3m4s"), Ok(Duration::from_secs(93_784)));
        assert_eq!(parse_interval(" 2H "), Ok(Duration::from_secs(7200)));
        for bad in ["", "5", "m", "5x", "30m1h", "1h1h", "0m", "1.5h", "-5m"] {
            assert!(
                matches!(
                    parse_interval(bad),
                    Err(ScheduleError::InvalidInterval { .. })
                ),
                "`{bad}` should be refused"
            );
        }
        assert!(matches!(
            parse_interval("99999999999999999999w"),
            Err(ScheduleError::InvalidInterval { .. })
        ));
    }

    #[test]
    fn interval_minimum_is_one_minute() {
        assert_eq!(
            ScheduleSpec::every("59s"),
            Err(ScheduleError::IntervalTooShort {
                interval: "59s".into()
            })
        );
        assert_eq!(
            ScheduleSpec::every("60s"),
            Ok(ScheduleSpec::Every(Duration::from_secs(60)))
        );
        assert_eq!(
            ScheduleSpec::every("90s").unwrap().to_string(),
            "every 1m30s"
        );
    }

    #[test]
    fn format_round_trips() {
        for secs in [60, 90, 3600, 5400, 86_400, 93_784] {
            let d = Duration::from_secs(secs);
            assert_eq!(parse_interval(&format_interval(d)), Ok(d));
        }
    }

    #[test]
    fn at_must_be_future_rfc3339() {
        let now = Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap();
        assert_eq!(
            ScheduleSpec::at("2030-01-01T09:00:00+01:00", now),
            Ok(ScheduleSpec::At(
                Utc.with_ymd_and_hms(2030, 1, 1, 8, 0, 0).unwrap()
            ))
        );
        assert!(matches!(
            ScheduleSpec::at("2029-12-31T23:59:59Z", now),
            Err(ScheduleError::TimeInPast { .. })
        ));
        assert!(
            matches!(
                ScheduleSpec::at("2030-01-01T00:00:00Z", now),
                Err(ScheduleError::TimeInPast { .. })
            ),
            "now itself is not in the future"
        );
        assert!(matches!(
            ScheduleSpec::at("tomorrow", now),
            Err(ScheduleError::InvalidTime { .. })
        ));
        assert!(
            ScheduleSpec::at("2030-01-01T09:00:00Z", now)
                .unwrap()
                .is_one_shot()
        );
    }

    #[test]
    fn in_from_now() {
        let now = Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap();
        assert_eq!(
            ScheduleSpec::in_from_now("1h30m", now),
            Ok(ScheduleSpec::At(
                Utc.with_ymd_and_hms(2030, 1, 1, 1, 30, 0).unwrap()
            ))
        );
        assert!(ScheduleSpec::in_from_now("0s", now).is_err());
    }

    #[test]
    fn job_names() {
        for ok in ["a", "nightly-build", "v1.2_x", &"x".repeat(64)] {
            assert_eq!(validate_job_name(ok), Ok(()), "{ok}");
        }
        for bad in ["", "has space", "ümlaut", "a/b", &"x".repeat(65)] {
            assert!(
                matches!(
                    validate_job_name(bad),
                    Err(ScheduleError::InvalidJobName { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn prompts() {
        assert_eq!(validate_prompt("do it"), Ok(()));
        assert_eq!(validate_prompt("  \n"), Err(ScheduleError::EmptyPrompt));
        // Characters, not bytes: 20,000 two-byte characters are fine.
        assert_eq!(validate_prompt(&"é".repeat(MAX_PROMPT_CHARS)), Ok(()));
        let long = format!("0 0 * * {}", vec!["1"; 300].join(","));
        assert!(matches!(
            ScheduleSpec::cron(&long, None),
            Err(ScheduleError::CronTooLong { .. })
        ));
        assert_eq!(
            validate_prompt(&"a".repeat(MAX_PROMPT_CHARS + 1)),
            Err(ScheduleError::PromptTooLong {
                chars: MAX_PROMPT_CHARS + 1
            })
        );
    }
}
