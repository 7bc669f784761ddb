//! Workers are untrusted, through the built binaries: a worker of the gateway's own user
//! cannot read the gateway's environment and gets no secret variable; card text written
//! by a model never runs as a command, never becomes an option and never expands a
//! placeholder; a worker that clears its environment is neither duplicated nor dropped;
//! and no process a worker started outlives it (a timeout, a normal exit, a reclaim).

use crate::common;
use crate::gateway_board;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use board_core::{BoardReads, Outcome, Status, TaskId};
use fake_llm::Reply;
use gateway_board::{wait_until, GatewayBoard, Setup, KANBAN};

/// The unprivileged account the gateway runs as when the tests run as root.
const NOBODY: u32 = 65534;

/// A profile entry whose argv is given as is (a JSON list is a YAML flow sequence).
fn profile(name: &str, argv: &[&str]) -> String {
    let argv = serde_json::to_string(argv).unwrap();
    format!("  {name}:\n    description: test worker\n    command: {argv}\n")
}

/// A unique word for a process's command line: a `sleep` duration no other test uses.
fn marker(n: u32) -> String {
    format!("{}.{}", 900 + n, std::process::id())
}

/// Live processes (zombies have an empty command line) with `word` as an argument.
fn processes_with(word: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.split(|b| *b == 0).any(|arg| arg == word.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

fn wait_for_no_process(what: &str, word: &str) {
    wait_until(what, Duration::from_secs(20), || processes_with(word).is_empty());
}

fn last_run(b: &GatewayBoard, id: &TaskId) -> board_core::Run {
    b.db().runs(id).unwrap().pop().expect("a run")
}

/// The `kanban` binary where an unprivileged gateway can run it: a link (or copy) in a
/// world-readable directory, since the build's own directory may not be reachable.
struct ReachableBinary {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl ReachableBinary {
    fn new() -> ReachableBinary {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().join("kanban");
        if std::fs::hard_link(KANBAN, &path).is_err() {
            std::fs::copy(KANBAN, &path).unwrap();
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        ReachableBinary { _dir: dir, path }
    }
}

fn chown_tree(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap().flatten() {
            chown_tree(&entry.path(), uid);
        }
    }
}

/// Starts the gateway as a user that is not root (root may read any process's memory,
/// so the test would prove nothing): as root, the home is handed to an unprivileged
/// account and the gateway runs as it; otherwise it runs as the caller.
fn start_unprivileged_gateway(b: &mut GatewayBoard, kanban: &Path) {
    let mut command = std::process::Command::new(kanban);
    command
        .arg("--home")
        .arg(b.path())
        .args(["gateway", "run"])
        .env_remove("KANBAN_HOME")
        .env_remove("KANBAN_TASK")
        .env_remove("KANBAN_RUN_ID")
        .envs(b.env.iter().map(|(k, v)| (k, v)));
    if common::is_root() {
        std::fs::set_permissions(b.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        chown_tree(&b.path(), NOBODY);
        command.uid(NOBODY).gid(NOBODY);
    }
    let log = std::fs::File::create(b.log_path()).unwrap();
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    b.gateway = Some(child);
    b.wait_for("the gateway's first tick", || {
        b.path().join("gateway.json").exists()
    });
}

/// The workspace of `id`'s worker, which tried to copy the gateway's environment (and
/// memory) into `stolen` there and got nothing.
fn nothing_stolen(b: &GatewayBoard, id: &TaskId) -> PathBuf {
    let workspace = b.path().join("workspaces").join(id.as_str());
    let stolen = std::fs::read(workspace.join("stolen")).expect("the worker tried");
    assert!(
        stolen.is_empty(),
        "the worker read {} bytes of the gateway's environment or memory",
        stolen.len()
    );
    workspace
}

const SECRETS: &[(&str, &str)] = &[
    ("OPENAI_API_KEY", "canary-openai-1"),
    ("openai_api_key", "canary-openai-2"),
    ("AWS_SECRET_ACCESS_KEY", "canary-aws-3"),
    ("DATABASE_PASSWORD", "canary-db-4"),
    ("GITHUB_TOKEN", "canary-gh-5"),
    ("Service_Secret", "canary-svc-6"),
    ("GCP_CREDENTIALS", "canary-gcp-7"),
    ("MODEL_VAR_NAMED_IN_CONFIG", "canary-model-8"),
    ("PGPASSWORD", "canary-pg-9"),
    ("SMTP_PASSWD", "canary-smtp-10"),
    ("DATABASE_URL", "postgres://app:canary-dburl-11@db/app"),
    ("GITHUB_PAT", "canary-pat-12"),
    ("HTTP_PROXY", "http://proxy:canary-proxy-13@proxy:3128"),
];

#[test]
fn a_worker_cannot_read_the_gateways_environment_nor_inherit_a_secret() {
    let bin = ReachableBinary::new();
    let kanban = bin.path.display().to_string();
    let script = format!(
        "cat /proc/$(cat \"$KANBAN_HOME/gateway.pid\")/environ > \"$KANBAN_WORKSPACE/stolen\" 2>/dev/null; \
         env > \"$KANBAN_WORKSPACE/env.txt\"; {kanban} complete --result looked"
    );
    let profiles =
        profile("thief", &["sh", "-c", &script]) + "    env_allow: [DEPLOY_TOKEN, PLAIN_SETTING]\n";
    let mut env: Vec<(String, String)> = SECRETS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    env.push(("DEPLOY_TOKEN".into(), "allowed-deploy-token".into()));
    env.push(("PLAIN_SETTING".into(), "plain-value".into()));
    env.push(("UNNAMED_SETTING".into(), "unnamed-value".into()));
    let mut b = GatewayBoard::new(Setup {
        model_extra: "  api_key_env: MODEL_VAR_NAMED_IN_CONFIG\n",
        profiles: &profiles,
        max_spawn: 1,
        env,
        ..Setup::default()
    });
    let id = b.create(&["look around", "--assignee", "thief"]);
    start_unprivileged_gateway(&mut b, &bin.path);
    b.wait_for("the thief to finish", || b.task(&id).status == Status::Done);

    let workspace = nothing_stolen(&b, &id);
    if common::root_for("read the gateway's environment, proving it held the secrets") {
        // The gateway did hold the secrets: root can still read them, the worker could not.
        let pid = b.gateway.as_ref().unwrap().id();
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        assert!(gateway_board::contains(&environ, b"canary-gh-5"));
    }
    let dump = std::fs::read_to_string(workspace.join("env.txt")).unwrap();
    for (name, value) in SECRETS {
        assert!(!dump.contains(value), "{name} reached the worker:\n{dump}");
    }
    assert!(dump.contains("DEPLOY_TOKEN=allowed-deploy-token"), "{dump}");
    assert!(dump.contains("PLAIN_SETTING=plain-value"), "{dump}");
    assert!(
        !dump.contains("UNNAMED_SETTING"),
        "a variable no profile names: {dump}"
    );
    assert!(dump.contains("KANBAN_TITLE=look around"), "{dump}");
}

/// A root gateway's worker of a profile without `user` runs as root, and root reads any
/// process's environment: unless it has no capability at all. Its `/proc/self/status`
/// shows empty sets and `no_new_privs`, and the gateway's environment, which holds the
/// secrets (root's test process reads it), stays out of its reach.
#[test]
fn a_root_gateways_worker_without_a_user_has_no_capability_and_no_secret() {
    if !common::root_for("run the gateway as root") {
        return;
    }
    let bin = ReachableBinary::new();
    let kanban = bin.path.display().to_string();
    let script = format!(
        "gw=$(cat \"$KANBAN_HOME/gateway.pid\"); \
         cat /proc/$gw/environ > \"$KANBAN_WORKSPACE/stolen\" 2>/dev/null; \
         head -c 4096 /proc/$gw/mem >> \"$KANBAN_WORKSPACE/stolen\" 2>/dev/null; \
         grep -E '^(Uid|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status > \"$KANBAN_WORKSPACE/status\"; \
         {kanban} complete --result looked"
    );
    let env = SECRETS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let mut b = GatewayBoard::new(Setup {
        model_extra: "  api_key_env: MODEL_VAR_NAMED_IN_CONFIG\n",
        profiles: &profile("thief", &["sh", "-c", &script]),
        max_spawn: 1,
        env,
        ..Setup::default()
    });
    let id = b.create(&["look around as root", "--assignee", "thief"]);
    b.start_gateway();
    b.wait_for("the thief to finish", || b.task(&id).status == Status::Done);

    let pid = b.gateway.as_ref().unwrap().id();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert!(
        gateway_board::contains(&environ, b"canary-model-8"),
        "the gateway held the key"
    );
    let workspace = nothing_stolen(&b, &id);
    let status = std::fs::read_to_string(workspace.join("status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no {name} in:\n{status}"))
            .to_owned()
    };
    assert!(
        field("Uid:").starts_with('0'),
        "the worker ran as root:\n{status}"
    );
    for set in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
        assert_eq!(field(set), "0000000000000000", "{set}\n{status}");
    }
    assert_eq!(field("NoNewPrivs:"), "1", "{status}");
    assert!(
        b.gateway_log()
            .contains("workers of a profile without `user` run as its user with none"),
        "the gateway says what it does at startup"
    );
}

#[test]
fn model_written_titles_run_nothing_and_write_no_file() {
    let trap = tempfile::tempdir().unwrap();
    let t = trap.path().display();
    let titles = [
        format!("$(touch {t}/dollar)"),
        format!("`touch {t}/backtick`"),
        format!("--output={t}/option"),
        "{workspace}".to_owned(),
        "nul\u{0}byte".to_owned(),
    ];
    let assignee = |title: &str| {
        if title.starts_with("--") {
            "sorter"
        } else {
            "recorder"
        }
    };
    let tasks: Vec<serde_json::Value> = titles
        .iter()
        .map(|title| serde_json::json!({"title": title, "body": "", "assignee": assignee(title), "parents": []}))
        .collect();
    let reply = serde_json::json!({"fanout": true, "rationale": "five", "tasks": tasks});
    let record = format!(
        "printf '%s|%s' \"$1\" \"$KANBAN_TITLE\" > \"$KANBAN_WORKSPACE/seen\"; {KANBAN} complete --result ok"
    );
    let profiles = profile("recorder", &["sh", "-c", &record, "worker", "{title}"])
        + &profile("sorter", &["sort", "{title}"]);
    let mut b = GatewayBoard::new(Setup {
        profiles: &profiles,
        max_spawn: 4,
        ..Setup::default()
    });
    b.reply("inject", Reply::text(reply.to_string()));
    let root = b.create(&["inject", "--triage"]);
    b.start_gateway();
    b.wait_for("the decomposition", || b.task(&root).status != Status::Triage);
    let children = b.children(&root);
    assert_eq!(children.len(), 5);
    let (sorted, recorded): (Vec<TaskId>, Vec<TaskId>) = children
        .into_iter()
        .partition(|c| b.task(c).assignee.as_deref() == Some("sorter"));
    b.wait_for("every recorder to finish", || {
        recorded.iter().all(|c| b.task(c).status == Status::Done)
    });
    let option = &sorted[0];
    b.wait_for("the option title to be refused", || {
        b.db().runs(option).unwrap().iter().any(|r| r.outcome.is_some())
    });
    let run = last_run(&b, option);
    assert_eq!(run.outcome, Some(Outcome::SpawnFailed));
    assert!(run.error.unwrap().contains("start with '-'"));

    for child in &recorded {
        let title = b.task(child).title;
        assert!(!title.contains('\0'), "a NUL was stored: {title:?}");
        let seen =
            std::fs::read_to_string(b.path().join("workspaces").join(child.as_str()).join("seen")).unwrap();
        assert_eq!(
            seen,
            format!("{title}|{title}"),
            "the title reached the worker literally"
        );
    }
    let stored: Vec<String> = recorded.iter().map(|c| b.task(c).title).collect();
    assert!(stored.contains(&"{workspace}".to_owned()), "{stored:?}");
    assert!(stored.contains(&"nulbyte".to_owned()), "{stored:?}");
    let planted: Vec<_> = std::fs::read_dir(trap.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(planted.is_empty(), "card text ran as a command: {planted:?}");
}

#[test]
fn a_worker_that_clears_its_environment_is_not_duplicated() {
    let mark = marker(1);
    let script = format!("exec env -i /bin/sh -c 'exec sleep {mark}'");
    let (b, id) = one_worker(&script, "  claim_ttl_seconds: 1\n", &["hides its environment"]);
    let extended = |b: &GatewayBoard| b.kinds(&id).iter().filter(|k| *k == "claim_extended").count();
    let runs = |b: &GatewayBoard| b.db().runs(&id).unwrap().len();
    b.wait_for("three lease extensions (or a second run)", || {
        extended(&b) >= 3 || runs(&b) > 1
    });
    assert_eq!(runs(&b), 1, "one run");
    assert_eq!(b.task(&id).status, Status::Running);
    assert_eq!(processes_with(&mark).len(), 1, "one live process");
    assert!(!b.kinds(&id).contains(&"stale".to_owned()), "{:?}", b.kinds(&id));
}

/// A gateway running one task, assigned to a profile whose worker is `sh -c script`.
fn one_worker(script: &str, kanban_extra: &str, create: &[&str]) -> (GatewayBoard, TaskId) {
    let profiles = profile("w", &["sh", "-c", script]);
    let mut b = GatewayBoard::new(Setup {
        profiles: &profiles,
        max_spawn: 1,
        kanban_extra,
        ..Setup::default()
    });
    let id = b.create(&[create, &["--assignee", "w"]].concat());
    b.start_gateway();
    (b, id)
}

/// A worker whose leader exits on SIGTERM and whose background child ignores it.
fn stubborn_group(leader: &str, stubborn: &str) -> String {
    format!("(trap '' TERM; exec sleep {stubborn}) & exec sleep {leader}")
}

fn wait_for_group(b: &GatewayBoard, leader: &str, stubborn: &str) {
    b.wait_for("both processes", || {
        processes_with(leader).len() == 1 && processes_with(stubborn).len() == 1
    });
}

#[test]
fn no_process_survives_a_worker_past_its_max_runtime() {
    let (leader, stubborn) = (marker(2), marker(3));
    // One failure gives up: no second worker brings the markers back.
    let (b, id) = one_worker(
        &stubborn_group(&leader, &stubborn),
        "  failure_limit: 1\n",
        &["runs too long", "--max-runtime", "2s"],
    );
    wait_for_group(&b, &leader, &stubborn);
    b.wait_for("the timeout", || b.task(&id).status == Status::Blocked);
    assert_eq!(last_run(&b, &id).outcome, Some(Outcome::TimedOut));
    wait_for_no_process("the leader to be gone", &leader);
    wait_for_no_process("the grandchild that ignores SIGTERM to be gone", &stubborn);
}

#[test]
fn no_process_survives_a_worker_that_exits_normally() {
    let background = marker(4);
    let script = format!("sleep {background} & {KANBAN} complete --result done");
    let (b, id) = one_worker(&script, "", &["leaves a child behind"]);
    b.wait_for("the completion", || b.task(&id).status == Status::Done);
    wait_for_no_process("the background child to be gone", &background);
}

#[test]
fn reclaim_stops_the_whole_group_of_a_worker_it_did_not_start() {
    let (leader, stubborn) = (marker(5), marker(6));
    let (mut b, id) = one_worker(&stubborn_group(&leader, &stubborn), "", &["is reclaimed"]);
    wait_for_group(&b, &leader, &stubborn);
    // Without its gateway, the worker is reachable only through its recorded pid.
    b.kill_gateway();
    let out = b.kanban_ok(&["reclaim", id.as_str()]);
    assert!(out.contains("Reclaimed"), "{out}");
    wait_for_no_process("the leader to be gone", &leader);
    wait_for_no_process("the grandchild that ignores SIGTERM to be gone", &stubborn);
    assert_eq!(last_run(&b, &id).outcome, Some(Outcome::Reclaimed));
}

#[test]
fn titles_lose_control_characters_when_written() {
    let board = common::Board::init();
    let id = board.create(&["bell\u{7} and \u{1b}]0;owned\u{7} esc\tand tab"]);
    assert_eq!(common::get(&board, &id).title, "bell and ]0;owned esc and tab");
    board.ok(&["edit", &id, "--title", "line one\nline two\u{9b}2J"]);
    assert_eq!(common::get(&board, &id).title, "line one line two2J");
    let out = board
        .kanban(&["edit", &id, "--title", "\u{1b}\u{7}"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "a title of control characters only is blank"
    );
}

#[test]
fn config_check_names_a_profile_that_puts_the_title_in_code() {
    let board = common::Board::init();
    for command in [
        "[sh, -c, \"echo {title} > out\"]",
        "[python3, -c, \"print('{title}')\"]",
    ] {
        std::fs::write(
            board.home().join("config.yaml"),
            format!("profiles:\n  coder:\n    command: {command}\n"),
        )
        .unwrap();
        let out = board.kanban(&["config", "check"]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{command}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("profiles.coder.command: {title} inside"),
            "{stderr}"
        );
    }
}

#[test]
fn config_check_warns_about_a_key_other_users_can_read() {
    let board = common::Board::init();
    let config = board.home().join("config.yaml");
    std::fs::write(&config, "model:\n  api_key: sk-readable-canary\n").unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(board.home(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = board.kanban(&["config", "check"]).output().unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("model.api_key is readable by other users"),
        "{stderr}"
    );
    assert!(!stderr.contains("sk-readable-canary"), "{stderr}");
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = board.kanban(&["config", "check"]).output().unwrap();
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A descriptor the gateway inherited from whoever started it (here a file left open on
/// descriptor 9 without close-on-exec), like those it opens itself, never reaches a
/// worker: the worker holds its standard streams and its channel only.
#[test]
fn a_worker_holds_no_descriptor_of_the_gateways() {
    let script = "ls -l /proc/$$/fd > \"$KANBAN_WORKSPACE/fds.txt\"; kanban complete --result listed";
    let mut b = GatewayBoard::new(Setup {
        profiles: &gateway_board::worker_profile("lister", script),
        max_spawn: 1,
        ..Setup::default()
    });
    let marker = b.dir.path().join("inherited-marker");
    let file = std::fs::File::create(&marker).unwrap();
    let id = b.create(&["list your descriptors", "--assignee", "lister"]);
    let raw = std::os::fd::AsRawFd::as_raw_fd(&file);
    let log = std::fs::File::create(b.log_path()).unwrap();
    let mut command = std::process::Command::new(KANBAN);
    command
        .arg("--home")
        .arg(b.path())
        .args(["gateway", "run"])
        .env_remove("KANBAN_HOME")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    // SAFETY: dup2 between fork and exec, on descriptors this process owns.
    unsafe {
        command.pre_exec(move || {
            if libc::dup2(raw, 9) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    b.gateway = Some(command.spawn().unwrap());
    b.wait_for("the lister to finish", || b.task(&id).status == Status::Done);
    let pid = b.gateway.as_ref().unwrap().id();
    let held = std::fs::read_link(format!("/proc/{pid}/fd/9")).unwrap();
    assert_eq!(held, marker, "the gateway did inherit the descriptor");
    let fds = std::fs::read_to_string(b.path().join("workspaces").join(id.as_str()).join("fds.txt")).unwrap();
    assert!(
        !fds.contains("inherited-marker"),
        "the worker inherited the gateway's descriptor:\n{fds}"
    );
    assert!(
        !fds.contains("kanban.db"),
        "the worker holds the board open:\n{fds}"
    );
}
