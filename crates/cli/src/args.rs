//! The command line's grammar: every verb, flag and value parser (clap derive).
//!
//! Flag values are parsed here, so a bad value (an unknown status, an unparsable
//! duration, invalid JSON) is a usage error (exit 2) before anything touches the board.

use std::ffi::OsString;
use std::path::PathBuf;

use board_core::{RunId, TaskId};
use clap::{Args, Parser, Subcommand};
use clap_complete::Shell;
use gateway::logging::{LogArgs, Verbosity};

mod boards;
mod config;
mod lanes;
mod reads;
mod tasks;

pub use boards::BoardsCommand;
pub use config::ConfigCommand;
pub use lanes::LaneCommand;
pub use reads::{DiagnosticsArgs, EventsArgs, GcArgs, ListArgs, Since, WatchArgs, EVENTS_SHOWN};
pub use tasks::{
    orders, statuses, ApproveArgs, AttachArgs, BlockArgs, CommentArgs, CompleteArgs, CreateArgs, EditArgs,
    NotifySubscribeArgs, PromoteArgs, ReassignArgs, RequestChangesArgs, RequestReviewArgs, ScheduleArgs,
    SwarmArgs,
};

/// Where every verb's help lists the flags that go with any verb, apart from its own.
const GLOBAL: &str = "Global options";

/// A durable kanban board for AI agents.
#[derive(Debug, Parser)]
#[command(
    name = "kanban",
    version,
    arg_required_else_help = true,
    after_help = "Examples:\n  kanban create \"write the release notes\" --assignee writer\n  kanban ls --status ready\n  kanban show t_1a2b3c4d\n\nInside a worker (KANBAN_TASK and KANBAN_RUN_ID set), context, complete, block,\nheartbeat and comment act on the worker's own task when no id is given."
)]
pub struct Cli {
    /// The board's home directory [default: $KANBAN_HOME, else ~/.kanban]
    #[arg(long, global = true, value_name = "DIR", help_heading = GLOBAL)]
    pub home: Option<PathBuf>,

    /// The board of the home to act on [default: $KANBAN_BOARD, else the one `kanban
    /// boards switch` chose, else default]
    #[arg(long, global = true, value_name = "SLUG", help_heading = GLOBAL)]
    pub board: Option<String>,

    /// Print pure JSON on stdout (warnings go to stderr)
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub json: bool,

    #[command(flatten, next_help_heading = GLOBAL)]
    pub verbosity: Verbosity,

    #[command(subcommand)]
    pub verb: Verb,
}

/// A verb's own flags are built only when it is the one used (`defer`): a worker's
/// `kanban complete` starts without building the other verbs' grammar.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Verb {
    /// Create the home, its config template and database (idempotent)
    Init,
    /// Create a task
    #[command(
        after_help = "Examples:\n  kanban create \"fix the login bug\" --priority 5 --assignee coder\n  kanban create \"ship it\" --parent t_1a2b3c4d --parent t_5e6f7a8b\n  kanban create \"rough idea\" --triage --body-file notes.md\n  echo \"details\" | kanban create \"from stdin\" --body-file -"
    )]
    Create(CreateArgs),
    /// List tasks (priority desc, then age; --sort for another order)
    #[command(
        visible_alias = "ls",
        after_help = "Examples:\n  kanban ls\n  kanban list --status ready --assignee coder\n  kanban list --mine --sort updated\n  kanban list --assignee none\n  kanban list --archived --json\n  kanban list --limit 50 --after t_1a2b3c4d   # the page after that task\n  kanban list --jsonl > board.jsonl"
    )]
    List(ListArgs),
    /// Show a task with its parents, children, runs, comments and recent events
    #[command(after_help = "Examples:\n  kanban show t_1a2b3c4d\n  kanban show t_1a2b3c4d --json")]
    Show {
        /// The task
        #[arg(value_name = "ID")]
        id: TaskId,
    },
    /// Edit a task's title, body or priority (bumps its revision), or a done task's result
    #[command(
        after_help = "Examples:\n  kanban edit t_1a2b3c4d --title \"Fix the login redirect\" --priority 5\n  kanban edit t_1a2b3c4d --result \"merged as #412\" --metadata '{\"pr\": 412}'   # a done task"
    )]
    Edit(EditArgs),
    /// Set a task's assignee (refused while it runs)
    Assign {
        /// The task
        #[arg(value_name = "ID")]
        id: TaskId,
        /// A profile name, or `none` to clear the assignee
        #[arg(value_name = "PROFILE|none")]
        profile: String,
    },
    /// Set a task's assignee; with --reclaim a running task's worker is stopped first
    #[command(
        after_help = "Examples:\n  kanban reassign t_1a2b3c4d reviewer\n  kanban reassign t_1a2b3c4d coder --reclaim   # stop its worker first\n  kanban reassign t_1a2b3c4d none\n\nWithout --reclaim a running task is refused, as assign refuses it."
    )]
    Reassign(ReassignArgs),
    /// Make CHILD wait for PARENT (cycles and self-links are refused)
    Link {
        /// The task to wait for
        #[arg(value_name = "PARENT")]
        parent: TaskId,
        /// The task that waits
        #[arg(value_name = "CHILD")]
        child: TaskId,
    },
    /// Remove the link PARENT -> CHILD
    Unlink {
        /// The task waited for
        #[arg(value_name = "PARENT")]
        parent: TaskId,
        /// The task that waits
        #[arg(value_name = "CHILD")]
        child: TaskId,
    },
    /// Claim a ready task by hand, or a lane's next one (--lane); prints the run id
    #[command(
        after_help = "Examples:\n  kanban claim t_1a2b3c4d\n  kanban claim t_1a2b3c4d --ttl 3600 --json\n  kanban claim --lane laptop --wait 60s --json   # the task, its brief and the run\n\nWith --lane, exit 0 is a claim and exit 3 is nothing to claim (the wait ended)."
    )]
    Claim {
        /// The task
        #[arg(value_name = "ID", required_unless_present = "lane", conflicts_with = "lane")]
        id: Option<TaskId>,
        /// Claim the next ready task of this lane's profiles (priority first), for it
        #[arg(long, value_name = "NAME")]
        lane: Option<String>,
        /// With --lane: wait this long for a task to become ready: 30, 60s, 5m
        #[arg(long, value_name = "DUR", value_parser = parse_duration, requires = "lane")]
        wait: Option<i64>,
        /// Lease length in seconds [default: kanban.claim_ttl_seconds, or lanes.lease_seconds
        /// for a lane]
        #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(i64).range(1..))]
        ttl: Option<i64>,
    },
    /// Extend the lease of a running task
    Heartbeat {
        /// The task [default: $KANBAN_TASK]
        #[arg(value_name = "ID")]
        id: Option<TaskId>,
        /// The run the caller holds [default: $KANBAN_RUN_ID, else the current run]
        #[arg(long, value_name = "RUN")]
        run: Option<RunId>,
        /// A note recorded with the heartbeat
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
    },
    /// Complete tasks
    #[command(
        after_help = "Examples:\n  kanban complete t_1a2b3c4d --result \"deployed to staging\"\n  kanban complete --summary \"done\"   # inside a worker: its own task, guarded by its run\n  kanban complete t_1a2b3c4d --run 7 --metadata '{\"tests\": 42}'"
    )]
    Complete(CompleteArgs),
    /// Block a task: it needs something before it can go on
    #[command(
        after_help = "Examples:\n  kanban block t_1a2b3c4d waiting for the API key --kind needs_input\n  kanban block t_1a2b3c4d \"waiting for the API key\"\n  kanban block cannot reach the database --kind transient   # inside a worker"
    )]
    Block(BlockArgs),
    /// The work is done and waits for a reviewer (a worker's own task, guarded by its run)
    #[command(
        name = "request-review",
        after_help = "Examples:\n  kanban request-review --summary \"ready for a look\"   # inside a worker\n  kanban request-review t_1a2b3c4d --reviewer critic"
    )]
    RequestReview(RequestReviewArgs),
    /// Send the work under review back to its worker, with the reason as a comment
    #[command(
        name = "request-changes",
        after_help = "Examples:\n  kanban request-changes t_1a2b3c4d the error path has no test\n  kanban request-changes the error path has no test   # inside a reviewer's run"
    )]
    RequestChanges(RequestChangesArgs),
    /// Approve the work under review: the task is done
    #[command(
        after_help = "Examples:\n  kanban approve t_1a2b3c4d\n  kanban approve --summary \"reads well\"   # inside a reviewer's run"
    )]
    Approve(ApproveArgs),
    /// Run a verify run's verifiers and report the verdict (the gateway starts it as the
    /// worker of a verify run, in the task's workspace)
    Verify,
    /// Send a task whose changes were requested, or a blocked review loop, back to review
    #[command(name = "reopen-review")]
    ReopenReview {
        /// The task
        #[arg(value_name = "ID")]
        id: TaskId,
        /// Why, recorded in the review_reopened event
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },
    /// Return blocked tasks to ready (or todo while a parent is open)
    Unblock {
        /// The tasks
        #[arg(value_name = "ID", required = true)]
        ids: Vec<TaskId>,
        /// Why, recorded in the unblocked event
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },
    /// What is wrong with this board and its config, each finding with its fix (Hermes'
    /// `diagnostics`)
    #[command(
        visible_alias = "diag",
        after_help = "Examples:\n  kanban diagnostics\n  kanban diagnostics --severity error --json\n  kanban diag --task t_1a2b3c4d\n\nFindings: config keys ignored, the provider breaker open, ready work and no gateway,\na profile with ready work and no command (stranded_in_ready), expired leases nobody\nreclaims, tasks given up on (repeated_failures), blocked for a day (stuck_in_blocked),\nsent to triage by a block loop (block_unblock_cycling), parked decompositions."
    )]
    Diagnostics(DiagnosticsArgs),
    /// Park tasks in scheduled: waiting on time, not on a person (Hermes' `schedule`);
    /// `unblock` releases them
    #[command(
        after_help = "Examples:\n  kanban schedule t_1a2b3c4d waits for the 02:00 window\n  kanban schedule t_1a2b3c4d --ids t_5e6f7a8b   # both, with one reason\n\nA running task's run ends `scheduled`. Exit 1 when any task could not be scheduled."
    )]
    Schedule(ScheduleArgs),
    /// Move todo or blocked tasks to ready by hand (past open parents with --force)
    #[command(
        after_help = "Examples:\n  kanban promote t_1a2b3c4d the fix landed upstream\n  kanban promote t_1a2b3c4d --ids t_5e6f7a8b t_9c0d1e2f --dry-run\n  kanban promote t_1a2b3c4d --force   # its parent is still open\n\nExit 1 when any task could not be promoted (each is said on stderr)."
    )]
    Promote(PromoteArgs),
    /// Take done or archived tasks back into work: ready, or todo while a parent is open
    Reopen {
        /// The tasks
        #[arg(value_name = "ID", required = true)]
        ids: Vec<TaskId>,
        /// Why, recorded in the reopened event
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },
    /// Stop a task's worker and return the task to ready
    Reclaim {
        /// The task
        #[arg(value_name = "ID")]
        id: TaskId,
        /// Only if RUN is still the current run
        #[arg(long, value_name = "RUN")]
        run: Option<RunId>,
        /// Why, recorded with the ended run
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },
    /// Archive tasks (a running one is reclaimed first), or delete archived ones for good
    #[command(
        after_help = "Examples:\n  kanban archive t_1a2b3c4d t_5e6f7a8b\n  kanban archive --rm t_1a2b3c4d   # deletes it with its runs, events and comments"
    )]
    Archive {
        /// The tasks to archive
        #[arg(value_name = "ID", required_unless_present = "rm", conflicts_with = "rm")]
        ids: Vec<TaskId>,
        /// Delete these archived tasks permanently, with their runs, events, comments and
        /// links (refused for a task that is not archived or is linked to one that is not)
        #[arg(long = "rm", value_name = "ID", num_args = 1..)]
        rm: Vec<TaskId>,
    },
    /// Make a team template's graph for a goal: its steps as cards, routed and linked,
    /// and a card for the goal done last (Hermes' `swarm`, from templates/TEMPLATE.yaml)
    #[command(
        after_help = "Examples:\n  kanban swarm research --goal \"cut the CI time in half\"\n  kanban swarm research --goal \"compare the three queues\" --workers 5 --json\n\nA template (docs/board.md#team-templates) names steps (a role, `repeat: workers` for\nparallel cards, `after:` the steps it waits for) and a root, the goal's own card.\n`kanban config check` checks every template."
    )]
    Swarm(SwarmArgs),
    /// Call a webhook with a task's events, or the board's: signed JSON POSTs the gateway
    /// sends, retried until the receiver answers 2xx
    #[command(
        after_help = "Examples:\n  kanban notify-subscribe t_1a2b3c4d --webhook https://example.com/hooks/kanban\n  kanban notify-subscribe --board --kinds completed,gave_up --webhook http://127.0.0.1:8080/k\n\nThe gateway posts each event as JSON with X-Kanban-Delivery (the same on a retry),\nX-Kanban-Event and X-Kanban-Signature: sha256= and the HMAC-SHA256 of the body under the\nsubscription's secret, printed once here. Kinds default to completed, blocked,\nreview_requested and gave_up."
    )]
    NotifySubscribe(NotifySubscribeArgs),
    /// List the webhooks, what each hears and how its last delivery went
    NotifyList,
    /// Stop calling a webhook
    NotifyUnsubscribe {
        /// The subscription (`kanban notify-list` lists them)
        #[arg(value_name = "N")]
        id: i64,
    },
    /// Call a webhook paused after failures again, from the event it was paused at
    NotifyResume {
        /// The subscription
        #[arg(value_name = "N")]
        id: i64,
    },
    /// Attach a local file to a task (Hermes' `attach`): its bytes go into the board
    #[command(
        after_help = "Examples:\n  kanban attach t_1a2b3c4d ./screenshot.png\n  kanban attach t_1a2b3c4d notes.txt --name brief.txt --content-type text/plain\n\nA link, a directory, a device or a file over kanban.attachment_max_bytes (25 MB) is\nrefused. A name already on the card gets \" (1)\"; the worker finds the files in its\nworkspace's attachments/ directory."
    )]
    Attach(AttachArgs),
    /// List a task's files (Hermes' `attachments`)
    Attachments {
        /// The task
        #[arg(value_name = "ID")]
        id: TaskId,
    },
    /// Write one of a task's files to --out FILE (a new file), or to a pipe
    AttachGet {
        /// The file's id (`kanban attachments ID` lists them)
        #[arg(value_name = "ATTACHMENT")]
        attachment: i64,
        /// Where to write it; it must not exist yet
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Delete one of a task's files, by its id (Hermes' `attach-rm`)
    AttachRm {
        /// The file's id
        #[arg(value_name = "ATTACHMENT")]
        attachment: i64,
    },
    /// Add a comment to a task
    #[command(
        after_help = "Examples:\n  kanban comment t_1a2b3c4d the tests pass on staging\n  kanban comment t_1a2b3c4d \"the tests pass\" --author alice\n  kanban comment found the cause   # inside a worker: its own task"
    )]
    Comment(CommentArgs),
    /// A task's run history
    Runs {
        /// The task
        #[arg(value_name = "ID")]
        id: TaskId,
    },
    /// A task's worker log (Hermes' `log`), control characters blanked
    #[command(
        after_help = "Examples:\n  kanban log t_1a2b3c4d\n  kanban log t_1a2b3c4d --tail 4096   # the last 4 KiB"
    )]
    Log {
        /// The task
        #[arg(value_name = "ID")]
        id: TaskId,
        /// Only the last N bytes (from the first whole line in them)
        #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
        tail: Option<u64>,
    },
    /// Follow the board's new events until Ctrl-C (Hermes' `watch`: `events --follow`
    /// from now on), of every task or of one assignee's, of some kinds
    #[command(
        after_help = "Examples:\n  kanban watch\n  kanban watch --assignee coder --kinds completed,blocked,gave_up\n  kanban watch --interval 2 --json"
    )]
    Watch(WatchArgs),
    /// Follow a task's events until Ctrl-C (Hermes' `tail`: `events ID --follow`)
    #[command(
        after_help = "Examples:\n  kanban tail t_1a2b3c4d\n  kanban tail t_1a2b3c4d --interval 0.5 --json"
    )]
    Tail {
        /// The task
        #[arg(value_name = "ID")]
        id: TaskId,
        /// Seconds between two reads of the board (0.05 to 60) [default: 0.2]
        #[arg(long, value_name = "SECONDS", value_parser = parse_interval)]
        interval: Option<std::time::Duration>,
    },
    /// The newest events, of one task or the whole board
    #[command(
        after_help = "Examples:\n  kanban events                  # the newest 100\n  kanban events t_1a2b3c4d --limit 20\n  kanban events --since 2h --kind completed\n  kanban events --all --json     # every event, streamed\n  kanban events --follow --json  # one object per line until Ctrl-C"
    )]
    Events(EventsArgs),
    /// The brief a worker needs: the task, its parents' results, earlier attempts, comments
    #[command(
        after_help = "Examples:\n  kanban context t_1a2b3c4d\n  kanban context            # inside a worker: its own task\n  kanban context t_1a2b3c4d --json\n\nThe Markdown is kept under 16 KiB: the oldest attempts and comments go first,\nthen long fields are cut, and the brief says what was left out."
    )]
    Context {
        /// The task [default: $KANBAN_TASK]
        #[arg(value_name = "ID")]
        id: Option<TaskId>,
    },
    /// Counts by status and assignee, the oldest ready task, LLM calls and tokens
    #[command(after_help = "Examples:\n  kanban stats\n  kanban stats --json")]
    Stats,
    /// The profiles of config.yaml and the assignees on the board, with their tasks by
    /// status (archived left out), as Hermes' `kanban assignees`
    #[command(after_help = "Examples:\n  kanban assignees\n  kanban assignees --json")]
    Assignees,
    /// Remove old archived tasks and old routine events, in short batches
    #[command(
        after_help = "Examples:\n  kanban gc --archived-older-than 90d --events-older-than 30d --dry-run\n  kanban gc   # the ages of kanban.gc_archived_older_than and gc_events_older_than\n\nAn archived task goes with every task linked to it, and only when all of them are\narchived and old enough. Events of done tasks go only when routine (heartbeats, edits,\nlease extensions); the events that record a task's history stay."
    )]
    Gc(GcArgs),
    /// Check the home's config.yaml and print its effective values
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Bring a Hermes board's tasks, links, runs, events and comments over, ids kept
    #[command(
        after_help = "Examples:\n  kanban import-hermes ~/.hermes/kanban.db\n  kanban import-hermes ~/.hermes/kanban.db --json\n  kanban import-hermes ~/.hermes     # every Hermes board, each into the board of its slug\n\nThe Hermes file is only read, never written. Statuses this board lacks come over as\nthe nearest one (running -> ready, any other this board lacks -> blocked), the original kept\nin an `imported` event. Importing the same board again changes nothing."
    )]
    ImportHermes {
        /// The Hermes board file (Hermes keeps it at ~/.hermes/kanban.db), or Hermes' root
        /// directory for every board
        #[arg(value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
        path: std::path::PathBuf,
    },
    /// Ask the model to split triage cards into tasks, or tighten each into one
    #[command(after_help = "Examples:\n  kanban decompose t_1a2b3c4d\n  kanban decompose --all --json")]
    Decompose(ModelCallArgs),
    /// Ask the model to rewrite triage cards as single, clearer tasks (never split)
    #[command(after_help = "Examples:\n  kanban specify t_1a2b3c4d\n  kanban specify --all")]
    Specify(ModelCallArgs),
    /// One dispatcher pass without the gateway: reclaim, decompose, promote, claim, spawn
    #[command(
        after_help = "Examples:\n  kanban dispatch\n  kanban dispatch --dry-run --json\n  kanban dispatch --max 1   # spawn at most one worker\n  kanban dispatch --failure-limit 1   # give up on a task at its first failure"
    )]
    Dispatch {
        /// Say what the pass would do, and change nothing
        #[arg(long)]
        dry_run: bool,
        /// Hold at most N workers in this pass, so spawn at most N less those running
        /// (kanban.max_spawn for this pass) [default: kanban.max_spawn]
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
        max: Option<u16>,
        /// Give a task up (gave_up, blocked) after N failed runs in a row: crashes,
        /// timeouts, stale leases, failed spawns (kanban.failure_limit for this pass)
        /// [default: kanban.failure_limit]
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=100))]
        failure_limit: Option<u16>,
    },
    /// Run the gateway until SIGINT or SIGTERM
    #[command(subcommand)]
    Gateway(GatewayCommand),
    /// Lanes: agents outside the gateway that claim, hold and report work
    #[command(subcommand)]
    Lane(LaneCommand),
    /// Boards: one home, a board per project (list, create, rm, rename, switch, show)
    #[command(subcommand)]
    Boards(BoardsCommand),
    /// Serve the board as a live web page and a JSON API until stopped
    #[command(
        after_help = "Examples:\n  kanban serve\n  KANBAN_SERVE_TOKEN=\"$(openssl rand -hex 16)\" kanban serve --bind 0.0.0.0:8420\n\nBound to a loopback address no token is needed; bound anywhere else a token is\nrequired (KANBAN_SERVE_TOKEN, or --token, which shows in `ps`; at least 16 characters)
and every request must carry it."
    )]
    Serve {
        /// The address to listen on
        #[arg(long, value_name = "ADDR", default_value = web::DEFAULT_BIND)]
        bind: std::net::SocketAddr,
        /// The token every request must carry (shows in `ps`: prefer $KANBAN_SERVE_TOKEN)
        #[arg(long, value_name = "TOKEN")]
        token: Option<String>,
    },
    /// Serve the board's verbs as Model Context Protocol tools on stdin and stdout
    #[command(
        after_help = "Examples:\n  kanban mcp\n  claude mcp add kanban -- kanban --home ~/.kanban mcp\n\nThe tools: list_tasks, show_task, task_context, create_task, comment, heartbeat,\ncomplete_task, block_task, decompose_task, link_tasks; each answers with the --json\nshape of its verb. Inside a worker (KANBAN_TASK and KANBAN_RUN_ID set) the worker's own\ntask is the default, and complete_task, block_task and heartbeat are guarded by its run."
    )]
    Mcp,
    /// Copy the whole board (ids kept) into an empty PostgreSQL or SQLite board and
    /// verify the counts; the board itself is only read
    #[command(
        after_help = "Examples:\n  kanban migrate --to postgres://kanban@db.internal/boards\n  kanban migrate --to sqlite:/srv/kanban/kanban.db\n\nStop the gateways first: a write that lands during the copy is not in it. A target\nthat is not empty is refused untouched."
    )]
    Migrate {
        /// A postgres:// URL, or a SQLite file (sqlite:PATH or PATH)
        #[arg(long, value_name = "URL|PATH")]
        to: String,
    },
    /// Print a shell completion script
    Completions {
        /// The shell the script is for
        #[arg(value_name = "SHELL", value_parser = ["bash", "zsh", "fish"])]
        shell: String,
    },
    /// Print the manual page (roff), or write one page per verb into a directory
    #[command(
        after_help = "Examples:\n  kanban man | man -l -\n  kanban man --out /usr/local/share/man/man1   # kanban.1, kanban-create.1, ..."
    )]
    Man {
        /// Write kanban.1 and a kanban-VERB.1 page for every verb into DIR
        #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
        out: Option<PathBuf>,
    },
}

/// `kanban gateway ...`.
#[derive(Debug, Subcommand)]
pub enum GatewayCommand {
    /// Tick every kanban.dispatch_interval_seconds: decompose triage cards, promote, claim
    /// ready tasks and spawn their workers, reclaim the work of workers that are gone
    #[command(
        after_help = "Examples:\n  kanban gateway run\n  kanban gateway run --replace   # stop the running one first"
    )]
    Run {
        /// Stop the gateway already running on this home first
        #[arg(long)]
        replace: bool,
        #[command(flatten)]
        log: LogArgs,
    },
    /// Make the running gateway re-read config.yaml (SIGHUP): a valid file takes effect at
    /// the next tick, an invalid one is refused in its log and the running config kept
    #[command(after_help = "Examples:\n  kanban gateway reload")]
    Reload,
    /// Stop the gateway and wait for it to exit (systemctl stop when its unit is installed
    /// and systemd runs, else SIGTERM); its workers keep running
    #[command(after_help = "Examples:\n  kanban gateway stop")]
    Stop,
    /// Whether a gateway runs on this home (running, stopped or crashed), its pid, uptime,
    /// last tick age, tick count and workers, from gateway.pid and gateway.json; and its
    /// systemd unit's state when one is installed
    #[command(after_help = "Examples:\n  kanban gateway status\n  kanban gateway status --json")]
    Status,
    /// Write a systemd unit running this home's gateway, then reload systemd and enable it
    #[command(
        after_help = "Examples:\n  kanban gateway install\n  sudo kanban --home /srv/kanban gateway install --system\n\nUser units go to ~/.config/systemd/user, system units to /etc/systemd/system\n($KANBAN_SYSTEMD_UNIT_DIR overrides both). The unit is named for the home, so\nseveral homes can be installed side by side."
    )]
    Install {
        #[command(flatten)]
        scope: ScopeArgs,
        /// Replace a unit file of that name that `kanban gateway install` did not write
        #[arg(long)]
        force: bool,
    },
    /// Stop and disable this home's systemd unit, and remove it
    #[command(after_help = "Examples:\n  kanban gateway uninstall")]
    Uninstall {
        #[command(flatten)]
        scope: ScopeArgs,
        /// Remove a unit file of that name that `kanban gateway install` did not write
        #[arg(long)]
        force: bool,
    },
    /// Start this home's installed unit (systemctl start); without systemd, refused
    #[command(after_help = "Examples:\n  kanban gateway start")]
    Start,
    /// Restart this home's installed unit (systemctl restart); without systemd, refused
    #[command(after_help = "Examples:\n  kanban gateway restart")]
    Restart,
}

/// Which service manager a unit belongs to.
#[derive(Debug, Args)]
pub struct ScopeArgs {
    /// The user's own service manager (systemctl --user) [default for install]
    #[arg(long, conflicts_with = "system")]
    pub user: bool,
    /// The machine's service manager; the unit runs as the home's owner (needs root)
    #[arg(long)]
    pub system: bool,
}

/// The cards of a manual model call: one id, or every triage card.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("cards").required(true).args(["id", "all"])))]
pub struct ModelCallArgs {
    /// The triage card
    #[arg(value_name = "ID")]
    pub id: Option<TaskId>,
    /// Every triage card, in list order
    #[arg(long)]
    pub all: bool,
    /// With --all, only the triage cards of this tenant
    #[arg(long, value_name = "NAME", requires = "all")]
    pub tenant: Option<String>,
    /// Send even though a daily spend ceiling is reached (the ledger records it)
    #[arg(long)]
    pub over_budget: bool,
}

pub use board_home::config::parse_duration;

fn parse_json(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))
}

/// The shell a completion script is for.
pub fn shell(name: &str) -> Option<Shell> {
    match name {
        "bash" => Some(Shell::Bash),
        "zsh" => Some(Shell::Zsh),
        "fish" => Some(Shell::Fish),
        _ => None,
    }
}

/// Parses the process's own arguments, keeping non-UTF-8 ones for clap to refuse cleanly.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(args)
}

/// `tail --interval`: seconds, 0.05 to 60.
pub(crate) fn parse_interval(text: &str) -> Result<std::time::Duration, String> {
    match text.parse::<f64>() {
        Ok(s) if (0.05..=60.0).contains(&s) => Ok(std::time::Duration::from_secs_f64(s)),
        _ => Err(format!("expected seconds from 0.05 to 60, got {text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use clap::error::ErrorKind;
    use clap::CommandFactory;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn a_duration_is_seconds_by_default_or_in_its_unit() {
        let cases = [
            ("90", 90),
            ("90s", 90),
            ("15m", 900),
            ("2h", 7200),
            ("1d", 86_400),
            ("007m", 420),
        ];
        for (text, secs) in cases {
            assert_eq!(parse_duration(text), Ok(secs), "{text}");
        }
    }

    #[test]
    fn a_duration_that_is_not_positive_whole_units_is_refused() {
        for text in [
            "",
            "0",
            "0s",
            "-5",
            "+5",
            "5x",
            "m",
            "1.5h",
            "5 m",
            "5ms",
            "15M",
            "99999999999999999999",
            "106751991167301d",
        ] {
            let err = parse_duration(text).expect_err(text).to_string();
            assert_eq!(
                err,
                format!("not a duration: {text:?} (expected e.g. 90, 90s, 15m, 2h)")
            );
        }
    }

    #[test]
    fn json_is_any_json_value() {
        assert_eq!(parse_json(r#"{"tests": 42}"#), Ok(json!({"tests": 42})));
        assert_eq!(parse_json("[1, null]"), Ok(json!([1, null])));
        assert_eq!(parse_json("\"text\""), Ok(json!("text")));
    }

    #[test]
    fn json_that_does_not_parse_says_why() {
        for text in ["", "{tests: 42}", "{\"a\": 1} trailing", "'single'"] {
            let err = parse_json(text).expect_err(text);
            assert!(err.starts_with("invalid JSON: "), "{err}");
        }
    }

    #[test]
    fn every_shell_the_grammar_accepts_has_a_script() {
        // Each verb's flags are built when it is used (`defer`): build them all first.
        let mut command = Cli::command();
        command.build();
        let completions = command.find_subcommand("completions").expect("completions verb");
        let shell_arg = completions
            .get_arguments()
            .find(|a| a.get_id() == "shell")
            .expect("shell argument");
        let names: Vec<String> = shell_arg
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_owned())
            .collect();
        assert_eq!(names, ["bash", "zsh", "fish"]);
        for name in &names {
            assert!(shell(name).is_some(), "{name}");
        }
        assert!(shell("powershell").is_none());
    }

    fn parsed(args: &[&str]) -> Result<Cli, clap::Error> {
        parse(
            std::iter::once("kanban")
                .chain(args.iter().copied())
                .map(OsString::from),
        )
    }

    #[test]
    fn flag_values_are_parsed_when_the_line_is() {
        let cli = parsed(&["create", "ship it", "--max-runtime", "15m", "--json"]).expect("parses");
        assert!(cli.json);
        let Verb::Create(create) = cli.verb else {
            panic!("not create: {:?}", cli.verb);
        };
        assert_eq!(create.max_runtime, Some(900));
        let cli = parsed(&["complete", "t_1a2b3c4d", "--metadata", r#"{"tests": 42}"#]).expect("parses");
        let Verb::Complete(complete) = cli.verb else {
            panic!("not complete: {:?}", cli.verb);
        };
        assert_eq!(complete.metadata, Some(json!({"tests": 42})));
    }

    #[test]
    fn a_bad_flag_value_is_a_usage_error_before_anything_runs() {
        for args in [
            &["create", "ship it", "--max-runtime", "soon"][..],
            &["complete", "t_1a2b3c4d", "--metadata", "{"],
            &["claim", "t_1a2b3c4d", "--ttl", "0"],
            &["dispatch", "--max", "0"],
        ] {
            let err = parsed(args).expect_err("refused");
            assert_eq!(err.kind(), ErrorKind::ValueValidation, "{args:?}: {err}");
            assert_eq!(err.exit_code(), 2, "{args:?}");
        }
        for args in [
            &["list", "--status", "finished"][..],
            &["block", "t_1a2b3c4d", "--kind", "bored"],
        ] {
            let err = parsed(args).expect_err("refused");
            assert_eq!(err.kind(), ErrorKind::InvalidValue, "{args:?}: {err}");
            assert_eq!(err.exit_code(), 2, "{args:?}");
        }
    }

    /// Every argument of every verb, `--help` and `--version` aside.
    fn every_argument(command: &clap::Command, path: String, out: &mut Vec<(String, clap::Arg)>) {
        for arg in command.get_arguments() {
            if !matches!(arg.get_id().as_str(), "help" | "version") {
                out.push((path.clone(), arg.clone()));
            }
        }
        for sub in command.get_subcommands() {
            every_argument(sub, format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn every_argument_says_what_it_is() {
        let mut args = Vec::new();
        let mut command = Cli::command();
        command.build();
        every_argument(&command, "kanban".to_owned(), &mut args);
        assert!(
            args.iter()
                .any(|(path, arg)| path == "kanban complete" && arg.get_id() == "result"),
            "the verbs' own flags were not built"
        );
        let silent: Vec<String> = args
            .iter()
            .filter(|(_, arg)| arg.get_help().is_none())
            .map(|(path, arg)| format!("{path} {}", arg.get_id()))
            .collect();
        assert!(silent.is_empty(), "arguments without help: {silent:?}");
    }

    #[test]
    fn statuses_and_block_kinds_are_value_lists() {
        let names = |parser: clap::builder::ValueParser| -> Vec<String> {
            parser
                .possible_values()
                .expect("a value list")
                .map(|v| v.get_name().to_owned())
                .collect()
        };
        let statuses: Vec<&str> = board_core::Status::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            names(clap::builder::ValueParser::new(super::statuses())),
            statuses
        );
        let kinds: Vec<&str> = board_core::BlockKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            names(clap::builder::ValueParser::new(super::tasks::block_kinds())),
            kinds
        );
        let cli = parsed(&["list", "--status", "blocked"]).expect("parses");
        let Verb::List(list) = cli.verb else {
            panic!("not list: {:?}", cli.verb);
        };
        assert_eq!(list.status, Some(board_core::Status::Blocked));
    }

    #[test]
    fn an_argument_that_is_not_utf8_is_refused_not_lost() {
        use std::os::unix::ffi::OsStringExt;
        let args = [
            OsString::from("kanban"),
            OsString::from("create"),
            OsString::from_vec(b"bad \xff title".to_vec()),
        ];
        let err = parse(args).expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::InvalidUtf8);
    }
}
