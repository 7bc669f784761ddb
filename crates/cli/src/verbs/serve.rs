//! `kanban serve`: the web board on the home the CLI prepared.

use std::net::SocketAddr;
use std::sync::Arc;

use board_home::Home;
use gateway::supervisor::ProcessGroupTerminator;

use crate::failure::{one_line, Failure};

use super::Ctx;

/// Serves until the process is stopped: every board of the home, each under `/b/SLUG/`
/// with its own config, store, lanes and MCP tools, the board the command names at the
/// root too (docs/boards.md). The token comes from `--token` (which any user sees in
/// `ps`, so it is warned about), else from `KANBAN_SERVE_TOKEN`; `web::serve` refuses a
/// non-loopback bind without one, and a token easy to guess.
pub fn serve(ctx: Ctx, home: &Home, bind: SocketAddr, flag: Option<String>) -> Result<(), Failure> {
    undumpable()?;
    let (token, from_home) = serve_token(home, bind, flag)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Refused(format!("cannot start the server: {e}")))?;
    let mut boards = Vec::new();
    // Each board's lanes wait on its wake-ups, heard while these live.
    let mut listening = Vec::new();
    for slug in home.boards()? {
        let board = home.on_board(slug.clone());
        let (store, config) = match &slug == home.board() {
            true => (ctx.store.clone(), ctx.config.clone()),
            false => {
                let config = board.load_config()?.config;
                (board.open_store(&config)?, config)
            }
        };
        let (settings, heard) = board_settings(&board, store.clone(), &config, &token)?;
        listening.push(heard);
        boards.push(web::ServedBoard {
            slug: slug.to_string(),
            name: board.board_meta().name,
            store,
            settings,
        });
    }
    let current = home.board().to_string();
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(bind)
            .await
            .map_err(|e| Failure::Refused(format!("cannot listen on {bind}: {e}")))?;
        let local = listener
            .local_addr()
            .map_err(|e| Failure::Refused(e.to_string()))?;
        // The actual port (`--bind 127.0.0.1:0` picks one) is what a script waits for.
        println!("serving the board at http://{local}/");
        if from_home {
            sign_in_line(local, home, &token);
        }
        web::serve_boards_on(listener, boards, &current, board_home::now, Some(token))
            .await
            .map_err(|e| Failure::Refused(one_line(&e.to_string())))
    })
}

/// How the server serves one board: its config's caps, its model, its lanes and its
/// MCP tools, with the secrets it must never show (the model key, the token).
fn board_settings(
    board: &Home,
    store: Arc<dyn board_core::Store>,
    config: &board_home::Config,
    token: &str,
) -> Result<(web::Settings, board_home::Listening), Failure> {
    let max_text_bytes = config.kanban.max_text_bytes;
    // The model as `kanban decompose` loads it; a client that cannot be built is the
    // decompose action's refusal, not a server that does not start.
    let model = config.decomposer_settings();
    let secrets = model
        .resolved_api_key()
        .map(|key| key.expose().to_owned())
        .into_iter()
        .chain([token.to_owned()])
        .collect();
    let defaults = web::Settings::default();
    let (lanes, listening) = lane_settings(config, board)?;
    let settings = web::Settings {
        max_text_bytes,
        // A body at the text cap, JSON-escaped, must still reach the cap's own message.
        max_request_bytes: defaults.max_request_bytes.max(max_text_bytes.saturating_mul(2)),
        terminator: Arc::new(ProcessGroupTerminator),
        log: Some(log_reader(board)),
        ceilings: config.spend_ceilings(),
        default_assignee: Some(config.kanban.default_assignee.clone()),
        runnable: Some(runnable(config)),
        review_round_limit: config.kanban.review_round_limit,
        decomposer: web::Decomposer::new(model)
            .map(Arc::new)
            .map_err(|e| e.to_string()),
        secrets,
        mcp: Some(Arc::new(super::mcp::Tools::served(
            store,
            config.clone(),
            board.clone(),
        ))),
        // A waiting lane's claim holds a connection: room for them beside the board's.
        limits: web::Limits {
            connections: defaults.limits.connections + lanes.max_waiting,
            ..defaults.limits
        },
        lanes: Some(lanes),
        ..defaults
    };
    Ok((settings, listening))
}

/// The token every request must carry: `--token` (said to show in `ps`), else
/// $KANBAN_SERVE_TOKEN, else the home's own (`true`: the home's).
fn serve_token(home: &Home, bind: SocketAddr, flag: Option<String>) -> Result<(String, bool), Failure> {
    if flag.is_some() {
        eprintln!(
            "kanban: warning: --token shows in `ps` to every user of this machine; set {} instead",
            web::TOKEN_ENV
        );
    }
    let given = flag.or_else(|| std::env::var(web::TOKEN_ENV).ok().filter(|t| !t.is_empty()));
    // Loopback is no boundary on a shared machine (any local process, a sandboxed worker
    // among them, reaches it): without a token given, the home's own is required.
    let from_home = given.is_none();
    let token = match given {
        Some(token) => token,
        None => home.serve_token().map_err(|e| Failure::Refused(e.to_string()))?,
    };
    web::check_bind(bind, Some(&token), web::SERVE_TOKEN_SOURCES)
        .map_err(|e| Failure::Usage(e.to_string()))?;
    Ok((token, from_home))
}

/// The profiles this home runs: the web board marks a ready card of any other.
fn runnable(config: &board_home::Config) -> std::collections::BTreeSet<String> {
    let runs = config.profiles.iter().filter(|(_, p)| p.runs_here());
    runs.map(|(name, _)| name.clone()).collect()
}

/// The server holds the model key and the token: no process of this user may read
/// them from its environment or memory.
fn undumpable() -> Result<(), Failure> {
    // SAFETY: prctl(PR_SET_DUMPABLE) changes a flag of this process and touches no memory.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(Failure::Refused(format!(
            "cannot make the server undumpable: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// How the server answers lanes (docs/lanes.md): the config's caps, the checks a
/// gateway would fix, and the brief `kanban context` gives.
/// Lanes waiting for work sleep on the board's wake-ups, heard here once for all while
/// the returned listener lives.
fn lane_settings(
    config: &board_home::Config,
    home: &Home,
) -> Result<(web::LaneSettings, board_home::Listening), Failure> {
    let (wake, wakes) = tokio::sync::watch::channel(0u64);
    let listening = home.watch(
        config,
        Arc::new(move || {
            wake.send_modify(|n| *n = n.wrapping_add(1));
        }),
    )?;
    let checks = super::lanes::checks_for(config);
    let lanes = web::LaneSettings {
        max_held: config.lanes.max_held,
        lease_seconds: config.lanes.lease_seconds,
        max_wait_seconds: config.lanes.max_wait_seconds,
        max_waiting: usize::try_from(config.lanes.max_waiting).unwrap_or(usize::MAX),
        checks: Arc::new(checks),
        brief: Arc::new(|store, id, now| {
            super::context::brief_of(store, id, now).map_err(|e| e.message().unwrap_or("refused").to_owned())
        }),
        wakes,
    };
    Ok((lanes, listening))
}

/// How to sign in with the home's token: the whole address on a terminal (the person
/// who started the server opens it once), only where the token is kept anywhere else (a
/// log or a journal must not hold it).
fn sign_in_line(local: SocketAddr, home: &Home, token: &str) {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        println!("open http://{local}/?token={token} once to sign in");
    } else {
        println!(
            "every request needs the token in {} (open http://{local}/?token=TOKEN once to sign in)",
            home.serve_token_file().display()
        );
    }
}

/// A card's worker log as the web board reads it: through the home, never following a
/// link the worker may have put in its place.
fn log_reader(home: &Home) -> web::LogRead {
    let home = home.clone();
    Arc::new(move |id: &board_core::TaskId, from: Option<u64>, max: u64| {
        board_home::safety::read_span(&home.log(id), from, max).ok()
    })
}
