//! `kanban`: the board's command line. Parses the arguments, runs one verb against the
//! board's `Store`, prints the result, and maps every failure to one line on stderr and
//! an exit code (0 success, 1 refused, 2 usage error).

mod args;
mod failure;
mod output;
mod stop;
mod verbs;

use std::process::ExitCode;

use args::Verb;
use board_home::Home;
use failure::{one_line, Failure};

fn main() -> ExitCode {
    let cli = match args::parse(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    if !matches!(cli.verb, Verb::Gateway(_) | Verb::Serve { .. } | Verb::Mcp) {
        // A reader that stops early (`kanban ls | head`) ends a command quietly, as it
        // does any Unix tool, instead of failing a write. A verb that serves keeps
        // ignoring SIGPIPE: a client that hangs up, or a closed log pipe, must not stop
        // it; the write fails and only that exchange ends.
        // SAFETY: restoring the default disposition of one signal before any thread starts.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    if let Err(e) = start_log(&cli) {
        eprintln!("kanban: {}", one_line(&e.to_string()));
        return ExitCode::from(2);
    }
    let outcome = match cli.verb {
        // A completion script and the manual need no board, so they create no home.
        Verb::Completions { shell } => verbs::completions(&shell),
        Verb::Man { out } => verbs::man(out.as_deref()),
        // The boards' verbs name their boards themselves.
        Verb::Boards(command) => Home::resolve(cli.home)
            .map_err(Failure::from)
            .and_then(|home| verbs::boards::run(&home, cli.json, cli.board.as_deref(), command)),
        verb => Home::resolve(cli.home)
            .and_then(|home| home.choose_board(cli.board.as_deref()))
            .map_err(Failure::from)
            .and_then(|home| verbs::run(home, cli.json, verb)),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if let Some(message) = failure.message() {
                eprintln!("kanban: {}", one_line(message));
            }
            ExitCode::from(failure.exit_code())
        }
    }
}

/// The gateway always logs; any other verb logs as it does when `-v`, `-q` or `RUST_LOG`
/// asks, and otherwise prints only the libraries' warnings, one line each.
fn start_log(cli: &args::Cli) -> Result<(), gateway::logging::LogError> {
    use gateway::logging::{init, LogArgs, LogOptions};
    match &cli.verb {
        Verb::Gateway(args::GatewayCommand::Run { log, .. }) => init(LogOptions::new(*log, cli.verbosity)),
        _ if cli.verbosity.asked() => init(LogOptions::new(LogArgs::default(), cli.verbosity)),
        Verb::Gateway(_) => Ok(()),
        _ => {
            failure::print_warnings();
            Ok(())
        }
    }
}

/// Verbs of the Hermes kanban that kanban names otherwise.
const HERMES_VERBS: &[(&str, &str)] = &[("daemon", "gateway run")];

/// An unknown verb, in one line: the verb kanban has for a Hermes one, else a verb
/// within two edits of it (a swap of two letters is one: `lsit` -> `list`), else none; never a verb that merely
/// shares letters with it.
fn unknown_verb(e: &clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ContextValue};
    let given = match e.get(ContextKind::InvalidSubcommand) {
        Some(ContextValue::String(verb)) => verb.clone(),
        _ => String::new(),
    };
    let command = <args::Cli as clap::CommandFactory>::command();
    let verbs: Vec<String> = command
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .flat_map(|c| std::iter::once(c.get_name().to_owned()).chain(c.get_all_aliases().map(str::to_owned)))
        .collect();
    let hint = HERMES_VERBS
        .iter()
        .find(|(hermes, _)| *hermes == given && !verbs.iter().any(|v| v == hermes))
        .map(|(_, ours)| format!("; kanban's is `kanban {ours}`"))
        .or_else(|| {
            verbs
                .iter()
                .map(|v| (strsim::damerau_levenshtein(v, &given), v))
                .filter(|(distance, _)| *distance <= 2 && *distance < given.len())
                .min()
                .map(|(_, v)| format!("; did you mean `{v}`?"))
        })
        .unwrap_or_default();
    eprintln!("kanban: no verb {:?}{hint} (see --help)", one_line(&given));
    ExitCode::from(2)
}

/// Help and version go out as clap writes them; a real usage error becomes one line.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
        ErrorKind::InvalidSubcommand => return unknown_verb(&e),
        _ => {}
    }
    let rendered = e.render().to_string();
    let message: Vec<&str> = rendered
        .lines()
        .take_while(|line| !line.starts_with("Usage:"))
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("For more information"))
        .collect();
    let message = message.join(" ");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    eprintln!("kanban: {} (see --help)", one_line(message));
    ExitCode::from(2)
}
