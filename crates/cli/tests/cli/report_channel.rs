//! The report channel (docs/gateway.md#the-report-channel), through the built binaries and
//! a real gateway: a worker running as another user (`profiles.<p>.user: nobody`) reads
//! its brief, comments, beats and completes through its channel while it cannot read the
//! home, `config.yaml` or `kanban.db`; a report naming another task or run is refused; a
//! stale run's report is refused and leaves the newer run's work alone; a worker whose
//! gateway restarted reports through the home when it can read it and fails clearly when
//! it cannot; without `CAP_SETUID`, or from `kanban dispatch` (which serves no channel),
//! a `user` profile is a clear spawn failure.

use crate::common;
use crate::gateway_board;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use board_core::{BoardReads, Outcome, Status, TaskId};
use gateway_board::{GatewayBoard, Setup, KANBAN};

/// The `kanban` binary where nobody can run it: this build's, or a copy in a directory of
/// the test's own when the build's is out of nobody's reach.
fn kanban_for_nobody(dir: &Path) -> PathBuf {
    let binary = Path::new(KANBAN);
    let others_may =
        |path: &Path, bits: u32| std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & bits == bits);
    if binary.ancestors().skip(1).all(|d| others_may(d, 0o001)) && others_may(binary, 0o005) {
        return binary.to_path_buf();
    }
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let copy = bin.join("kanban");
    std::fs::copy(binary, &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    copy
}

/// A profile running `sh -c SCRIPT` as `user` (when given), `kanban` being `binary`.
fn profile(name: &str, user: Option<&str>, binary: &Path, script: &str) -> String {
    let script = script.replace("kanban ", &format!("{} ", binary.display()));
    let user = user.map_or_else(String::new, |u| format!("    user: {u}\n"));
    format!("  {name}:\n    description: test worker\n    command: [\"sh\", \"-c\", {script:?}]\n{user}")
}

/// A board whose temporary directory others may traverse, so that only the home's own
/// modes keep a worker of another user out of it; and the directory of the binary's
/// copy, when one was needed, to keep as long as the board.
fn board_with(profiles: impl FnOnce(&Path) -> String) -> (GatewayBoard, tempfile::TempDir) {
    let scratch = tempfile::tempdir().unwrap();
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let profiles = profiles(scratch.path());
    let board = GatewayBoard::new(Setup {
        profiles: &profiles,
        max_spawn: 2,
        ..Setup::default()
    });
    std::fs::set_permissions(board.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    (board, scratch)
}

fn workspace(board: &GatewayBoard, id: &TaskId) -> PathBuf {
    board.path().join("workspaces").join(id.as_str())
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn wait_for_file(board: &GatewayBoard, path: &Path) {
    board.wait_for(&path.display().to_string(), || path.exists());
}

/// What the sandboxed worker does: it tries to read the home, then reports every way a
/// worker can, wrongly (another task, another run) and rightly, writing each exit code.
const SANDBOXED: &str = r#"
id -u > uid.txt
for f in "$KANBAN_HOME/config.yaml" "$KANBAN_HOME/kanban.db" "$KANBAN_HOME/gateway.pid"; do
  cat "$f" > /dev/null 2>&1 && echo "read $f" >> leaks.txt
done
ls "$KANBAN_HOME" > /dev/null 2>&1 && echo "listed the home" >> leaks.txt
kanban context > brief.md; echo "context=$?" >> codes.txt
kanban comment "from the sandbox"; echo "comment=$?" >> codes.txt
kanban heartbeat --note alive; echo "heartbeat=$?" >> codes.txt
kanban complete "$OTHER_TASK" --result forged; echo "other-task=$?" >> codes.txt
kanban context "$OTHER_TASK" > other.md; echo "other-context=$?" >> codes.txt
kanban complete --run 999 --result forged; echo "other-run=$?" >> codes.txt
kanban complete --replay-run 1 --result forged; echo "replay=$?" >> codes.txt
kanban complete --result "done by $(id -u)"; echo "complete=$?" >> codes.txt
"#;

#[test]
fn a_worker_of_another_user_reports_through_its_channel_and_cannot_read_the_home() {
    if !common::root_for("run a worker as another user") {
        return;
    }
    let (mut board, _scratch) = board_with(|scratch| {
        let binary = kanban_for_nobody(scratch);
        // The gateway passes on only what the profile names of its environment.
        profile("sandboxed", Some("nobody"), &binary, SANDBOXED) + "    env_allow: [OTHER_TASK]\n"
    });
    let other = board.create(&["somebody else's card", "--assignee", "idle"]);
    let parent = board.create(&["the parent", "--assignee", "idle"]);
    board.kanban_ok(&["claim", parent.as_str()]);
    board.kanban_ok(&["complete", parent.as_str(), "--result", "the parent's answer"]);
    let id = board.create(&[
        "sandboxed work",
        "--assignee",
        "sandboxed",
        "--body",
        "the body only a brief shows",
        "--parent",
        parent.as_str(),
    ]);
    board.env.push(("OTHER_TASK".to_owned(), other.to_string()));
    board.start_gateway();
    board.wait_for("the sandboxed task to be done", || {
        board.task(&id).status == Status::Done
    });

    let ws = workspace(&board, &id);
    board.wait_for("the worker's last line", || {
        read(&ws.join("codes.txt")).contains("complete=")
    });
    assert_eq!(
        read(&ws.join("uid.txt")).trim(),
        "65534",
        "the worker ran as nobody"
    );
    assert_eq!(read(&ws.join("leaks.txt")), "", "the worker read the home");
    let codes = read(&ws.join("codes.txt"));
    assert_eq!(
        codes,
        "context=0\ncomment=0\nheartbeat=0\nother-task=1\nother-context=1\nother-run=1\nreplay=1\ncomplete=0\n"
    );
    let brief = read(&ws.join("brief.md"));
    assert!(brief.contains("the body only a brief shows"), "{brief}");
    assert!(brief.contains("the parent's answer"), "{brief}");
    let log = read(&board.path().join("logs").join(format!("{id}.log")));
    assert!(
        log.contains(&format!(
            "kanban: this worker's report channel speaks for task {id} only; {other} was refused"
        )),
        "{log}"
    );
    let run = board.db().runs(&id).unwrap()[0].id;
    assert!(
        log.contains(&format!(
            "kanban: this worker's report channel speaks for run {run} of {id} only; run 999 was refused"
        )),
        "{log}"
    );
    assert!(log.contains("--replay-run is for people"), "{log}");

    let task = board.task(&id);
    assert_eq!(task.result.as_deref(), Some("done by 65534"));
    let store = board.db();
    let comments = store.comments(&id).unwrap();
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0].body, "from the sandbox");
    assert_eq!(
        board.task(&other).status,
        Status::Ready,
        "the forged report changed nothing"
    );
    let runs = store.runs(&id).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome, Some(Outcome::Completed));
    // The gateway wrote the worker's log; the worker owns only its workspace.
    use std::os::unix::fs::MetadataExt;
    let log_owner = std::fs::metadata(board.path().join("logs").join(format!("{id}.log"))).unwrap();
    assert_eq!(log_owner.uid(), 0);
    assert_eq!(std::fs::metadata(&ws).unwrap().uid(), 65534);
}

/// Without CAP_SETUID (the binary run as nobody on a home of nobody's), a `user` profile
/// is a spawn failure that says why.
fn a_user_profile_needs_a_gateway_that_may_switch_users() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let run = |args: &[&str]| {
        let out = common::unprivileged(dir.path())
            .arg("--home")
            .arg(&home)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    run(&["init"]);
    let config = "kanban:\n  max_spawn: 1\n  failure_limit: 1\nprofiles:\n  sandboxed:\n    command: [\"true\"]\n    user: nobody\n";
    std::fs::write(home.join("config.yaml"), config).unwrap();
    let created = run(&[
        "create",
        "needs another user",
        "--assignee",
        "sandboxed",
        "--json",
    ]);
    let id: serde_json::Value = serde_json::from_str(&created).unwrap();
    let id = id["id"].as_str().unwrap().to_owned();
    run(&["dispatch"]);
    let shown: serde_json::Value = serde_json::from_str(&run(&["show", &id, "--json"])).unwrap();
    let run0 = &shown["runs"][0];
    assert_eq!(run0["outcome"], "spawn_failed", "{shown}");
    let error = run0["error"].as_str().unwrap();
    assert!(
        error.contains(
            "profile sandboxed runs its workers as user nobody, which needs a gateway running as root"
        ),
        "{error}"
    );
}

#[test]
fn without_cap_setuid_a_user_profile_fails_to_spawn_with_a_clear_error() {
    a_user_profile_needs_a_gateway_that_may_switch_users();
}

#[test]
fn a_single_pass_serves_no_channel_so_it_does_not_start_a_user_profile() {
    if !common::root_for("run a worker as another user") {
        return;
    }
    let board = common::Board::init();
    let config = "kanban:\n  max_spawn: 1\n  failure_limit: 1\nprofiles:\n  sandboxed:\n    command: [\"true\"]\n    user: nobody\n";
    std::fs::write(board.home().join("config.yaml"), config).unwrap();
    let id = board.create(&["needs a gateway", "--assignee", "sandboxed"]);
    let dispatch = board.kanban(&["dispatch"]).output().unwrap();
    assert!(dispatch.status.success());
    let warned = String::from_utf8_lossy(&dispatch.stderr);
    assert!(warned.contains("could not spawn a worker"), "{warned}");
    let shown = board.json(&["show", &id]);
    assert_eq!(shown["runs"][0]["outcome"], "spawn_failed", "{shown}");
    let error = shown["runs"][0]["error"].as_str().unwrap();
    assert!(
        error.contains(
            "profile sandboxed runs its workers as user nobody, who can report only through a running gateway's channel"
        ),
        "{error}"
    );
}

/// The worker of run 1 leaves a process in a session of its own (out of the reach of
/// the group kill) that comments and completes once told to; the run is reclaimed and
/// run 2 starts.
const STALE: &str = r#"
if [ ! -e lurker-started ]; then
  touch lurker-started
  setsid sh -c 'while [ ! -e go ]; do sleep 0.05; done; kanban comment "a stale note"; echo "comment=$?" > stale.tmp; kanban complete --result stale; echo "stale=$?" >> stale.tmp; mv stale.tmp stale.txt' < /dev/null >> lurker.log 2>&1 &
  exec sleep 300
fi
while [ ! -e stale.txt ]; do sleep 0.05; done
kanban complete --result fresh
"#;

#[test]
fn a_stale_runs_report_through_its_channel_is_refused() {
    let user = common::root_for("run the worker as another user").then_some("nobody");
    let (mut board, _scratch) = board_with(|scratch| {
        let binary = kanban_for_nobody(scratch);
        profile("lurking", user, &binary, STALE)
    });
    let id = board.create(&["stale work", "--assignee", "lurking"]);
    board.start_gateway();
    let ws = workspace(&board, &id);
    wait_for_file(&board, &ws.join("lurker-started"));
    board.wait_for("the first worker's pid", || {
        board.task(&id).lease.and_then(|l| l.worker_pid).is_some()
    });
    board.kanban_ok(&["reclaim", id.as_str(), "--run", "1"]);
    board.wait_for("run 2", || board.task(&id).current_run_id() == Some(2));
    std::fs::write(ws.join("go"), "").unwrap();
    board.wait_for("the task to be done", || board.task(&id).status == Status::Done);

    assert_eq!(read(&ws.join("stale.txt")), "comment=1\nstale=1\n");
    let lurker = read(&ws.join("lurker.log"));
    assert!(
        lurker.contains(&format!(
            "kanban: run 1 is not the current run of {id} (current: 2)\n"
        )),
        "{lurker}"
    );
    let comments = board.db().comments(&id).unwrap();
    assert!(
        comments.is_empty(),
        "a reclaimed worker's comment landed: {comments:?}"
    );
    assert!(
        lurker.contains(&format!(
            "kanban: complete of {id} lost: run 1 is not the current run (current: 2); nothing changed"
        )),
        "{lurker}"
    );
    let task = board.task(&id);
    assert_eq!(task.result.as_deref(), Some("fresh"));
    let runs = board.db().runs(&id).unwrap();
    let outcomes: Vec<_> = runs.iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes, [Some(Outcome::Reclaimed), Some(Outcome::Completed)]);
}

/// Waits for `go`, then completes, noting its exit code.
const PATIENT: &str = r#"
while [ ! -e go ]; do sleep 0.05; done
kanban complete --result "after the restart"; echo "complete=$?" >> codes.txt
"#;

#[test]
fn after_a_gateway_restart_a_worker_reports_through_the_home_when_it_can_read_it() {
    let root = common::root_for("run a worker of another user, who cannot read the home");
    let (mut board, _scratch) = board_with(|scratch| {
        let binary = kanban_for_nobody(scratch);
        let mut profiles = profile("patient", None, &binary, PATIENT);
        if root {
            profiles.push_str(&profile("sandboxed", Some("nobody"), &binary, PATIENT));
        }
        profiles
    });
    let own = board.create(&["own user's work", "--assignee", "patient"]);
    let sandboxed = root.then(|| board.create(&["nobody's work", "--assignee", "sandboxed"]));
    board.start_gateway();
    for id in std::iter::once(&own).chain(sandboxed.as_ref()) {
        board.wait_for("a worker", || {
            board.task(id).lease.and_then(|l| l.worker_pid).is_some()
        });
    }
    board.sigkill_running_gateway();
    board.start_gateway();
    for id in std::iter::once(&own).chain(sandboxed.as_ref()) {
        std::fs::write(workspace(&board, id).join("go"), "").unwrap();
    }
    board.wait_for("the own user's task to be done", || {
        board.task(&own).status == Status::Done
    });
    let codes = workspace(&board, &own).join("codes.txt");
    board.wait_for("the own user's worker's last line", || {
        read(&codes).contains('\n')
    });
    assert_eq!(read(&codes), "complete=0\n");
    assert_eq!(board.task(&own).result.as_deref(), Some("after the restart"));
    let runs = board.db().runs(&own).unwrap();
    assert_eq!(runs.len(), 1, "the adopted worker's own run completed");
    if let Some(id) = sandboxed {
        // Its report fails, and says why; the run ends with the worker and the new
        // gateway's worker, which has a channel, completes the task.
        board.wait_for("nobody's task to be done", || {
            board.task(&id).status == Status::Done
        });
        let codes = workspace(&board, &id).join("codes.txt");
        board.wait_for("nobody's worker's last line", || {
            read(&codes).lines().count() == 2
        });
        assert_eq!(read(&codes), "complete=1\ncomplete=0\n");
        let log = read(&board.path().join("logs").join(format!("{id}.log")));
        assert!(
            log.contains(
                "kanban: the report channel is closed (the gateway that started this worker has stopped), \
                 and the home cannot be used instead"
            ),
            "{log}"
        );
        let runs = board.db().runs(&id).unwrap();
        let outcomes: Vec<_> = runs.iter().map(|r| r.outcome).collect();
        assert_eq!(outcomes, [Some(Outcome::Reclaimed), Some(Outcome::Completed)]);
    }
}

/// Eight `kanban` processes of one worker at once, each a conversation of its own on the
/// one channel: comments and multi-read briefs, every answer to its own asker.
const CROWD: &str = r#"
for i in 1 2 3 4 5 6 7 8; do
  if [ $((i % 2)) = 0 ]; then
    (kanban comment "note $i"; echo "$?" > "code$i") &
  else
    (kanban context > "brief$i.md"; echo "$?" > "code$i") &
  fi
done
wait
cat code1 code2 code3 code4 code5 code6 code7 code8 > codes.txt
kanban complete --result crowd
"#;

#[test]
fn concurrent_reports_of_one_worker_each_get_their_own_answer() {
    let user = common::root_for("run the worker as another user").then_some("nobody");
    let (mut board, _scratch) = board_with(|scratch| {
        let binary = kanban_for_nobody(scratch);
        profile("crowd", user, &binary, CROWD)
    });
    let id = board.create(&[
        "crowded work",
        "--assignee",
        "crowd",
        "--body",
        "the crowd's body",
    ]);
    board.start_gateway();
    board.wait_for("the crowded task to be done", || {
        board.task(&id).status == Status::Done
    });
    let ws = workspace(&board, &id);
    assert_eq!(read(&ws.join("codes.txt")), "0\n".repeat(8));
    for i in [1, 3, 5, 7] {
        let brief = read(&ws.join(format!("brief{i}.md")));
        assert!(brief.starts_with("# crowded work\n"), "{brief}");
        assert!(brief.contains("the crowd's body"), "{brief}");
    }
    let mut bodies: Vec<String> = board
        .db()
        .comments(&id)
        .unwrap()
        .into_iter()
        .map(|c| c.body)
        .collect();
    bodies.sort();
    assert_eq!(bodies, ["note 2", "note 4", "note 6", "note 8"]);
}

/// What the flooding worker does: every text it can send, over `kanban.max_text_bytes`,
/// then 300 comments as fast as it can, then it completes (retrying while it is paced).
const FLOOD: &str = r#"
big=$(head -c 5000 /dev/zero | tr '\0' x)
kanban heartbeat --note "$big" 2>> errs.txt; echo "note=$?" >> codes.txt
kanban block "$big" 2>> errs.txt; echo "reason=$?" >> codes.txt
kanban complete --result ok --summary "$big" 2>> errs.txt; echo "summary=$?" >> codes.txt
kanban complete --result ok --metadata "{\"log\": \"$big\"}" 2>> errs.txt; echo "metadata=$?" >> codes.txt
i=0
while [ $i -lt 300 ]; do
  i=$((i+1))
  kanban comment "flood $i" 2>> paced.txt || echo refused >> refused.txt
done
until kanban complete --result done 2>/dev/null; do :; done
"#;

/// A worker cannot fill the board through its channel: every text it sends is held to
/// `kanban.max_text_bytes` (a heartbeat note, a block reason, a summary, metadata, not
/// only results and comments), and a flood of reports is paced, the excess refused.
#[test]
fn a_worker_cannot_flood_the_board_through_its_channel() {
    let user = common::root_for("run the worker as another user").then_some("nobody");
    let scratch = tempfile::tempdir().unwrap();
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let binary = kanban_for_nobody(scratch.path());
    let profiles = profile("flood", user, &binary, FLOOD);
    let mut board = GatewayBoard::new(Setup {
        profiles: &profiles,
        max_spawn: 1,
        kanban_extra: "  max_text_bytes: 4096\n",
        ..Setup::default()
    });
    std::fs::set_permissions(board.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let id = board.create(&["flooding", "--assignee", "flood"]);
    board.start_gateway();
    board.wait_for("the flood to end", || board.task(&id).status == Status::Done);

    let ws = workspace(&board, &id);
    let codes = read(&ws.join("codes.txt"));
    for what in ["note", "reason", "summary", "metadata"] {
        assert!(
            !codes.contains(&format!("{what}=0")),
            "a {what} over the cap was taken:\n{codes}"
        );
    }
    let errs = read(&ws.join("errs.txt"));
    assert_eq!(errs.matches("kanban.max_text_bytes").count(), 4, "{errs}");
    let comments = board.db().comments(&id).unwrap().len();
    let refused = read(&ws.join("refused.txt")).lines().count();
    assert_eq!(comments + refused, 300);
    assert!(
        refused > 0 && comments >= 50,
        "{comments} comments landed, {refused} refused"
    );
    assert!(read(&ws.join("paced.txt")).contains("faster than 20 a second"));
    let task = board.task(&id);
    assert_eq!(task.result.as_deref(), Some("done"));
    let events = board.db().events(&Default::default()).unwrap();
    let stored: usize = events.iter().map(|e| e.payload.to_string().len()).sum();
    assert!(stored < 100_000, "{stored} bytes of event payloads");
}
