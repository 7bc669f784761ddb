//! Properties of the reply parser: it never panics, its reasons stay short, and every
//! plan it accepts is one the commit accepts too.

use board_core::plan::{validate_fanout, CHILD_TITLE_MAX_CHARS};
use board_core::Plan;
use decompose::{parse_reply, Profile, Roster};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn roster(cap: usize) -> Roster {
    Roster::new(vec![Profile::new("default", ""), Profile::new("coder", "")])
        .with_default_assignee(Some("coder"))
        .with_max_children(Some(cap))
}

/// Checks what must hold of any outcome, accepted or not.
fn check(reply: &str, roster: &Roster) -> Result<(), TestCaseError> {
    match parse_reply(reply, roster) {
        Err(err) => {
            let text = err.to_string();
            prop_assert!(text.chars().count() <= 220, "reason too long: {}", text);
            prop_assert!(!text.contains('\n'));
        }
        Ok(Plan::Single {
            title,
            body,
            assignee,
        }) => {
            prop_assert!(!title.trim().is_empty() || !body.trim().is_empty());
            let assignee = assignee.unwrap_or_default();
            prop_assert!(roster.has_profile(&assignee) || assignee == roster.default_assignee());
        }
        Ok(Plan::Fanout { tasks, .. }) => {
            prop_assert!(tasks.len() <= roster.max_children());
            prop_assert_eq!(validate_fanout(&tasks, roster.max_children()), Ok(()));
            for t in &tasks {
                prop_assert!(t.title.chars().count() <= CHILD_TITLE_MAX_CHARS);
                prop_assert!(roster.has_profile(&t.assignee) || t.assignee == roster.default_assignee());
            }
        }
    }
    Ok(())
}

/// Any JSON value, a few levels deep, with the keys a reply uses over-represented.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-3i64..5).prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::from),
        Just(json!("coder")),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        let key = prop_oneof![
            Just("fanout".to_owned()),
            Just("tasks".to_owned()),
            Just("title".to_owned()),
            Just("body".to_owned()),
            Just("assignee".to_owned()),
            Just("parents".to_owned()),
            Just("rationale".to_owned()),
            "[a-z]{1,6}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..8)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// A reply shaped like a fan-out, with parents that are often but not always valid.
fn fanout_reply() -> impl Strategy<Value = Value> {
    let parent = prop_oneof![
        8 => (0u64..12).prop_map(Value::from),
        1 => (-2i64..0).prop_map(Value::from),
        1 => Just(json!(1.0)),
    ];
    let task = (
        prop_oneof![
            8 => "[a-z][a-z ]{0,8}".prop_map(Value::from),
            1 => " {0,2}".prop_map(Value::from),
            1 => any_json(),
        ],
        prop::collection::vec(parent, 0..4),
        prop_oneof![Just(json!("coder")), Just(json!("ghost")), Just(Value::Null)],
    )
        .prop_map(
            |(title, parents, assignee)| json!({ "title": title, "parents": parents, "assignee": assignee }),
        );
    (prop::collection::vec(task, 0..12), any::<bool>()).prop_map(|(tasks, acyclic)| {
        let tasks = if acyclic {
            // Keep only backward edges so many generated graphs are acceptable.
            tasks
                .into_iter()
                .enumerate()
                .map(|(i, mut t)| {
                    if let Some(Value::Array(parents)) = t.get_mut("parents") {
                        parents.retain(|p| p.as_u64().is_some_and(|p| (p as usize) < i));
                        parents.sort_by_key(|p| p.as_u64());
                        parents.dedup();
                    }
                    t
                })
                .collect()
        } else {
            tasks
        };
        let mut object = Map::new();
        object.insert("fanout".into(), Value::Bool(true));
        object.insert("tasks".into(), Value::Array(tasks));
        Value::Object(object)
    })
}

/// Prose and fences a model might wrap its answer in.
fn wrapped(json: String) -> impl Strategy<Value = String> {
    prop_oneof![
        Just(json.clone()),
        Just(format!("```json\n{json}\n```")),
        ".{0,20}".prop_map(move |prose| format!("{prose}\n{json}\n{prose}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_panics_on_arbitrary_text(text in any::<String>(), cap in 0usize..80) {
        check(&text, &roster(cap))?;
    }

    #[test]
    fn never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check(&String::from_utf8_lossy(&bytes), &roster(16))?;
    }

    #[test]
    fn never_panics_on_json_ish_text(text in r#"[{}\[\]",:0-9a-z \-.\n`]{0,200}"#) {
        check(&text, &roster(16))?;
    }

    #[test]
    fn any_json_value_is_checked_safely(value in any_json(), cap in 1usize..20) {
        check(&value.to_string(), &roster(cap))?;
    }

    #[test]
    fn accepted_fanouts_pass_validate_fanout(
        reply in fanout_reply().prop_flat_map(|v| wrapped(v.to_string())),
        cap in 1usize..70,
    ) {
        check(&reply, &roster(cap))?;
    }

    #[test]
    fn well_formed_acyclic_fanouts_within_the_cap_are_accepted(n in 1usize..=16, seed in any::<u64>()) {
        let tasks: Vec<Value> = (0..n)
            .map(|i| {
                let parents: Vec<usize> = (0..i).filter(|p| (seed >> ((i * 7 + p) % 64)) & 1 == 1).collect();
                json!({ "title": format!("t{i}"), "parents": parents })
            })
            .collect();
        let reply = json!({ "fanout": true, "tasks": tasks }).to_string();
        let plan = parse_reply(&reply, &roster(16));
        prop_assert!(matches!(&plan, Ok(Plan::Fanout { tasks, .. }) if tasks.len() == n), "{:?}", plan);
    }
}
