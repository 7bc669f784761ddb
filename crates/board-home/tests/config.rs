//! `board_home::config` through its public API: every default, every override, every error
//! message (a snapshot table), unknown-key warnings, the API key's redaction and its
//! environment fallback, and the decomposer's fallbacks to `model.*`.

use std::collections::BTreeMap;
use std::time::Duration;

use board_home::config::{Config, ConfigError, Loaded, Warning};
use board_sqlite::Synchronous;

const CANARY: &str = "sk-canary-7f3a9c1e";

fn no_env(_: &str) -> Option<String> {
    None
}

fn parse(text: &str) -> Loaded {
    Config::parse(text, &no_env).unwrap_or_else(|e| panic!("{text:?} refused: {e}"))
}

fn config(text: &str) -> Config {
    let loaded = parse(text);
    assert_eq!(
        loaded.warnings,
        Vec::<Warning>::new(),
        "unexpected warnings for {text:?}"
    );
    loaded.config
}

fn error(text: &str) -> String {
    match Config::parse(text, &no_env) {
        Ok(loaded) => panic!("{text:?} was accepted: {:?}", loaded.config),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_default() {
    let c = Config::default();
    assert_eq!(c.model.provider, "custom");
    assert_eq!(c.model.base_url, "http://127.0.0.1:11434/v1");
    assert_eq!(c.model.default, "llama3.1");
    assert_eq!(c.model.api_key_env, "OPENAI_API_KEY");
    assert_eq!(c.model.api_key, None);
    assert_eq!(c.auxiliary.transient_retries, 2);
    assert_eq!(c.auxiliary.kanban_decomposer.model, "");
    assert_eq!(c.auxiliary.kanban_decomposer.base_url, "");
    assert_eq!(c.auxiliary.kanban_decomposer.timeout, 180);
    assert_eq!(c.auxiliary.kanban_decomposer.max_tokens, 4000);
    let k = &c.kanban;
    assert_eq!(k.dispatch_interval_seconds, 60.0);
    assert_eq!(k.dispatch_interval(), Duration::from_secs(60));
    assert_eq!(k.max_spawn, 4);
    assert!(k.auto_decompose);
    assert_eq!(k.auto_decompose_per_tick, 3);
    assert_eq!(k.auto_decompose_concurrency, 2);
    assert!(k.auto_promote_children);
    assert_eq!(k.decompose_max_children, 16);
    assert_eq!(k.decompose_failure_limit, 3);
    assert_eq!(k.decompose_retry_base_seconds, 30);
    assert_eq!(k.default_assignee, "default");
    assert_eq!(k.orchestrator_profile, "default");
    assert_eq!(k.failure_limit, 2);
    assert_eq!(k.claim_ttl_seconds, 900);
    assert_eq!(k.sqlite_synchronous, Synchronous::Full);
    assert_eq!(c.profiles.len(), 1);
    let default = c.profile("default").expect("the implied default profile");
    assert_eq!(default.description, "General-purpose worker");
    assert_eq!(default.command, None);
}

#[test]
fn empty_or_missing_files_are_every_default() {
    for text in [
        "",
        "\n",
        "# only a comment\n",
        "---\n",
        "~\n",
        "kanban:\n",
        "model: ~\nprofiles:\n",
    ] {
        assert_eq!(config(text), Config::default(), "{text:?}");
    }
    let home = tempfile::tempdir().expect("temp dir");
    let loaded = Config::load_with_env(home.path(), &no_env).expect("no file is every default");
    assert_eq!(loaded.config, Config::default());
    assert!(loaded.warnings.is_empty());
    std::fs::write(home.path().join("config.yaml"), "").expect("write");
    assert_eq!(
        Config::load_with_env(home.path(), &no_env)
            .expect("empty file")
            .config,
        Config::default()
    );
}

#[test]
fn the_init_template_parses_to_exactly_the_defaults() {
    let loaded = parse(&Config::template());
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.config, Config::default());
}

/// Every key the config declares, by its full path (`kanban.max_spawn`).
fn declared_keys(value: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    if let Some(map) = value.as_object() {
        for (key, value) in map {
            let path = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            out.push(path.clone());
            declared_keys(value, &path, out);
        }
    }
}

#[test]
fn the_template_names_every_declared_key() {
    let template = Config::template();
    let mut keys = Vec::new();
    declared_keys(&Config::default().effective_json(), "", &mut keys);
    assert!(keys.len() > 25, "{keys:?}");
    for key in keys {
        let name = key.rsplit('.').next().unwrap_or(&key);
        assert!(
            template.contains(&format!("{name}:")),
            "{key} missing from the template"
        );
    }
    // The secret is named but never given a value to fill in.
    assert!(!template.lines().any(|l| l.trim_start().starts_with("api_key:")));
}

#[test]
fn the_effective_values_come_from_the_same_declarations_as_the_defaults() {
    let json = Config::default().effective_json();
    assert_eq!(json["kanban"]["max_spawn"], 4);
    assert_eq!(
        json["kanban"]["decompose_failure_limit"],
        board_core::RetryPolicy::default().failure_limit
    );
    assert_eq!(
        json["kanban"]["decompose_retry_base_seconds"],
        board_core::RetryPolicy::default().base_seconds
    );
    assert_eq!(
        json["kanban"]["decompose_max_children"],
        board_core::plan::DEFAULT_MAX_CHILDREN
    );
}

#[test]
fn a_full_file_of_spec_values_is_every_default_with_the_example_profile() {
    let spec = "\
model:
  provider: custom
  base_url: http://127.0.0.1:11434/v1
  default: llama3.1
  api_key_env: OPENAI_API_KEY
auxiliary:
  transient_retries: 2
  kanban_decomposer:
    model: \"\"
    base_url: \"\"
    timeout: 180
    max_tokens: 4000
kanban:
  dispatch_interval_seconds: 60
  max_spawn: 4
  auto_decompose: true
  auto_decompose_per_tick: 3
  auto_decompose_concurrency: 2
  auto_promote_children: true
  decompose_max_children: 16
  decompose_failure_limit: 3
  decompose_retry_base_seconds: 30
  default_assignee: default
  orchestrator_profile: default
  failure_limit: 2
  claim_ttl_seconds: 900
  sqlite_synchronous: full
profiles:
  default:
    description: General-purpose worker
    command: [\"my-agent\", \"--task\", \"{task_id}\"]
";
    let c = config(spec);
    let mut expected = Config::default();
    if let Some(p) = expected.profiles.get_mut("default") {
        p.command = Some(vec!["my-agent".into(), "--task".into(), "{task_id}".into()]);
    }
    assert_eq!(c, expected);
}

#[test]
fn every_override() {
    let c = config(
        "\
model:
  provider: openai
  base_url: https://api.example.com/v1
  default: gpt-x
  api_key_env: MY_KEY
  allow_insecure_http: true
auxiliary:
  transient_retries: 0
  kanban_decomposer:
    model: small
    base_url: http://10.0.0.1:8080/v1
    timeout: 30
    max_tokens: 1000
kanban:
  dispatch_interval_seconds: 0.25
  max_spawn: 0
  auto_decompose: false
  auto_decompose_per_tick: 0
  auto_decompose_concurrency: 5
  auto_promote_children: false
  decompose_max_children: 64
  decompose_failure_limit: 7
  decompose_retry_base_seconds: 5
  decompose_probe_max_seconds: 2m
  default_assignee: coder
  orchestrator_profile: planner
  failure_limit: 9
  claim_ttl_seconds: 60
  sqlite_synchronous: normal
  max_text_bytes: 4096
profiles:
  coder:
    description: Writes code
    command: [coder, --task, \"{task_id}\", --in, \"{workspace}\"]
    user: nobody
  planner: {description: Plans}
",
    );
    assert_eq!(c.model.provider, "openai");
    assert_eq!(c.model.base_url, "https://api.example.com/v1");
    assert_eq!(c.model.default, "gpt-x");
    assert_eq!(c.model.api_key_env, "MY_KEY");
    assert!(c.model.allow_insecure_http);
    assert_eq!(c.auxiliary.transient_retries, 0);
    assert_eq!(c.auxiliary.kanban_decomposer.model, "small");
    assert_eq!(c.auxiliary.kanban_decomposer.base_url, "http://10.0.0.1:8080/v1");
    assert_eq!(c.auxiliary.kanban_decomposer.timeout, 30);
    assert_eq!(c.auxiliary.kanban_decomposer.max_tokens, 1000);
    let k = &c.kanban;
    assert_eq!(k.dispatch_interval_seconds, 0.25);
    assert_eq!(k.dispatch_interval(), Duration::from_millis(250));
    assert_eq!(k.max_spawn, 0);
    assert!(!k.auto_decompose);
    assert_eq!(k.auto_decompose_per_tick, 0);
    assert_eq!(k.auto_decompose_concurrency, 5);
    assert!(!k.auto_promote_children);
    assert_eq!(k.decompose_max_children, 64);
    assert_eq!(k.decompose_failure_limit, 7);
    assert_eq!(k.decompose_retry_base_seconds, 5);
    assert_eq!(k.decompose_probe_max_seconds, Some(120));
    assert_eq!(c.decomposer_settings().probe_max_seconds, Some(120));
    assert_eq!(k.default_assignee, "coder");
    assert_eq!(k.orchestrator_profile, "planner");
    assert_eq!(k.failure_limit, 9);
    assert_eq!(k.claim_ttl_seconds, 60);
    assert_eq!(k.sqlite_synchronous, Synchronous::Normal);
    assert_eq!(k.max_text_bytes, 4096);
    let names: Vec<&str> = c.profiles.keys().map(String::as_str).collect();
    assert_eq!(names, ["coder", "default", "planner"], "default stays implied");
    let coder = c.profile("coder").expect("coder");
    assert_eq!(coder.description, "Writes code");
    assert_eq!(
        coder.command.as_deref(),
        Some(&["coder", "--task", "{task_id}", "--in", "{workspace}"].map(String::from)[..])
    );
    assert_eq!(coder.user.as_deref(), Some("nobody"));
    let planner = c.profile("planner").expect("planner");
    assert_eq!(
        (planner.description.as_str(), planner.command.as_ref()),
        ("Plans", None)
    );
}

#[test]
fn a_defined_default_profile_replaces_the_implied_one() {
    let c = config("profiles:\n  default:\n    command: [agent]\n");
    let default = c.profile("default").expect("default");
    assert_eq!(default.description, "General-purpose worker");
    assert_eq!(default.command, Some(vec!["agent".to_owned()]));
    let c = config("profiles:\n  default: {description: Mine}\n");
    assert_eq!(c.profile("default").map(|p| p.description.as_str()), Some("Mine"));
    // A profile other than default gets no made-up description.
    let c = config("profiles:\n  writer: ~\n");
    assert_eq!(c.profile("writer").map(|p| p.description.as_str()), Some(""));
}

#[test]
fn whole_second_and_case_variants() {
    assert_eq!(
        config("kanban: {dispatch_interval_seconds: 2}")
            .kanban
            .dispatch_interval_seconds,
        2.0
    );
    assert_eq!(
        config("kanban: {sqlite_synchronous: NORMAL}")
            .kanban
            .sqlite_synchronous,
        Synchronous::Normal
    );
    assert_eq!(
        config("kanban: {max_spawn: ~}").kanban.max_spawn,
        4,
        "null is the default"
    );
}

#[test]
fn unknown_keys_are_warnings_naming_their_path() {
    let loaded = parse(
        "\
modle: {}
model: {temperature: 0.2, api_key_env: ~}
~: 1
auxiliary: {kanban_decomposer: {modle: x}, other: 1}
kanban:
  max_spwn: 8
  max_spawn: 2
  spare: ~
  3: three
profiles:
  coder: {command: [c], env: {A: b}}
",
    );
    let shown: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "config.yaml: unknown key modle (ignored)",
            "config.yaml: unknown key model.temperature (ignored)",
            "config.yaml: unknown key null (ignored)",
            "config.yaml: unknown key auxiliary.kanban_decomposer.modle (ignored)",
            "config.yaml: unknown key auxiliary.other (ignored)",
            "config.yaml: unknown key kanban.max_spwn (ignored)",
            "config.yaml: unknown key kanban.spare (ignored)",
            "config.yaml: unknown key kanban.3 (ignored)",
            "config.yaml: unknown key profiles.coder.env (ignored)",
        ]
    );
    assert_eq!(
        loaded.warnings[5],
        Warning::UnknownKey("kanban.max_spwn".to_owned())
    );
    // The known keys beside them still apply.
    assert_eq!(loaded.config.kanban.max_spawn, 2);
}

/// Every bad config, and the one line it is refused with.
#[test]
fn error_messages() {
    let cases: &[&str] = &[
        // YAML itself
        "kanban:\n  max_spawn: [1, 2\n",
        "kanban: {max_spawn: 1\n",
        "kanban:\n  max_spawn: 1\n max_spawn: 2\n",
        "kanban:\n  max_spawn: 1\n  max_spawn: 2\n",
        "\"unterminated\n",
        "a: b: c\n",
        "kanban: {}\n---\nkanban: {}\n",
        "- model\n- kanban\n",
        "just words\n",
        // sections
        "kanban: 3\n",
        "model: [a, b]\n",
        "auxiliary: {kanban_decomposer: fast}\n",
        "profiles: [coder]\n",
        "profiles: {coder: run-it}\n",
        "profiles: {\"\": {command: [x]}}\n",
        "profiles: {7: {command: [x]}}\n",
        // integers
        "kanban: {max_spawn: four}\n",
        "kanban: {max_spawn: -1}\n",
        "kanban: {max_spawn: 2.5}\n",
        "kanban: {max_spawn: 99999999999999999999}\n",
        "kanban: {max_spawn: 5000}\n",
        "kanban: {decompose_max_children: 500}\n",
        "kanban: {decompose_max_children: 0}\n",
        "kanban: {claim_ttl_seconds: 0}\n",
        "kanban: {claim_ttl_seconds: \"900\"}\n",
        "kanban: {failure_limit: true}\n",
        "kanban: {auto_decompose_concurrency: 0}\n",
        "kanban: {decompose_retry_base_seconds: -5}\n",
        "kanban: {decompose_probe_max_seconds: 0}\n",
        "kanban: {decompose_probe_max_seconds: soon}\n",
        "auxiliary: {transient_retries: 11}\n",
        "auxiliary: {kanban_decomposer: {timeout: 0}}\n",
        "auxiliary: {kanban_decomposer: {max_tokens: many}}\n",
        // fractions
        "kanban: {dispatch_interval_seconds: 0}\n",
        "kanban: {dispatch_interval_seconds: -0.5}\n",
        "kanban: {dispatch_interval_seconds: soon}\n",
        "kanban: {dispatch_interval_seconds: .inf}\n",
        "kanban: {dispatch_interval_seconds: .nan}\n",
        "kanban: {dispatch_interval_seconds: 100000}\n",
        // booleans, strings, choices
        "kanban: {auto_decompose: yes}\n",
        "kanban: {auto_promote_children: 1}\n",
        "kanban: {sqlite_synchronous: fast}\n",
        "kanban: {sqlite_synchronous: 1}\n",
        "kanban: {orchestrator_profile: [a]}\n",
        "model: {default: 3}\n",
        "model: {base_url: localhost:11434}\n",
        "model: {base_url: \"http://\"}\n",
        "model: {provider: [a]}\n",
        "auxiliary: {kanban_decomposer: {api_key: [a]}}\n",
        "auxiliary: {kanban_decomposer: {base_url: ftp://x}}\n",
        "model: {base_url: \"http://api.example.com/v1\"}\n",
        "auxiliary: {kanban_decomposer: {base_url: \"http://10.0.0.1/v1\"}}\n",
        "model: {base_url: \"ftp://user:s3cret-pass@x/v1?api_key=sk-in-url\"}\n",
        "model: {allow_insecure_http: yes}\n",
        "kanban: {max_text_bytes: 0}\n",
        "gateway: {metrics_bind: localhost}\n",
        "gateway: {metrics_bind: 9464}\n",
        // profiles
        "profiles: {coder: {command: my-agent --task}}\n",
        "profiles: {coder: {command: []}}\n",
        "profiles: {coder: {command: [agent, 3]}}\n",
        "profiles: {coder: {command: [agent, [nested]]}}\n",
        "profiles: {coder: {command: [\"\", x]}}\n",
        "profiles: {coder: {description: [a]}}\n",
        "profiles: {coder: {command: [x], user: no-such-user-kanban}}\n",
        "profiles: {coder: {command: [x], user: \"\"}}\n",
        "profiles: {coder: {command: [x], user: 0}}\n",
    ];
    let table: String = cases
        .iter()
        .map(|text| format!("{}\n  => {}\n", text.trim_end().replace('\n', "⏎"), error(text)))
        .collect();
    insta::assert_snapshot!(table);
}

#[test]
fn syntax_errors_carry_line_and_column() {
    let text = "kanban:\n  max_spawn: 1\n  failure_limit: a: b\n";
    match Config::parse(text, &no_env) {
        Err(ConfigError::Syntax { line, column, .. }) => assert_eq!((line, column), (3, 19)),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn invalid_errors_expose_the_key_path() {
    match Config::parse("profiles: {coder: {command: []}}", &no_env) {
        Err(ConfigError::Invalid { key, problem }) => {
            assert_eq!(key, "profiles.coder.command");
            assert_eq!(problem, "must not be empty");
        }
        other => panic!("expected an invalid value, got {other:?}"),
    }
}

#[test]
fn file_errors() {
    let home = tempfile::tempdir().expect("temp dir");
    let path = home.path().join("config.yaml");

    std::fs::write(&path, b"kanban:\n  default_assignee: caf\xe9\n").expect("write");
    let e = Config::load_with_env(home.path(), &no_env).expect_err("latin-1");
    assert_eq!(e.to_string(), "config.yaml: not valid UTF-8 (line 2)");

    std::fs::remove_file(&path).expect("remove");
    std::fs::create_dir(&path).expect("mkdir");
    let e = Config::load_with_env(home.path(), &no_env).expect_err("a directory");
    assert_eq!(
        e.to_string(),
        format!("{}: the config is a directory, not a file", path.display())
    );
    std::fs::remove_dir(&path).expect("rmdir");

    std::fs::write(&path, "x".repeat(1024 * 1024 + 1)).expect("write");
    let e = Config::load_with_env(home.path(), &no_env).expect_err("too big");
    assert_eq!(
        e.to_string(),
        "config.yaml: 1048577 bytes is too big for a config (at most 1048576)"
    );

    // A byte-order mark is not an error.
    std::fs::write(&path, "\u{feff}kanban: {max_spawn: 1}\n").expect("write");
    let loaded = Config::load_with_env(home.path(), &no_env).expect("BOM");
    assert_eq!(loaded.config.kanban.max_spawn, 1);
}

#[test]
fn aliases_are_capped() {
    let ok =
        "x: &cmd [agent, --task, \"{task_id}\"]\nprofiles:\n  a: {command: *cmd}\n  b: {command: *cmd}\n";
    let loaded = parse(ok);
    assert_eq!(
        loaded
            .config
            .profile("b")
            .and_then(|p| p.command.clone())
            .map(|c| c.len()),
        Some(3)
    );
    let mut laughs = String::from("a0: &a0 [lol, lol, lol, lol]\n");
    for i in 1..10 {
        let prev = i - 1;
        laughs.push_str(&format!("a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"));
    }
    assert_eq!(
        error(&laughs),
        "config.yaml: more than 16 YAML aliases; a config needs few"
    );
}

#[test]
fn the_api_key_comes_from_the_file_first_then_the_named_variable() {
    let env = |name: &str| match name {
        "OPENAI_API_KEY" => Some("from-default-var".to_owned()),
        "MY_KEY" => Some("from-my-var".to_owned()),
        "EMPTY" => Some(String::new()),
        _ => None,
    };
    let key = |text: &str| {
        Config::parse(text, &env)
            .expect("valid")
            .config
            .model
            .api_key
            .map(|k| k.expose().to_owned())
    };
    assert_eq!(key(""), Some("from-default-var".to_owned()));
    assert_eq!(
        key("model: {api_key_env: MY_KEY}"),
        Some("from-my-var".to_owned())
    );
    assert_eq!(key("model: {api_key_env: UNSET}"), None);
    assert_eq!(key("model: {api_key_env: EMPTY}"), None);
    assert_eq!(
        key("model: {api_key_env: \"\"}"),
        None,
        "an empty name reads nothing"
    );
    assert_eq!(
        key("model: {api_key: in-file, api_key_env: MY_KEY}"),
        Some("in-file".to_owned())
    );
    assert_eq!(key("model: {api_key: \"\"}"), Some("from-default-var".to_owned()));
}

#[test]
fn the_api_key_is_never_printed() {
    let text = format!("model: {{api_key: {CANARY}}}\n");
    let config = parse(&text).config;
    let key = config.model.api_key.clone().expect("a key");
    assert_eq!(key.expose(), CANARY);
    assert_eq!(format!("{key}"), "[redacted]");
    assert_eq!(format!("{key:?}"), "[redacted]");
    for shown in [
        format!("{config:?}"),
        format!("{config:#?}"),
        config.effective_yaml(),
        config.effective_json().to_string(),
    ] {
        assert!(!shown.contains(CANARY), "the key leaked: {shown}");
        assert!(shown.contains("[redacted]"), "no placeholder: {shown}");
    }
    // From the environment, the same.
    let from_env = |name: &str| (name == "OPENAI_API_KEY").then(|| CANARY.to_owned());
    let config = Config::parse("", &from_env).expect("valid").config;
    assert!(!format!("{config:?}{}", config.effective_yaml()).contains(CANARY));
    // A key of the wrong type is refused without being quoted.
    let e = error(&format!("model: {{api_key: [{CANARY}]}}"));
    assert_eq!(e, "config.yaml: model.api_key: expected a string");
}

#[test]
fn the_database_password_is_never_printed() {
    const PASSWORD: &str = "pg-canary-5d1e0c";
    let url = format!("postgres://kanban:{PASSWORD}@db.internal:5432/boards");
    let from_file = parse(&format!("database_url: {url}\n")).config;
    let from_env = |name: &str| (name == board_home::DATABASE_URL_VARIABLE).then(|| url.clone());
    let from_variable = Config::parse("", &from_env).expect("valid").config;
    for config in [from_file, from_variable] {
        assert_eq!(
            config.database_url.as_ref().map(|u| u.expose()),
            Some(url.as_str())
        );
        for shown in [
            format!("{config:?}"),
            format!("{config:#?}"),
            config.effective_yaml(),
            config.effective_json().to_string(),
        ] {
            assert!(!shown.contains(PASSWORD), "the password leaked: {shown}");
            assert!(
                shown.contains("postgres://kanban:***@db.internal:5432/boards"),
                "{shown}"
            );
        }
    }
    // A bad URL is refused without being quoted.
    let e = error(&format!("database_url: mysql://kanban:{PASSWORD}@db/boards"));
    assert!(!e.contains(PASSWORD), "{e}");
    assert!(
        e.starts_with("config.yaml: database_url: expected a postgres://"),
        "{e}"
    );
    let bad = |name: &str| (name == board_home::DATABASE_URL_VARIABLE).then(|| format!("{PASSWORD}@db"));
    let e = Config::parse("", &bad).expect_err("refused").to_string();
    assert!(!e.contains(PASSWORD), "{e}");
    assert!(e.starts_with("config.yaml: KANBAN_DATABASE_URL: expected"), "{e}");
}

#[test]
fn effective_values_without_a_key() {
    let config = Config::default();
    insta::assert_snapshot!("effective_yaml_defaults", config.effective_yaml());
    let json = config.effective_json();
    assert_eq!(json["model"]["api_key"], serde_json::Value::Null);
    assert_eq!(json["kanban"]["dispatch_interval_seconds"], 60);
    assert_eq!(json["kanban"]["sqlite_synchronous"], "full");
    assert_eq!(json["profiles"]["default"]["command"], serde_json::Value::Null);
    let fractional = config_json("kanban: {dispatch_interval_seconds: 1.5}");
    assert_eq!(fractional["kanban"]["dispatch_interval_seconds"], 1.5);
}

fn config_json(text: &str) -> serde_json::Value {
    config(text).effective_json()
}

#[test]
fn the_effective_yaml_parses_back_to_the_same_config() {
    let text = "\
model: {api_key_env: MY_KEY}
kanban: {dispatch_interval_seconds: 0.5, sqlite_synchronous: normal, max_spawn: 0}
profiles:
  coder: {description: \"Writes: code\", command: [coder, \"{task_id}\", \"--flag=yes\", \"- x\"]}
";
    let original = config(text);
    assert_eq!(config(&original.effective_yaml()), original);
    assert_eq!(config(&Config::default().effective_yaml()), Config::default());
}

#[test]
fn decomposer_settings_fall_back_to_the_model() {
    let c = Config::default();
    assert_eq!(c.decomposer_model(), "llama3.1");
    assert_eq!(c.decomposer_base_url(), "http://127.0.0.1:11434/v1");
    assert_eq!(c.decomposer_timeout(), Duration::from_secs(180));
    assert_eq!(c.decomposer_max_tokens(), 4000);

    let c = config(
        "model: {default: big, base_url: \"https://a/v1\"}\nauxiliary: {kanban_decomposer: {model: small}}",
    );
    assert_eq!(
        (c.decomposer_model(), c.decomposer_base_url()),
        ("small", "https://a/v1")
    );

    let c = config(
        "model: {default: big}\nauxiliary: {kanban_decomposer: {base_url: \"https://b/v1\", timeout: 5, max_tokens: 99}}",
    );
    assert_eq!(
        (c.decomposer_model(), c.decomposer_base_url()),
        ("big", "https://b/v1")
    );
    assert_eq!(c.decomposer_timeout(), Duration::from_secs(5));
    assert_eq!(c.decomposer_max_tokens(), 99);

    let c = config("auxiliary: {kanban_decomposer: {model: \"\", base_url: \"\"}}");
    assert_eq!(c.decomposer_model(), "llama3.1");
    assert_eq!(c.decomposer_base_url(), "http://127.0.0.1:11434/v1");
}

#[test]
fn profiles_are_sorted_by_name() {
    let c = config("profiles: {zed: ~, alpha: ~}");
    let names: Vec<&String> = c.profiles.keys().collect();
    assert_eq!(names, ["alpha", "default", "zed"]);
    let _: &BTreeMap<String, _> = &c.profiles;
}

#[test]
fn a_hand_built_interval_never_gives_a_zero_or_panicking_duration() {
    let mut c = Config::default();
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        c.kanban.dispatch_interval_seconds = bad;
        assert!(c.kanban.dispatch_interval() > Duration::ZERO, "{bad}");
    }
}

/// The virtualenv's interpreter (`cargo xtask venv` makes it, with hermes-agent in it).
fn venv_python() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join("target/venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `cargo xtask venv`",
        python.display()
    );
    python
}

/// The config hermes-agent writes, every one of its defaults spelled out, is read: each
/// key is honoured or named once in the one warning about Hermes settings.
#[test]
fn the_config_hermes_agent_writes_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hermes/write_config.py");
    let out = std::process::Command::new(venv_python())
        .arg(&script)
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(dir.path().join("config.yaml")).unwrap();
    assert!(text.starts_with("model: ''\n"), "{}", &text[..80]);
    let loaded = Config::parse(&text, &no_env).unwrap_or_else(|e| panic!("refused: {e}"));
    let [Warning::HermesKeys(keys)] = loaded.warnings.as_slice() else {
        panic!("expected one warning, got {:?}", loaded.warnings);
    };
    let mut unique = keys.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), keys.len(), "a key named twice: {keys:?}");
    for named in [
        "agent",
        "gateway.api_server",
        "auxiliary.vision",
        "kanban.dispatch_in_gateway",
        "_config_version",
    ] {
        assert!(keys.iter().any(|k| k == named), "{named} not named: {keys:?}");
    }
    // What Hermes sets that the board shares is honoured; its blanks are the defaults.
    let c = loaded.config;
    let defaults = Config::default();
    assert_eq!(c.model, defaults.model);
    assert_eq!(c.kanban.default_assignee, "default");
    assert_eq!(c.kanban.orchestrator_profile, "default");
    assert_eq!(c.kanban.dispatch_interval_seconds, 60.0);
    assert_eq!(c.auxiliary.kanban_decomposer.provider, "auto");
    assert_eq!(c.decomposer_timeout(), Duration::from_secs(180));
    // Hermes' worker log, per-profile cap and request keys are the board's now.
    for honoured in [
        "kanban.worker_log_rotate_bytes",
        "kanban.worker_log_backup_count",
        "kanban.max_in_progress_per_profile",
        "auxiliary.kanban_decomposer.extra_body",
        "auxiliary.kanban_decomposer.reasoning_effort",
        "auxiliary.triage_specifier",
        "kanban.dispatch_stale_timeout_seconds",
    ] {
        assert!(
            !keys.iter().any(|k| k == honoured),
            "{honoured} named as ignored: {keys:?}"
        );
    }
    assert_eq!(c.specifier_settings().timeout, Duration::from_secs(120));
    assert_eq!(c.specifier_settings().model, c.decomposer_settings().model);
    assert_eq!(c.kanban.worker_log_rotate_bytes, 2 * 1024 * 1024);
    assert_eq!(c.kanban.worker_log_backup_count, 1);
    assert_eq!(
        c.kanban.dispatch_stale_timeout_seconds, 14400,
        "Hermes writes four hours"
    );
    assert_eq!(c.kanban.max_in_progress_per_profile, None);
    assert!(c.auxiliary.kanban_decomposer.extra_body.is_empty());
}

/// Hermes' keys for the workers' logs, the per-profile cap and the model request are
/// read and reach what uses them; a field the decomposer owns, or a reasoning effort
/// Hermes does not know, is refused naming the key.
#[test]
fn hermes_worker_and_request_keys_are_honoured() {
    let c = config(
        "kanban:\n  max_in_progress_per_profile: 2\n  worker_log_rotate_bytes: 4096\n  worker_log_backup_count: 3\n\
         auxiliary:\n  kanban_decomposer:\n    extra_body: {provider: {order: [groq]}, top_p: 0.9}\n    reasoning_effort: high\n\
         profiles:\n  coder: {command: [coder]}\n  solo: {command: [solo], max_concurrent: 1}\n",
    );
    assert_eq!(c.kanban.max_in_progress_per_profile, Some(2));
    assert_eq!(
        (c.kanban.worker_log_rotate_bytes, c.kanban.worker_log_backup_count),
        (4096, 3)
    );
    let settings = c.decomposer_settings();
    assert_eq!(settings.extra_body["provider"]["order"][0], "groq");
    assert_eq!(settings.reasoning_effort.as_deref(), Some("high"));
    assert_eq!(
        config("auxiliary: {kanban_decomposer: {reasoning_effort: ''}}")
            .decomposer_settings()
            .reasoning_effort,
        None
    );
    let side = config(
        "auxiliary:\n  triage_specifier: {provider: openrouter, model: spec, timeout: 30}\n  kanban_decomposer: {model: dec}\n",
    );
    let (spec, dec) = (side.specifier_settings(), side.decomposer_settings());
    assert_eq!((spec.model.as_str(), dec.model.as_str()), ("spec", "dec"));
    assert_eq!(spec.base_url, "https://openrouter.ai/api/v1");
    assert_eq!(spec.api_key_env.as_deref(), Some("OPENROUTER_API_KEY"));
    assert_eq!(spec.timeout, Duration::from_secs(30));
    assert_eq!(dec.base_url, Config::default().model.base_url);
    for (bad, key) in [
        (
            "auxiliary: {triage_specifier: {provider: bedrock}}",
            "auxiliary.triage_specifier.provider",
        ),
        (
            "auxiliary: {kanban_decomposer: {extra_body: {messages: []}}}",
            "auxiliary.kanban_decomposer.extra_body",
        ),
        (
            "auxiliary: {kanban_decomposer: {reasoning_effort: lots}}",
            "auxiliary.kanban_decomposer.reasoning_effort",
        ),
        (
            "kanban: {max_in_progress_per_profile: 0}",
            "kanban.max_in_progress_per_profile",
        ),
        (
            "kanban: {worker_log_rotate_bytes: 0}",
            "kanban.worker_log_rotate_bytes",
        ),
    ] {
        let refused = Config::parse(bad, &no_env).expect_err(bad).to_string();
        assert!(refused.contains(key), "{bad}: {refused}");
    }
}

#[test]
fn hermes_forms_of_the_default() {
    let c = config("model: \"\"\nkanban: {orchestrator_profile: \"\", default_assignee: \" \"}");
    assert_eq!(c, Config::default());
    let c = config("model: qwen2.5\n");
    assert_eq!(c.model.default, "qwen2.5");
    assert_eq!(c.model.base_url, Config::default().model.base_url);
    let c = config("model: {default: \"\", provider: \"\", base_url: \"\"}\n");
    assert_eq!(c.model, Config::default().model);
}

#[test]
fn the_decomposers_own_endpoint_key_and_provider() {
    let env = |name: &str| (name == "OPENROUTER_API_KEY").then(|| CANARY.to_owned());
    let text = "auxiliary: {kanban_decomposer: {provider: openrouter, model: m, timeout: 7}}";
    let c = Config::parse(text, &env).unwrap().config;
    assert_eq!(c.decomposer_base_url(), "https://openrouter.ai/api/v1");
    assert_eq!(c.decomposer_api_key().map(|k| k.expose()), Some(CANARY));
    let settings = c.decomposer_settings();
    assert_eq!(settings.model, "m");
    assert_eq!(settings.timeout, Duration::from_secs(7));
    assert_eq!(settings.api_key_env.as_deref(), Some("OPENROUTER_API_KEY"));

    // A key in the file wins, and is never shown.
    let text = format!("auxiliary: {{kanban_decomposer: {{api_key: {CANARY}, base_url: \"https://d/v1\"}}}}");
    let c = config(&text);
    assert_eq!(c.decomposer_api_key().map(|k| k.expose()), Some(CANARY));
    assert_eq!(c.decomposer_base_url(), "https://d/v1");
    assert!(!c.effective_yaml().contains(CANARY));
    assert_eq!(c.model.api_key, None);

    // Hermes' aliases name the same provider; `main` is the model's.
    let c = config("auxiliary: {kanban_decomposer: {provider: or}}");
    assert_eq!(c.decomposer_base_url(), "https://openrouter.ai/api/v1");
    let c = config("model: {provider: openai}\nauxiliary: {kanban_decomposer: {provider: main}}");
    assert_eq!(c.decomposer_base_url(), "https://api.openai.com/v1");
}

#[test]
fn a_named_model_provider_is_its_endpoint_and_key_never_a_local_server() {
    let env = |name: &str| (name == "OPENROUTER_API_KEY").then(|| CANARY.to_owned());
    let c = Config::parse("model: {provider: openrouter, default: m}", &env)
        .unwrap()
        .config;
    assert_eq!(c.model.base_url, "https://openrouter.ai/api/v1");
    assert_eq!(c.model.api_key_env, "OPENROUTER_API_KEY");
    assert_eq!(c.model.api_key.as_ref().map(|k| k.expose()), Some(CANARY));
    assert_eq!(
        c.decomposer_base_url(),
        "https://openrouter.ai/api/v1",
        "auto is the model's"
    );
    for (name, url, var) in [
        ("openai", "https://api.openai.com/v1", "OPENAI_API_KEY"),
        ("Anthropic", "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY"),
        ("glm", "https://api.z.ai/api/paas/v4", "GLM_API_KEY"),
    ] {
        let c = config(&format!("model: {{provider: {name}}}"));
        assert_eq!(
            (c.model.base_url.as_str(), c.model.api_key_env.as_str()),
            (url, var),
            "{name}"
        );
    }
    // What the file sets beside the provider wins.
    let c =
        config("model: {provider: openrouter, base_url: \"https://proxy.example/v1\", api_key_env: MINE}");
    assert_eq!(c.model.base_url, "https://proxy.example/v1");
    assert_eq!(c.model.api_key_env, "MINE");
    // A local server stays the default endpoint.
    for name in ["custom", "ollama", "vllm", "auto"] {
        let c = config(&format!("model: {{provider: {name}}}"));
        assert_eq!(c.model.base_url, Config::default().model.base_url, "{name}");
    }
    // A name kanban cannot call without an endpoint is an error naming the key.
    let refused = |text: &str| Config::parse(text, &|_| None).unwrap_err().to_string();
    let unknown = refused("model: {provider: acme}");
    assert!(
        unknown.contains("model.provider: \"acme\" is not a provider kanban knows")
            && unknown.contains("set base_url"),
        "{unknown}"
    );
    let bedrock = refused("model: {provider: bedrock}");
    assert!(
        bedrock.contains("model.provider: \"bedrock\" does not speak the OpenAI chat-completions API"),
        "{bedrock}"
    );
    let decomposer = refused("auxiliary: {kanban_decomposer: {provider: vertex}}");
    assert!(
        decomposer.contains("auxiliary.kanban_decomposer.provider: \"vertex\""),
        "{decomposer}"
    );
    // With an endpoint, any name is only a label.
    let c = config("model: {provider: bedrock, base_url: \"https://litellm.example/v1\"}");
    assert_eq!(c.model.base_url, "https://litellm.example/v1");
}

/// Each `path: value` of a YAML text, the path by indentation (two spaces a level), with
/// comments and blank lines left out.
fn keys_of(yaml: &str) -> Vec<(String, String)> {
    let mut path: Vec<String> = Vec::new();
    let mut keys = Vec::new();
    for line in yaml.lines() {
        let code = line.split(" #").next().unwrap_or_default().trim_end();
        if code.trim().is_empty() || code.trim_start().starts_with('#') {
            continue;
        }
        let depth = (code.len() - code.trim_start().len()) / 2;
        let Some((key, value)) = code.trim().split_once(':') else {
            continue;
        };
        path.truncate(depth);
        path.push(key.to_owned());
        let value = value.trim();
        let unquoted = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        keys.push((path.join("."), unquoted.to_owned()));
    }
    keys
}

/// docs/config.md shows the template `kanban init` writes, with longer notes: every key
/// of the template with its default, each once, and besides them only the keys the docs
/// show as examples.
#[test]
fn the_config_docs_show_every_default_of_the_template_once() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/config.md")).unwrap();
    let block = docs
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("docs/config.md has a yaml block");
    let shown = keys_of(block);
    let mut seen = std::collections::BTreeSet::new();
    for (path, _) in &shown {
        assert!(seen.insert(path.clone()), "docs/config.md lists {path} twice");
    }
    // Shown in the docs, not in the template: keys unset or empty by default, and an
    // example command for the default profile. Every key shown is one the config reads.
    let examples = [
        "database_url",
        "auxiliary.kanban_decomposer.api_key",
        "auxiliary.triage_specifier.api_key",
        "gateway.host_id",
        "profiles.default.command",
        "profiles.default.env_allow",
        "profiles.default.allow_dash_arguments",
    ];
    let read = Config::parse(block, &no_env).unwrap_or_else(|e| panic!("docs/config.md: {e}"));
    assert!(read.warnings.is_empty(), "docs/config.md: {:?}", read.warnings);
    let template: BTreeMap<String, String> = keys_of(&Config::template()).into_iter().collect();
    for (path, value) in &template {
        let documented = shown.iter().find(|(p, _)| p == path).map(|(_, v)| v);
        if examples.contains(&path.as_str()) {
            continue;
        }
        assert_eq!(documented, Some(value), "docs/config.md on {path}");
    }
    for (path, _) in &shown {
        assert!(
            template.contains_key(path) || examples.contains(&path.as_str()),
            "docs/config.md shows {path}, which the template does not have"
        );
    }
}
