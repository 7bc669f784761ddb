//! Team templates: `swarm TEMPLATE --goal TEXT [--workers N]` and `create --template`
//! make a template's graph in one go, routed and linked; a bad template or request is
//! refused in one line writing nothing; and a swarm runs end to end through a gateway,
//! its verifier failing once.

use board_core::{Outcome, Status, TaskId};

use crate::common::{get, Board};
use crate::gateway_board::{worker_profile, GatewayBoard, Setup};

const RESEARCH: &str = "description: research in parallel, check, write up
steps:
  - name: research
    title: \"Research {n} of {workers}: {goal}\"
    body: \"Find what you can about: {goal}\"
    assignee: researcher
    repeat: workers
  - name: verify
    title: \"Check the findings on {goal}\"
    assignee: reviewer
    after: [research]
root:
  title: \"Write up: {goal}\"
  body: \"Write up what the research found, as checked.\"
  assignee: writer
";

fn with_template(dir: &std::path::Path, name: &str, text: &str) {
    let templates = dir.join("templates");
    std::fs::create_dir_all(&templates).unwrap();
    std::fs::write(templates.join(format!("{name}.yaml")), text).unwrap();
}

/// A gateway board with the research template and its three profiles, the reviewer's
/// worker running `reviewer`.
fn research_board(reviewer: &str) -> GatewayBoard {
    let profiles = [
        worker_profile("researcher", "kanban complete --result found"),
        worker_profile("reviewer", reviewer),
        worker_profile("writer", "kanban complete --result written"),
    ]
    .concat();
    let board = GatewayBoard::new(Setup {
        profiles: &profiles,
        max_spawn: 4,
        ..Setup::default()
    });
    with_template(&board.path(), "research", RESEARCH);
    board
}

#[test]
fn swarm_and_create_make_the_templates_graph_routed_and_linked() {
    let board = Board::init();
    with_template(&board.home(), "research", RESEARCH);
    let said = board.ok(&["swarm", "research", "--goal", "cheaper CI", "--workers", "2"]);
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 4, "{said}");
    assert!(
        lines[0].starts_with("Created t_")
            && lines[0].ends_with("(todo, assignee=writer) from template research"),
        "{said}"
    );
    assert!(
        lines[1].starts_with("  research  t_") && lines[1].ends_with("(ready, assignee=researcher)"),
        "{said}"
    );
    assert!(
        lines[3].starts_with("  verify    t_") && lines[3].ends_with("(todo, assignee=reviewer)"),
        "{said}"
    );

    let made = board.json(&[
        "create",
        "faster tests",
        "--template",
        "research",
        "--priority",
        "3",
    ]);
    let root = made["root"]["id"].as_str().unwrap().to_owned();
    let children = made["children"].as_array().unwrap();
    assert_eq!(children.len(), 4, "the template's 3 workers and its verifier");
    assert_eq!(children[0]["task"]["title"], "Research 1 of 3: faster tests");
    assert_eq!(
        children[0]["task"]["body"],
        "Find what you can about: faster tests"
    );
    assert_eq!(made["root"]["priority"], 3);
    let snapshot = board.snapshot();
    let parents_of = |id: &str| -> Vec<String> {
        snapshot
            .links
            .iter()
            .filter(|l| l.child_id.as_str() == id)
            .map(|l| l.parent_id.to_string())
            .collect()
    };
    let verify = children[3]["task"]["id"].as_str().unwrap();
    assert_eq!(parents_of(verify).len(), 3, "the verifier waits for every worker");
    assert_eq!(parents_of(&root).len(), 4, "the goal's card waits for every step");
    assert_eq!(get(&board, &root).title, "Write up: faster tests");
    let (_, checked, _) = board.outcome(&["config", "check"], &[]);
    assert!(checked.contains("# templates (checked): research"), "{checked}");
}

#[test]
fn bad_templates_and_requests_are_refused_in_one_line_writing_nothing() {
    let board = Board::init();
    with_template(&board.home(), "research", RESEARCH);
    with_template(
        &board.home(),
        "broken",
        &RESEARCH.replace("after: [research]", "after: [write]"),
    );
    let before = board.snapshot();
    for (args, code, said) in [
        (&["swarm", "missing", "--goal", "x"][..], 1, "no template missing"),
        (&["swarm", "../research", "--goal", "x"], 1, "not a template name"),
        (&["swarm", "broken", "--goal", "x"], 1, "not a step before it"),
        (&["swarm", "research", "--goal", " "], 2, "needs a goal"),
        (
            &["swarm", "research", "--goal", "x", "--workers", "0"],
            2,
            "--workers",
        ),
        (
            &["swarm", "research", "--goal", "x", "--workers", "20"],
            2,
            "over kanban.decompose_max_children (16)",
        ),
        (
            &["create", "x", "--template", "research", "--triage"],
            2,
            "cannot be used with",
        ),
        (&["create", "x", "--workers", "2"], 2, "--template"),
    ] {
        let (got, _, err) = board.outcome(args, &[]);
        assert_eq!(got, Some(code), "{args:?}: {err}");
        assert!(err.contains(said) && err.lines().count() <= 2, "{args:?}: {err}");
    }
    assert_eq!(board.snapshot(), before);
    let (got, _, err) = board.outcome(&["config", "check"], &[]);
    assert_eq!(got, Some(1), "{err}");
    assert!(
        err.contains("template broken: ") && err.lines().count() == 1,
        "{err}"
    );
}

/// Two researchers, then a verifier whose first run fails, then the writer on the
/// goal's card: every card ends done, the verifier after two runs, the writer last.
#[test]
fn a_swarm_runs_end_to_end_with_its_verifier_failing_once() {
    let mut board = research_board(
        "if [ -e tried ]; then kanban complete --result checked; else touch tried; exit 1; fi",
    );
    let made: serde_json::Value = serde_json::from_str(&board.kanban_ok(&[
        "swarm",
        "research",
        "--goal",
        "cheaper CI",
        "--workers",
        "2",
        "--json",
    ]))
    .unwrap();
    let root: TaskId = made["root"]["id"].as_str().unwrap().parse().unwrap();
    let verify: TaskId = made["children"][2]["task"]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    board.start_gateway();
    board.wait_for("the goal's card done", || {
        board.task(&root).status == Status::Done
    });
    let snapshot = board.snapshot();
    assert!(
        snapshot.tasks.iter().all(|t| t.status == Status::Done),
        "{:?}",
        snapshot.tasks
    );
    let runs_of = |id: &TaskId| -> Vec<_> { snapshot.runs.iter().filter(|r| &r.task_id == id).collect() };
    let verifier_runs = runs_of(&verify);
    assert_eq!(verifier_runs.len(), 2, "{verifier_runs:?}");
    assert_ne!(verifier_runs[0].outcome, Some(Outcome::Completed));
    assert_eq!(verifier_runs[1].outcome, Some(Outcome::Completed));
    let root_run = runs_of(&root)[0].started_at;
    assert!(
        root_run >= verifier_runs[1].ended_at.unwrap(),
        "the writer starts after the check"
    );
    assert_eq!(board.task(&root).result.as_deref(), Some("written"));
}

/// A triage card the gateway decomposes, the model picking the team's template: the
/// template's graph is made under the card, and the card is done last by the writer.
#[test]
fn the_gateways_decomposer_may_pick_a_template_for_a_triage_card() {
    let mut board = research_board("kanban complete --result checked");
    let pick = serde_json::json!({ "fanout": true, "template": "research", "workers": 2 });
    board.reply("cheaper CI", fake_llm::Reply::text(pick.to_string()));
    board.start_gateway();
    let card = board.create(&["cheaper CI", "--triage"]);
    board.wait_for("the card done", || board.task(&card).status == Status::Done);
    let children = board.children(&card);
    assert_eq!(children.len(), 3, "two researchers and the check");
    assert!(children.iter().all(|c| board.task(c).status == Status::Done));
    assert_eq!(board.task(&card).assignee.as_deref(), Some("writer"));
    assert_eq!(board.task(&card).result.as_deref(), Some("written"));
}
