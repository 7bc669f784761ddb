//! `init`, `completions` and `man`: setting up the board's home and the user's shell.

use serde_json::json;

use board_home::Home;

use crate::args::{shell, Cli};
use crate::failure::Failure;
use crate::output::{plain, print_json};
use crate::verbs::Ctx;

/// What this command created, as opposed to found.
pub struct Created {
    pub home: bool,
    pub config: bool,
}

/// The home is prepared before any verb runs; `init` reports what it found and made.
pub fn init(ctx: &Ctx, home: &Home, created: Created) -> Result<(), Failure> {
    if ctx.json {
        print_json(&json!({
            "home": home.dir().display().to_string(),
            "database": home.database().display().to_string(),
            "config": home.config().display().to_string(),
            "created_home": created.home,
            "created_config": created.config,
        }));
        return Ok(());
    }
    let verb = if created.home { "created" } else { "using" };
    println!("{verb} board home {}", home.dir().display());
    println!("  database {}", home.database().display());
    let config_note = if created.config { "written" } else { "kept" };
    println!("  config   {} ({config_note})", home.config().display());
    Ok(())
}

/// Prints the completion script for `shell_name` on stdout; needs no board.
/// `kanban man`: the manual page of `kanban` on stdout, or with `out` a page for it and
/// for every verb (`kanban-create.1`, ...) written into that directory.
pub fn man(out: Option<&std::path::Path>) -> Result<(), Failure> {
    let command = <Cli as clap::CommandFactory>::command();
    let written = match out {
        None => clap_mangen::Man::new(command).render(&mut std::io::stdout()),
        Some(dir) => std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(command, dir)),
    };
    written.map_err(|e| {
        let target = out.map_or_else(|| "stdout".to_owned(), |d| plain(&d.display().to_string(), false));
        Failure::Refused(format!("cannot write the manual page to {target}: {e}"))
    })
}

pub fn completions(shell_name: &str) -> Result<(), Failure> {
    let shell = shell(shell_name).ok_or_else(|| Failure::Usage(format!("unknown shell {shell_name:?}")))?;
    let mut command = <Cli as clap::CommandFactory>::command();
    clap_complete::generate(shell, &mut command, "kanban", &mut std::io::stdout());
    Ok(())
}
