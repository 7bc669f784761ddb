//! `kanban config ...`: check, get, set and path.

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate config.yaml: warnings on stderr, the effective values on stdout (the API
    /// key redacted); exit 1 when it is invalid
    #[command(after_help = "Examples:\n  kanban config check\n  kanban config check --json")]
    Check,
    /// Print the effective value of one dotted key, as `config check` shows it (secrets
    /// redacted); an unknown key exits 1
    #[command(
        after_help = "Examples:\n  kanban config get kanban.max_spawn\n  kanban config get profiles.default --json"
    )]
    Get {
        /// A dotted key: kanban.max_spawn, gateway.metrics_bind, profiles.NAME.command
        #[arg(value_name = "KEY")]
        key: String,
    },
    /// Set one dotted key in config.yaml; the new file is checked as `config check` checks
    /// it before it replaces the old one, so an unknown key or a bad value changes nothing
    #[command(
        after_help = "Examples:\n  kanban config set kanban.max_spawn 8\n  kanban config set kanban.default_assignee coder\n  kanban config set profiles.coder.command '[\"claude\", \"-p\"]'\n\nVALUE is read as YAML: 8 is a number, true a flag, [a, b] a list, anything else text.\nThe file is written anew from its parsed tree: its comments and layout are not kept."
    )]
    Set {
        /// A dotted key: kanban.max_spawn, model.default, profiles.NAME.command
        #[arg(value_name = "KEY")]
        key: String,
        /// The new value, as YAML
        #[arg(value_name = "VALUE", allow_hyphen_values = true)]
        value: String,
    },
    /// Print the path of the home's config.yaml (whether or not it exists)
    #[command(after_help = "Examples:\n  kanban config path\n  $EDITOR \"$(kanban config path)\"")]
    Path,
}
