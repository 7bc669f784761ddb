//! The decomposition lease across gateways (docs/gateway.md#several-gateways-on-one-board,
//! docs/decomposer.md#the-call): two gateway processes with their own homes, host ids and
//! API keys share one PostgreSQL board and one fake model, which tells them apart by the
//! key each request carries. A call that waits out a long `Retry-After` keeps its card:
//! the other gateway sends nothing for it meanwhile, and the fake sees exactly the
//! requests of one attempt. A gateway killed mid-call leaves a lease that lapses; the
//! other takes the card only after the expiry, and charges the lapse to the card.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use board_core::{BoardReads, BoardWrites, EventFilter, LlmLedger, NewTask, Status, TaskId};
use board_postgres::PgStore;
use fake_llm::{FakeLlm, RecordedRequest, Reply, Settings};

use crate::gateway_board::{title_of, KANBAN, SINGLE};
use crate::scratch_schema::{in_schema, open_board, server_url, tear_down};

const WAIT: Duration = Duration::from_secs(120);

/// Two gateways on a board in a schema of its own; gateway `n` sends the key `key-n`.
struct TwoGateways {
    dir: tempfile::TempDir,
    schema: String,
    store: PgStore,
    fake: FakeLlm,
    gateways: [Option<Child>; 2],
}

impl TwoGateways {
    /// Homes whose decomposer calls time out after `timeout` seconds and retry
    /// `retries` times, with a retry base of `retry_base` seconds; the cards titled in
    /// `replies` get those replies, every other one the single-task reply.
    fn new(timeout: u32, retries: u32, retry_base: u32, replies: Vec<(&'static str, Reply)>) -> TwoGateways {
        let (store, schema) = open_board("kanban_lease");
        let fake = FakeLlm::start_blocking(Settings::default()).unwrap();
        fake.respond_with(move |request| {
            let title = title_of(request).unwrap_or_default();
            let scripted = replies.iter().find(|(t, _)| *t == title);
            scripted.map_or_else(|| Reply::text(SINGLE), |(_, reply)| reply.clone())
        });
        let board = TwoGateways {
            dir: tempfile::tempdir().unwrap(),
            schema,
            store,
            fake,
            gateways: [None, None],
        };
        let url = in_schema(&server_url(), &board.schema);
        for n in 0..2 {
            let init = board.kanban(n).arg("init").output().unwrap();
            assert!(init.status.success(), "{init:?}");
            let config = format!(
                "database_url: {url}\ngateway:\n  host_id: host-{n}\n\
                 model:\n  base_url: {model}\n  default: fake\n  api_key: key-{n}\n\
                 auxiliary:\n  transient_retries: {retries}\n  kanban_decomposer:\n    timeout: {timeout}\n\
                 kanban:\n  dispatch_interval_seconds: 0.2\n  max_spawn: 0\n  default_assignee: idle\n  \
                 decompose_retry_base_seconds: {retry_base}\n\
                 profiles:\n  idle:\n    description: never spawned\n",
                model = board.fake.base_url(),
            );
            std::fs::write(board.home(n).join("config.yaml"), config).unwrap();
        }
        board
    }

    fn home(&self, n: usize) -> PathBuf {
        self.dir.path().join(format!("home-{n}"))
    }

    fn log(&self, n: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("gateway-{n}.log"))).unwrap_or_default()
    }

    fn kanban(&self, n: usize) -> Command {
        let mut cmd = Command::new(KANBAN);
        cmd.arg("--home")
            .arg(self.home(n))
            .env_remove("KANBAN_HOME")
            .env_remove("KANBAN_DATABASE_URL");
        cmd
    }

    /// Starts both gateways and waits for their first ticks.
    fn start(&mut self) {
        for n in 0..2 {
            let log = std::fs::File::create(self.dir.path().join(format!("gateway-{n}.log"))).unwrap();
            let child = self
                .kanban(n)
                .args(["gateway", "run"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap();
            self.gateways[n] = Some(child);
        }
        for n in 0..2 {
            let status = self.home(n).join("gateway.json");
            self.wait_for(&format!("gateway {n}'s first tick"), || status.exists());
        }
    }

    /// SIGKILLs gateway `n`, which must still be running.
    fn kill(&mut self, n: usize) {
        let mut gateway = self.gateways[n].take().expect("started");
        assert!(
            gateway.try_wait().unwrap().is_none(),
            "gateway {n} exited by itself:\n{}",
            self.log(n)
        );
        gateway.kill().unwrap();
        gateway.wait().unwrap();
    }

    fn card(&self, title: &str) -> TaskId {
        let card = NewTask {
            triage: true,
            ..NewTask::titled(title)
        };
        self.store.create(&card, board_home::now()).unwrap().id
    }

    /// The requests about `card`, each with the gateway whose key it carried.
    fn requests(&self, card: &TaskId) -> Vec<(usize, RecordedRequest)> {
        self.fake
            .requests()
            .into_iter()
            .filter(|r| r.task_id.as_deref() == Some(card.as_str()))
            .map(|r| (sender(&r), r))
            .collect()
    }

    fn events(&self, card: &TaskId, kind: &str) -> Vec<serde_json::Value> {
        let filter = EventFilter {
            task_id: Some(card.clone()),
            ..EventFilter::default()
        };
        let events = self.store.events(&filter).unwrap();
        events
            .into_iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.payload)
            .collect()
    }

    fn wait_for(&self, what: &str, mut done: impl FnMut() -> bool) {
        let start = Instant::now();
        while !done() {
            if start.elapsed() > WAIT {
                panic!(
                    "timed out waiting for {what}\n{}\n---\n{}",
                    self.log(0),
                    self.log(1)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for TwoGateways {
    fn drop(&mut self) {
        for gateway in self.gateways.iter_mut().flatten() {
            let _ = gateway.kill();
            let _ = gateway.wait();
        }
        tear_down(&self.store, &self.schema);
    }
}

/// The gateway whose key a request carried.
fn sender(request: &RecordedRequest) -> usize {
    match request.headers.get("authorization").map(String::as_str) {
        Some("Bearer key-0") => 0,
        Some("Bearer key-1") => 1,
        other => panic!("a request with the authorization {other:?}"),
    }
}

/// A 429 asking for 50 s, longer than the requests of the attempt and the commit's
/// margin together (32 s, where a lease used to end): the gateway that sent it keeps
/// the card, waits, retries once and is charged one failure; the other sends nothing
/// for the card the whole time.
#[test]
fn a_call_waiting_out_a_long_retry_after_keeps_its_card_from_the_other_gateway() {
    const RETRY_AFTER: u64 = 50;
    let slow_down = Reply::Error {
        status: 429,
        message: "slow down".into(),
        retry_after: Some(RETRY_AFTER),
    };
    // A long retry base: the card's next attempt comes long after the test's reads.
    let mut b = TwoGateways::new(1, 1, 60, vec![("rate limited", slow_down)]);
    b.start();
    // The provider seen up first, so a 429 is this attempt's alone and is retried.
    let healthy = b.card("healthy");
    b.wait_for("the healthy card decomposed", || {
        b.store.get(&healthy).unwrap().status != Status::Triage
    });
    let card = b.card("rate limited");
    b.wait_for("the attempt to end with a failure", || {
        b.store.get(&card).unwrap().decompose_failures >= 1
    });
    let requests = b.requests(&card);
    let senders: Vec<usize> = requests.iter().map(|(n, _)| *n).collect();
    let first = senders.first().copied().expect("a request");
    let rows = b.store.llm_calls(Some(&card)).unwrap();
    let sent_at = |i: usize| requests[i].1.received_at_ms;
    // Exactly the attempt's request and its one retry, from the gateway holding the
    // lease, the retry after the wait the provider asked for.
    assert_eq!(senders, [first, first], "requests by gateway: {senders:?}");
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        sent_at(1) - sent_at(0) >= RETRY_AFTER * 1000 - 50,
        "the retry {} ms after the first",
        sent_at(1) - sent_at(0)
    );
    let failed = b.events(&card, "auto_decompose_failed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    let error = failed[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("HTTP 429"), "{error}");
}

/// A gateway killed while its request hangs leaves its lease until the expiry: the other
/// sends nothing for the card before then, then records the lapsed attempt as the
/// card's failure (`decompose_failures` 1, one `auto_decompose_failed` event) and
/// decomposes it on a later attempt.
#[test]
fn a_lease_that_lapses_mid_call_is_charged_to_the_card() {
    let mut b = TwoGateways::new(2, 0, 1, vec![("hangs", Reply::Hang)]);
    b.start();
    let card = b.card("hangs");
    b.wait_for("the card's request", || !b.requests(&card).is_empty());
    let (holder, first) = b.requests(&card).remove(0);
    let lease = decompose::lease_seconds(Duration::from_secs(2), 0);
    b.kill(holder);
    let started = Instant::now();
    // Whatever is sent from now on answers.
    b.fake.respond_with(|_| Reply::text(SINGLE));
    b.wait_for("the lapse recorded", || {
        b.store.get(&card).unwrap().decompose_failures >= 1
    });
    let lapsed_after = started.elapsed();
    let failed = b.events(&card, "auto_decompose_failed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    let error = failed[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("lapsed") && error.contains(&format!("host-{holder}/")),
        "{error}"
    );
    assert_eq!(failed[0]["failures"], 1);
    b.wait_for("the card decomposed by the survivor", || {
        b.store.get(&card).unwrap().status != Status::Triage
    });
    let requests = b.requests(&card);
    let senders: Vec<usize> = requests.iter().map(|(n, _)| *n).collect();
    assert_eq!(senders, [holder, 1 - holder], "requests by gateway");
    // The survivor's request came only once the dead gateway's lease had expired.
    let waited_ms = requests[1].1.received_at_ms - first.received_at_ms;
    assert!(
        waited_ms >= (lease as u64 - 1) * 1000,
        "the survivor sent {waited_ms} ms after the first request, the lease is {lease} s"
    );
    eprintln!(
        "lease {lease} s; lapse recorded {} ms after the kill; the survivor sent {waited_ms} ms after the first request",
        lapsed_after.as_millis()
    );
}
