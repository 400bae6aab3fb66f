//! `cron next`: the next fire times of a cron expression, as a job with
//! that schedule would fire (no stagger). Needs no configuration and
//! touches nothing on disk.

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::Serialize;

use crate::host::Host;

/// What `cron next` is asked.
#[derive(Debug, Clone)]
pub(crate) struct NextRequest<'a> {
    pub expr: &'a str,
    /// An IANA zone; the host's when absent.
    pub tz: Option<&'a str>,
    /// Start after this time; now when absent.
    pub from: Option<&'a str>,
    pub count: usize,
}

/// `cron next --json`: `{"next": ["2026-12-02T08:00:00Z", …]}`.
#[derive(Debug, Serialize)]
pub(crate) struct NextFires {
    /// The fire times, in UTC, to the second.
    pub next: Vec<String>,
    /// The same, as instants.
    #[serde(skip)]
    pub instants: Vec<Timestamp>,
    /// The zone the expression was read in.
    #[serde(skip)]
    pub zone: TimeZone,
}

/// Why `cron next` could not answer: each is how it was asked (exit 2).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CronNextError {
    #[error("invalid cron expression `{expr}`: {reason}")]
    BadExpression {
        expr: String,
        reason: almanac_cron::ExprError,
    },
    #[error("unknown time zone `{0}`")]
    UnknownZone(String),
    #[error(
        "invalid --from `{0}`: expected an ISO 8601 time such as 2026-12-02T09:00:00Z (UTC when it has no offset)"
    )]
    BadFrom(String),
}

/// The next `count` fire times strictly after `from` (default now).
pub(crate) fn next_fires(host: &Host, request: &NextRequest) -> Result<NextFires, CronNextError> {
    let zone = almanac_cron::resolve_zone(request.tz, host.time_zone()).map_err(|_| {
        CronNextError::UnknownZone(request.tz.unwrap_or_default().trim().to_string())
    })?;
    let now = host.now_ms();
    let from = match request.from {
        Some(text) => almanac_cron::parse_at(text, now, None)
            .map_err(|_| CronNextError::BadFrom(text.trim().to_string()))?,
        None => now,
    };
    let fires =
        almanac_cron::next_fires(request.expr, &zone, from, request.count).map_err(|reason| {
            CronNextError::BadExpression {
                expr: request.expr.trim().to_string(),
                reason,
            }
        })?;
    let instants: Vec<Timestamp> = fires
        .into_iter()
        .filter_map(|ms| Timestamp::from_millisecond(ms).ok())
        .collect();
    Ok(NextFires {
        next: instants
            .iter()
            .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .collect(),
        instants,
        zone,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn host(now: &str) -> Host {
        Host::with_vars(
            Vec::<(String, String)>::new(),
            Path::new("/home/u"),
            Path::new("/home/u"),
            now.parse().unwrap(),
        )
    }

    fn ask<'a>(expr: &'a str, tz: Option<&'a str>, from: Option<&'a str>) -> NextRequest<'a> {
        NextRequest {
            expr,
            tz,
            from,
            count: 2,
        }
    }

    #[test]
    fn fires_after_now_in_the_host_zone_by_default() {
        let host = host("2026-12-02T07:30:00+01:00[Europe/Paris]");
        let fires = next_fires(&host, &ask("0 9 * * *", None, None)).unwrap();
        assert_eq!(fires.next, ["2026-12-02T08:00:00Z", "2026-12-03T08:00:00Z"]);
        assert_eq!(fires.zone.iana_name(), Some("Europe/Paris"));
        let tokyo = next_fires(&host, &ask("0 9 * * *", Some("Asia/Tokyo"), None)).unwrap();
        assert_eq!(tokyo.next, ["2026-12-03T00:00:00Z", "2026-12-04T00:00:00Z"]);
    }

    #[test]
    fn from_without_an_offset_is_utc() {
        let host = host("2026-12-02T07:30:00+01:00[Europe/Paris]");
        let fires =
            next_fires(&host, &ask("0 9 * * *", None, Some("2026-12-05T08:00:00"))).unwrap();
        assert_eq!(fires.next, ["2026-12-06T08:00:00Z", "2026-12-07T08:00:00Z"]);
    }

    #[test]
    fn errors_say_what_was_asked_wrongly() {
        let host = host("2026-12-02T07:30:00+00:00[UTC]");
        let cases = [
            (
                ask("61 * * * *", None, None),
                "invalid cron expression `61 * * * *`: field 1 (minute): 61 is out of range 0-59",
            ),
            (
                ask("0 9 * * *", Some("Mars/Base"), None),
                "unknown time zone `Mars/Base`",
            ),
            (
                ask("0 9 * * *", None, Some("soon")),
                "invalid --from `soon`: expected an ISO 8601 time such as 2026-12-02T09:00:00Z (UTC when it has no offset)",
            ),
        ];
        for (request, message) in cases {
            assert_eq!(
                next_fires(&host, &request).unwrap_err().to_string(),
                message
            );
        }
    }
}
