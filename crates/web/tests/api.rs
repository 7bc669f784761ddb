//! The JSON API: every route and action through HTTP, with the command line's shapes,
//! its refusals as JSON errors, bad ids, and oversized bodies.

mod common;

use board_core::shapes::{list_json, task_json, Shown};
use board_core::{BlockKind, BoardReads, BoardStats, BoardWrites, LlmLedger, Status, TaskFilter};
use common::{error, serve, NOW};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn list_and_show_have_the_command_lines_shapes() {
    let s = serve().await;
    let a = s.task("alpha");
    let b = s
        .store
        .create(
            &board_core::NewTask {
                assignee: Some("coder".into()),
                ..board_core::NewTask::titled("beta")
            },
            NOW,
        )
        .unwrap();
    s.store
        .comment(&a.id, Some("ann"), "looks fine", None, NOW)
        .unwrap();

    let (status, body) = s.get("/api/tasks").await;
    assert_eq!(status, 200);
    assert_eq!(body, list_json(&s.store.list(&TaskFilter::default()).unwrap()));

    let (status, body) = s.get("/api/tasks?assignee=coder").await;
    assert_eq!((status, body), (200, json!([task_json(&b)])));

    let (_, body) = s.get(&format!("/api/tasks/{}", a.id)).await;
    assert_eq!(body, Shown::read(s.store.as_ref(), &a.id).unwrap().to_json());
    assert_eq!(body["comments"][0]["body"], "looks fine");

    s.store.archive(&a.id, NOW).unwrap();
    let (_, body) = s.get("/api/tasks").await;
    assert_eq!(
        body.as_array().unwrap().len(),
        1,
        "archived tasks only when asked: {body}"
    );
    let (_, body) = s.get("/api/tasks?archived=true").await;
    assert_eq!(body.as_array().unwrap().len(), 2);
    let (_, body) = s.get("/api/tasks?status=archived").await;
    assert_eq!(body[0]["id"], json!(a.id));
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_ids_and_queries_are_json_errors() {
    let s = serve().await;
    let (status, body) = s.get("/api/tasks/not-an-id").await;
    assert_eq!(status, 400, "{body}");
    error(&body);
    let (status, body) = s.get("/api/tasks/t_00000000").await;
    assert_eq!(status, 404, "{body}");
    assert!(error(&body).contains("no such task"), "{body}");
    let (status, body) = s.get("/api/tasks?status=sideways").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = s.get("/api/tasks?colour=red").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = s.post("/api/tasks/t_00000000/archive", json!({})).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = s.get("/api/nothing-here").await;
    assert_eq!(status, 404, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn create_into_triage_or_ready_and_refuse_bad_bodies() {
    let s = serve().await;
    let (status, body) = s
        .post("/api/tasks", json!({ "title": "  draft  ", "triage": true }))
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        (body["title"].as_str(), body["status"].as_str()),
        (Some("draft"), Some("triage"))
    );
    let (status, body) = s
        .post(
            "/api/tasks",
            json!({ "title": "go", "assignee": "coder", "priority": 3 }),
        )
        .await;
    assert_eq!(
        (status, body["status"].as_str(), body["priority"].as_i64()),
        (201, Some("ready"), Some(3))
    );
    let hermes = json!({ "title": "h", "tenant": "acme", "skills": ["a", "b"], "max_retries": 1 });
    let (status, body) = s.post("/api/tasks", hermes).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        (&body["tenant"], &body["skills"], &body["max_retries"]),
        (&json!("acme"), &json!(["a", "b"]), &json!(1))
    );
    let (status, body) = s
        .post("/api/tasks", json!({ "title": "x", "skills": ["a,b"] }))
        .await;
    assert_eq!(status, 400, "{body}");

    let (status, body) = s.post("/api/tasks", json!({ "title": "   " })).await;
    assert_eq!(status, 400, "{body}");
    assert!(error(&body).contains("blank"), "{body}");
    let (status, body) = s
        .post("/api/tasks", json!({ "title": "x", "colour": "red" }))
        .await;
    assert_eq!(status, 422, "{body}");
    let (status, body) = s
        .post("/api/tasks", json!({ "title": "x", "parents": ["t_00000000"] }))
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = s
        .post("/api/tasks", json!({ "title": "x", "body": "b".repeat(5000) }))
        .await;
    assert_eq!(status, 413, "{body}");
    assert!(error(&body).contains("max_text_bytes"), "{body}");

    let r = s
        .client
        .post(s.url("/api/tasks"))
        .header("content-type", "application/json")
        .body(format!("{{\"title\":\"{}\"}}", "t".repeat(20 * 1024)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
    error(&r.json().await.unwrap());
    let r = s
        .client
        .post(s.url("/api/tasks"))
        .body("{\"title\":\"x\"}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    error(&r.json().await.unwrap());
    let r = s
        .client
        .post(s.url("/api/tasks"))
        .header("content-type", "application/json")
        .body("{\"title\":")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    error(&r.json().await.unwrap());
    assert_eq!(
        s.store.list(&TaskFilter::default()).unwrap().len(),
        3,
        "refusals changed nothing"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn edit_comment_and_assign() {
    let s = serve().await;
    let t = s.task("first");
    let path = |a: &str| format!("/api/tasks/{}/{a}", t.id);
    let (status, body) = s
        .post(&path("edit"), json!({ "title": "second", "priority": 2 }))
        .await;
    assert_eq!(
        (status, body["title"].as_str(), body["priority"].as_i64()),
        (200, Some("second"), Some(2))
    );
    let (status, body) = s.post(&path("edit"), json!({})).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = s.post(&path("edit"), json!({ "body": "x".repeat(5000) })).await;
    assert_eq!(status, 413, "{body}");

    let (status, body) = s
        .post(&path("comment"), json!({ "body": "hello", "author": "ann" }))
        .await;
    assert_eq!(
        (status, body["body"].as_str(), body["author"].as_str()),
        (201, Some("hello"), Some("ann"))
    );
    let (status, body) = s
        .post(&path("comment"), json!({ "body": "x".repeat(5000) }))
        .await;
    assert_eq!(status, 413, "{body}");

    let (status, body) = s.post(&path("assign"), json!({ "assignee": "coder" })).await;
    assert_eq!((status, body["assignee"].as_str()), (200, Some("coder")));
    let (status, body) = s.post(&path("assign"), json!({ "assignee": null })).await;
    assert_eq!((status, body["assignee"].clone()), (200, json!(null)));
    let (status, body) = s.post(&path("assign"), json!({ "assignee": "" })).await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn unblock_reclaim_and_archive_with_the_clis_refusals() {
    let s = serve().await;
    let t = s.task("work");
    let path = |a: &str| format!("/api/tasks/{}/{a}", t.id);
    let (status, body) = s.post(&path("unblock"), json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        error(&body),
        format!("task {} is ready; unblock needs blocked or scheduled", t.id)
    );
    let (status, body) = s.post(&path("reclaim"), json!({})).await;
    assert_eq!(status, 409, "{body}");

    let claim = s.store.claim(&t.id, 900, NOW).unwrap();
    let (status, body) = s.post(&path("reclaim"), json!({ "reason": "stuck" })).await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({ "task_id": t.id, "ok": true, "outcome": "reclaimed" })
        )
    );
    assert_eq!(s.store.get(&t.id).unwrap().status, Status::Ready);
    assert_eq!(s.store.runs(&t.id).unwrap()[0].id, claim.run_id);

    let claim = s.store.claim(&t.id, 900, NOW).unwrap();
    s.store
        .block(
            &t.id,
            Some(BlockKind::Capability),
            Some("needs a key".into()),
            Some(claim.run_id),
            NOW,
        )
        .unwrap();
    let (status, body) = s.post(&path("unblock"), json!({ "reason": "key given" })).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("ready")), "{body}");
    let (status, body) = s.post(&path("archive"), json!({})).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("archived")));
    let (status, body) = s.post(&path("archive"), json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        error(&body).contains("archive needs any status but archived"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_move_performs_the_matching_action_or_says_why_not() {
    let s = serve().await;
    let t = s.task("drag me");
    let mv = |to: &str| (format!("/api/tasks/{}/move", t.id), json!({ "to": to }));
    let (p, b) = mv("done");
    let (status, body) = s.post(&p, b).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        error(&body).contains("no action moves a card from ready to done"),
        "{body}"
    );
    let (p, b) = mv("ready");
    let (status, body) = s.post(&p, b).await;
    assert_eq!(status, 409, "{body}");
    let (p, b) = mv("sideways");
    let (status, body) = s.post(&p, b).await;
    assert_eq!(status, 422, "{body}");

    s.store.claim(&t.id, 900, NOW).unwrap();
    let (p, b) = mv("ready");
    let (status, body) = s.post(&p, b).await;
    assert_eq!(
        (status, body["outcome"].as_str()),
        (200, Some("reclaimed")),
        "{body}"
    );
    let (p, b) = mv("archived");
    let (status, body) = s.post(&p, b).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("archived")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn cards_carry_runs_marks_and_the_newest_event() {
    let s = serve().await;
    let t = s.task("ran");
    s.store.claim(&t.id, 60, NOW).unwrap();
    let (status, body) = s.get("/api/cards").await;
    assert_eq!(status, 200, "{body}");
    let card = &body["cards"][0];
    assert_eq!(card["task"], task_json(&s.store.get(&t.id).unwrap()));
    assert_eq!(
        (card["runs"].as_u64(), card["stale_lease"].as_bool()),
        (Some(1), Some(true)),
        "{card}"
    );
    let (_, one) = s.get(&format!("/api/cards/{}", t.id)).await;
    assert_eq!(one["task"]["id"], json!(t.id));
    let (status, _) = s.get("/api/cards/nope").await;
    assert_eq!(status, 400);
}

#[tokio::test(flavor = "multi_thread")]
async fn pages_escape_card_text() {
    let s = serve().await;
    let evil = "<script>alert('x')</script>";
    let t = s
        .store
        .create(
            &board_core::NewTask {
                body: format!(
                    "# Heading\n\n{evil}\n\n[click](javascript:alert(1)) and <img src=x onerror=alert(1)>"
                ),
                ..board_core::NewTask::titled(evil)
            },
            NOW,
        )
        .unwrap();
    s.store.comment(&t.id, Some(evil), evil, None, NOW).unwrap();
    let r = s
        .client
        .get(s.url(&format!("/tasks/{}", t.id)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    let html = r.text().await.unwrap();
    assert!(html.contains("<h1>Heading</h1>"), "Markdown is rendered");
    assert!(!html.contains("<script>alert"), "{html}");
    assert!(!html.contains("<img"), "{html}");
    assert!(!html.contains("javascript:"), "{html}");
    assert!(html.contains("&lt;script&gt;alert"), "{html}");
    for path in [
        "/",
        "/stats",
        "/assets/board.js",
        "/assets/detail.js",
        "/assets/kanban.css",
    ] {
        let r = s.client.get(s.url(path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
    }
    let stats = s.text("/stats").await;
    assert!(
        stats.contains("Breaker: closed"),
        "the stats page shows the breaker"
    );
    assert!(stats.contains("Spend ceilings: none set"), "and the ceilings");
    let r = s.client.get(s.url("/tasks/t_00000000")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
}

const KEY: &str = "sk-webcanary-4e1f9a7c03b2d865";

const FANOUT: &str = r#"{"fanout": true, "rationale": "two parts", "tasks": [
    {"title": "first part", "body": "a", "parents": []},
    {"title": "second part", "body": "b", "parents": [0]}]}"#;

#[tokio::test(flavor = "multi_thread")]
async fn decompose_is_kanban_decompose_over_http() {
    let fake = fake_llm::FakeLlm::start(fake_llm::Settings {
        api_key: Some(KEY.to_owned()),
        ..fake_llm::Settings::default()
    })
    .await
    .unwrap();
    let s = common::serve_with_model(&fake, KEY).await;
    let card = s
        .store
        .create(
            &board_core::NewTask {
                triage: true,
                ..board_core::NewTask::titled("rough idea")
            },
            NOW,
        )
        .unwrap();
    fake.push_reply(fake_llm::Reply::text(FANOUT));
    let path = format!("/api/tasks/{}/decompose", card.id);
    let (status, outcome) = s.post(&path, json!({})).await;
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["ok"], json!(true));
    assert_eq!(outcome["fanout"], json!(true));
    let children: Vec<String> = outcome["child_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(children.len(), 2, "{outcome}");
    for child in &children {
        let task = s.store.get(&child.parse().unwrap()).unwrap();
        assert!(task.title.ends_with("part"), "{task:?}");
    }
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str()),
        "the configured key was sent"
    );
    // The ledger row `kanban decompose` writes.
    let bill = s.store.llm_calls(Some(&card.id)).unwrap();
    assert_eq!(bill.len(), 1, "{bill:?}");
    assert_eq!(
        (bill[0].purpose.as_str(), bill[0].outcome.as_str()),
        ("decompose", "ok")
    );
    assert_eq!(bill[0].model, "fake");

    // The same refusals: a card that left triage, an unknown card, a bad id, and a
    // provider that rejects the key quoting it.
    let (status, body) = s.post(&path, json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert!(error(&body).contains("triage"), "{body}");
    assert_eq!(fake.requests().len(), 1, "a refusal calls no model");
    let (status, _) = s.post("/api/tasks/t_00000000/decompose", json!({})).await;
    assert_eq!(status, 404);
    let (status, _) = s.post("/api/tasks/nope/decompose", json!({})).await;
    assert_eq!(status, 400);
    let echo = s
        .store
        .create(
            &board_core::NewTask {
                triage: true,
                ..board_core::NewTask::titled("echoes the key")
            },
            NOW,
        )
        .unwrap();
    fake.push_reply(fake_llm::Reply::error(
        401,
        format!("Incorrect API key provided: {KEY}"),
    ));
    let r = s
        .client
        .post(s.url(&format!("/api/tasks/{}/decompose", echo.id)))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 409);
    let text = r.text().await.unwrap();
    assert!(text.contains("401"), "{text}");
    for piece in KEY.as_bytes().windows(8) {
        let piece = std::str::from_utf8(piece).unwrap();
        assert!(!text.contains(piece), "{piece:?} of the key in {text}");
    }
    let bill = s.store.llm_calls(Some(&echo.id)).unwrap();
    assert_eq!(bill.len(), 1);
    assert_eq!(bill[0].http_status, Some(401));
    assert_eq!(s.store.get(&echo.id).unwrap().status, Status::Triage);
}

#[tokio::test(flavor = "multi_thread")]
async fn decompose_without_a_model_is_refused() {
    let s = serve().await;
    let card = s
        .store
        .create(
            &board_core::NewTask {
                triage: true,
                ..board_core::NewTask::titled("rough idea")
            },
            NOW,
        )
        .unwrap();
    let before = s.store.snapshot().unwrap();
    let (status, body) = s
        .post(&format!("/api/tasks/{}/decompose", card.id), json!({}))
        .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(error(&body), web::NO_MODEL);
    assert_eq!(s.store.snapshot().unwrap(), before, "nothing changed");
    assert!(s.store.llm_calls(None).unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn cards_come_in_pages_of_a_column() {
    let s = serve().await;
    let ids: Vec<String> = (0..5)
        .map(|i| s.task(&format!("ready {i}")).id.to_string())
        .collect();
    let (status, first) = s.get("/api/cards?status=ready&limit=3").await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["cards"].as_array().unwrap().len(), 3);
    assert_eq!(first["total"], 5);
    let next = first["next"].as_str().expect("a next page").to_owned();
    let (_, second) = s
        .get(&format!("/api/cards?status=ready&limit=3&after={next}"))
        .await;
    assert_eq!(second["cards"].as_array().unwrap().len(), 2);
    assert!(second["next"].is_null(), "the last page");
    let mut seen: Vec<String> = [&first, &second]
        .iter()
        .flat_map(|page| page["cards"].as_array().unwrap().iter())
        .map(|c| c["task"]["id"].as_str().unwrap().to_owned())
        .collect();
    seen.sort();
    let mut all = ids.clone();
    all.sort();
    assert_eq!(seen, all);
    let (bad, _) = s.get("/api/cards?status=nope").await;
    assert_eq!(bad, 400);
    let (_, done) = s.get("/api/cards?status=done").await;
    assert_eq!(done["cards"], json!([]));
    assert_eq!(done["total"], 0, "an empty column counts 0");
    let (_, every) = s.get("/api/cards").await;
    assert!(
        every["total"].is_null(),
        "no column, no count: {}",
        every["total"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_columns_first_page_comes_in_one_read_the_same_as_each_columns() {
    let s = serve().await;
    for i in 0..5 {
        s.task(&format!("ready {i}"));
    }
    let gone = s.task("archived");
    s.store.archive(&gone.id, NOW).unwrap();
    let triage = board_core::NewTask {
        triage: true,
        ..board_core::NewTask::titled("an idea")
    };
    s.store.create(&triage, NOW).unwrap();
    let (status, all) = s.get("/api/columns?limit=3").await;
    assert_eq!(status, 200, "{all}");
    let columns = all["columns"].as_array().unwrap();
    let names: Vec<&str> = columns.iter().map(|c| c["status"].as_str().unwrap()).collect();
    let shown: Vec<&str> = Status::ALL
        .iter()
        .map(|s| s.as_str())
        .filter(|s| *s != "archived")
        .collect();
    assert_eq!(names, shown, "every column but archived, in the board's order");
    assert!(all["newest_event"].is_i64() && all["now"].is_i64(), "{all}");
    for column in columns {
        let path = format!("/api/cards?status={}&limit=3", column["status"].as_str().unwrap());
        let (_, alone) = s.get(&path).await;
        for key in ["cards", "next", "total"] {
            assert_eq!(column[key], alone[key], "{key} of {path}");
        }
    }
    let ready = &columns[names.iter().position(|n| *n == "ready").unwrap()];
    assert_eq!(
        (ready["cards"].as_array().unwrap().len(), &ready["total"]),
        (3, &json!(5))
    );
    let (_, with) = s.get("/api/columns?archived=true").await;
    let archived = with["columns"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(archived["status"], "archived");
    assert_eq!(archived["cards"][0]["task"]["id"], json!(gone.id));
    for bad in [
        "/api/columns?limit=x",
        "/api/columns?status=ready",
        "/api/columns?archived=2",
    ] {
        let (code, body) = s.get(bad).await;
        assert_eq!(code, 400, "{bad}: {body}");
    }
}

/// Short fields (assignee, idempotency key, comment author) are capped at the store: a
/// megabyte through the API is refused with 400, and nothing lands.
#[tokio::test(flavor = "multi_thread")]
async fn short_fields_over_their_cap_are_refused() {
    let s = serve().await;
    let t = s.task("capped");
    let long = "n".repeat(board_core::limits::SHORT_MAX_BYTES + 1);
    let before = s.store.snapshot().unwrap();
    for (path, body) in [
        ("/api/tasks".to_owned(), json!({ "title": "x", "assignee": long })),
        (
            "/api/tasks".to_owned(),
            json!({ "title": "x", "idempotency_key": long }),
        ),
        (
            format!("/api/tasks/{}/comment", t.id),
            json!({ "body": "hi", "author": long }),
        ),
        (format!("/api/tasks/{}/assign", t.id), json!({ "assignee": long })),
    ] {
        let (status, answer) = s.post(&path, body).await;
        assert_eq!(status, 400, "{path}: {answer}");
        assert!(error(&answer).contains("byte limit"), "{path}: {answer}");
    }
    assert_eq!(
        s.store.snapshot().unwrap(),
        before,
        "a refused write changed the board"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_person_reviews_on_the_page_and_through_the_api() {
    let s = serve().await;
    let t = s
        .store
        .create(
            &board_core::NewTask {
                assignee: Some("coder".into()),
                ..board_core::NewTask::titled("reviewed")
            },
            NOW,
        )
        .unwrap();
    let ready = s.task("not in review");
    common::into_review(&s, &t.id, json!({ "tests": "<b>42</b>" }));
    let html = s.text(&format!("/tasks/{}", t.id)).await;
    assert!(html.contains("data-action=\"approve\"") && html.contains("data-action=\"request-changes\""));
    assert!(html.contains("reviewer critic"), "{html}");
    assert!(
        html.contains("&lt;b&gt;42&lt;/b&gt;") && !html.contains("<b>42"),
        "evidence is text: {html}"
    );
    let other = s.text(&format!("/tasks/{}", ready.id)).await;
    assert!(
        !other.contains("data-action=\"approve\""),
        "review actions only where they apply"
    );

    let path = format!("/api/tasks/{}/request-changes", t.id);
    let (status, body) = s.post(&path, json!({})).await;
    assert_eq!(status, 422, "a reason is required: {body}");
    let (status, body) = s.post(&path, json!({ "reason": "add a test" })).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("ready")), "{body}");
    let comment = s.store.comments(&t.id).unwrap().pop().unwrap();
    assert_eq!(comment.body, "CHANGES REQUESTED: add a test");

    common::into_review(&s, &t.id, json!("second try"));
    let (status, body) = s
        .post(&format!("/api/tasks/{}/move", t.id), json!({ "to": "done" }))
        .await;
    assert_eq!((status, body["status"].as_str()), (200, Some("done")), "{body}");
    let (status, body) = s.post(&format!("/api/tasks/{}/approve", t.id), json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert!(error(&body).contains("approve needs review"), "{body}");
    let stats = s.text("/stats").await;
    assert!(
        stats.contains("Checks: 0 failed verifications · 1 rounds of changes requested"),
        "{stats}"
    );
}
