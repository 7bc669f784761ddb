//! `config check`: validate the home's `config.yaml` and print its effective values.
//!
//! It opens no board and creates nothing, so it works on a home whose config would stop
//! every other verb, and on a home that does not exist yet (every default).

use board_home::Home;

use crate::args::ConfigCommand;
use crate::failure::Failure;
use crate::output::print_json;

pub fn run(home: &Home, json: bool, command: ConfigCommand) -> Result<(), Failure> {
    match command {
        ConfigCommand::Check => check(home, json),
    }
}

/// Warnings on stderr, one line each; the effective values on stdout (the key redacted).
fn check(home: &Home, json: bool) -> Result<(), Failure> {
    let loaded = home.load_config()?;
    for warning in &loaded.warnings {
        eprintln!("kanban: warning: {warning}");
    }
    if json {
        print_json(&loaded.config.effective_json());
        return Ok(());
    }
    let path = home.config();
    let note = if path.exists() {
        ""
    } else {
        " (no file: every default)"
    };
    println!("# effective configuration of {}{note}", path.display());
    print!("{}", loaded.config.effective_yaml());
    Ok(())
}
