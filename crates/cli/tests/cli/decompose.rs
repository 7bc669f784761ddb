//! `kanban decompose` and `kanban specify` against a fake LLM server: the `--json` lines,
//! the human lines, `--all`, and the exit codes.

use crate::common;

use assert_cmd::Command;
use board_core::Status;
use common::{get, Board};
use fake_llm::{FakeLlm, Reply, Settings};
use serde_json::{json, Value};

fn fake() -> FakeLlm {
    FakeLlm::start_blocking(Settings::default()).expect("fake llm")
}

/// `kanban ARGS...` on the board, whose config points the decomposer at `llm`.
fn kanban(board: &Board, llm: &FakeLlm, args: &[&str]) -> Command {
    let config = format!(
        "model:\n  base_url: {}\n  default: fake-model\n  api_key_env: KANBAN_TEST_NO_KEY\n",
        llm.base_url()
    );
    std::fs::write(board.home().join("config.yaml"), config).expect("write config");
    let mut cmd = board.kanban(args);
    cmd.env_remove("OPENAI_API_KEY");
    cmd
}

fn single(title: &str) -> Reply {
    Reply::text(json!({ "fanout": false, "title": title, "body": "done when it works" }).to_string())
}

fn lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect()
}

#[test]
fn decompose_one_card_prints_one_outcome_line() {
    let board = Board::init();
    let llm = fake();
    let id = board.create(&["rough idea", "--triage"]);
    llm.push_reply(single("Write the release notes"));
    let out = kanban(&board, &llm, &["decompose", &id, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = lines(&out.stdout);
    assert_eq!(lines.len(), 1);
    let keys: Vec<&str> = lines[0].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["task_id", "ok", "reason", "fanout", "child_ids", "new_title"]
    );
    assert_eq!(
        lines[0],
        json!({ "task_id": id, "ok": true, "reason": null, "fanout": false, "child_ids": [], "new_title": "Write the release notes" })
    );
    let task = get(&board, &id);
    assert_eq!(
        (task.status, task.title.as_str()),
        (Status::Ready, "Write the release notes")
    );
    let request = &llm.requests()[0];
    assert_eq!(request.json().unwrap()["model"], "fake-model");
    assert!(request.header("authorization").is_none());
}

#[test]
fn a_malformed_reply_exits_1_with_ok_false() {
    let board = Board::init();
    let llm = fake();
    let id = board.create(&["rough idea", "--triage"]);
    llm.push_reply(Reply::text("Sure, I can help with that!"));
    let out = kanban(&board, &llm, &["decompose", &id, "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let lines = lines(&out.stdout);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["ok"], false);
    assert!(lines[0]["reason"]
        .as_str()
        .unwrap()
        .starts_with("malformed reply"));
    let task = get(&board, &id);
    assert_eq!(
        (task.status, task.decompose_failures),
        (Status::Triage, 0),
        "a manual failure is not counted"
    );

    llm.push_reply(Reply::text("still prose"));
    let out = kanban(&board, &llm, &["decompose", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!("kanban: {id}: malformed reply")),
        "{stderr}"
    );
}

#[test]
fn all_decomposes_every_triage_card_in_list_order() {
    let board = Board::init();
    let llm = fake();
    let first = board.create(&["first idea", "--triage"]);
    let second = board.create(&["second idea", "--triage", "--priority", "5"]);
    let third = board.create(&["third idea", "--triage"]);
    let ready = board.create(&["already clear"]);
    llm.script_task(first.clone(), vec![single("First, clearer")]);
    llm.script_task(
        second.clone(),
        vec![Reply::text(
            r#"{"fanout": true, "tasks": [{"title": "a"}, {"title": "b", "parents": [0]}]}"#,
        )],
    );
    llm.script_task(third.clone(), vec![Reply::text(r#"{"fanout": "maybe"}"#)]);
    let out = kanban(&board, &llm, &["decompose", "--all", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "one card failed");
    let lines = lines(&out.stdout);
    let ids: Vec<&str> = lines.iter().map(|l| l["task_id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [second.as_str(), first.as_str(), third.as_str()],
        "priority first, then age"
    );
    let oks: Vec<bool> = lines.iter().map(|l| l["ok"].as_bool().unwrap()).collect();
    assert_eq!(oks, [true, true, false]);
    assert_eq!(lines[0]["fanout"], true);
    assert_eq!(lines[0]["child_ids"].as_array().unwrap().len(), 2);
    assert_eq!(get(&board, &second).status, Status::Todo);
    assert_eq!(get(&board, &ready).status, Status::Ready);
    assert_eq!(llm.requests().len(), 3, "the ready card was not sent");

    let out = kanban(&board, &llm, &["decompose", "--all"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "the third card is still triage and still fails"
    );
}

#[test]
fn all_with_a_tenant_sends_only_that_tenants_cards() {
    let board = Board::init();
    let llm = fake();
    let acme = board.create(&["acme's idea", "--triage", "--tenant", "acme"]);
    let other = board.create(&["globex's idea", "--triage", "--tenant", "globex"]);
    llm.script_task(acme.clone(), vec![single("Acme's, clearer")]);
    let out = kanban(&board, &llm, &["specify", "--all", "--tenant", "acme", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ids: Vec<String> = lines(&out.stdout)
        .iter()
        .map(|l| l["task_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, [acme]);
    assert_eq!(llm.requests().len(), 1);
    assert_eq!(get(&board, &other).status, Status::Triage);
    let out = kanban(&board, &llm, &["decompose", "--tenant", "acme"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "--tenant needs --all");
}

#[test]
fn all_with_no_triage_cards_succeeds() {
    let board = Board::init();
    let llm = fake();
    let out = kanban(&board, &llm, &["specify", "--all"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "no triage cards\n");
    assert!(llm.requests().is_empty());
}

#[test]
fn specify_retitles_a_card() {
    let board = Board::init();
    let llm = fake();
    let id = board.create(&["vague", "--triage"]);
    llm.push_reply(single("Precise title"));
    let out = kanban(&board, &llm, &["specify", &id]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{id}: now \"Precise title\"\n")
    );
    assert_eq!(get(&board, &id).title, "Precise title");
    let system = llm.requests()[0].json().unwrap()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("never split"));
}

#[test]
fn an_id_or_all_is_required_but_not_both() {
    let board = Board::init();
    let llm = fake();
    let id = board.create(&["vague", "--triage"]);
    kanban(&board, &llm, &["decompose"]).assert().code(2);
    kanban(&board, &llm, &["decompose", &id, "--all"])
        .assert()
        .code(2);
    assert!(llm.requests().is_empty());
}

/// Hermes' side-call keys reach the model: `kanban decompose` sends the decomposer's
/// model, `extra_body` and `reasoning_effort`; `kanban specify` the ones of
/// `auxiliary.triage_specifier`, each left empty falling back to the decomposer's.
#[test]
fn each_call_sends_its_own_sides_model_and_request_keys() {
    let board = Board::init();
    let llm = fake();
    let config = format!(
        "model:\n  base_url: {}\n  default: main-model\n  api_key_env: KANBAN_TEST_NO_KEY\n\
         auxiliary:\n  kanban_decomposer:\n    extra_body: {{top_p: 0.5}}\n    reasoning_effort: low\n  \
         triage_specifier:\n    model: spec-model\n    reasoning_effort: high\n",
        llm.base_url()
    );
    std::fs::write(board.home().join("config.yaml"), config).unwrap();
    let one = board.create(&["rough", "--triage"]);
    let two = board.create(&["vague", "--triage"]);
    llm.push_reply(single("Decomposed"));
    llm.push_reply(single("Specified"));
    for (verb, id) in [("decompose", &one), ("specify", &two)] {
        let out = board
            .kanban(&[verb, id])
            .env_remove("OPENAI_API_KEY")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{verb}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let sent: Vec<Value> = llm.requests().iter().map(|r| r.json().unwrap().clone()).collect();
    let keys = |body: &Value| {
        (
            body["model"].clone(),
            body["reasoning_effort"].clone(),
            body["top_p"].clone(),
        )
    };
    assert_eq!(keys(&sent[0]), (json!("main-model"), json!("low"), json!(0.5)));
    assert_eq!(keys(&sent[1]), (json!("spec-model"), json!("high"), json!(0.5)));
}

/// With a team template in the home, the prompt names it, and a reply that picks it makes
/// the template's graph under the card, the card itself left to the template's root
/// profile; a reply naming a template the team does not have decomposes nothing.
#[test]
fn a_reply_may_pick_one_of_the_teams_templates() {
    let board = Board::init();
    let llm = fake();
    let templates = board.home().join("templates");
    std::fs::create_dir(&templates).unwrap();
    std::fs::write(
        templates.join("research.yaml"),
        "description: research in parallel, then check\nsteps:\n  - name: research\n    title: \"Research {n}: {goal}\"\n    assignee: researcher\n    repeat: workers\n  - name: verify\n    title: \"Check: {goal}\"\n    assignee: reviewer\n    after: [research]\nroot:\n  title: unused\n  assignee: writer\n",
    )
    .unwrap();
    let id = board.create(&["cheaper CI", "--triage"]);
    llm.push_reply(Reply::text(
        json!({ "fanout": true, "rationale": "the team's shape", "template": "research", "workers": 2 })
            .to_string(),
    ));
    let out = kanban(&board, &llm, &["decompose", &id, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let system = llm.requests()[0].json().unwrap()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("- research: research in parallel, then check"),
        "{system}"
    );
    let children = lines(&out.stdout)[0]["child_ids"].as_array().unwrap().clone();
    let titles: Vec<String> = children
        .iter()
        .map(|c| get(&board, c.as_str().unwrap()).title)
        .collect();
    assert_eq!(
        titles,
        [
            "Research 1: cheaper CI",
            "Research 2: cheaper CI",
            "Check: cheaper CI"
        ]
    );
    let card = get(&board, &id);
    assert_eq!(
        (card.status, card.assignee.as_deref(), card.title.as_str()),
        (Status::Todo, Some("writer"), "cheaper CI")
    );

    let other = board.create(&["another idea", "--triage"]);
    llm.push_reply(Reply::text(
        json!({ "fanout": true, "template": "nope" }).to_string(),
    ));
    let out = kanban(&board, &llm, &["decompose", &other, "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(lines(&out.stdout)[0]["reason"]
        .as_str()
        .unwrap()
        .contains("not one of the team's"));
    assert_eq!(get(&board, &other).status, Status::Triage);
}
