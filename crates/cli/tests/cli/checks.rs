//! Work is checked before it counts, end to end: a real gateway runs the verifiers of
//! reported work and dispatches reviewer profiles; verdicts are read from `kanban.db`
//! and the files the workers left in their workspaces.

use crate::gateway_board;

use std::path::PathBuf;

use board_core::{BoardReads, Outcome, Run, RunKind, Status, TaskId};
use gateway_board::{worker_profile, GatewayBoard, Setup};

fn board(kanban_extra: &str, profiles: &str) -> GatewayBoard {
    GatewayBoard::new(Setup {
        max_spawn: 4,
        kanban_extra,
        profiles,
        interval_seconds: 1.0,
        ..Setup::default()
    })
}

/// A profile running `script`, with extra lines of its own (four spaces in).
fn profile(name: &str, script: &str, extra: &str) -> String {
    format!("{}{extra}", worker_profile(name, script))
}

fn workspace(b: &GatewayBoard, id: &TaskId) -> PathBuf {
    b.path().join("workspaces").join(id.as_str())
}

fn runs(b: &GatewayBoard, id: &TaskId) -> Vec<Run> {
    b.db().runs(id).unwrap()
}

/// Each run as its kind and outcome, oldest first.
fn run_kinds(b: &GatewayBoard, id: &TaskId) -> Vec<(RunKind, Option<Outcome>)> {
    runs(b, id).iter().map(|r| (r.kind, r.outcome)).collect()
}

fn count(kinds: &[String], kind: &str) -> usize {
    kinds.iter().filter(|k| *k == kind).count()
}

/// A worker that counts its attempts in its workspace, keeps each brief it was given,
/// and reports its work complete.
const COUNTING_WORKER: &str = "n=$(cat attempts 2>/dev/null || echo 0); n=$((n+1)); echo $n > attempts; \
     kanban context > brief-$n.md; kanban complete --result \"attempt $n\" --summary \"try $n\"";

#[test]
fn a_verifier_that_fails_twice_then_passes_holds_the_work_until_it_passes() {
    let verify = "    verify:\n      - [\"sh\", \"-c\", \"test $(cat attempts) -ge 3 || { echo only $(cat attempts) attempts; exit 1; }\"]\n";
    let mut b = board("", &profile("coder", COUNTING_WORKER, verify));
    let task = b.create(&["counted work", "--assignee", "coder"]);
    let child = b.create(&["after it", "--parent", task.as_str()]);
    b.start_gateway();
    b.wait_for("the verified work", || b.task(&task).status == Status::Done);
    use Outcome::{Completed, VerifyFailed};
    use RunKind::{Verify, Work};
    assert_eq!(
        run_kinds(&b, &task),
        [
            (Work, Some(Completed)),
            (Verify, Some(VerifyFailed)),
            (Work, Some(Completed)),
            (Verify, Some(VerifyFailed)),
            (Work, Some(Completed)),
            (Verify, Some(Completed)),
        ]
    );
    let done = b.task(&task);
    assert_eq!(
        (done.result.as_deref(), done.verify_failures),
        (Some("attempt 3"), 0)
    );
    let last = runs(&b, &task).pop().unwrap();
    let evidence = last.evidence.expect("the verifiers' evidence is kept on the run");
    assert_eq!(evidence[0]["exit_code"], 0, "{evidence:#}");
    assert_eq!(evidence[0]["argv"][0], "sh");
    let failed = &runs(&b, &task)[1];
    assert!(failed.evidence.as_ref().unwrap()[0]["output_tail"]
        .as_str()
        .unwrap()
        .contains("only 1 attempts"));
    // The second worker read the first failure in its brief.
    let brief = std::fs::read_to_string(workspace(&b, &task).join("brief-2.md")).unwrap();
    assert!(
        brief.contains("VERIFICATION FAILED") && brief.contains("only 1 attempts"),
        "{brief}"
    );
    // The child started only on verified work: promoted after the task's completion.
    let snapshot = b.snapshot();
    let event_id = |id: &TaskId, kind: &str| {
        snapshot
            .events
            .iter()
            .find(|e| &e.task_id == id && e.kind == kind)
            .map(|e| e.id)
    };
    assert!(event_id(&child, "promoted") > event_id(&task, "completed"));
    assert!(event_id(&task, "completed") > event_id(&task, "verified"));
    let kinds = b.kinds(&task);
    assert_eq!(
        (count(&kinds, "verify_failed"), count(&kinds, "verified")),
        (2, 1)
    );
    assert_eq!(count(&kinds, "completed"), 1, "done once");
}

#[test]
fn a_verifier_that_hangs_is_killed_and_counts_as_failed() {
    let verify = "    verify:\n      - [\"sh\", \"-c\", \"echo $$ > verifier.pid; exec sleep 600\"]\n";
    let mut b = board(
        "  verify_timeout_seconds: 1\n  verify_failure_limit: 1\n",
        &profile("coder", "kanban complete --result done", verify),
    );
    let task = b.create(&["hangs in verification", "--assignee", "coder"]);
    b.start_gateway();
    b.wait_for("the task to be blocked", || {
        b.task(&task).status == Status::Blocked
    });
    let blocked = b.task(&task);
    assert_eq!(blocked.verify_failures, 1);
    let reason = blocked.last_failure_error.unwrap_or_default();
    assert!(reason.contains("timeout"), "{reason}");
    let pid: i32 = std::fs::read_to_string(workspace(&b, &task).join("verifier.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    b.wait_for("the hung verifier to be gone", || {
        // SAFETY: signal 0 only asks whether the pid exists.
        unsafe { libc::kill(pid, 0) != 0 }
    });
    let check = runs(&b, &task).pop().unwrap();
    assert_eq!(
        (check.kind, check.outcome),
        (RunKind::Verify, Some(Outcome::VerifyFailed))
    );
    assert_eq!(check.evidence.unwrap()[0]["timed_out"], true);
}

#[test]
fn a_reviewer_requests_changes_once_then_approves() {
    let coder = profile(
        "coder",
        COUNTING_WORKER,
        "    review: required\n    reviewer: critic\n",
    );
    let critic = worker_profile(
        "critic",
        "if [ -f reviewed ]; then kanban approve --summary 'reads well now'; \
         else touch reviewed; kanban request-changes the error path has no test; fi",
    );
    let mut b = board("", &format!("{coder}{critic}"));
    let task = b.create(&["reviewed work", "--assignee", "coder"]);
    b.start_gateway();
    b.wait_for("the approved work", || b.task(&task).status == Status::Done);
    use Outcome::{ChangesRequested, Completed};
    use RunKind::{Review, Work};
    assert_eq!(
        run_kinds(&b, &task),
        [
            (Work, Some(Completed)),
            (Review, Some(ChangesRequested)),
            (Work, Some(Completed)),
            (Review, Some(Completed)),
        ]
    );
    let reviews: Vec<Option<String>> = runs(&b, &task)
        .into_iter()
        .filter(|r| r.kind == Review)
        .map(|r| r.profile)
        .collect();
    assert_eq!(reviews, [Some("critic".to_owned()), Some("critic".to_owned())]);
    let comments = b.db().comments(&task).unwrap();
    assert_eq!(comments[0].body, "CHANGES REQUESTED: the error path has no test");
    assert_eq!(comments[0].author.as_deref(), Some("critic"));
    let brief = std::fs::read_to_string(workspace(&b, &task).join("brief-2.md")).unwrap();
    assert!(
        brief.contains("CHANGES REQUESTED: the error path has no test"),
        "{brief}"
    );
    let kinds = b.kinds(&task);
    assert_eq!(count(&kinds, "approved"), 1);
    assert_eq!(b.task(&task).result.as_deref(), Some("attempt 2"));
}

#[test]
fn a_worker_cannot_approve_its_own_work_and_a_review_loop_is_blocked() {
    let coder = profile(
        "coder",
        "kanban approve 2> approve.err; echo $? > approve.code; kanban request-review --summary mine",
        "    reviewer: critic\n",
    );
    let critic = worker_profile("critic", "kanban request-changes still wrong");
    let mut b = board("  review_round_limit: 2\n", &format!("{coder}{critic}"));
    let task = b.create(&["never good enough", "--assignee", "coder"]);
    b.start_gateway();
    b.wait_for("the review loop to block the task", || {
        b.task(&task).status == Status::Blocked
    });
    let code = std::fs::read_to_string(workspace(&b, &task).join("approve.code")).unwrap();
    assert_ne!(code.trim(), "0", "a worker's approve of its own run is refused");
    let err = std::fs::read_to_string(workspace(&b, &task).join("approve.err")).unwrap();
    assert!(err.contains("cannot review"), "{err}");
    assert!(b.kinds(&task).contains(&"review_loop_detected".to_owned()));
    let blocked = b.task(&task);
    assert_eq!(blocked.review_rounds, 2);
    assert_eq!(
        runs(&b, &task).len(),
        4,
        "two rounds, then no more runs: {:?}",
        run_kinds(&b, &task)
    );
    b.prove_ticks(2);
    assert_eq!(runs(&b, &task).len(), 4, "a blocked loop bills nothing more");
}

#[test]
fn a_hostile_title_reaches_a_verifier_as_text_never_as_a_command() {
    let verify = "    verify:\n      - [\"sh\", \"-c\", \"printf '%s' \\\"$KANBAN_TITLE\\\" > title.txt\"]\n";
    let mut b = board("", &profile("coder", "kanban complete --result done", verify));
    let title = "$(touch pwned-a) `touch pwned-b`; touch pwned-c";
    let task = b.create(&[title, "--assignee", "coder"]);
    b.start_gateway();
    b.wait_for("the verified work", || b.task(&task).status == Status::Done);
    let dir = workspace(&b, &task);
    assert_eq!(std::fs::read_to_string(dir.join("title.txt")).unwrap(), title);
    for name in ["pwned-a", "pwned-b", "pwned-c"] {
        assert!(!dir.join(name).exists(), "{name} was created: the title ran");
    }
}

#[test]
fn a_gateway_killed_during_verification_loses_and_double_counts_nothing() {
    let verify = "    verify:\n      - [\"sh\", \"-c\", \"touch verifying; while [ ! -f go ]; do sleep 0.05; done\"]\n";
    let mut b = board("", &profile("coder", "kanban complete --result done", verify));
    let task = b.create(&["verified across a crash", "--assignee", "coder"]);
    b.start_gateway();
    let dir = workspace(&b, &task);
    b.wait_for("the verifier to start", || dir.join("verifying").exists());
    b.sigkill_running_gateway();
    std::fs::write(dir.join("go"), "").unwrap();
    b.start_gateway();
    b.wait_for("the verified work", || b.task(&task).status == Status::Done);
    let kinds = b.kinds(&task);
    assert_eq!(count(&kinds, "completed"), 1, "{kinds:?}");
    assert_eq!(count(&kinds, "verified"), 1, "{kinds:?}");
    assert_eq!(count(&kinds, "verify_failed"), 0, "{kinds:?}");
    let done = b.task(&task);
    assert_eq!((done.verify_failures, done.consecutive_failures), (0, 0));
    assert_eq!(
        runs(&b, &task).iter().filter(|r| r.kind == RunKind::Work).count(),
        1,
        "the work was not redone"
    );
}

#[test]
fn completion_contracts_take_evidence_and_complete_from_output() {
    let prover = profile(
        "prover",
        "kanban complete --result proved 2> bare.err; echo $? > bare.code; \
         kanban complete --result proved --evidence '{\"tests\": 3}'",
        "    contract: evidence\n",
    );
    let echoer = profile("echoer", "echo the answer is 42", "    contract: auto\n");
    let quiet = profile("quiet", "exit 0", "    contract: auto\n");
    let mut b = board("  failure_limit: 1\n", &format!("{prover}{echoer}{quiet}"));
    let proved = b.create(&["needs evidence", "--assignee", "prover"]);
    let echoed = b.create(&["answers by output", "--assignee", "echoer"]);
    let silent = b.create(&["says nothing", "--assignee", "quiet"]);
    b.start_gateway();
    b.wait_for("the contracts", || {
        b.task(&proved).status == Status::Done
            && b.task(&echoed).status == Status::Done
            && b.task(&silent).status == Status::Blocked
    });
    let dir = workspace(&b, &proved);
    assert_ne!(
        std::fs::read_to_string(dir.join("bare.code")).unwrap().trim(),
        "0"
    );
    let err = std::fs::read_to_string(dir.join("bare.err")).unwrap();
    assert!(err.contains("--evidence"), "{err}");
    let run = runs(&b, &proved).pop().unwrap();
    assert_eq!(run.evidence, Some(serde_json::json!({ "tests": 3 })));
    assert_eq!(b.task(&echoed).result.as_deref(), Some("the answer is 42"));
    assert_eq!(
        runs(&b, &silent).pop().unwrap().outcome,
        Some(Outcome::ProtocolViolation),
        "an auto contract's exit 0 without output is a protocol violation"
    );
}

#[test]
fn a_verifier_that_leaves_a_process_holding_its_output_is_not_waited_for() {
    let verify =
        "    verify:\n      - [\"sh\", \"-c\", \"setsid sh -c 'echo $$ > daemon.pid; exec sleep 600' & \
                  while [ ! -s daemon.pid ]; do sleep 0.01; done; echo started\"]\n";
    let mut b = board("", &profile("coder", "kanban complete --result done", verify));
    let task = b.create(&["verified, leaving a daemon", "--assignee", "coder"]);
    b.start_gateway();
    b.wait_for("the verified work", || b.task(&task).status == Status::Done);
    let pid_file = workspace(&b, &task).join("daemon.pid");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: signal 0 asks only whether the pid exists.
    let alive = unsafe { libc::kill(pid, 0) } == 0;
    // SAFETY: the daemon this test's verifier left; it left its group on purpose.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    assert!(alive, "the daemon held the output while the verdict landed");
    let run = runs(&b, &task).pop().unwrap();
    let evidence = run.evidence.unwrap();
    assert_eq!(evidence[0]["exit_code"], 0, "{evidence:#}");
    assert!(
        evidence[0]["output_tail"].as_str().unwrap().contains("started"),
        "{evidence:#}"
    );
}
