//! The brief's fitting with plain values: boards built in a `MemStore`, read by `gather`,
//! fitted, and checked against what `kanban context` promises (newest kept, bounded,
//! every omission said).

use board_core::memory::MemStore;
use board_core::{BoardWrites, NewTask, NoWorkers};

use super::*;

const NOW: Timestamp = 1_700_000_000;

fn create(store: &MemStore, new: NewTask, at: Timestamp) -> TaskId {
    store.create(&new, at).expect("create").id
}

fn titled(store: &MemStore, title: &str) -> TaskId {
    create(store, NewTask::titled(title), NOW - 100_000)
}

/// An ended run whose error is `error`, started at `at`.
fn attempt(store: &MemStore, id: &TaskId, error: String, at: Timestamp) {
    store.claim(id, 900, at).expect("claim");
    store
        .reclaim(id, None, Some(error), &NoWorkers, at + 1)
        .expect("reclaim");
}

fn comment(store: &MemStore, id: &TaskId, body: &str, at: Timestamp) {
    store.comment(id, Some("lead"), body, None, at).expect("comment");
}

/// The brief of `id` and its Markdown, as `kanban context` prints them.
fn brief(store: &MemStore, id: &TaskId) -> (Material, Brief, String) {
    let material = gather(store, id).expect("gather");
    let brief = fit(&material, NOW);
    let md = markdown(&brief, NOW);
    assert!(md.len() <= MAX_BYTES, "{} bytes", md.len());
    (material, brief, md)
}

fn bodies(comments: &[Comment]) -> Vec<&str> {
    comments.iter().map(|c| c.body.as_str()).collect()
}

#[test]
fn a_brief_that_fits_is_whole() {
    let store = MemStore::new();
    let parent = titled(&store, "find the answer");
    let id = create(
        &store,
        NewTask {
            body: "print it".to_owned(),
            parents: vec![parent.clone()],
            ..NewTask::titled("use the answer")
        },
        NOW - 100_000,
    );
    store.archive(&parent, NOW - 90_000).expect("archive");
    attempt(&store, &id, "first try".to_owned(), NOW - 3000);
    attempt(&store, &id, "second try".to_owned(), NOW - 2000);
    comment(&store, &id, "look again", NOW - 1000);
    let (_, b, md) = brief(&store, &id);
    assert!(!b.truncated());
    assert_eq!((b.parents.len(), b.attempts.len(), b.comments.len()), (1, 2, 1));
    assert!(md.starts_with("# use the answer\n"), "{md}");
    for part in [
        "print it",
        "find the answer",
        "first try",
        "second try",
        "look again",
    ] {
        assert!(md.contains(part), "{part} missing: {md}");
    }
    assert!(!md.contains("Cut to fit"), "{md}");
    assert_eq!(brief_json(&b)["truncated"], false);
}

#[test]
fn an_open_run_is_the_current_attempt_not_an_earlier_one() {
    let store = MemStore::new();
    let id = titled(&store, "try twice");
    attempt(&store, &id, "crashed".to_owned(), NOW - 2000);
    let run = store.claim(&id, 900, NOW - 1000).expect("claim").run_id;
    let (_, b, md) = brief(&store, &id);
    assert_eq!(b.attempts.len(), 1);
    assert_ne!(b.attempts[0].id, run);
    assert!(md.contains(&format!(" · run {run}\n")), "{md}");
}

#[test]
fn the_oldest_comments_go_first_and_the_newest_stay() {
    let store = MemStore::new();
    let id = titled(&store, "a long thread");
    let written: Vec<String> = (0..20)
        .map(|i| format!("comment {i:02} {}", "x".repeat(1400)))
        .collect();
    for (i, body) in written.iter().enumerate() {
        comment(&store, &id, body, NOW - 1000 + i as Timestamp);
    }
    let (m, b, md) = brief(&store, &id);
    let left_out = b.left_out_comments;
    assert!(left_out > 0 && left_out < written.len(), "{left_out} left out");
    assert_eq!(bodies(&b.comments), bodies(&m.comments[left_out..]));
    assert_eq!(b.cut_fields, 0, "nothing needed shortening");
    assert!(
        md.ends_with(&format!(
            "_Cut to fit 16 KiB; left out: {left_out} older comments. `kanban show` has everything._\n"
        )),
        "{md}"
    );
    // The fullest brief that fits: one more comment would not.
    let one_more = Selection {
        caps: CAPS,
        attempts_from: 0,
        comments_from: left_out - 1,
        parents: m.parents.len(),
    };
    assert!(markdown(&cut(&m, &one_more), NOW).len() > MAX_BYTES);
}

#[test]
fn attempts_and_comments_leave_together_oldest_first() {
    let store = MemStore::new();
    let id = titled(&store, "a busy task");
    for i in 0..12 {
        let at = NOW - 10_000 + i * 100;
        attempt(&store, &id, format!("error {i:02} {}", "e".repeat(1400)), at);
        comment(
            &store,
            &id,
            &format!("comment {i:02} {}", "c".repeat(1400)),
            at + 50,
        );
    }
    let (m, b, _) = brief(&store, &id);
    assert!(
        b.left_out_attempts > 0 && b.left_out_comments > 0,
        "both kinds leave"
    );
    assert!(
        !b.attempts.is_empty() && !b.comments.is_empty(),
        "both kinds stay"
    );
    let oldest_kept = b.attempts[0].started_at.min(b.comments[0].created_at);
    let newest_left_out = m.attempts[..b.left_out_attempts]
        .iter()
        .map(|r| r.started_at)
        .chain(m.comments[..b.left_out_comments].iter().map(|c| c.created_at))
        .max()
        .expect("something left out");
    assert!(
        newest_left_out < oldest_kept,
        "{newest_left_out} >= {oldest_kept}"
    );
    assert_eq!(b.attempts.last().map(|r| r.id), m.attempts.last().map(|r| r.id));
    assert_eq!(bodies(&b.comments).last(), bodies(&m.comments).last());
}

#[test]
fn only_the_recent_comments_are_read_and_the_rest_are_counted() {
    let store = MemStore::new();
    let id = titled(&store, "a chatty task");
    for i in 0..RECENT_COMMENTS + 5 {
        comment(&store, &id, &format!("comment {i}"), NOW - 1000 + i as Timestamp);
    }
    let (_, b, md) = brief(&store, &id);
    assert_eq!(b.comments.len(), RECENT_COMMENTS);
    assert_eq!(b.comments[0].body, "comment 5");
    assert_eq!(b.left_out_comments, 5);
    assert!(md.contains("left out: 5 older comments"), "{md}");
    assert_eq!(brief_json(&b)["truncated"], true);
}

#[test]
fn a_long_body_is_cut_to_its_cap_saying_how_much() {
    let store = MemStore::new();
    let id = create(
        &store,
        NewTask {
            body: "b".repeat(20_000),
            ..NewTask::titled("a long spec")
        },
        NOW,
    );
    let (_, b, md) = brief(&store, &id);
    let expected = format!("{}… [cut 12000 more characters]", "b".repeat(CAPS.body));
    assert_eq!(b.task.body, expected);
    assert_eq!(b.cut_fields, 1);
    assert!(md.contains("; 1 long fields shortened."), "{md}");
}

/// A task waiting for `n` parents, each with a title of `title_chars` characters.
fn with_parents(store: &MemStore, n: usize, title_chars: usize) -> TaskId {
    let parents = (0..n)
        .map(|i| titled(store, &format!("{i:03} {}", "p".repeat(title_chars - 4))))
        .collect();
    create(
        store,
        NewTask {
            parents,
            ..NewTask::titled("join them")
        },
        NOW - 50_000,
    )
}

#[test]
fn caps_shrink_when_leaving_out_attempts_and_comments_is_not_enough() {
    let store = MemStore::new();
    let id = with_parents(&store, 60, CAPS.title);
    let (m, b, md) = brief(&store, &id);
    assert_eq!(b.parents.len(), 60, "no parent left out");
    assert_eq!(b.left_out_parents, 0);
    let halved = CAPS.halved().expect("caps can shrink").title;
    for ((kept, _), (parent, _)) in b.parents.iter().zip(&m.parents) {
        assert_eq!(kept.id, parent.id);
        let (expected, was_cut) = cut_text(&parent.title, halved);
        assert!(was_cut);
        assert_eq!(kept.title, expected);
    }
    assert!(md.contains("; 60 long fields shortened."), "{md}");
}

#[test]
fn the_last_parents_go_once_no_cap_can_shrink() {
    let store = MemStore::new();
    let id = with_parents(&store, 200, CAPS.title);
    let (m, b, md) = brief(&store, &id);
    let kept = b.parents.len();
    assert!(kept > 0 && kept < 200, "{kept} parents kept");
    assert_eq!(b.left_out_parents, 200 - kept);
    let first: Vec<&TaskId> = m.parents[..kept].iter().map(|(p, _)| &p.id).collect();
    let shown: Vec<&TaskId> = b.parents.iter().map(|(p, _)| &p.id).collect();
    assert_eq!(shown, first);
    for ((kept, _), (parent, _)) in b.parents.iter().zip(&m.parents) {
        assert_eq!(
            kept.title,
            cut_text(&parent.title, MIN_CAP).0,
            "every cap at its floor"
        );
    }
    assert!(md.contains(&format!("left out: {} parents", 200 - kept)), "{md}");
}

#[test]
fn caps_halve_down_to_a_floor_then_stop() {
    let mut caps = CAPS;
    let mut steps = 0;
    while let Some(next) = caps.halved() {
        assert!(next.body < caps.body || next.title < caps.title || next.note < caps.note);
        caps = next;
        steps += 1;
    }
    assert!(steps > 0);
    assert_eq!(
        (caps.title, caps.body, caps.result, caps.note),
        (MIN_CAP, MIN_CAP, MIN_CAP, MIN_CAP)
    );
}

#[test]
fn a_field_is_cut_by_characters_and_says_how_many_went() {
    assert_eq!(cut_text("ééé", 3), ("ééé".to_owned(), false));
    assert_eq!(
        cut_text("éééé", 3),
        ("ééé… [cut 1 more characters]".to_owned(), true)
    );
}

#[test]
fn the_json_brief_carries_what_the_markdown_shows() {
    let store = MemStore::new();
    let id = titled(&store, "a long thread");
    for i in 0..20 {
        comment(
            &store,
            &id,
            &format!("comment {i:02} {}", "x".repeat(1400)),
            NOW - 1000 + i,
        );
    }
    let (_, b, md) = brief(&store, &id);
    let json = brief_json(&b);
    let shown: Vec<&str> = json["comments"]
        .as_array()
        .expect("comments")
        .iter()
        .map(|c| c["body"].as_str().expect("body"))
        .collect();
    assert_eq!(shown, bodies(&b.comments));
    assert!(shown.iter().all(|body| md.contains(body)));
    assert_eq!(json["truncated"], true);
}

#[test]
fn continuation_lines_are_indented_under_their_item() {
    assert_eq!(indented("one\ntwo\n\n"), "one\n    two");
}
