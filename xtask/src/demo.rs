//! `cargo xtask demo`: the product's main job on a temporary home. A fake model that
//! splits one rough idea into three tasks and tightens the other, a gateway ticking
//! every second, workers that think for a moment and then `kanban complete`, and the
//! board's events shown live until every card is done. The coder's work is checked by a
//! verifier that fails its first run, and the writer's work is reviewed by an editor who
//! asks for changes once, so a verification failure and a review round trip go by.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(55);

/// The model's script: the first card asked about is split, the second tightened.
const SCRIPT: &str = r#"{
  "default": {"kind": "text", "content_json": {"fanout": false, "rationale": "one clear step",
      "title": "Write the launch announcement", "body": "Done when the post is drafted.", "assignee": "writer"}},
  "replies": [
    {"kind": "text", "content_json": {"fanout": true, "rationale": "schema first, then the API and its docs",
      "tasks": [
        {"title": "Design the schema", "body": "Tables and indexes.", "assignee": "coder", "parents": []},
        {"title": "Write the user guide", "body": "How to use it.", "assignee": "writer", "parents": []},
        {"title": "Build the API", "body": "Endpoints on the schema.", "assignee": "coder", "parents": [0]}
      ]}}
  ]
}"#;

/// A child process that is stopped when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: SIGTERM to a process this demo started; it stops cleanly on it.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

pub fn run(root: &Path) -> Result<(), String> {
    let cargo = crate::cargo();
    crate::run(&cargo, &["build", "--quiet", "-p", "cli", "-p", "fake-llm"])?;
    let bin = crate::target_dir(root).join("debug");
    let kanban = bin.join("kanban");
    let home = std::env::temp_dir().join(format!("kanban-demo-{}", std::process::id()));
    std::fs::create_dir_all(&home).map_err(|e| format!("cannot create {}: {e}", home.display()))?;
    let script = home.join("model-script.json");
    std::fs::write(&script, SCRIPT).map_err(|e| e.to_string())?;

    let mut fake = Command::new(bin.join("fake-llm"));
    fake.args(["serve", "--port", "0", "--script"]).arg(&script);
    let (_fake, base_url) = start_announcing(fake, "fake-llm")?;

    write_config(&home, &kanban, &base_url)?;
    let cli = |args: &[&str]| -> Result<String, String> {
        let out = Command::new(&kanban)
            .arg("--home")
            .arg(&home)
            .args(args)
            .output()
            .map_err(|e| format!("cannot run kanban: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "kanban {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    cli(&["init"])?;
    let gateway_log = std::fs::File::create(home.join("gateway.log")).map_err(|e| e.to_string())?;
    let gateway = Command::new(&kanban)
        .arg("--home")
        .arg(&home)
        .args(["gateway", "run"])
        .stdout(Stdio::null())
        .stderr(gateway_log)
        .spawn()
        .map_err(|e| format!("cannot start the gateway: {e}"))?;
    let gateway = Running(gateway);

    let mut serve = Command::new(&kanban);
    serve
        .arg("--home")
        .arg(&home)
        .args(["serve", "--bind", "127.0.0.1:0"]);
    let (web, announced) = start_announcing(serve, "kanban serve")?;
    let board_url = sign_in_address(&announced, &home)?;

    println!("kanban demo: home {}", home.display());
    println!(
        "kanban demo: fake model at {base_url}, gateway pid {}",
        gateway.0.id()
    );
    println!("kanban demo: watch the board at {board_url}");
    cli(&[
        "create",
        "Ship the new API",
        "--triage",
        "--body",
        "We need an API, its schema and a guide.",
    ])?;
    cli(&["create", "Tell people about it", "--triage"])?;

    let started = Instant::now();
    if !follow(&cli, started)? {
        drop(gateway);
        return Err(format!(
            "the board did not finish within {} s; see {}",
            LIMIT.as_secs(),
            home.join("gateway.log").display()
        ));
    }
    drop(gateway);
    finish(&cli, &home, started, &board_url)?;
    drop(web);
    Ok(())
}

/// The finished board, where it lives, and (on a terminal) the web board kept up until
/// Enter.
fn finish(
    cli: &dyn Fn(&[&str]) -> Result<String, String>,
    home: &Path,
    started: Instant,
    board_url: &str,
) -> Result<(), String> {
    println!();
    print!("{}", cli(&["list", "--archived"])?);
    println!();
    println!(
        "kanban demo: every card is done in {:.1} s.",
        started.elapsed().as_secs_f32()
    );
    let stats: Value = serde_json::from_str(&cli(&["stats", "--json"])?).map_err(|e| e.to_string())?;
    println!(
        "kanban demo: checks: {} failed verifications, {} rounds of changes requested, before the work counted",
        stats["checks"]["verify_failed"], stats["checks"]["changes_requested"]
    );
    println!("kanban demo: the board is in {}", home.display());
    println!(
        "  try: cargo run -q -p cli -- --home {} show <id>",
        home.display()
    );
    if std::io::stdin().is_terminal() {
        println!("kanban demo: the board stays at {board_url}; press Enter to stop it");
        let _ = std::io::stdin().read_line(&mut String::new());
    }
    Ok(())
}

/// The demo's config: the fake model, three profiles whose worker completes its card,
/// the coder's verifier (its first run in a workspace fails), and the editor who reviews
/// the writer's work (asking for changes once, then approving).
fn write_config(home: &Path, kanban: &Path, base_url: &str) -> Result<(), String> {
    let kanban = kanban.display();
    let worker =
        format!("sleep 1; {kanban} complete --result \"finished by $KANBAN_PROFILE\" --summary done");
    let editor = format!(
        "if [ -f reviewed ]; then {kanban} approve --summary 'reads well now'; \
         else touch reviewed; {kanban} request-changes 'tighten the first paragraph'; fi"
    );
    let profile = |name: &str, what: &str, command: &str, extra: &str| {
        format!("  {name}:\n    description: {what}\n    command: [\"sh\", \"-c\", {command:?}]\n{extra}")
    };
    let verify = "    verify:\n      - [\"sh\", \"-c\", \"test -f suite-ran || { touch suite-ran; echo 'test suite: 1 failure'; exit 1; }\"]\n";
    let config = format!(
        "model:\n  base_url: {base_url}\n  default: demo-model\n  api_key_env: KANBAN_DEMO_NO_KEY\n\
         kanban:\n  dispatch_interval_seconds: 1\n  max_spawn: 4\n  orchestrator_profile: lead\n\
         profiles:\n{}{}{}{}",
        profile("coder", "Writes code", &worker, verify),
        profile(
            "writer",
            "Writes prose",
            &worker,
            "    review: required\n    reviewer: editor\n"
        ),
        profile("editor", "Reviews prose", &editor, ""),
        profile("lead", "Checks that the parts add up", &worker, ""),
    );
    std::fs::write(home.join("config.yaml"), config).map_err(|e| e.to_string())
}

/// Prints the board's events as they come; true when every card is done, false when
/// `LIMIT` passed first.
fn follow(cli: &dyn Fn(&[&str]) -> Result<String, String>, started: Instant) -> Result<bool, String> {
    let mut last_event = 0;
    let mut titles: BTreeMap<String, String> = BTreeMap::new();
    loop {
        // Events first, then the tasks: every event read has its task's title.
        let events: Value = serde_json::from_str(&cli(&["events", "--json"])?).map_err(|e| e.to_string())?;
        let tasks: Value =
            serde_json::from_str(&cli(&["list", "--json", "--archived"])?).map_err(|e| e.to_string())?;
        let tasks = tasks.as_array().cloned().unwrap_or_default();
        for t in &tasks {
            titles.insert(str_of(t, "id"), str_of(t, "title"));
        }
        for e in events.as_array().into_iter().flatten() {
            let id = e["id"].as_i64().unwrap_or(0);
            if id <= last_event {
                continue;
            }
            last_event = id;
            let task = str_of(e, "task_id");
            let title = titles.get(&task).cloned().unwrap_or_default();
            let seconds = started.elapsed().as_secs_f32();
            println!("{seconds:6.1}s  {task}  {:<20} {title}", str_of(e, "kind"));
        }
        let statuses: BTreeSet<String> = tasks.iter().map(|t| str_of(t, "status")).collect();
        if !tasks.is_empty() && statuses.iter().all(|s| s == "done") {
            return Ok(true);
        }
        if started.elapsed() > LIMIT {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Starts a server that prints its address on its first line of stdout; returns it
/// running (stopped when dropped) and that line.
fn start_announcing(mut command: Command, name: &str) -> Result<(Running, String), String> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    let stdout = child.stdout.take().ok_or(format!("{name} has no stdout"))?;
    let running = Running(child);
    let mut first_line = String::new();
    BufReader::new(stdout)
        .read_line(&mut first_line)
        .map_err(|e| format!("{name}: {e}"))?;
    if first_line.trim().is_empty() {
        return Err(format!("{name} stopped before it listened"));
    }
    Ok((running, first_line.trim().to_owned()))
}

fn str_of(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_owned()
}

/// The address `kanban serve` announced, with the home's token it made on start: opened
/// once, it signs the browser in (a cookie keeps the token).
fn sign_in_address(announced: &str, home: &Path) -> Result<String, String> {
    let address = announced.rsplit(' ').next().unwrap_or_default();
    let token_file = home.join("serve-token");
    let token = std::fs::read_to_string(&token_file).map_err(|e| format!("{}: {e}", token_file.display()))?;
    Ok(format!("{address}?token={}", token.trim()))
}
