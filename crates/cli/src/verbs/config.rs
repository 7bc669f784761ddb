//! `config check`, `get`, `set` and `path`: the home's `config.yaml`.
//!
//! None opens a board, so they work on a home whose config would stop every other verb,
//! and `check`, `get` and `path` on a home that does not exist yet (every default).

use board_home::config::{as_yaml, ConfigError};
use board_home::{Home, HomeError};
use serde_json::{json, Value};

use crate::args::ConfigCommand;
use crate::failure::Failure;
use crate::output::print_json;

pub fn run(home: &Home, json: bool, command: ConfigCommand) -> Result<(), Failure> {
    match command {
        ConfigCommand::Check => check(home, json),
        ConfigCommand::Get { key } => get(home, json, &key),
        ConfigCommand::Set { key, value } => set(home, json, &key, &value),
        ConfigCommand::Path => {
            let path = home.config();
            match json {
                true => print_json(&json!({ "path": path, "exists": path.exists() })),
                false => println!("{}", path.display()),
            }
            Ok(())
        }
    }
}

/// Warnings on stderr, one line each; the effective values on stdout (the key redacted).
fn check(home: &Home, json: bool) -> Result<(), Failure> {
    let loaded = home.load_config()?;
    for warning in &loaded.warnings {
        eprintln!("kanban: warning: {warning}");
    }
    for line in unrunnable_on_board(home, &loaded.config) {
        eprintln!("kanban: warning: {line}");
    }
    let templates = board_home::config::templates(home);
    let mut bad = false;
    for (_, read) in &templates {
        if let Err(why) = read {
            bad = true;
            eprintln!("kanban: {}", crate::output::plain(why, false));
        }
    }
    let done = |bad| match bad {
        true => Err(Failure::Reported),
        false => Ok(()),
    };
    if json {
        print_json(&loaded.config.effective_json());
        return done(bad);
    }
    let path = home.config();
    let note = if path.exists() {
        ""
    } else {
        " (no file: every default)"
    };
    println!("# effective configuration of {}{note}", path.display());
    print!("{}", loaded.config.effective_yaml());
    let good: Vec<&str> = templates
        .iter()
        .filter(|(_, read)| read.is_ok())
        .map(|(name, _)| name.as_str())
        .collect();
    if !good.is_empty() {
        println!("# templates (checked): {}", good.join(", "));
    }
    done(bad)
}

/// The profiles whose tasks the home's own SQLite board holds and this config cannot run,
/// one line each; nothing when the home holds no such board or it cannot be read (the
/// check is of the config: a shared PostgreSQL board is not reached for it).
fn unrunnable_on_board(home: &Home, config: &board_home::Config) -> Vec<String> {
    if config.database_url.is_some() || !home.database().exists() {
        return Vec::new();
    }
    let Ok((store, _)) = home.read_only_board() else {
        return Vec::new();
    };
    super::profiles::unrunnable(&store, config)
        .map(|found| super::profiles::lines(&found))
        .unwrap_or_default()
}

fn get(home: &Home, json: bool, key: &str) -> Result<(), Failure> {
    let loaded = home.load_config()?;
    let value = loaded
        .config
        .effective_value(key)
        .ok_or_else(|| Failure::from(HomeError::from(ConfigError::UnknownKey(key.to_owned()))))?;
    print_value(json, &value);
    Ok(())
}

fn set(home: &Home, json: bool, key: &str, value: &str) -> Result<(), Failure> {
    let value = home.set_config(key, value)?;
    if json {
        print_json(&json!({ "key": key, "value": value }));
    } else {
        println!("set {key} in {}", home.config().display());
        print_value(false, &value);
    }
    Ok(())
}

/// A scalar as itself (text unquoted); a section or a list as block YAML.
fn print_value(json: bool, value: &Value) {
    match value {
        _ if json => print_json(value),
        Value::String(text) => println!("{text}"),
        Value::Object(_) | Value::Array(_) => print!("{}", as_yaml(value)),
        other => println!("{other}"),
    }
}
