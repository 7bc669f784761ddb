//! The decomposer end to end (docs/decomposer.md): a SQLite board in a temporary directory, the real
//! HTTP client, and the fake LLM server on 127.0.0.1. Each test is one acceptance item
//! of the decomposer's issue; the board is checked through the `Store` only.

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use board_core::BoardWrites;
use board_core::{BlockKind, Mode, NewTask, Status, Store, Task, TaskId};
use board_sqlite::{Options, SqliteStore};
use decompose::{ApiKey, DecomposeOutcome, DecomposerSettings, HttpModel};
use fake_llm::{FakeLlm, RecordedRequest, Reply, Settings};
use serde_json::{json, Value};
use tempfile::TempDir;

const START: i64 = 1_700_000_000;

/// Past any backoff of the failure policy (its cap is one hour).
const PAST_BACKOFF: i64 = 4_000;

struct Board {
    _dir: TempDir,
    path: PathBuf,
    store: Arc<dyn Store>,
    llm: FakeLlm,
    now: Arc<AtomicI64>,
}

impl Board {
    async fn new() -> Board {
        Board::with_llm(Settings::default()).await
    }

    async fn with_llm(llm: Settings) -> Board {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kanban.db");
        let store = SqliteStore::open(&path, &Options::default()).unwrap();
        Board {
            _dir: dir,
            path,
            store: Arc::new(store),
            llm: FakeLlm::start(llm).await.unwrap(),
            now: Arc::new(AtomicI64::new(START)),
        }
    }

    /// A second connection to the same file, as another process would have.
    fn other_connection(path: &PathBuf) -> SqliteStore {
        SqliteStore::open(path, &Options::default()).unwrap()
    }

    fn triage(&self, title: &str) -> TaskId {
        let task = NewTask {
            triage: true,
            body: "some details".into(),
            ..NewTask::titled(title)
        };
        self.store.create(&task, self.now()).unwrap().id
    }

    /// Records that the provider answered a call about another card, as the breaker
    /// sees it: a provider fault after it is charged to its card.
    fn provider_up(&self) {
        let other = self.triage("answered");
        let up = board_core::BreakerSignal::Up { card: other };
        self.store
            .signal_breaker(&up, &Default::default(), self.now())
            .unwrap();
    }

    fn now(&self) -> i64 {
        self.now.load(Ordering::SeqCst)
    }

    fn advance(&self, seconds: i64) {
        self.now.fetch_add(seconds, Ordering::SeqCst);
    }

    fn settings(&self) -> DecomposerSettings {
        DecomposerSettings {
            base_url: self.llm.base_url(),
            model: "fake-model".into(),
            api_key_env: None,
            timeout: Duration::from_secs(5),
            retry_backoff: Duration::ZERO,
            ..DecomposerSettings::default()
        }
    }

    async fn decompose(&self, id: &TaskId, mode: Mode) -> DecomposeOutcome {
        self.decompose_with(id, mode, &self.settings()).await
    }

    async fn decompose_with(
        &self,
        id: &TaskId,
        mode: Mode,
        settings: &DecomposerSettings,
    ) -> DecomposeOutcome {
        let client = HttpModel::new(settings).unwrap();
        let now = Arc::clone(&self.now);
        let clock = move || now.load(Ordering::SeqCst);
        decompose::decompose(self.store.clone(), &client, id, mode, settings, &clock).await
    }

    async fn specify(&self, id: &TaskId, mode: Mode) -> DecomposeOutcome {
        let settings = self.settings();
        let client = HttpModel::new(&settings).unwrap();
        let now = Arc::clone(&self.now);
        let clock = move || now.load(Ordering::SeqCst);
        decompose::specify(self.store.clone(), &client, id, mode, &settings, &clock).await
    }

    fn task(&self, id: &TaskId) -> Task {
        self.store.get(id).unwrap()
    }

    fn task_count(&self) -> usize {
        self.store.snapshot().unwrap().tasks.len()
    }

    fn requests_for(&self, id: &TaskId) -> Vec<RecordedRequest> {
        requests_for(&self.llm, id)
    }

    fn events_of(&self, id: &TaskId, kind: &str) -> Vec<Value> {
        self.store
            .snapshot()
            .unwrap()
            .events
            .into_iter()
            .filter(|e| &e.task_id == id && e.kind == kind)
            .map(|e| e.payload)
            .collect()
    }
}

fn requests_for(llm: &FakeLlm, id: &TaskId) -> Vec<RecordedRequest> {
    llm.requests()
        .into_iter()
        .filter(|r| r.task_id.as_deref() == Some(id.as_str()))
        .collect()
}

fn single(title: &str) -> Reply {
    Reply::text(
        json!({ "fanout": false, "rationale": "one step", "title": title, "body": "done when shipped" })
            .to_string(),
    )
}

fn three_children() -> Reply {
    Reply::text(
        json!({
            "fanout": true,
            "rationale": "three parts",
            "tasks": [
                { "title": "schema", "body": "add the table" },
                { "title": "docs" },
                { "title": "api", "parents": [0] },
            ],
        })
        .to_string(),
    )
}

fn assert_reason(outcome: &DecomposeOutcome, expected: &str) {
    assert!(!outcome.ok, "expected a failure, got {outcome:?}");
    let reason = outcome.reason.as_deref().unwrap_or("");
    assert!(
        reason.contains(expected),
        "reason {reason:?} does not contain {expected:?}"
    );
}

/// Acceptance 1: a fresh triage card, automatic, a single-task reply.
#[tokio::test]
async fn a_fresh_card_is_rewritten_by_one_request_and_made_ready() {
    let board = Board::new().await;
    let card = board.triage("rough idea about release notes");
    board.llm.push_reply(single("Write the release notes"));
    let outcome = board.decompose(&card, Mode::Automatic).await;
    assert!(outcome.ok, "{outcome:?}");
    assert_eq!(outcome.new_title.as_deref(), Some("Write the release notes"));
    assert!(!outcome.fanout && outcome.child_ids.is_empty());
    assert_eq!(board.llm.requests().len(), 1);
    let task = board.task(&card);
    assert_eq!(
        (task.status, task.title.as_str()),
        (Status::Ready, "Write the release notes")
    );
    assert_eq!(task.assignee.as_deref(), Some("default"));
    assert_eq!(board.events_of(&card, "specified").len(), 1);
    let calls = board.store.llm_calls(Some(&card)).unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].outcome.as_str(), calls[0].purpose.as_str()),
        ("ok", "decompose")
    );
}

/// Claim, block (capability), unblock, claim, block again: back in triage with history.
fn card_with_history(board: &Board) -> TaskId {
    let now = board.now();
    let id = board
        .store
        .create(&NewTask::titled("needs a human"), now)
        .unwrap()
        .id;
    board.store.claim(&id, 900, now).unwrap();
    assert!(board
        .store
        .block(&id, Some(BlockKind::Capability), Some("no GPU".into()), None, now)
        .unwrap());
    board.store.unblock(&id, None, now).unwrap();
    board.store.claim(&id, 900, now).unwrap();
    assert!(board
        .store
        .block(
            &id,
            Some(BlockKind::Capability),
            Some("still no GPU".into()),
            None,
            now
        )
        .unwrap());
    assert_eq!(board.task(&id).status, Status::Triage);
    id
}

/// Acceptance 2: history stops an automatic call before it spends anything; a manual
/// call still works.
#[tokio::test]
async fn a_card_with_history_is_left_alone_automatically_but_not_by_hand() {
    let board = Board::new().await;
    let card = card_with_history(&board);
    board
        .llm
        .set_default_reply(single("Get a GPU for the render job"));
    let before = board.store.snapshot().unwrap();
    let outcome = board.decompose(&card, Mode::Automatic).await;
    assert_reason(&outcome, "execution history");
    assert!(
        board.llm.requests().is_empty(),
        "an automatic call sent a request"
    );
    assert_eq!(
        board.store.snapshot().unwrap(),
        before,
        "an automatic refusal wrote something"
    );
    assert!(board.store.llm_calls(None).unwrap().is_empty());

    let outcome = board.decompose(&card, Mode::Manual).await;
    assert!(outcome.ok, "{outcome:?}");
    assert_eq!(board.llm.requests().len(), 1);
    let task = board.task(&card);
    assert_eq!(
        (task.status, task.title.as_str()),
        (Status::Ready, "Get a GPU for the render job")
    );
}

/// Inserts an ended run for `id` straight into the file: what a worker's claim and
/// block leave behind. The store has no verb that gives a run to a card while it stays
/// in triage with no history, so this stands in for another process's run (see the
/// gained-history guard of docs/decomposer.md#automatic-and-manual).
fn give_a_run(path: &PathBuf, id: &str, now: i64) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(30)).unwrap();
    conn.execute(
        "INSERT INTO task_runs (task_id, profile, status, outcome, started_at, ended_at, error)
         VALUES (?1, 'default', 'ended', 'blocked', ?2, ?2, 'blocked: capability')",
        rusqlite::params![id, now],
    )
    .unwrap();
}

/// Acceptance 3: a run appears while the model is answering; then an edit does.
#[tokio::test]
async fn a_card_that_changes_during_the_call_keeps_its_state() {
    let board = Board::new().await;
    let single_card = board.triage("one thing");
    let fanout_card = board.triage("three things");
    let edited_card = board.triage("edited meanwhile");
    board
        .llm
        .script_task(single_card.as_str(), vec![single("One thing, tightened")]);
    board
        .llm
        .script_task(fanout_card.as_str(), vec![three_children()]);
    board
        .llm
        .script_task(edited_card.as_str(), vec![three_children()]);
    let (path, edited, now) = (board.path.clone(), edited_card.clone(), board.now());
    board.llm.on_request(move |request| {
        let Some(id) = request.task_id.as_deref() else {
            return;
        };
        if id == edited.as_str() {
            let other = Board::other_connection(&path);
            other
                .edit(&edited, Some("edited by a person".into()), None, None, now)
                .unwrap();
        } else {
            give_a_run(&path, id, now);
        }
    });
    let tasks_before = board.task_count();

    for card in [&single_card, &fanout_card] {
        let outcome = board.decompose(card, Mode::Automatic).await;
        assert_reason(&outcome, "gained execution history");
        let task = board.task(card);
        assert_eq!(task.status, Status::Triage);
        assert_eq!(task.decompose_failures, 0, "a card that moved on is not failing");
        assert!(board.events_of(card, "auto_decompose_failed").is_empty());
    }
    let outcome = board.decompose(&edited_card, Mode::Automatic).await;
    assert_reason(&outcome, "input changed during decomposition");
    let task = board.task(&edited_card);
    assert_eq!(
        (task.status, task.title.as_str()),
        (Status::Triage, "edited by a person")
    );

    assert_eq!(board.task_count(), tasks_before, "no child rows");
    assert!(board.store.snapshot().unwrap().links.is_empty());
    assert_eq!(board.llm.requests().len(), 3);
}

/// Acceptance 4: a valid three-child reply with the edge 0 -> 2.
#[tokio::test]
async fn a_fanout_creates_the_children_and_parks_the_root_under_them() {
    let board = Board::new().await;
    let root = board.triage("build the feature");
    board.llm.push_reply(three_children());
    let settings = DecomposerSettings {
        plan: board_core::PlanSettings {
            orchestrator: "lead".into(),
            ..board_core::PlanSettings::default()
        },
        ..board.settings()
    };
    let outcome = board.decompose_with(&root, Mode::Automatic, &settings).await;
    assert!(outcome.ok && outcome.fanout, "{outcome:?}");
    let children = &outcome.child_ids;
    assert_eq!(children.len(), 3);
    let titles: Vec<String> = children.iter().map(|c| board.task(c).title).collect();
    assert_eq!(titles, ["schema", "docs", "api"]);

    let links: Vec<(TaskId, TaskId)> = board
        .store
        .snapshot()
        .unwrap()
        .links
        .into_iter()
        .map(|l| (l.parent_id, l.child_id))
        .collect();
    assert!(links.contains(&(children[0].clone(), children[2].clone())));
    for child in children {
        assert!(
            links.contains(&(child.clone(), root.clone())),
            "{child} -> root missing"
        );
    }
    assert_eq!(links.len(), 4);

    let task = board.task(&root);
    assert_eq!(
        (task.status, task.assignee.as_deref()),
        (Status::Todo, Some("lead"))
    );
    let decomposed = board.events_of(&root, "decomposed");
    assert_eq!(decomposed.len(), 1);
    assert_eq!(decomposed[0]["child_ids"], json!(children));
    let statuses: Vec<Status> = children.iter().map(|c| board.task(c).status).collect();
    assert_eq!(statuses, [Status::Ready, Status::Ready, Status::Todo]);
    assert_eq!(outcome.new_title, None);
}

/// Acceptance 5: every kind of bad answer fails with its own reason, writes no task row
/// and counts against the card.
#[tokio::test]
async fn every_bad_answer_fails_alone_and_is_recorded() {
    let board = Board::new().await;
    let many: Vec<Value> = (0..500)
        .map(|i| json!({ "title": format!("part {i}") }))
        .collect();
    let cases: Vec<(&str, Reply, &str)> = vec![
        (
            "500 children",
            Reply::text(json!({ "fanout": true, "tasks": many }).to_string()),
            "reply has 500 tasks, limit is 16",
        ),
        (
            "a cycle",
            Reply::text(
                r#"{"fanout": true, "tasks": [{"title": "a", "parents": [1]}, {"title": "b", "parents": [0]}]}"#,
            ),
            "dependency cycle",
        ),
        (
            "a parent out of range",
            Reply::text(r#"{"fanout": true, "tasks": [{"title": "a"}, {"title": "b", "parents": [9]}]}"#),
            "tasks[1].parents: index 9 out of range",
        ),
        (
            "a non-boolean fanout",
            Reply::text(r#"{"fanout": "yes", "title": "x"}"#),
            "fanout must be true or false",
        ),
        (
            "prose",
            Reply::text("I think this should be split into three tasks."),
            "malformed reply",
        ),
        (
            "a 5 MiB body",
            Reply::raw("application/json", vec![b' '; 5 * 1024 * 1024]),
            "response too large",
        ),
        ("an HTTP 500", Reply::error(500, "internal error"), "HTTP 500"),
        ("a hang", Reply::Hang, "timed out"),
    ];
    let settings = DecomposerSettings {
        timeout: Duration::from_secs(1),
        ..board.settings()
    };
    for (name, reply, expected) in cases {
        let card = board.triage(name);
        board.llm.script_task(card.as_str(), vec![reply]);
        board.provider_up();
        let tasks_before = board.task_count();
        let outcome = board.decompose_with(&card, Mode::Automatic, &settings).await;
        assert_reason(&outcome, expected);
        assert_eq!(board.task_count(), tasks_before, "{name}: a task row was written");
        let task = board.task(&card);
        assert_eq!(
            (task.status, task.decompose_failures),
            (Status::Triage, 1),
            "{name}"
        );
        assert_eq!(
            task.decompose_last_error.as_deref(),
            outcome.reason.as_deref(),
            "{name}"
        );
        assert!(
            task.decompose_next_attempt_at.is_some_and(|at| at > board.now()),
            "{name}"
        );
        assert_eq!(board.events_of(&card, "auto_decompose_failed").len(), 1, "{name}");
    }
}

#[tokio::test]
async fn an_http_500_is_retried_and_every_request_billed() {
    let board = Board::new().await;
    let card = board.triage("flaky provider");
    board
        .llm
        .script_task(card.as_str(), vec![Reply::error(500, "internal error")]);
    board.provider_up();
    let outcome = board.decompose(&card, Mode::Automatic).await;
    assert_reason(&outcome, "HTTP 500");
    assert_eq!(board.requests_for(&card).len(), 3, "one request and two retries");
    let calls = board.store.llm_calls(Some(&card)).unwrap();
    assert_eq!(calls.len(), 3);
    assert!(calls
        .iter()
        .all(|c| c.outcome.as_str() == "http_error" && c.http_status == Some(500)));
}

/// Acceptance 5, continued: three failures park the card; a parked or cooling card
/// sends nothing; a manual call clears the park.
#[tokio::test]
async fn three_failures_park_the_card_and_a_parked_or_cooling_card_costs_nothing() {
    let board = Board::new().await;
    let card = board.triage("hard to read");
    board.llm.script_task(card.as_str(), vec![Reply::text("no idea")]);

    let outcome = board.decompose(&card, Mode::Automatic).await;
    assert_reason(&outcome, "malformed reply");
    let cooling = board.decompose(&card, Mode::Automatic).await;
    assert_reason(&cooling, "cooling down");
    assert_eq!(
        board.requests_for(&card).len(),
        1,
        "a cooling card sent a request"
    );

    for failures in 2..=3 {
        board.advance(PAST_BACKOFF);
        let outcome = board.decompose(&card, Mode::Automatic).await;
        assert_reason(&outcome, "malformed reply");
        assert_eq!(board.task(&card).decompose_failures, failures);
    }
    let task = board.task(&card);
    assert!(task.decompose_parked);
    assert_eq!(task.status, Status::Triage);
    assert_eq!(board.events_of(&card, "auto_decompose_parked").len(), 1);

    board.advance(PAST_BACKOFF);
    let parked = board.decompose(&card, Mode::Automatic).await;
    assert_reason(&parked, "parked");
    assert_eq!(board.requests_for(&card).len(), 3, "a parked card sent a request");

    board.llm.script_task(card.as_str(), vec![single("Readable now")]);
    let outcome = board.decompose(&card, Mode::Manual).await;
    assert!(outcome.ok, "{outcome:?}");
    let task = board.task(&card);
    assert!(!task.decompose_parked && task.decompose_failures == 0);
    assert_eq!(task.status, Status::Ready);
}

#[tokio::test]
async fn a_manual_failure_is_not_counted() {
    let board = Board::new().await;
    let card = board.triage("by hand");
    board
        .llm
        .script_task(card.as_str(), vec![Reply::text("prose only")]);
    let outcome = board.decompose(&card, Mode::Manual).await;
    assert_reason(&outcome, "malformed reply");
    assert_eq!(board.task(&card).decompose_failures, 0);
}

#[tokio::test]
async fn specify_asks_for_one_task_and_refuses_a_fanout() {
    let board = Board::new().await;
    let card = board.triage("vague");
    board.llm.script_task(card.as_str(), vec![three_children()]);
    let outcome = board.specify(&card, Mode::Manual).await;
    assert_reason(&outcome, "specify needs a single task");
    assert_eq!(board.task(&card).status, Status::Triage);
    let system = board.requests_for(&card)[0].json().unwrap()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains(r#""fanout" must be the JSON boolean false"#));

    board.llm.script_task(card.as_str(), vec![single("Precise")]);
    let outcome = board.specify(&card, Mode::Manual).await;
    assert!(outcome.ok, "{outcome:?}");
    assert_eq!(outcome.new_title.as_deref(), Some("Precise"));
    let calls = board.store.llm_calls(Some(&card)).unwrap();
    assert!(calls.iter().all(|c| c.purpose.as_str() == "specify"));
}

#[tokio::test]
async fn an_unknown_or_finished_card_is_refused_without_a_request() {
    let board = Board::new().await;
    let ready = board
        .store
        .create(&NewTask::titled("already clear"), START)
        .unwrap()
        .id;
    let outcome = board.decompose(&ready, Mode::Manual).await;
    assert_reason(&outcome, "needs triage");
    let unknown = TaskId::from_random([9, 9, 9, 9]);
    let outcome = board.decompose(&unknown, Mode::Automatic).await;
    assert_reason(&outcome, "no such task");
    assert!(board.llm.requests().is_empty());
}

const CANARY: &str = "sk-canary-1234567890";

/// Acceptance 6: the API key appears nowhere, whatever goes wrong.
#[tokio::test]
async fn the_api_key_never_leaks() {
    let board = Board::with_llm(Settings {
        api_key: Some(CANARY.into()),
        ..Settings::default()
    })
    .await;
    let settings = DecomposerSettings {
        api_key: Some(ApiKey::new(CANARY)),
        timeout: Duration::from_secs(1),
        transient_retries: 1,
        ..board.settings()
    };
    let mut outcomes = Vec::new();
    let replies: Vec<(&str, Reply)> = vec![
        ("ok", single("Fine")),
        ("fanout ok", three_children()),
        ("http 500", Reply::error(500, CANARY)),
        (
            "http 401",
            Reply::error(401, format!("Incorrect API key provided: {CANARY}")),
        ),
        (
            "429",
            Reply::Error {
                status: 429,
                message: CANARY.into(),
                retry_after: Some(0),
            },
        ),
        ("timeout", Reply::Hang),
        (
            "too large",
            Reply::raw("application/json", vec![b'x'; 2 * 1024 * 1024]),
        ),
        ("bad response", Reply::raw("text/plain", CANARY)),
        ("malformed", Reply::text(format!("my key is {CANARY}"))),
        (
            "rejected",
            Reply::text(
                json!({ "fanout": true, "tasks": [{ "title": CANARY, "parents": [7] }] }).to_string(),
            ),
        ),
    ];
    for (name, reply) in replies {
        let card = board.triage(name);
        board.llm.script_task(card.as_str(), vec![reply]);
        board.provider_up();
        outcomes.push(board.decompose_with(&card, Mode::Automatic, &settings).await);
    }
    // An edit during the call: a refusal at commit.
    let edited = board.triage("edited");
    board.llm.script_task(edited.as_str(), vec![single("Edited")]);
    let (path, target, now) = (board.path.clone(), edited.clone(), board.now());
    board.llm.on_request(move |request| {
        if request.task_id.as_deref() == Some(target.as_str()) {
            Board::other_connection(&path)
                .edit(&target, Some("changed".into()), None, None, now)
                .unwrap();
        }
    });
    board.provider_up();
    outcomes.push(board.decompose_with(&edited, Mode::Automatic, &settings).await);
    // A closed port: a connection error.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let unreachable = DecomposerSettings {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        ..settings.clone()
    };
    let card = board.triage("unreachable");
    board.provider_up();
    outcomes.push(board.decompose_with(&card, Mode::Automatic, &unreachable).await);

    let failed = outcomes.iter().filter(|o| !o.ok).count();
    assert_eq!(
        failed,
        outcomes.len() - 2,
        "every failure kind failed: {outcomes:#?}"
    );
    let kinds: std::collections::BTreeSet<String> = board
        .store
        .llm_calls(None)
        .unwrap()
        .into_iter()
        .map(|c| c.outcome.as_str().to_owned())
        .collect();
    let expected = [
        "ok",
        "http_error",
        "timeout",
        "connection_error",
        "too_large",
        "bad_response",
    ];
    assert_eq!(kinds, expected.iter().map(|k| k.to_string()).collect());
    let sent = board.llm.requests();
    assert!(
        sent.iter()
            .all(|r| r.header("authorization") == Some(&format!("Bearer {CANARY}"))),
        "the key was not sent with every request"
    );

    let snapshot = board.store.snapshot().unwrap();
    for event in &snapshot.events {
        assert!(
            !event.payload.to_string().contains(CANARY),
            "event {} leaks the key",
            event.kind
        );
    }
    for task in &snapshot.tasks {
        assert!(
            !format!("{task:?}").contains(CANARY),
            "task {} leaks the key",
            task.id
        );
    }
    for (row, call) in board.store.llm_calls(None).unwrap().iter().enumerate() {
        assert!(
            !format!("{call:?}").contains(CANARY),
            "llm_calls row {row} leaks the key"
        );
    }
    for outcome in &outcomes {
        assert!(
            !serde_json::to_string(outcome).unwrap().contains(CANARY),
            "{outcome:?}"
        );
    }
    assert!(!format!("{settings:?}").contains(CANARY));
}

/// A provider fault on a board that never saw the provider up is nobody's fault: it is
/// not retried and not charged; a second card's fault opens the breaker (one event);
/// then an automatic call sends nothing, the probe sends one request, and its success
/// closes the breaker.
#[tokio::test]
async fn an_outage_opens_the_breaker_and_charges_no_card() {
    let board = Board::new().await;
    let (first, second, third) = (board.triage("one"), board.triage("two"), board.triage("three"));
    for card in [&first, &second, &third] {
        board
            .llm
            .script_task(card.as_str(), vec![Reply::error(503, "overloaded")]);
    }
    let outcome = board.decompose(&first, Mode::Automatic).await;
    assert_reason(&outcome, "HTTP 503");
    assert_eq!(board.requests_for(&first).len(), 1, "never seen up: no retries");
    assert_eq!(board.task(&first).decompose_failures, 0, "not charged");
    assert!(!board.store.breaker().unwrap().open);
    board.decompose(&second, Mode::Automatic).await;
    let breaker = board.store.breaker().unwrap();
    assert!(breaker.open, "two cards failed with no success between");
    assert_eq!(board.task(&second).decompose_failures, 0);
    assert_eq!(board.events_of(&second, "breaker_opened").len(), 1);
    let refused = board.decompose(&third, Mode::Automatic).await;
    assert_reason(&refused, "breaker is open");
    assert!(board.requests_for(&third).is_empty(), "nothing sent while open");
    board
        .llm
        .script_task(third.as_str(), vec![single("Third, clearer")]);
    let probe = decompose::Ask {
        probe: true,
        ..decompose::Ask::from(Mode::Automatic)
    };
    let settings = board.settings();
    let client = HttpModel::new(&settings).unwrap();
    let now = Arc::clone(&board.now);
    let clock = move || now.load(Ordering::SeqCst);
    let outcome = decompose::decompose(board.store.clone(), &client, &third, probe, &settings, &clock).await;
    assert!(outcome.ok, "{outcome:?}");
    assert_eq!(board.requests_for(&third).len(), 1);
    assert!(
        !board.store.breaker().unwrap().open,
        "the probe's success closes it"
    );
    assert_eq!(board.events_of(&third, "breaker_closed").len(), 1);
    let rows = board.store.llm_calls(None).unwrap();
    assert_eq!(rows.len(), 3, "every request is one ledger row");
}

/// At a reached ceiling a manual call is refused before sending, says how to go past
/// it, and with `over_budget` it is sent and its row says so; prices give every row
/// its cost.
#[tokio::test]
async fn a_reached_ceiling_refuses_until_over_budget_and_rows_carry_their_cost() {
    let board = Board::new().await;
    let settings = DecomposerSettings {
        ceilings: board_core::Ceilings {
            max_requests_per_day: Some(1),
            ..Default::default()
        },
        prices: board_core::Prices {
            per_million_input: Some(1.0),
            per_million_output: Some(2.0),
        },
        ..board.settings()
    };
    let (first, second) = (board.triage("first"), board.triage("second"));
    board.llm.script_task(first.as_str(), vec![single("First")]);
    board.llm.script_task(second.as_str(), vec![single("Second")]);
    assert!(board.decompose_with(&first, Mode::Manual, &settings).await.ok);
    let refused = board.decompose_with(&second, Mode::Manual, &settings).await;
    assert_reason(&refused, "--over-budget");
    assert!(board.requests_for(&second).is_empty());
    let past = decompose::Ask {
        over_budget: true,
        ..decompose::Ask::from(Mode::Manual)
    };
    let client = HttpModel::new(&settings).unwrap();
    let now = Arc::clone(&board.now);
    let clock = move || now.load(Ordering::SeqCst);
    let outcome = decompose::decompose(board.store.clone(), &client, &second, past, &settings, &clock).await;
    assert!(outcome.ok, "{outcome:?}");
    let rows = board.store.llm_calls(None).unwrap();
    assert_eq!(
        rows.iter().map(|r| r.over_budget).collect::<Vec<_>>(),
        [false, true]
    );
    assert!(rows.iter().all(|r| r.cost.is_some_and(|c| c > 0.0)), "{rows:?}");
}

/// A person's call while the breaker is open is still sent (one request), and what it
/// learns moves the breaker: a 429 with `Retry-After` pushes the next probe back, a
/// success closes it.
#[tokio::test]
async fn a_manual_call_during_an_open_breaker_is_sent_and_its_answer_moves_the_breaker() {
    let board = Board::new().await;
    let cards = ["one", "two", "three", "four"].map(|title| board.triage(title));
    for card in &cards[..2] {
        board
            .llm
            .script_task(card.as_str(), vec![Reply::error(503, "overloaded")]);
        board.decompose(card, Mode::Automatic).await;
    }
    let opened = board.store.breaker().unwrap();
    assert!(opened.open, "two cards failed with no success between");
    let probe_at = opened.probe_at.expect("a probe time");

    let slow_down = Reply::Error {
        status: 429,
        message: "slow down".into(),
        retry_after: Some(3000),
    };
    board.llm.script_task(cards[2].as_str(), vec![slow_down]);
    let refused = board.decompose(&cards[2], Mode::Manual).await;
    assert!(!refused.ok, "{refused:?}");
    assert_eq!(board.requests_for(&cards[2]).len(), 1, "sent once, not retried");
    let held = board.store.breaker().unwrap();
    assert!(held.open);
    assert_eq!(held.probe_at, Some(board.now() + 3000), "was {probe_at}");
    assert_eq!(
        held.last_error.as_deref().map(|e| e.contains("slow down")),
        Some(true)
    );

    board
        .llm
        .script_task(cards[3].as_str(), vec![single("Four, clearer")]);
    let outcome = board.decompose(&cards[3], Mode::Manual).await;
    assert!(outcome.ok, "{outcome:?}");
    assert_eq!(board.requests_for(&cards[3]).len(), 1);
    assert!(
        !board.store.breaker().unwrap().open,
        "a person's success closes it"
    );
    assert_eq!(board.events_of(&cards[3], "breaker_closed").len(), 1);
    assert_eq!(
        board.store.llm_calls(None).unwrap().len(),
        4,
        "every request is one row"
    );
}
