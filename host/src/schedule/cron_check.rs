//! Field-by-field checks of a cron expression before the `croner` crate sees it.
//!
//! `croner` reports most mistakes as "Component error" without saying which field
//! is wrong, so every field is checked here first and a mistake names its field,
//! its position as the user typed it and the reason. `croner` still parses the
//! result, so anything these checks let through is caught there.

use super::spec::{CronField, FieldProblem, ScheduleError};

/// Month names accepted in the month field, January first.
const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
/// Weekday names accepted in the day-of-week field, Sunday (0) first.
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// `@name` aliases and the five-field expressions they stand for.
pub(crate) const ALIASES: [(&str, &str); 7] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

/// A checked cron expression, ready to evaluate.
pub(crate) struct Compiled {
    /// The evaluator.
    pub cron: croner::Cron,
    /// Neither its minute nor its hour field starts with `*`: a job at fixed times of
    /// day, which runs by the wall clock across DST changes (cron(8): once when the
    /// clock goes back, right after the gap when it goes forward), where one with a
    /// wildcard minute or hour follows real time.
    pub wall_clock: bool,
}

/// Checks `expr` and compiles it into the evaluator, reporting the first bad field.
///
/// Day of month and day of week combine as in Vixie cron: when both are restricted
/// (neither starts with `*`) a day matching either runs; when one starts with `*` —
/// `*/7` included, which `croner` alone takes as restricted — a day must match both.
pub(crate) fn compile(expr: &str) -> Result<Compiled, ScheduleError> {
    let trimmed = expr.trim();
    let expanded = if trimmed.starts_with('@') {
        ALIASES
            .iter()
            .find(|(alias, _)| alias.eq_ignore_ascii_case(trimmed))
            .map(|(_, full)| *full)
            .ok_or_else(|| ScheduleError::UnknownCronAlias {
                alias: trimmed.to_owned(),
            })?
    } else {
        trimmed
    };
    let fields: Vec<&str> = expanded.split_whitespace().collect();
    let kinds: &[CronField] = match fields.len() {
        5 => &CronField::ALL[1..],
        6 => &CronField::ALL,
        found => {
            return Err(ScheduleError::CronFieldCount {
                expr: expr.to_owned(),
                found,
            });
        }
    };
    for (index, (text, field)) in fields.iter().zip(kinds).enumerate() {
        check_field(text, *field).map_err(|problem| ScheduleError::CronField {
            expr: expr.to_owned(),
            position: index + 1,
            field: *field,
            text: (*text).to_owned(),
            problem,
        })?;
    }
    // Six fields go through as written; five get `0` seconds, as documented.
    let full = if fields.len() == 5 {
        format!("0 {}", fields.join(" "))
    } else {
        fields.join(" ")
    };
    let all: Vec<&str> = full.split_whitespace().collect();
    let (minute, hour, dom, dow) = (all[1], all[2], all[3], all[5]);
    let full = all
        .iter()
        .zip(CronField::ALL)
        .map(|(text, field)| normalize(text, field))
        .collect::<Vec<_>>()
        .join(" ");
    let cron = croner::parser::CronParser::builder()
        .dom_and_dow(dom.starts_with('*') || dow.starts_with('*'))
        .build()
        .parse(&full)
        .map_err(|err| ScheduleError::CronRejected {
            expr: expr.to_owned(),
            message: err.to_string(),
        })?;
    Ok(Compiled {
        cron,
        wall_clock: !minute.starts_with('*') && !hour.starts_with('*'),
    })
}

/// A checked field as the evaluator takes it: in a list, `*` and `*/n` items become
/// the field's whole range (`*,5`, which cron(8) accepts, was refused by `croner` with a
/// message naming no field), and a day-of-week range closed by Sunday as `0` closes
/// with `7` (`6-0`, as `SAT-SUN` is read).
fn normalize(text: &str, field: CronField) -> String {
    let (min, max) = match field {
        CronField::DayOfWeek => (0, 6),
        other => other.range(),
    };
    let list = text.contains(',');
    text.split(',')
        .map(|item| {
            let (base, step) = match item.split_once('/') {
                Some((base, step)) => (base, Some(step)),
                None => (item, None),
            };
            let base = if list && base == "*" {
                format!("{min}-{max}")
            } else if field == CronField::DayOfWeek
                && let Some((start, "0")) = base.split_once('-')
                && start != "0"
            {
                format!("{start}-7")
            } else {
                base.to_owned()
            };
            match step {
                Some(step) => format!("{base}/{step}"),
                None => base,
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Checks one field: a comma-separated list of `*`, values, ranges and steps.
fn check_field(text: &str, field: CronField) -> Result<(), FieldProblem> {
    for item in text.split(',') {
        check_item(item, field)?;
    }
    Ok(())
}

fn check_item(item: &str, field: CronField) -> Result<(), FieldProblem> {
    if item.is_empty() {
        return Err(FieldProblem::EmptyItem);
    }
    let (min, max) = field.range();
    let (base, step) = match item.split_once('/') {
        Some((base, step)) => (base, Some(step)),
        None => (item, None),
    };
    if let Some(step) = step {
        let span = max - min + 1;
        match step.parse::<u32>() {
            Ok(n) if (1..=span).contains(&n) => {}
            _ => {
                return Err(FieldProblem::BadStep {
                    step: step.to_owned(),
                    max: span,
                });
            }
        }
        if base != "*" && !base.contains('-') {
            return Err(FieldProblem::StepWithoutRange);
        }
    }
    if base == "*" {
        return Ok(());
    }
    if base == "?" {
        return match field {
            CronField::DayOfMonth | CronField::DayOfWeek => Ok(()),
            _ => Err(FieldProblem::QuestionMarkNotAllowed),
        };
    }
    if step.is_none() && check_special(base, field)? {
        return Ok(());
    }
    match base.split_once('-') {
        Some((start, end)) => {
            let start = value(start, field)?;
            let end = value(end, field)?;
            // Sunday may close a range as 7 (`MON-SUN`, `1-7`).
            let end = if field == CronField::DayOfWeek && end == 0 && start > 0 {
                7
            } else {
                end
            };
            if start > end {
                return Err(FieldProblem::ReversedRange { start, end });
            }
            Ok(())
        }
        None => value(base, field).map(drop),
    }
}

/// Accepts the `L`, `W` and `#` forms `croner` supports; `Ok(false)` when `base` is none of them.
fn check_special(base: &str, field: CronField) -> Result<bool, FieldProblem> {
    let upper = base.to_ascii_uppercase();
    match field {
        CronField::DayOfMonth => {
            if upper == "L" || upper == "LW" {
                return Ok(true);
            }
            if let Some(day) = upper.strip_suffix('W') {
                value(day, field)?;
                return Ok(true);
            }
            Ok(false)
        }
        CronField::DayOfWeek => {
            if let Some(day) = upper.strip_suffix('L') {
                value(day, field)?;
                return Ok(true);
            }
            if let Some((day, nth)) = upper.split_once('#') {
                value(day, field)?;
                match nth.parse::<u32>() {
                    Ok(1..=5) => return Ok(true),
                    _ => {
                        return Err(FieldProblem::BadNth {
                            nth: nth.to_owned(),
                        });
                    }
                }
            }
            Ok(false)
        }
        _ => Ok(false),
    }
}

/// Parses one number or name and checks it against the field's range.
fn value(token: &str, field: CronField) -> Result<u32, FieldProblem> {
    let names: &[&str] = match field {
        CronField::Month => &MONTHS,
        CronField::DayOfWeek => &WEEKDAYS,
        CronField::Second | CronField::Minute | CronField::Hour | CronField::DayOfMonth => &[],
    };
    if let Some(index) = names.iter().position(|n| n.eq_ignore_ascii_case(token)) {
        let first = if field == CronField::Month { 1 } else { 0 };
        return Ok(index as u32 + first);
    }
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FieldProblem::NotAValue {
            token: token.to_owned(),
            names: !names.is_empty(),
        });
    }
    let (min, max) = field.range();
    match token.parse::<u32>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(FieldProblem::OutOfRange {
            value: token.to_owned(),
            min,
            max,
        }),
    }
}
