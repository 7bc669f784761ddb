//! `kanban lane create|list|revoke` and `kanban claim --lane`: agents outside the
//! gateway that pull work (docs/lanes.md). A lane's claim here is the store's
//! `claim_for_lane`, the same one `kanban serve` answers lanes over HTTP with; its wait
//! sleeps on the board's wake-ups, not a polling loop.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use board_core::lanes::{token_from, Lane, LaneClaim, LaneStats};
use board_core::{Checks, Claim, Store, Task, Timestamp};
use board_home::{Config, Home};
use gateway::planner::DispatchSettings;
use serde_json::{json, Value};

use crate::args::LaneCommand;
use crate::failure::Failure;
use crate::output::{age, cell, print_json, width, Table};

use super::context::brief_of;
use super::Ctx;

pub fn run(ctx: &Ctx, command: LaneCommand) -> Result<(), Failure> {
    match command {
        LaneCommand::Create { name, profiles } => create(ctx, &name, &profiles),
        LaneCommand::List => list(ctx),
        LaneCommand::Revoke { name } => {
            let lane = ctx.store.revoke_lane(&name, ctx.now)?;
            match ctx.json {
                true => print_json(&lane_json(&lane)),
                false => println!("lane {name} revoked; its token is refused from now on"),
            }
            Ok(())
        }
    }
}

fn create(ctx: &Ctx, name: &str, profiles: &[String]) -> Result<(), Failure> {
    let mut random = [0u8; 32];
    getrandom::fill(&mut random).map_err(|e| Failure::Refused(format!("cannot draw a token: {e}")))?;
    let token = token_from(random);
    let lane = Lane::new(name, profiles, &token, ctx.now).map_err(|e| Failure::Usage(e.to_string()))?;
    for profile in &lane.profiles {
        if !ctx.config.profiles.contains_key(profile) {
            eprintln!("kanban: warning: {profile} is not a profile of config.yaml; the lane claims its tasks all the same");
        }
    }
    ctx.store.create_lane(&lane)?;
    if ctx.json {
        let mut shown = lane_json(&lane);
        shown["token"] = json!(token);
        print_json(&shown);
    } else {
        println!("lane {} created for {}", lane.name, lane.profiles.join(", "));
        println!("token (shown once; the board keeps only its digest):");
        println!("{token}");
    }
    Ok(())
}

fn lane_json(lane: &Lane) -> Value {
    serde_json::to_value(lane).unwrap_or(Value::Null)
}

fn list(ctx: &Ctx) -> Result<(), Failure> {
    let lanes = ctx.store.lane_stats()?;
    if ctx.json {
        print_json(&Value::Array(lanes.iter().map(|l| l.to_json(ctx.now)).collect()));
        return Ok(());
    }
    if lanes.is_empty() {
        println!(
            "{}",
            ctx.paint
                .dim("no lanes (kanban lane create NAME --profile PROFILE)")
        );
        return Ok(());
    }
    print_lanes(ctx, &lanes);
    Ok(())
}

/// The lanes as a table: name, state, held, done, failed, last seen, profiles.
pub fn print_lanes(ctx: &Ctx, lanes: &[LaneStats]) {
    let mut table = Table::new(
        &["LANE", "STATE", "HELD", "DONE", "FAILED", "SEEN", "PROFILES"],
        ctx.paint,
    );
    for l in lanes {
        let seen = l
            .last_seen()
            .map_or_else(|| "never".to_owned(), |at| format!("{} ago", age(ctx.now, at)));
        table.row(vec![
            cell(l.lane.name.as_str()),
            cell(l.state(ctx.now)),
            cell(l.held.to_string()),
            cell(l.done.to_string()),
            cell(l.failed.to_string()),
            cell(seen),
            cell(l.lane.profiles.join(", ")),
        ]);
    }
    table.print(width());
}

/// What a lane's claim hands over: the task, its brief, the run and its lease.
pub fn claim_json(store: &dyn Store, claim: &Claim, now: Timestamp) -> Result<Value, Failure> {
    Ok(web::lane_claim_json(claim, brief_of(store, &claim.task.id, now)?))
}

/// The checks a lane's work run must pass: those a gateway would fix at the claim.
pub fn checks_for(config: &Config) -> impl Fn(&Task) -> Checks + Send + Sync + 'static {
    let settings = DispatchSettings::from_config(config);
    move |task: &Task| settings.checks_for(task)
}

/// `kanban claim ID` (a person's claim) or `kanban claim --lane NAME` (a lane's).
pub fn claim_verb(
    ctx: &Ctx,
    home: &Home,
    id: Option<board_core::TaskId>,
    lane: Option<String>,
    (wait, ttl): (Option<i64>, Option<i64>),
) -> Result<(), Failure> {
    match (id, lane) {
        (_, Some(lane)) => claim(ctx, home, &lane, wait, ttl),
        (Some(id), None) => super::work::claim(ctx, &id, ttl),
        (None, None) => Err(Failure::Usage("claim needs a task id or --lane NAME".to_owned())),
    }
}

/// `kanban claim --lane NAME [--wait DUR]`: exit 0 with the claim, exit 3 when nothing
/// was ready before the wait ended.
pub fn claim(ctx: &Ctx, home: &Home, name: &str, wait: Option<i64>, ttl: Option<i64>) -> Result<(), Failure> {
    let lanes = &ctx.config.lanes;
    let ttl = ttl.unwrap_or(lanes.lease_seconds);
    let wait = wait.unwrap_or(0).min(lanes.max_wait_seconds);
    let checks = checks_for(&ctx.config);
    let store = ctx.store.as_ref();
    let attempt = |now| store.claim_for_lane(name, ttl, lanes.max_held, &checks, now);
    let claimed = match attempt(board_home::now())? {
        LaneClaim::Claimed(c) => Some(c),
        LaneClaim::Nothing if wait > 0 => wait_for_work(ctx, home, name, wait, &attempt)?,
        LaneClaim::Nothing => None,
    };
    let Some(claim) = claimed else {
        return Err(Failure::Nothing(format!("nothing ready for lane {name}")));
    };
    let shown = claim_json(store, &claim, board_home::now())?;
    match ctx.json {
        true => print_json(&shown),
        false => {
            println!(
                "claimed {} as run {} for lane {name}",
                claim.task.id, claim.run_id
            );
            println!("{}", crate::output::plain(&claim.task.title, false));
        }
    }
    Ok(())
}

/// Sleeps on the board's wake-ups (a socket of this process under the home's `waiters/`,
/// or the board's channel on PostgreSQL) until a claim lands or `wait` seconds pass;
/// the lane is shown as waiting meanwhile.
fn wait_for_work(
    ctx: &Ctx,
    home: &Home,
    name: &str,
    wait: i64,
    attempt: &dyn Fn(Timestamp) -> board_core::StoreResult<LaneClaim>,
) -> Result<Option<Box<Claim>>, Failure> {
    let woken = Arc::new((Mutex::new(0u64), Condvar::new()));
    let nudge = woken.clone();
    let _listening = home.watch(
        &ctx.config,
        Arc::new(move || {
            let (count, bell) = &*nudge;
            *count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
            bell.notify_all();
        }),
    )?;
    let deadline = Instant::now() + Duration::from_secs(wait as u64);
    ctx.store
        .see_lane(name, Some(board_home::now() + wait), board_home::now())?;
    let (count, bell) = &*woken;
    let mut seen = 0;
    let found = loop {
        // A wake-up between the listener's start and now is not missed: claim once more.
        if let LaneClaim::Claimed(c) = attempt(board_home::now())? {
            break Some(c);
        }
        let mut woke = count.lock().unwrap_or_else(|p| p.into_inner());
        while *woke == seen {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            woke = bell.wait_timeout(woke, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        if *woke == seen {
            break None;
        }
        seen = *woke;
    };
    ctx.store.see_lane(name, None, board_home::now())?;
    Ok(found)
}
