//! `kanban lane ...`: the credentials of agents outside the gateway (docs/lanes.md).

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum LaneCommand {
    /// Add a lane: a credential that claims and reports the ready tasks of its profiles;
    /// prints its token once (the board keeps only its digest)
    #[command(
        after_help = "Examples:\n  kanban lane create ci --profile tester\n  kanban lane create laptop --profile coder --profile writer --json\n\nThe token goes in the lane's `Authorization: Bearer TOKEN` header (HTTP and MCP on\n`kanban serve`); `kanban claim --lane NAME` on this machine needs only the name."
    )]
    Create {
        /// The lane's name: a-z, 0-9, '-' and '_'
        #[arg(value_name = "NAME")]
        name: String,
        /// A profile whose tasks it may claim (repeatable)
        #[arg(long = "profile", value_name = "PROFILE", required = true)]
        profiles: Vec<String>,
    },
    /// The lanes: their profiles, state, last heartbeat, and the tasks each holds, did
    /// and failed
    #[command(after_help = "Examples:\n  kanban lane list\n  kanban lane list --json")]
    List,
    /// Revoke a lane: its token is refused from now on; the runs it holds lapse with
    /// their leases unless reclaimed first
    #[command(after_help = "Examples:\n  kanban lane revoke ci")]
    Revoke {
        /// The lane
        #[arg(value_name = "NAME")]
        name: String,
    },
}
