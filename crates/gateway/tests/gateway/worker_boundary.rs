//! What a worker is given, through the supervisor's and the config's public API: the
//! environment without secrets (every case and suffix, the allow-list, `KANBAN_TITLE`),
//! the argv substituted in one pass with card text never starting an option, and the
//! config errors and warnings that keep card text out of shell code and the key out of
//! readable files; and the processes it may signal: a run's live worker is stopped
//! before the run is released, a pid that does not run the task is left alone.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use board_core::{NewTask, Outcome, Request, Status, Store, Task, Termination, Terminator};
use board_home::config::{Config, Warning};
use board_home::Home;
use board_sqlite::{Options, SqliteStore};
use gateway::channel::Terms;
use gateway::dispatcher::{Dispatcher, NoDecompositions};
use gateway::planner::{Boundary, DispatchSettings};
use gateway::supervisor::{worker_argv, worker_env, Assignment, ProcessGroupTerminator};

fn no_env(_: &str) -> Option<String> {
    None
}

fn task(title: &str) -> Task {
    let id = "t_0123abcd".parse().unwrap();
    board_core::graph::blank_task(id, title.to_owned(), Status::Running, 0)
}

fn env_of(inherited: &[(&str, &str)], boundary: &Boundary, secret_vars: &[String]) -> Vec<(String, String)> {
    let task = task("a title with $(touch x) and {workspace}");
    let assignment = Assignment {
        task: &task,
        run_id: 7,
        claim_lock: "lock",
        profile: "coder",
        command: &[],
        secret_vars,
        boundary,
        home_board: true,
        terms: Terms {
            claim_ttl_seconds: 900,
            max_text_bytes: 1024,
            checks: gateway::channel::CheckLimits {
                review_rounds: 3,
                verify_failures: 3,
            },
            verify: None,
            files: Vec::new(),
        },
        worker_log: gateway::planner::LogRotation::default(),
        files: &[],
    };
    let inherited = inherited.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
    worker_env(
        inherited,
        &Home::at(Path::new("/home/k")).unwrap(),
        &assignment,
        Some(5),
    )
}

/// A worker gets what a program needs (its path, user, language, time) and what its
/// profile's `env_allow` names: no secret, whatever its name, nor anything else.
#[test]
fn only_what_a_worker_needs_reaches_it() {
    let secrets = [
        "OPENAI_API_KEY",
        "openai_api_key",
        "AWS_SECRET_ACCESS_KEY",
        "Database_Password",
        "GITHUB_TOKEN",
        "gh_token",
        "GITHUB_PAT",
        "DATABASE_URL",
        "HTTP_PROXY",
        "CLIENT_SECRET",
        "GCP_CREDENTIALS",
        "MODEL_KEY_FROM_CONFIG",
        "model_key_from_config",
        "KANBAN_RUN_ID",
        "kanban_claim_lock",
        "KANBAN_DATABASE_URL",
    ];
    let mut inherited: Vec<(&str, &str)> = secrets.iter().map(|name| (*name, "sk-secret")).collect();
    inherited.extend([
        ("PATH", "/usr/bin"),
        ("HOME", "/home/k"),
        ("LC_ALL", "C.UTF-8"),
        ("KEYBOARD", "us"),
        ("TOKENIZER", "fast"),
    ]);
    let env = env_of(
        &inherited,
        &Boundary::default(),
        &["MODEL_KEY_FROM_CONFIG".to_owned()],
    );
    assert!(
        env.iter().all(|(_, v)| v != "sk-secret"),
        "a secret reached the worker: {env:?}"
    );
    let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    for kept in ["PATH", "HOME", "LC_ALL"] {
        assert!(names.contains(&kept), "{kept} was withheld: {names:?}");
    }
    for withheld in ["KEYBOARD", "TOKENIZER", "KANBAN_DATABASE_URL"] {
        assert!(
            !names.contains(&withheld),
            "{withheld} reached the worker: {names:?}"
        );
    }
    let title = env
        .iter()
        .find(|(k, _)| k == "KANBAN_TITLE")
        .map(|(_, v)| v.as_str());
    assert_eq!(title, Some("a title with $(touch x) and {workspace}"));
}

#[test]
fn the_allow_list_passes_named_variables_but_never_the_model_key() {
    let boundary = Boundary {
        env_allow: vec![
            "GITHUB_TOKEN".to_owned(),
            "OPENAI_API_KEY".to_owned(),
            "KEYBOARD".to_owned(),
        ],
        ..Boundary::default()
    };
    let env = env_of(
        &[
            ("GITHUB_TOKEN", "ghp-allowed"),
            ("github_token", "ghp-other-case"),
            ("OPENAI_API_KEY", "sk-model"),
            ("KEYBOARD", "us"),
        ],
        &boundary,
        &["OPENAI_API_KEY".to_owned()],
    );
    let values: Vec<&str> = env.iter().map(|(_, v)| v.as_str()).collect();
    assert!(values.contains(&"ghp-allowed"), "{env:?}");
    assert!(values.contains(&"us"), "{env:?}");
    assert!(!values.contains(&"ghp-other-case"), "{env:?}");
    assert!(!values.contains(&"sk-model"), "{env:?}");
}

fn argv(command: &[&str], title: &str, dash: bool) -> Result<Vec<String>, String> {
    let command: Vec<String> = command.iter().map(|s| (*s).to_owned()).collect();
    worker_argv(
        &command,
        &task(title),
        Path::new("/home/k/workspaces/t_0123abcd"),
        dash,
    )
}

#[test]
fn placeholders_are_substituted_in_one_pass() {
    let got = argv(
        &[
            "agent",
            "{task_id}",
            "--in={workspace}",
            "{title}",
            "{unknown}",
            "{",
        ],
        "{workspace} and {task_id}",
        false,
    )
    .unwrap();
    assert_eq!(
        got,
        [
            "agent",
            "t_0123abcd",
            "--in=/home/k/workspaces/t_0123abcd",
            "{workspace} and {task_id}",
            "{unknown}",
            "{"
        ]
    );
}

#[test]
fn card_text_never_starts_an_option_unless_the_profile_allows_it() {
    let refused = argv(&["sort", "{title}"], "--output=/tmp/x", false).unwrap_err();
    assert!(refused.contains("start with '-'"), "{refused}");
    assert!(refused.contains("allow_dash_arguments"), "{refused}");
    assert_eq!(
        argv(&["sort", "{title}"], "--output=/tmp/x", true).unwrap(),
        ["sort", "--output=/tmp/x"]
    );
    // A dash the profile itself wrote is the profile's: the title stays one value.
    assert_eq!(
        argv(&["agent", "--title={title}"], "-x", false).unwrap(),
        ["agent", "--title=-x"]
    );
    assert_eq!(
        argv(&["agent", "{title}"], "x-y", false).unwrap(),
        ["agent", "x-y"]
    );
}

fn config_error(text: &str) -> String {
    match Config::parse(text, &no_env) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn card_text_inside_shell_code_is_a_config_error_naming_the_profile() {
    // Inside a larger string, for any program: a shell's code, an interpreter's, an
    // option's value.
    for command in [
        r#"["sh", "-c", "echo {title} > out"]"#,
        r#"["/bin/bash", "-lc", "run '{title}'"]"#,
        r#"["env", "FOO=1", "dash", "-ec", "x{title}"]"#,
        r#"["python3", "-c", "print('{title}')"]"#,
        r#"["agent", "--title={title}"]"#,
        r#"["agent", "{title}{title}"]"#,
    ] {
        let e = config_error(&format!("profiles:\n  coder:\n    command: {command}\n"));
        assert!(
            e.starts_with("config.yaml: profiles.coder.command: {title} inside"),
            "{command}: {e}"
        );
        assert!(e.contains("KANBAN_TITLE"), "{e}");
    }
    // A whole argument that is itself the code a shell or an interpreter runs.
    for (command, named) in [
        (r#"["sh", "-c", "{title}"]"#, "`sh -c`"),
        (r#"["env", "X=1", "/bin/bash", "-lc", "{title}"]"#, "`bash -lc`"),
        (r#"["python3", "-c", "{title}"]"#, "`python3 -c`"),
        (r#"["node", "--eval", "{title}"]"#, "`node --eval`"),
        (r#"["perl", "-e", "{title}"]"#, "`perl -e`"),
    ] {
        let e = config_error(&format!("profiles:\n  coder:\n    command: {command}\n"));
        assert!(
            e.starts_with(&format!(
                "config.yaml: profiles.coder.command: {{title}} as the code of {named}"
            )),
            "{command}: {e}"
        );
    }
    // Data: the title as its own argument, after the code or as a prompt.
    for command in [
        r#"["sh", "-c", "echo \"$1\"", "worker", "{title}"]"#,
        r#"["python3", "-c", "import sys; print(sys.argv[1])", "{title}"]"#,
        r#"["claude", "-p", "{title}"]"#,
        r#"["agent", "--title", "{title}"]"#,
    ] {
        let text = format!("profiles:\n  coder:\n    command: {command}\n");
        assert!(Config::parse(&text, &no_env).is_ok(), "refused: {command}");
    }
    let e = config_error("profiles:\n  coder:\n    command: [agent, \"{body}\"]\n");
    assert_eq!(
        e,
        "config.yaml: profiles.coder.command: {body} is not a placeholder; a worker reads the body with `kanban context`"
    );
    let e = config_error("profiles:\n  coder:\n    command: [\"{title}\", x]\n");
    assert_eq!(
        e,
        "config.yaml: profiles.coder.command: the program (the first item) cannot come from the card's {title}"
    );
    // The title as a positional parameter after the code is data, not code.
    let ok = "profiles:\n  coder:\n    command: [sh, -c, 'echo \"$1\"', worker, \"{title}\"]\n";
    assert!(Config::parse(ok, &no_env).is_ok());
}

#[test]
fn profile_boundary_keys_are_parsed_and_checked() {
    let text = "profiles:\n  coder:\n    command: [agent]\n    env_allow: [GITHUB_TOKEN]\n    allow_dash_arguments: true\n";
    let loaded = Config::parse(text, &no_env).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let coder = loaded.config.profile("coder").unwrap();
    assert_eq!(coder.env_allow, ["GITHUB_TOKEN"]);
    assert!(coder.allow_dash_arguments);
    let round_trip = Config::parse(&loaded.config.effective_yaml(), &no_env).unwrap();
    assert_eq!(round_trip.config, loaded.config);
    assert_eq!(
        config_error("profiles:\n  coder:\n    env_allow: [\"A=B\"]\n"),
        "config.yaml: profiles.coder.env_allow: expected a variable name, got \"A=B\""
    );
    assert_eq!(
        config_error("profiles:\n  coder:\n    allow_dash_arguments: yes please\n"),
        "config.yaml: profiles.coder.allow_dash_arguments: expected true or false, got \"yes please\""
    );
}

#[test]
fn the_template_recommends_the_key_variable() {
    let template = Config::template();
    let loaded = Config::parse(&template, &no_env).unwrap();
    assert_eq!(loaded.config.model.api_key_env, "OPENAI_API_KEY");
    let key_lines: Vec<&str> = template.lines().filter(|l| l.contains("api_key")).collect();
    assert!(
        key_lines.iter().all(|l| !l.trim_start().starts_with("api_key:")),
        "{key_lines:?}"
    );
    assert!(template.contains("workers run as your user"), "{template}");
}

fn home_with(config: &str, home_mode: u32, file_mode: u32) -> (tempfile::TempDir, Vec<Warning>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, config).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(file_mode)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(home_mode)).unwrap();
    let warnings = Config::load_with_env(dir.path(), &no_env).unwrap().warnings;
    (dir, warnings)
}

#[test]
fn a_key_in_a_file_other_users_can_read_is_a_warning() {
    let key = "model:\n  api_key: sk-in-the-file\n";
    let (dir, warnings) = home_with(key, 0o755, 0o644);
    let file = dir.path().join("config.yaml");
    assert_eq!(warnings, [Warning::KeyReadable(file.clone())]);
    let line = warnings[0].to_string();
    assert!(line.contains(&format!("chmod 600 {}", file.display())), "{line}");
    assert!(!line.contains("sk-in-the-file"), "{line}");
    for (home, file) in [(0o700, 0o644), (0o755, 0o600), (0o750, 0o604)] {
        let (_dir, warnings) = home_with(key, home, file);
        assert!(warnings.is_empty(), "{home:o}/{file:o}: {warnings:?}");
    }
    let (_dir, warnings) = home_with("model:\n  api_key_env: MY_KEY\n", 0o755, 0o644);
    assert!(warnings.is_empty(), "no key in the file: {warnings:?}");
}

const T0: i64 = 1_800_000_000;

/// A task claimed by hand (no dispatcher started its worker) whose worker is `sh -c
/// script` in its own group, recorded as the run's worker; `named` puts the run in the
/// process's environment, as the gateway does for its workers.
fn hand_claimed(
    store: &Arc<dyn Store>,
    script: &str,
    named: bool,
) -> (board_core::TaskId, std::process::Child) {
    let id = store.create(&NewTask::titled("claimed by hand"), T0).unwrap().id;
    let claim = store.claim(&id, 10, T0).unwrap();
    let mut command = std::process::Command::new("sh");
    command.args(["-c", script]).process_group(0);
    if named {
        command
            .env("KANBAN_TASK", id.as_str())
            .env("KANBAN_RUN_ID", claim.run_id.to_string());
    }
    let child = command.spawn().unwrap();
    // The tick must meet the process that stays (`exec sleep`), not the shell mid-exec,
    // whose `/proc` entries are briefly unreadable.
    let comm = format!("/proc/{}/comm", child.id());
    wait_until_true("the worker's exec of sleep", || {
        std::fs::read_to_string(&comm).is_ok_and(|c| c.trim() == "sleep")
    });
    let request = Request::SetWorker {
        run_id: claim.run_id,
        claim_lock: claim.claim_lock,
        pid: i64::from(child.id()),
        host: board_home::default_host_id(),
    };
    store.transition(&id, &request, T0).unwrap();
    (id, child)
}

fn wait_until_true(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn exits_within(child: &mut std::process::Child, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn board() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("kanban.db"), &Options::default()).unwrap();
    (dir, Arc::new(store))
}

#[test]
fn an_expired_lease_stops_the_live_worker_before_its_run_is_released() {
    let (dir, store) = board();
    let (id, mut child) = hand_claimed(&store, "exec sleep 60", true);
    let mut d = Dispatcher::new(
        store.clone(),
        Home::at(dir.path()).unwrap(),
        Box::new(NoDecompositions),
    );
    let settings = DispatchSettings {
        max_spawn: 0,
        ..DispatchSettings::default()
    };
    let first = d.tick(&settings, T0 + 10);
    assert!(
        first.reclaimed.is_empty(),
        "released while its worker lived: {first:?}"
    );
    assert_eq!(store.get(&id).unwrap().status, Status::Running);
    assert!(
        exits_within(&mut child, Duration::from_secs(5)),
        "the worker was not stopped"
    );
    // Seen gone on a later tick, its run ends.
    let start = Instant::now();
    while d.tick(&settings, T0 + 10).reclaimed != vec![id.clone()] {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the run was never released"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(store.runs(&id).unwrap()[0].outcome, Some(Outcome::Stale));
}

#[test]
fn a_pid_that_does_not_run_the_task_is_never_signalled() {
    let (_dir, store) = board();
    // The recorded pid now belongs to a process that is not the run's worker.
    let (id, mut stranger) = hand_claimed(&store, "exec sleep 60", false);
    let task = store.get(&id).unwrap();
    assert_eq!(ProcessGroupTerminator.terminate(&task), Termination::Stopped);
    assert!(
        !exits_within(&mut stranger, Duration::from_millis(300)),
        "a stranger was signalled"
    );
    stranger.kill().unwrap();
    stranger.wait().unwrap();
}
