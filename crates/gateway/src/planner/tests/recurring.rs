//! Recurring tasks whose time came: a copy of the template for that time, none while the
//! last copy is open, and one last run as itself when the next time cannot be told.

use board_core::recurrence::{copy_key, Every, Recurrence};

use super::*;

fn template(n: u8, due: Timestamp) -> Task {
    Task {
        assignee: Some("coder".into()),
        priority: 3,
        tenant: Some("acme".into()),
        skills: vec!["review".into()],
        scheduled_until: Some(due),
        recurrence: Some(Recurrence::new(Every::Seconds(60)).unwrap()),
        ..task(n, Status::Scheduled)
    }
}

fn due(template: Task, next: Result<(Timestamp, i64), String>, open_copy: Option<TaskId>) -> DueRecurrence {
    DueRecurrence {
        template,
        next,
        open_copy,
    }
}

#[test]
fn a_due_template_gets_one_copy_for_its_time_and_moves_on() {
    let view = View {
        due_recurring: vec![due(template(1, T - 30), Ok((T + 30, 2)), None)],
        due_scheduled: vec![id(2)],
        ..View::default()
    };
    let actions = plan(&view, T, &settings());
    assert_eq!(kinds(&actions), [("recur", id(1)), ("resume", id(2))]);
    let Action::Recur {
        copy: Some(copy),
        next,
        missed,
        ..
    } = &actions[0]
    else {
        panic!("{actions:?}");
    };
    assert_eq!((*next, *missed), (T + 30, 2));
    assert_eq!(copy.idempotency_key, Some(copy_key(&id(1), T - 30)));
    assert_eq!(
        (copy.title.as_str(), copy.assignee.as_deref(), copy.priority),
        ("task 1", Some("coder"), 3)
    );
    assert_eq!(
        (copy.tenant.as_deref(), &copy.skills[..]),
        (Some("acme"), &["review".to_owned()][..])
    );
    assert!(!copy.triage && copy.parents.is_empty());
    assert_eq!(preview(&actions, 0).recurred, [id(1)]);
}

#[test]
fn no_copy_while_the_last_is_open_and_an_untellable_rule_runs_once() {
    let view = View {
        due_recurring: vec![
            due(template(1, T - 1), Ok((T + 59, 0)), Some(id(9))),
            due(template(2, T - 1), Err("not a time zone here".into()), None),
        ],
        ..View::default()
    };
    let actions = plan(&view, T, &settings());
    assert_eq!(kinds(&actions), [("recur", id(1)), ("end recurrence", id(2))]);
    assert!(matches!(&actions[0], Action::Recur { copy: None, next, .. } if *next == T + 59));
    assert!(matches!(&actions[1], Action::EndRecurrence { why, .. } if why.contains("zone")));
    assert_eq!(preview(&actions, 0).resumed, [id(2)]);
}
