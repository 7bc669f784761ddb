//! The profiles and the tasks assigned to them: `kanban assignees` (Hermes' verb, its
//! JSON keys), and the tasks assigned to a profile this home cannot run (no `command` in
//! config.yaml and not served by lanes, `external: true`), which the gateway leaves ready
//! forever, so `gateway status` and `import-hermes` name each such profile once, with
//! what to add.

use std::collections::BTreeMap;

use board_core::{Status, Store, StoreResult};
use board_home::{Config, ProfileConfig};
use serde::Serialize;
use serde_json::{json, Value};

use crate::failure::Failure;
use crate::output::{plain, print_json};

use super::Ctx;

/// One name of `kanban assignees`: a profile of config.yaml, an assignee of a task that
/// is not archived, or both.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Assignee {
    pub name: String,
    /// A profile of config.yaml (Hermes' key: a profile on disk).
    pub on_disk: bool,
    /// Whether this home runs its work: a command, or lanes.
    pub runnable: bool,
    /// Its tasks by status, archived left out.
    pub counts: BTreeMap<String, u64>,
}

/// Every assignee, by name, from the config and one aggregate of the board.
fn known(store: &dyn Store, config: &Config) -> StoreResult<Vec<Assignee>> {
    let fresh = |name: &str| Assignee {
        name: name.to_owned(),
        on_disk: config.profile(name).is_some(),
        runnable: runnable(config, name),
        counts: BTreeMap::new(),
    };
    let mut found: BTreeMap<String, Assignee> = config
        .profiles
        .keys()
        .map(|name| (name.clone(), fresh(name)))
        .collect();
    for count in store.status_counts()? {
        let Some(name) = count.assignee else { continue };
        if count.status == Status::Archived {
            continue;
        }
        let entry = found.entry(name.clone()).or_insert_with(|| fresh(&name));
        *entry.counts.entry(count.status.as_str().to_owned()).or_default() += count.tasks;
    }
    Ok(found.into_values().collect())
}

/// `kanban assignees [--json]`, in Hermes' layout: NAME, ON DISK (here: in config.yaml),
/// COUNTS (`status=n`, or `(idle)`); a profile this home cannot run is marked.
pub fn assignees(ctx: &Ctx) -> Result<(), Failure> {
    let all = known(ctx.store.as_ref(), &ctx.config)?;
    if ctx.json {
        print_json(&json!(all));
        return Ok(());
    }
    if all.is_empty() {
        println!(
            "(no assignees — add a profile to config.yaml: kanban config set profiles.NAME.command ...)"
        );
        return Ok(());
    }
    println!("{:20}  {:8}  COUNTS", "NAME", "ON DISK");
    for a in &all {
        let counts: Vec<String> = a.counts.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let counts = match counts.is_empty() {
            true => "(idle)".to_owned(),
            false => counts.join(", "),
        };
        let mark = if a.runnable { "" } else { "  (no command here)" };
        let on_disk = if a.on_disk { "yes" } else { "no" };
        println!("{:20}  {on_disk:8}  {counts}{mark}", plain(&a.name, false));
    }
    Ok(())
}

/// One profile tasks wait for that this home cannot run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unrunnable {
    pub profile: String,
    /// Its ready tasks: the ones that wait now.
    pub ready: u64,
    /// Its tasks that are not done nor archived.
    pub open: u64,
}

/// Whether the config runs `profile`'s work: a command, or lanes.
fn runnable(config: &Config, profile: &str) -> bool {
    config.profile(profile).is_some_and(ProfileConfig::runs_here)
}

/// The profiles with open tasks this home cannot run: the assignees ([`known`]) that are
/// not runnable and have a task that is not done.
pub fn unrunnable(store: &dyn Store, config: &Config) -> StoreResult<Vec<Unrunnable>> {
    let count = |a: &Assignee, status: Status| a.counts.get(status.as_str()).copied().unwrap_or(0);
    Ok(known(store, config)?
        .into_iter()
        .filter(|a| !a.runnable)
        .map(|a| Unrunnable {
            ready: count(&a, Status::Ready),
            open: a.counts.values().sum::<u64>() - count(&a, Status::Done),
            profile: a.name,
        })
        .filter(|u| u.open > 0)
        .collect())
}

/// What to add for `profile`, in words. A command line to copy is offered only for a
/// plain name: a profile name comes from the board (an imported one, say) and is no
/// text to paste into a shell.
pub fn fix(profile: &str) -> String {
    let plain_name = !profile.is_empty()
        && profile
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    let example = match plain_name {
        true => format!(" (kanban config set profiles.{profile}.command '[\"my-agent\", \"{{task_id}}\"]')"),
        false => String::new(),
    };
    format!(
        "add profiles.{profile}.command to config.yaml{example}, or profiles.{profile}.external: true \
         for a lane to claim them"
    )
}

/// Each profile's line for people, once per profile.
pub fn lines(found: &[Unrunnable]) -> Vec<String> {
    found
        .iter()
        .map(|u| {
            let profile = plain(&u.profile, false);
            format!(
                "{} task(s) of profile {profile} ({} ready) wait for a command this home does not have: {}",
                u.open,
                u.ready,
                fix(&profile)
            )
        })
        .collect()
}

/// The same for `--json`.
pub fn to_json(found: &[Unrunnable]) -> Value {
    json!(found
        .iter()
        .map(|u| json!({"profile": u.profile, "ready": u.ready, "open": u.open, "fix": fix(&u.profile)}))
        .collect::<Vec<_>>())
}

#[cfg(test)]
mod tests {
    use super::fix;

    #[test]
    fn a_command_to_copy_only_for_a_plain_profile_name() {
        assert!(fix("coder-2").contains("kanban config set profiles.coder-2.command"));
        let hostile = fix("x; rm -rf ~");
        assert!(!hostile.contains("kanban config set"), "{hostile}");
        assert!(
            hostile.starts_with("add profiles.x; rm -rf ~.command to config.yaml,"),
            "{hostile}"
        );
    }
}
