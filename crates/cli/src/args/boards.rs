//! `kanban boards ...`: the boards of the home (docs/boards.md).

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum BoardsCommand {
    /// The boards of the home, the current one marked, with their tasks counted
    #[command(
        visible_alias = "ls",
        after_help = "Examples:\n  kanban boards list\n  kanban boards ls --json"
    )]
    List,
    /// Make a board: its own database (a schema of its own on PostgreSQL), logs and
    /// workspaces; says so when it exists
    #[command(
        visible_alias = "new",
        after_help = "Examples:\n  kanban boards create atm10-server --name \"ATM10 server\"\n  kanban boards create ops --switch"
    )]
    Create {
        /// The board's slug: 1-64 lowercase letters, digits, '-' or '_'
        #[arg(value_name = "SLUG")]
        slug: String,
        /// Its display name [default: the slug in title case]
        #[arg(long)]
        name: Option<String>,
        /// What the board is for
        #[arg(long)]
        description: Option<String>,
        /// Make it the current board too
        #[arg(long)]
        switch: bool,
    },
    /// Remove a board: refused while it has running work unless --force (which reclaims
    /// that work first); the board is kept under boards/_archived/ (on PostgreSQL, its
    /// schema renamed)
    #[command(
        visible_aliases = ["remove", "delete"],
        after_help = "Examples:\n  kanban boards rm old-project\n  kanban boards rm old-project --force"
    )]
    Rm {
        /// The board to remove
        #[arg(value_name = "SLUG")]
        slug: String,
        /// Reclaim the board's running work (its workers stopped) and remove it anyway
        #[arg(long)]
        force: bool,
    },
    /// Change a board's display name (its slug stays)
    #[command(after_help = "Examples:\n  kanban boards rename ops \"Operations\"")]
    Rename {
        /// The board to rename
        #[arg(value_name = "SLUG")]
        slug: String,
        /// The new display name
        #[arg(value_name = "NAME")]
        name: String,
    },
    /// Make a board the current one: the board of every later command that names none
    /// (--board and KANBAN_BOARD still win)
    #[command(
        visible_alias = "use",
        after_help = "Examples:\n  kanban boards switch ops\n  kanban boards switch default"
    )]
    Switch {
        /// The board to make current
        #[arg(value_name = "SLUG")]
        slug: String,
    },
    /// The board commands act on, with its tasks counted
    #[command(
        visible_alias = "current",
        after_help = "Examples:\n  kanban boards show\n  kanban --board ops boards show --json"
    )]
    Show,
}
