//! A recurring task (`kanban schedule ID --every 2h|CRON`): the task itself waits in
//! `scheduled` as the template, and each time its time comes the gateway creates a fresh
//! copy to do the work and moves the template's time to the next occurrence
//! ([`Request::Recur`](crate::Request::Recur)). Occurrences the gateway missed while it
//! was down are folded into one copy and counted; a copy is not made while the previous
//! one is still open, so a short period never piles up workers.
//!
//! The core stores and checks the recurrence's shape; when a cron expression next
//! matches depends on a time zone's rules, which the gateway reads (`gateway::recurrence`).

use serde::{Deserialize, Serialize};

use crate::graph::NewTask;
use crate::limits::short;
use crate::types::{Task, TaskId, Timestamp};
use crate::Refusal;

/// The longest period: ten years.
pub const PERIOD_MAX_SECONDS: i64 = 10 * 366 * 86_400;

/// How often a recurring task repeats.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Every {
    /// A fixed period, counted from the first time.
    Seconds(i64),
    /// A five-field cron expression (minute hour day-of-month month day-of-week), read in
    /// the IANA time zone `zone` (the scheduler's, when it was set).
    Cron { expr: String, zone: String },
}

/// A recurring task's rule and what it has made so far.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recurrence {
    pub every: Every,
    /// The copy made last: the next is not made while it is open.
    #[serde(default)]
    pub last_copy: Option<TaskId>,
    /// Copies made so far.
    #[serde(default)]
    pub copies: i64,
}

impl Recurrence {
    /// A new rule with no copies yet, checked.
    pub fn new(every: Every) -> Result<Recurrence, Refusal> {
        let r = Recurrence {
            every,
            last_copy: None,
            copies: 0,
        };
        r.check()?;
        Ok(r)
    }

    /// Refuses a period outside 1 s..ten years, and a cron expression or zone that is
    /// blank, over the short limit or holds a control character. Whether the expression
    /// parses is the gateway's to say (the CLI asks it before scheduling).
    pub fn check(&self) -> Result<(), Refusal> {
        match &self.every {
            Every::Seconds(s) if (1..=PERIOD_MAX_SECONDS).contains(s) => Ok(()),
            Every::Seconds(s) => Err(Refusal::Invalid(format!(
                "a period is 1 second to 10 years, got {s} seconds"
            ))),
            Every::Cron { expr, zone } => {
                for (what, text) in [("the cron expression", expr), ("the time zone", zone)] {
                    if text.trim().is_empty() || text.chars().any(char::is_control) {
                        return Err(Refusal::Invalid(format!(
                            "{what} is not blank and holds no control characters"
                        )));
                    }
                    short(what, text)?;
                }
                Ok(())
            }
        }
    }

    /// How a person reads the rule: `every 2h`, `cron "0 9 * * 1-5" (Europe/Paris)`.
    pub fn describe(&self) -> String {
        match &self.every {
            Every::Seconds(s) => format!("every {}", period(*s)),
            Every::Cron { expr, zone } => format!("cron \"{expr}\" ({zone})"),
        }
    }
}

/// A period in its largest whole unit: `90s`, `15m`, `2h`, `1d`, else `3700s`.
pub fn period(seconds: i64) -> String {
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60)] {
        if seconds % size == 0 {
            return format!("{}{unit}", seconds / size);
        }
    }
    format!("{seconds}s")
}

/// When a fixed period next falls after `now`, counting from `due` (the time that came),
/// and how many of its times in between were missed: `due + (missed + 1) * seconds`.
pub fn next_period(due: Timestamp, seconds: i64, now: Timestamp) -> (Timestamp, i64) {
    let seconds = seconds.max(1);
    let missed = now.saturating_sub(due).max(0) / seconds;
    let next = due.saturating_add((missed + 1).saturating_mul(seconds));
    (next, missed)
}

/// What the gateway does with a recurring task whose time came
/// ([`Request::Recur`](crate::Request::Recur)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recurring {
    /// The copy just made for this time; none when the previous copy was still open.
    pub copy: Option<TaskId>,
    /// The next time, after now.
    pub next: Timestamp,
    /// Times between the one that came and now that were folded into this one.
    pub missed: i64,
}

/// The idempotency key of the copy made for `template`'s time `due`: one copy per time,
/// however many gateways try or however often one retries after a crash.
pub fn copy_key(template: &TaskId, due: Timestamp) -> String {
    format!("recur:{template}:{due}")
}

/// The copy of `template` made for its time `due`: its work and routing (title, body,
/// assignee, priority, tenant, skills, limits, reviewer, verifiers), ready at once, with
/// [`copy_key`] so it is made once.
pub fn copy_of(template: &Task, due: Timestamp) -> NewTask {
    NewTask {
        title: template.title.clone(),
        body: template.body.clone(),
        assignee: template.assignee.clone(),
        priority: template.priority,
        created_by: template.created_by.clone(),
        idempotency_key: Some(copy_key(&template.id, due)),
        max_runtime_seconds: template.max_runtime_seconds,
        reviewer: template.reviewer.clone(),
        verify: template.verify.clone(),
        tenant: template.tenant.clone(),
        skills: template.skills.clone(),
        max_retries: template.max_retries,
        ..NewTask::default()
    }
}

/// The template a copy was made from, read from its idempotency key.
pub fn template_of(idempotency_key: Option<&str>) -> Option<TaskId> {
    let rest = idempotency_key?.strip_prefix("recur:")?;
    let (id, due) = rest.rsplit_once(':')?;
    due.parse::<i64>().ok()?;
    id.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_period_counts_the_times_it_missed_and_falls_after_now() {
        assert_eq!(next_period(100, 10, 100), (110, 0));
        assert_eq!(next_period(100, 10, 109), (110, 0));
        assert_eq!(next_period(100, 10, 110), (120, 1));
        assert_eq!(next_period(100, 10, 135), (140, 3));
        assert_eq!(next_period(100, 3600, i64::MAX).1, (i64::MAX - 100) / 3600);
    }

    #[test]
    fn periods_and_cron_rules_are_checked_and_described() {
        assert!(Recurrence::new(Every::Seconds(0)).is_err());
        assert!(Recurrence::new(Every::Seconds(PERIOD_MAX_SECONDS + 1)).is_err());
        assert!(
            Recurrence::new(Every::Seconds(3650 * 86_400)).is_ok(),
            "ten years"
        );
        assert_eq!(
            Recurrence::new(Every::Seconds(7200)).unwrap().describe(),
            "every 2h"
        );
        assert_eq!(period(90), "90s");
        assert_eq!(period(86_400 * 2), "2d");
        let cron = |expr: &str, zone: &str| {
            Recurrence::new(Every::Cron {
                expr: expr.into(),
                zone: zone.into(),
            })
        };
        assert!(cron(" ", "UTC").is_err());
        assert!(cron("0 9 * * *", "U\u{1b}TC").is_err());
        assert_eq!(
            cron("0 9 * * 1-5", "Europe/Paris").unwrap().describe(),
            "cron \"0 9 * * 1-5\" (Europe/Paris)"
        );
    }

    #[test]
    fn a_copy_carries_the_templates_work_and_routing_and_is_ready() {
        let template = crate::Task {
            body: "check the backups".into(),
            assignee: Some("ops".into()),
            priority: 4,
            created_by: Some("ana".into()),
            max_runtime_seconds: Some(600),
            reviewer: Some("lead".into()),
            verify: Some(vec![vec!["true".into()]]),
            tenant: Some("acme".into()),
            skills: vec!["backup".into()],
            max_retries: Some(2),
            ..crate::graph::blank_task(
                "t_0123456789ab".parse().unwrap(),
                "nightly".into(),
                crate::Status::Scheduled,
                0,
            )
        };
        assert_eq!(
            copy_of(&template, 99),
            NewTask {
                title: "nightly".into(),
                body: "check the backups".into(),
                assignee: Some("ops".into()),
                priority: 4,
                created_by: Some("ana".into()),
                idempotency_key: Some("recur:t_0123456789ab:99".into()),
                max_runtime_seconds: Some(600),
                reviewer: Some("lead".into()),
                verify: Some(vec![vec!["true".into()]]),
                tenant: Some("acme".into()),
                skills: vec!["backup".into()],
                max_retries: Some(2),
                ..NewTask::default()
            }
        );
    }

    #[test]
    fn a_copy_names_its_template_in_its_key() {
        let t: TaskId = "t_0123456789ab".parse().unwrap();
        assert_eq!(template_of(Some(&copy_key(&t, 42))), Some(t));
        assert_eq!(template_of(Some("recur:t_0123456789ab:x")), None);
        assert_eq!(template_of(Some("mine")), None);
        assert_eq!(template_of(None), None);
    }
}
