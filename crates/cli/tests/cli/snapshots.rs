//! Snapshots of what every verb prints, for people and as JSON.
//!
//! Task ids are replaced by stable names in the order they first appear (`t_#######1`,
//! same width, so tables keep their alignment); the home's path becomes `[home]`;
//! timestamps and ages are redacted by insta filters (with the padding after an age,
//! whose width varies). Run, event and comment ids are deterministic on a fresh board
//! and kept.

use crate::common;

use std::cell::RefCell;

use board_core::LlmPurpose;
use board_core::{BlockKind, BoardWrites, LlmLedger};
use common::{store, task_id, Board};
use fake_llm::{FakeLlm, Reply, Settings};
use serde_json::json;

/// A small board with a parent, a completed child, a running one, a comment and a block.
struct Scene {
    board: Board,
    /// Every task id seen so far, in naming order.
    ids: RefCell<Vec<String>>,
}

/// Priorities all differ: tasks created in the same second with equal priority would
/// list in id order, which is random.
fn scene() -> Scene {
    let board = Board::init();
    let root = board.create(&[
        "ship the release",
        "--priority",
        "5",
        "--assignee",
        "lead",
        "--body",
        "cut, tag, announce",
    ]);
    let notes = board.create(&["write the notes", "--parent", &root, "--assignee", "writer"]);
    let build = board.create(&["build the artefacts", "--priority", "2", "--max-runtime", "15m"]);
    let idea = board.create(&[
        "a rough idea that is long enough to be cut when the terminal is narrow",
        "--triage",
        "--priority",
        "-1",
    ]);
    board.ok(&["claim", &build]);
    board.ok(&[
        "complete",
        &build,
        "--run",
        "1",
        "--result",
        "artefacts in dist/",
        "--summary",
        "built 3 targets",
    ]);
    board.ok(&["link", &build, &notes]);
    board.ok(&["claim", &root]);
    board.ok(&[
        "block",
        &root,
        "waiting for sign-off",
        "--kind",
        "needs_input",
        "--run",
        "2",
    ]);
    board.ok(&["unblock", &root]);
    board.ok(&["claim", &root]);
    board.ok(&["comment", &root, "sign-off given", "--author", "ann"]);
    Scene {
        board,
        ids: RefCell::new(vec![root, notes, build, idea]),
    }
}

impl Scene {
    /// An initialised board with no tasks.
    fn empty() -> Scene {
        Scene {
            board: Board::init(),
            ids: RefCell::new(Vec::new()),
        }
    }

    fn id(&self, n: usize) -> String {
        self.ids.borrow()[n].clone()
    }

    fn root(&self) -> String {
        self.id(0)
    }

    /// Creates a task (its id named next) and returns its id.
    fn create(&self, args: &[&str]) -> String {
        let id = self.board.create(args);
        self.ids.borrow_mut().push(id.clone());
        id
    }

    /// Runs a command that must succeed and names the ids and the home in its output.
    fn out(&self, args: &[&str]) -> String {
        self.name(&self.board.ok(args))
    }

    /// Names every task id in `text`, new ones in order of appearance, and the home.
    fn name(&self, text: &str) -> String {
        let mut ids = self.ids.borrow_mut();
        for (i, _) in text.match_indices("t_") {
            let Some(candidate) = text.get(i..i + 10) else {
                continue;
            };
            let hex = candidate[2..]
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if hex && !ids.iter().any(|id| id == candidate) {
                ids.push(candidate.to_owned());
            }
        }
        let mut text = text.replace(&self.board.home().display().to_string(), "[home]");
        for (i, id) in ids.iter().enumerate() {
            text = text.replace(id.as_str(), &format!("t_{:#>8}", i + 1));
        }
        text
    }
}

fn check(name: &str, text: &str) {
    insta::with_settings!({
        filters => vec![
            (r"t_[0-9a-f]{8,}", "t_[unknown]"),
            (r"\b1[0-9]{9}\b", "[ts]"),
            // Column padding after an age varies with its width; fold it to two spaces.
            (r"\b\d{4}-\d\d-\d\d \d\d:\d\d\b", "[time]"),
            (r"\b\d+[smhd]( ago)? {2,}", "[age]${1}  "),
            (r"\b\d+[smhd]( ago)?\b", "[age]${1}"),
            (r#""age_seconds": \d+"#, r#""age_seconds": "[age]""#),
        ],
        prepend_module_to_snapshot => false,
    }, {
        insta::assert_snapshot!(name, text);
    });
}

#[test]
fn list_human() {
    let s = scene();
    check("list_human", &s.out(&["list"]));
}

#[test]
fn list_human_narrow() {
    let s = scene();
    let mut cmd = s.board.kanban(&["ls"]);
    cmd.env("COLUMNS", "60");
    let out = cmd.output().expect("run");
    let text = s.name(&String::from_utf8(out.stdout).expect("utf-8"));
    check("list_human_narrow", &text);
}

#[test]
fn list_json() {
    let s = scene();
    check("list_json", &s.out(&["list", "--json"]));
}

#[test]
fn show_human() {
    let s = scene();
    check("show_human", &s.out(&["show", &s.root()]));
}

#[test]
fn show_json() {
    let s = scene();
    check("show_json", &s.out(&["show", &s.root(), "--json"]));
}

#[test]
fn runs_human() {
    let s = scene();
    check("runs_human", &s.out(&["runs", &s.root()]));
}

#[test]
fn runs_json() {
    let s = scene();
    check("runs_json", &s.out(&["runs", &s.root(), "--json"]));
}

/// Runs `args` on two tasks' worth of a verb: `human` on the first id, `json` on the second.
fn pair(s: &Scene, human: &[&str], json: &[&str]) -> (String, String) {
    let human = s.out(human);
    let mut json = json.to_vec();
    json.push("--json");
    (human, s.out(&json))
}

#[test]
fn init_human_and_json() {
    let fresh = Scene {
        board: Board::new(),
        ids: RefCell::new(Vec::new()),
    };
    let first = fresh.out(&["init"]);
    let again = fresh.out(&["init"]);
    check("init_human", &format!("{first}\n--- again ---\n{again}"));
    let fresh = Scene {
        board: Board::new(),
        ids: RefCell::new(Vec::new()),
    };
    check("init_json", &fresh.out(&["init", "--json"]));
}

#[test]
fn create_human_and_json() {
    let s = Scene::empty();
    let parent = s.create(&["design the API"]);
    check(
        "create_human",
        &s.out(&[
            "create",
            "write the docs",
            "--assignee",
            "writer",
            "--priority",
            "3",
        ]),
    );
    check(
        "create_json",
        &s.out(&[
            "create",
            "implement the API",
            "--parent",
            &parent,
            "--body",
            "endpoints as designed",
            "--max-runtime",
            "2h",
            "--idempotency-key",
            "impl-1",
            "--json",
        ]),
    );
}

#[test]
fn edit_human_and_json() {
    let s = Scene::empty();
    let a = s.create(&["first draft"]);
    let b = s.create(&["second draft"]);
    let (human, json) = pair(
        &s,
        &["edit", &a, "--title", "final title"],
        &["edit", &b, "--body", "more detail", "--priority", "7"],
    );
    check("edit_human", &human);
    check("edit_json", &json);
}

#[test]
fn assign_human_and_json() {
    let s = Scene::empty();
    let a = s.create(&["first"]);
    let b = s.create(&["second", "--assignee", "writer"]);
    let human = format!(
        "{}{}",
        s.out(&["assign", &a, "coder"]),
        s.out(&["assign", &b, "none"])
    );
    check("assign_human", &human);
    check("assign_json", &s.out(&["assign", &a, "reviewer", "--json"]));
}

#[test]
fn link_and_unlink_human_and_json() {
    let s = Scene::empty();
    let parent = s.create(&["parent"]);
    let a = s.create(&["child a"]);
    let b = s.create(&["child b"]);
    let (human, json) = pair(&s, &["link", &parent, &a], &["link", &parent, &b]);
    check("link_human", &human);
    check("link_json", &json);
    let (human, json) = pair(&s, &["unlink", &parent, &a], &["unlink", &parent, &b]);
    check("unlink_human", &human);
    check("unlink_json", &json);
}

#[test]
fn claim_human_and_json() {
    let s = Scene::empty();
    let a = s.create(&["first"]);
    let b = s.create(&["second"]);
    let (human, json) = pair(&s, &["claim", &a], &["claim", &b, "--ttl", "60"]);
    check("claim_human", &human);
    check("claim_json", &json);
}

#[test]
fn heartbeat_human_and_json() {
    let s = Scene::empty();
    let a = s.create(&["first"]);
    s.board.ok(&["claim", &a]);
    let (human, json) = pair(
        &s,
        &["heartbeat", &a, "--note", "halfway"],
        &["heartbeat", &a, "--run", "1"],
    );
    check("heartbeat_human", &human);
    check("heartbeat_json", &json);
}

#[test]
fn complete_human_and_json() {
    let s = Scene::empty();
    let a = s.create(&["first"]);
    let b = s.create(&["second"]);
    let c = s.create(&["third"]);
    s.board.ok(&["claim", &a]);
    s.board.ok(&["claim", &b]);
    let human = s.out(&[
        "complete",
        &a,
        "--result",
        "done well",
        "--summary",
        "it went fine",
    ]);
    check("complete_human", &human);
    // Several tasks: one JSON object per line.
    let json = s.out(&["complete", &b, &c, "--metadata", r#"{"tests": 42}"#, "--json"]);
    check("complete_json", &json);
}

#[test]
fn block_human_and_json() {
    let s = Scene::empty();
    let a = s.create(&["first"]);
    let b = s.create(&["second"]);
    s.board.ok(&["claim", &a]);
    let (human, json) = pair(
        &s,
        &["block", &a, "waiting for the API key", "--kind", "needs_input"],
        &["block", &b, "--kind", "capability"],
    );
    check("block_human", &human);
    check("block_json", &json);
}

#[test]
fn unblock_human_and_json() {
    let s = Scene::empty();
    let a = s.create(&["first"]);
    let b = s.create(&["second"]);
    s.board.ok(&["block", &a]);
    s.board.ok(&["block", &b]);
    let (human, json) = pair(&s, &["unblock", &a, "--reason", "key arrived"], &["unblock", &b]);
    check("unblock_human", &human);
    check("unblock_json", &json);
}

#[test]
fn reclaim_human_and_json() {
    let s = Scene::empty();
    let a = s.create(&["first"]);
    let b = s.create(&["second"]);
    s.board.ok(&["claim", &a]);
    s.board.ok(&["claim", &b]);
    let (human, json) = pair(
        &s,
        &["reclaim", &a, "--reason", "taking too long"],
        &["reclaim", &b, "--run", "2"],
    );
    check("reclaim_human", &human);
    check("reclaim_json", &json);
}

#[test]
fn archive_human_and_json() {
    let s = Scene::empty();
    let a = s.create(&["first"]);
    let b = s.create(&["second"]);
    let c = s.create(&["third"]);
    s.board.ok(&["claim", &c]);
    let (human, json) = pair(&s, &["archive", &a], &["archive", &b, &c]);
    check("archive_human", &human);
    check("archive_json", &json);
}

#[test]
fn comment_human_and_json() {
    let s = Scene::empty();
    let a = s.create(&["first"]);
    let (human, json) = pair(
        &s,
        &["comment", &a, "looks good"],
        &["comment", &a, "ship it", "--author", "ann"],
    );
    check("comment_human", &human);
    check("comment_json", &json);
}

#[test]
fn events_human_and_json() {
    let s = scene();
    check("events_human", &s.out(&["events"]));
    check("events_task_human", &s.out(&["events", &s.id(2)]));
    check("events_json", &s.out(&["events", &s.id(2), "--json"]));
}

#[test]
fn context_human_and_json() {
    let s = scene();
    // The notes wait for the release (running) and the build (done, with a result).
    check("context_human", &s.out(&["context", &s.id(1)]));
    check("context_json", &s.out(&["context", &s.id(1), "--json"]));
    // The release has an earlier attempt (blocked) and a comment.
    check("context_attempts_human", &s.out(&["context", &s.root()]));
}

/// Runs of one character longer than 12, folded to `{c×N}`, so a snapshot of a cut
/// brief shows what was kept without pages of filler.
fn fold_runs(text: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let run = chars[i..].iter().take_while(|&&d| d == c).count();
        if run > 12 {
            out.push_str(&format!("{{{c}×{run}}}"));
        } else {
            out.extend(std::iter::repeat_n(c, run));
        }
        i += run;
    }
    out
}

#[test]
fn context_cut_to_fit() {
    let s = Scene::empty();
    let parent = s.create(&["gather the data"]);
    let id = s.create(&["a long story", "--parent", &parent, "--body", &"b".repeat(20_000)]);
    let st = store(&s.board);
    let (pid, tid) = (task_id(&parent), task_id(&id));
    let claim = st.claim(&pid, 60, 1_000).expect("claim");
    let done = board_core::Completion {
        expected_run_id: Some(claim.run_id),
        result: Some("r".repeat(5_000)),
        summary: Some("collected everything".into()),
        ..board_core::Completion::default()
    };
    st.complete(&pid, &done, 1_001).expect("complete");
    for round in 0..4_i64 {
        let claim = st.claim(&tid, 60, 1_100 + round * 10).expect("claim");
        let kind = [BlockKind::Transient, BlockKind::NeedsInput][round as usize % 2];
        let reason = format!("attempt {round}: {}", "e".repeat(2_000));
        st.block(
            &tid,
            Some(kind),
            Some(reason),
            Some(claim.run_id),
            1_101 + round * 10,
        )
        .expect("block");
        st.unblock(&tid, None, 1_102 + round * 10).expect("unblock");
    }
    for n in 0..25_i64 {
        let body = format!("comment {n}: {}", "c".repeat(1_000));
        st.comment(&tid, Some("ann"), &body, None, 2_000 + n)
            .expect("comment");
    }
    let text = s.out(&["context", &id]);
    assert!(text.len() <= 16 * 1024, "{} bytes", text.len());
    check("context_cut_human", &fold_runs(&text));
    let json = s.out(&["context", &id, "--json"]);
    check("context_cut_json", &fold_runs(&json));
}

#[test]
fn stats_human_and_json() {
    let s = scene();
    s.create(&["polish the docs", "--assignee", "writer"]);
    let st = store(&s.board);
    for (outcome, prompt, completion) in [("ok", Some(1200), Some(300)), ("http_error", None, None)] {
        st.record_llm_call(&board_core::LlmCall {
            purpose: LlmPurpose::Decompose,
            model: "fake-model".into(),
            outcome: outcome.parse().expect("an outcome"),
            prompt_tokens: prompt,
            completion_tokens: completion,
            ..board_core::LlmCall::default()
        })
        .expect("record");
    }
    check("stats_human", &s.out(&["stats"]));
    check("stats_json", &s.out(&["stats", "--json"]));
}

#[test]
fn config_check_human_and_json() {
    let s = Scene::empty();
    let config = "model:\n  base_url: http://127.0.0.1:9/v1\n  default: test-model\n  api_key: sk-secret-never-printed\nkanban:\n  max_spawn: 2\nprofiles:\n  coder:\n    description: Writes code\n    command: [\"coder\", \"--task\", \"{task_id}\"]\n";
    std::fs::write(s.board.home().join("config.yaml"), config).expect("write config");
    let (human, json) = pair(&s, &["config", "check"], &["config", "check"]);
    assert!(
        !human.contains("sk-secret") && !json.contains("sk-secret"),
        "the key leaked"
    );
    check("config_check_human", &human);
    check("config_check_json", &json);
}

/// `kanban ARGS...` against a fake model: (stdout, stderr), ids named, and the exit code.
fn with_model(s: &Scene, llm: &FakeLlm, args: &[&str]) -> (String, String, Option<i32>) {
    let config = format!(
        "model:\n  base_url: {}\n  default: fake-model\n  api_key_env: KANBAN_TEST_NO_KEY\n",
        llm.base_url()
    );
    std::fs::write(s.board.home().join("config.yaml"), config).expect("write config");
    let mut cmd = s.board.kanban(args);
    cmd.env_remove("OPENAI_API_KEY");
    let out = cmd.output().expect("run kanban");
    let stdout = s.name(&String::from_utf8_lossy(&out.stdout));
    let stderr = s.name(&String::from_utf8_lossy(&out.stderr));
    (stdout, stderr, out.status.code())
}

fn single(title: &str) -> Reply {
    Reply::text(json!({ "fanout": false, "title": title, "body": "done when it works" }).to_string())
}

fn fanout() -> Reply {
    Reply::text(r#"{"fanout": true, "tasks": [{"title": "a"}, {"title": "b", "parents": [0]}]}"#)
}

#[test]
fn decompose_and_specify_outcome_lines() {
    let s = Scene::empty();
    let llm = FakeLlm::start_blocking(Settings::default()).expect("fake llm");
    let one = s.create(&["rough idea", "--triage"]);
    let two = s.create(&["big idea", "--triage"]);
    let three = s.create(&["vague idea", "--triage"]);
    let four = s.create(&["another big idea", "--triage"]);
    let five = s.create(&["hopeless idea", "--triage"]);
    let six = s.create(&["yet another idea", "--triage"]);
    llm.script_task(one.clone(), vec![single("Write the release notes")]);
    llm.script_task(two.clone(), vec![fanout()]);
    llm.script_task(three.clone(), vec![single("Precise title")]);
    llm.script_task(four.clone(), vec![fanout()]);
    llm.script_task(five.clone(), vec![Reply::text("Sure, I can help with that!")]);
    llm.script_task(six.clone(), vec![single("Clear title")]);

    let mut human = String::new();
    for (verb, id) in [("decompose", &one), ("decompose", &two), ("specify", &three)] {
        let (stdout, stderr, code) = with_model(&s, &llm, &[verb, id]);
        assert_eq!((code, stderr.as_str()), (Some(0), ""));
        human.push_str(&stdout);
    }
    let (stdout, stderr, code) = with_model(&s, &llm, &["decompose", &five]);
    assert_eq!((code, stdout.as_str()), (Some(1), ""));
    human.push_str(&format!("stderr: {stderr}"));
    check("decompose_human", &human);

    let mut json = String::new();
    for (verb, id) in [("decompose", &four), ("specify", &six), ("decompose", &five)] {
        let (stdout, _, _) = with_model(&s, &llm, &[verb, id, "--json"]);
        json.push_str(&stdout);
    }
    check("decompose_json", &json);
}

/// Runs `kanban args` with its output on a real pseudo-terminal 100 columns wide (so it
/// colours) and returns what the terminal received, line feeds as `\n`.
fn on_terminal(board: &common::Board, args: &[&str]) -> String {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (-1, -1);
    let size = libc::winsize {
        ws_row: 40,
        ws_col: 100,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors we then own; the size is read only.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are open and owned by nothing else.
    let (mut master, slave) = unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::fs::File::from_raw_fd(slave),
        )
    };
    let mut child = std::process::Command::new(common::KANBAN)
        .arg("--home")
        .arg(board.home())
        .args(args)
        .env_remove("KANBAN_HOME")
        .env_remove("NO_COLOR")
        .env_remove("COLUMNS")
        .env("TZ", "UTC")
        .stdout(slave.try_clone().expect("slave"))
        .spawn()
        .expect("spawn");
    drop(slave);
    let status = child.wait().expect("wait");
    assert!(status.success(), "{args:?}");
    let mut bytes = Vec::new();
    // Once every copy of the slave is closed the master reads EIO: the end.
    let mut buf = [0; 4096];
    loop {
        match master.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8(bytes).expect("utf-8").replace("\r\n", "\n")
}

/// The text without its colour sequences (`ESC [ digits ; ... m`); any other escape byte
/// is left for the caller to find.
fn without_colours(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let params = after.len()
            - after
                .trim_start_matches(|c: char| c.is_ascii_digit() || c == ';')
                .len();
        if after[params..].starts_with('m') {
            rest = &after[params + 1..];
        } else {
            out.push('\x1b');
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// What a person sees in a terminal: coloured, the escape sequences whole, the columns
/// aligned by display width (a CJK assignee included), cut at the terminal's width.
#[test]
fn verbs_on_a_real_terminal() {
    let s = scene();
    s.create(&["レビュー the plan", "--assignee", "山田"]);
    let root = s.root();
    for (name, args) in [
        ("terminal_list", vec!["list"]),
        ("terminal_show", vec!["show", root.as_str()]),
        ("terminal_runs", vec!["runs", root.as_str()]),
        ("terminal_stats", vec!["stats"]),
        ("terminal_events", vec!["events"]),
    ] {
        let raw = on_terminal(&s.board, &args);
        assert!(raw.contains("\x1b["), "{name}: no colour on a terminal: {raw:?}");
        let seen = without_colours(&raw);
        assert!(!seen.contains('\x1b'), "{name}: a stray escape byte: {seen:?}");
        for line in seen.lines() {
            assert!(
                unicode_width::UnicodeWidthStr::width(line) <= 100
                    || name == "terminal_show"
                    || name == "terminal_events",
                "{name}: wider than the terminal: {line}"
            );
        }
        check(name, &s.name(&seen));
    }
}
