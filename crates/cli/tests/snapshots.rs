//! Snapshots of what `list`, `show` and `runs` print, for people and as JSON.
//!
//! Task ids are replaced by stable names in creation order (`t_#######1`, same width, so
//! tables keep their alignment); timestamps and ages are redacted by insta filters (with the padding after an age,
//! whose width varies).
//! Run ids are deterministic on a fresh board and kept.

mod common;

use common::Board;

/// A small board with a parent, a completed child, a running one, a comment and a block.
struct Scene {
    board: Board,
    ids: Vec<String>,
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
        ids: vec![root, notes, build, idea],
    }
}

impl Scene {
    fn root(&self) -> &str {
        &self.ids[0]
    }

    /// Runs a command and names the task ids in its output.
    fn out(&self, args: &[&str]) -> String {
        let mut text = self.board.ok(args);
        for (i, id) in self.ids.iter().enumerate() {
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
            (r"\b\d+[smhd]( ago)? {2,}", "[age]${1}  "),
            (r"\b\d+[smhd]( ago)?\b", "[age]${1}"),
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
    let mut text = String::from_utf8(out.stdout).expect("utf-8");
    for (i, id) in s.ids.iter().enumerate() {
        text = text.replace(id.as_str(), &format!("t_{:#>8}", i + 1));
    }
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
    check("show_human", &s.out(&["show", s.root()]));
}

#[test]
fn show_json() {
    let s = scene();
    check("show_json", &s.out(&["show", s.root(), "--json"]));
}

#[test]
fn runs_human() {
    let s = scene();
    check("runs_human", &s.out(&["runs", s.root()]));
}

#[test]
fn runs_json() {
    let s = scene();
    check("runs_json", &s.out(&["runs", s.root(), "--json"]));
}
