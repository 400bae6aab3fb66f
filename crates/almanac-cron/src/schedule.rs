//! A job's schedule: when it next runs, the slots it has between two
//! times, and the one before a time; the stagger of top-of-hour jobs.
//!
//! A schedule's slots:
//!
//! * `at`: its one time;
//! * `every`: `anchor + k·every` for k ≥ 0, the anchor defaulting to the
//!   job's creation;
//! * `cron`: each fire time of the expression in its zone (the job's `tz`,
//!   else the host's) plus the job's stagger offset.

use jiff::tz::TimeZone;
use ring::digest::{SHA256, digest};

use crate::expr::{CronExpr, ExprError, compile_shared};

/// When a job runs. Times are epoch milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// Once, at `at_ms`.
    At { at_ms: i64 },
    /// Every `every_ms` (0 is taken as 1), on the grid through `anchor_ms`
    /// (the job's creation when absent).
    Every {
        every_ms: u64,
        anchor_ms: Option<i64>,
    },
    /// On a cron expression, in the IANA zone `tz` (the host's when
    /// absent), each fire delayed by the job's offset within `stagger_ms`
    /// (when absent, [`default_stagger_ms`] of the expression).
    Cron {
        expr: String,
        tz: Option<String>,
        stagger_ms: Option<u64>,
    },
}

/// Why a schedule, a time or a duration could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The cron expression is invalid.
    #[error(transparent)]
    Expression(#[from] ExprError),
    /// The zone is not a known IANA time zone.
    #[error("unknown time zone `{0}`")]
    UnknownZone(String),
    /// Not a time [`crate::parse_at`] reads.
    #[error(
        "`{0}` is not a time: write an ISO 8601 time (2026-03-01T09:00:00Z), a date, epoch milliseconds or a duration from now (20m)"
    )]
    BadTime(String),
    /// Not a duration [`crate::parse_duration_ms`] reads.
    #[error(
        "`{0}` is not a duration: write one number and a unit (ms, s, m, h or d), e.g. 30s, 20m or 1.5h"
    )]
    BadDuration(String),
    /// A duration that comes to less than a millisecond.
    #[error("the duration `{0}` must be greater than zero")]
    ZeroDuration(String),
}

/// The default stagger window of recurring top-of-hour expressions.
pub const TOP_OF_HOUR_STAGGER_MS: u64 = 300_000;

/// The zone named `tz` (surrounding whitespace ignored), or `host` when
/// `tz` is absent or blank.
pub fn resolve_zone(tz: Option<&str>, host: &TimeZone) -> Result<TimeZone, ScheduleError> {
    match tz.map(str::trim) {
        None | Some("") => Ok(host.clone()),
        Some(name) => TimeZone::get(name).map_err(|_| ScheduleError::UnknownZone(name.to_string())),
    }
}

/// The stagger window a cron job gets when none is given: 5 minutes
/// ([`TOP_OF_HOUR_STAGGER_MS`]) for an expression that recurs at the top
/// of the hour — five fields with minute `0` and an hour field containing
/// `*` (`0 * * * *`, `0 */2 * * *`), or six with second and minute `0` —
/// else 0 (`0 7 * * *` stays exact).
pub fn default_stagger_ms(expr: &str) -> u64 {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    let top_of_hour = match fields[..] {
        [minute, hour, _, _, _] => minute == "0" && hour.contains('*'),
        [second, minute, hour, _, _, _] => second == "0" && minute == "0" && hour.contains('*'),
        _ => false,
    };
    if top_of_hour {
        TOP_OF_HOUR_STAGGER_MS
    } else {
        0
    }
}

/// A job's offset within its stagger window: the first four bytes of
/// SHA-256(`job_id`) as a big-endian number, modulo `stagger_ms`; 0 when
/// the window is at most 1 ms.
pub fn stagger_offset_ms(job_id: &str, stagger_ms: u64) -> u64 {
    if stagger_ms <= 1 {
        return 0;
    }
    let hash = digest(&SHA256, job_id.as_bytes());
    let b = hash.as_ref();
    u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])) % stagger_ms
}

/// When a job next runs, given its last run (and whether that ended
/// well), its creation time and now. `Ok(None)`: it does not run again.
///
/// * `at`: its time, even when past (it stays due until it succeeds);
///   after a successful run, only if the time is later than that run.
/// * `every`: the last run plus the interval when that is after now, else
///   the first slot after now.
/// * `cron`: the first slot after now (stagger included). Should that
///   search come up empty, it is tried once more from the next second.
///
/// A disabled job has no next run; that is the caller's to decide.
pub fn next_run_ms(
    schedule: &Schedule,
    job_id: &str,
    last_run_ms: Option<i64>,
    last_ok: bool,
    created_ms: i64,
    now_ms: i64,
    host: &TimeZone,
) -> Result<Option<i64>, ScheduleError> {
    match schedule {
        Schedule::At { at_ms } => Ok(match last_run_ms {
            Some(last) if last_ok => (*at_ms > last).then_some(*at_ms),
            _ => Some(*at_ms),
        }),
        Schedule::Every {
            every_ms,
            anchor_ms,
        } => {
            let every = Grid::new(*every_ms, anchor_ms.unwrap_or(created_ms));
            if let Some(next) = last_run_ms.and_then(|last| every.add(last, 1))
                && next > now_ms
            {
                return Ok(Some(next));
            }
            Ok(every.first_after(now_ms))
        }
        Schedule::Cron {
            expr,
            tz,
            stagger_ms,
        } => {
            let cron = CronSchedule::new(expr, tz.as_deref(), *stagger_ms, job_id, host)?;
            Ok(cron
                .next_after(now_ms)
                .or_else(|| cron.next_after(next_second(now_ms))))
        }
    }
}

/// Every slot `s` of the schedule with `after_ms < s ≤ until_ms`, in
/// order, at most `limit` of them (the slots a job missed while nothing
/// ran it). A cron schedule that cannot be evaluated (an invalid
/// expression or zone) has none.
pub fn slots_between(
    schedule: &Schedule,
    job_id: &str,
    created_ms: i64,
    after_ms: i64,
    until_ms: i64,
    host: &TimeZone,
    limit: usize,
) -> Vec<i64> {
    let mut slots = Vec::new();
    if limit == 0 || after_ms >= until_ms {
        return slots;
    }
    match schedule {
        Schedule::At { at_ms } => {
            if after_ms < *at_ms && *at_ms <= until_ms {
                slots.push(*at_ms);
            }
        }
        Schedule::Every {
            every_ms,
            anchor_ms,
        } => {
            let grid = Grid::new(*every_ms, anchor_ms.unwrap_or(created_ms));
            let mut next = grid.first_after(after_ms);
            while let Some(slot) = next.filter(|&slot| slot <= until_ms) {
                slots.push(slot);
                if slots.len() == limit {
                    break;
                }
                next = grid.add(slot, 1);
            }
        }
        Schedule::Cron {
            expr,
            tz,
            stagger_ms,
        } => {
            let Ok(cron) = CronSchedule::new(expr, tz.as_deref(), *stagger_ms, job_id, host) else {
                return slots;
            };
            let mut cursor = after_ms;
            while let Some(slot) = cron.next_after(cursor).filter(|&slot| slot <= until_ms) {
                slots.push(slot);
                if slots.len() == limit {
                    break;
                }
                cursor = slot;
            }
        }
    }
    slots
}

/// The schedule's latest slot strictly before `before_ms`, if any. A cron
/// schedule that cannot be evaluated has none.
pub fn previous_slot_ms(
    schedule: &Schedule,
    job_id: &str,
    created_ms: i64,
    before_ms: i64,
    host: &TimeZone,
) -> Option<i64> {
    match schedule {
        Schedule::At { at_ms } => (*at_ms < before_ms).then_some(*at_ms),
        Schedule::Every {
            every_ms,
            anchor_ms,
        } => Grid::new(*every_ms, anchor_ms.unwrap_or(created_ms)).last_before(before_ms),
        Schedule::Cron {
            expr,
            tz,
            stagger_ms,
        } => CronSchedule::new(expr, tz.as_deref(), *stagger_ms, job_id, host)
            .ok()?
            .previous_before(before_ms),
    }
}

/// The start of the second after the one `ms` is in.
fn next_second(ms: i64) -> i64 {
    ms.div_euclid(1000).saturating_add(1).saturating_mul(1000)
}

/// The next midnight, UTC, after `ms`.
fn next_utc_midnight(ms: i64) -> i64 {
    const DAY: i64 = 86_400_000;
    ms.div_euclid(DAY).saturating_add(1).saturating_mul(DAY)
}

/// A job's schedule made ready to evaluate again and again (the
/// expression compiled and the zone resolved once), for a runner that
/// walks a job from slot to slot.
pub struct Slots {
    kind: SlotsKind,
}

enum SlotsKind {
    At(i64),
    Every(Grid),
    Cron(Box<CronSchedule>),
}

impl Slots {
    /// Prepares `schedule` of job `job_id` (created at `created_ms`) with
    /// `host` as the zone of a cron schedule without one.
    pub fn new(
        schedule: &Schedule,
        job_id: &str,
        created_ms: i64,
        host: &TimeZone,
    ) -> Result<Slots, ScheduleError> {
        let kind = match schedule {
            Schedule::At { at_ms } => SlotsKind::At(*at_ms),
            Schedule::Every {
                every_ms,
                anchor_ms,
            } => SlotsKind::Every(Grid::new(*every_ms, anchor_ms.unwrap_or(created_ms))),
            Schedule::Cron {
                expr,
                tz,
                stagger_ms,
            } => SlotsKind::Cron(Box::new(CronSchedule::new(
                expr,
                tz.as_deref(),
                *stagger_ms,
                job_id,
                host,
            )?)),
        };
        Ok(Slots { kind })
    }

    /// The first slot strictly after `after_ms` (the same slots as
    /// [`slots_between`] lists).
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        match &self.kind {
            SlotsKind::At(at) => (*at > after_ms).then_some(*at),
            SlotsKind::Every(grid) => grid.first_after(after_ms),
            SlotsKind::Cron(cron) => cron.next_after(after_ms),
        }
    }

    /// The latest slot strictly before `before_ms`.
    pub fn previous_before(&self, before_ms: i64) -> Option<i64> {
        match &self.kind {
            SlotsKind::At(at) => (*at < before_ms).then_some(*at),
            SlotsKind::Every(grid) => grid.last_before(before_ms),
            SlotsKind::Cron(cron) => cron.previous_before(before_ms),
        }
    }
}

/// The `every` grid: `anchor + k·every`, k ≥ 0.
struct Grid {
    every: i128,
    anchor: i128,
}

impl Grid {
    fn new(every_ms: u64, anchor_ms: i64) -> Grid {
        Grid {
            every: i128::from(every_ms.max(1)),
            anchor: i128::from(anchor_ms.max(0)),
        }
    }

    /// `ms + k·every`, if it is a time.
    fn add(&self, ms: i64, k: i128) -> Option<i64> {
        i64::try_from(i128::from(ms) + k * self.every).ok()
    }

    fn first_after(&self, ms: i64) -> Option<i64> {
        let ms = i128::from(ms);
        let k = if ms < self.anchor {
            0
        } else {
            (ms - self.anchor) / self.every + 1
        };
        i64::try_from(self.anchor + k * self.every).ok()
    }

    fn last_before(&self, ms: i64) -> Option<i64> {
        let ms = i128::from(ms);
        if ms <= self.anchor {
            return None;
        }
        let k = (ms - 1 - self.anchor) / self.every;
        i64::try_from(self.anchor + k * self.every).ok()
    }
}

/// A cron schedule ready to evaluate: expression, zone and the job's
/// stagger offset.
struct CronSchedule {
    expr: std::sync::Arc<CronExpr>,
    zone: TimeZone,
    offset: i64,
}

/// How many times the staggered searches move their cursor on.
const STAGGER_ATTEMPTS: usize = 4;

impl CronSchedule {
    fn new(
        expr: &str,
        tz: Option<&str>,
        stagger_ms: Option<u64>,
        job_id: &str,
        host: &TimeZone,
    ) -> Result<Self, ScheduleError> {
        let zone = resolve_zone(tz, host)?;
        let compiled = compile_shared(expr)?;
        let stagger = stagger_ms.unwrap_or_else(|| default_stagger_ms(expr));
        let offset = stagger_offset_ms(job_id, stagger);
        Ok(CronSchedule {
            expr: compiled,
            zone,
            // A window is a `u64` of milliseconds; no real one is near
            // `i64::MAX`.
            offset: i64::try_from(offset).unwrap_or(i64::MAX),
        })
    }

    /// The first staggered slot after `now`: the expression's fire times
    /// are searched from `now − offset`, and the first one that, delayed
    /// by the offset, lies after `now` is taken.
    fn next_after(&self, now: i64) -> Option<i64> {
        let mut cursor = now.saturating_sub(self.offset);
        for _ in 0..STAGGER_ATTEMPTS {
            let base = first_future(cursor, |from| self.expr.next_after(from, &self.zone))?;
            let slot = base.checked_add(self.offset)?;
            if slot > now {
                return Some(slot);
            }
            cursor = (cursor + 1).max(base.saturating_add(1000));
        }
        None
    }

    /// The latest staggered slot before `before`, mirroring
    /// [`CronSchedule::next_after`].
    fn previous_before(&self, before: i64) -> Option<i64> {
        let mut cursor = before.saturating_sub(self.offset);
        for _ in 0..STAGGER_ATTEMPTS {
            let base = self.expr.prev_before(cursor, &self.zone)?;
            let slot = base.checked_add(self.offset)?;
            if slot < before {
                return Some(slot);
            }
            cursor = base.saturating_sub(1000);
        }
        None
    }
}

/// The first time after `cursor` that `next` gives: asked from `cursor`,
/// then, should the answer not lie after `cursor`, from the next second,
/// then from the next UTC midnight; no answer at all ends the search. ([`CronExpr::next_after`] always
/// answers after its argument; the retries keep a wrong answer from
/// scheduling a job in the past whatever evaluates the expression.)
fn first_future(cursor: i64, next: impl Fn(i64) -> Option<i64>) -> Option<i64> {
    let first = next(cursor)?;
    if first > cursor {
        return Some(first);
    }
    [next_second(cursor), next_utc_midnight(cursor)]
        .into_iter()
        .find_map(|from| next(from).filter(|&at| at > cursor))
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
