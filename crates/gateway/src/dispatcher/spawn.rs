//! Starting the workers of a plan's spawns: the claims taken for them, their files read,
//! then every worker started in one call to the process control, which may start them
//! side by side; a worker that cannot be started ends its run as `spawn_failed`.

use super::execute::{terms, Pass};
use super::*;
use board_core::Claim;

use crate::channel::Terms;
use crate::supervisor::WorkerFile;

/// A spawn whose claim was taken: what its worker is started with.
struct Claimed<'p> {
    claim: Claim,
    profile: &'p str,
    command: &'p [String],
    files: Vec<WorkerFile>,
}

impl Dispatcher {
    /// Starts the workers of `actions` (spawns, in plan order) whose claims were taken.
    pub(super) fn spawn_all(&mut self, actions: &[Action], pass: &mut Pass<'_>) {
        let mut claimed = Vec::with_capacity(actions.len());
        let mut all_terms: Vec<Terms> = Vec::with_capacity(actions.len());
        for action in actions {
            let Action::Spawn {
                task,
                profile,
                command,
                kind,
                verifiers,
            } = action
            else {
                continue;
            };
            let Some(claim) = pass.claims.remove(&task.id) else {
                continue;
            };
            let mut terms = terms(pass.settings, *kind, verifiers);
            let files = self.files_for(&task.id, &mut terms, pass);
            claimed.push(Claimed {
                claim,
                profile,
                command,
                files,
            });
            all_terms.push(terms);
        }
        let settings = pass.settings;
        let no_boundary = Boundary::default();
        let assignments: Vec<Assignment<'_>> = claimed
            .iter()
            .zip(all_terms)
            .map(|(c, terms)| Assignment {
                task: &c.claim.task,
                run_id: c.claim.run_id,
                claim_lock: &c.claim.claim_lock,
                profile: c.profile,
                command: c.command,
                secret_vars: &settings.secret_vars,
                boundary: settings.boundaries.get(c.profile).unwrap_or(&no_boundary),
                home_board: settings.home_board,
                terms,
                worker_log: settings.worker_log,
                files: &c.files,
            })
            .collect();
        let outcomes = self.processes.spawn_each(&assignments);
        for (c, outcome) in claimed.iter().zip(outcomes) {
            self.started(c, outcome, pass);
        }
    }

    /// Holds a started worker, its pid to be recorded on its run with the pass's others;
    /// ends the run of one that did not start.
    fn started(&mut self, c: &Claimed<'_>, outcome: std::io::Result<u32>, pass: &mut Pass<'_>) {
        let task = &c.claim.task;
        let run = RunRef {
            run_id: c.claim.run_id,
            claim_lock: c.claim.claim_lock.clone(),
        };
        let profile = c.profile;
        match outcome {
            Ok(pid) => {
                let request = Request::SetWorker {
                    run_id: run.run_id,
                    claim_lock: run.claim_lock.clone(),
                    pid: i64::from(pid),
                    host: self.host.clone(),
                };
                pass.started.push((task.id.clone(), request));
                tracing::info!(task = %task.id, run = run.run_id, pid, %profile, "spawned a worker");
                let held = HeldWorker {
                    task_id: task.id.clone(),
                    pid,
                    run,
                    adopted: false,
                    stopping: None,
                    run_ended: None,
                    profile: Some(profile.to_owned()),
                    since: pass.now,
                };
                self.workers.insert(task.id.clone(), held);
                pass.report.spawned.push(task.id.clone());
            }
            Err(e) => {
                tracing::warn!(task = %task.id, error = %e, "could not spawn a worker");
                let ending = Ending {
                    outcome: Outcome::SpawnFailed,
                    error: Some(e.to_string()),
                    detail: json!({ "profile": profile }),
                };
                if let Err(e) = self.end_run(&task.id, &run, &ending, pass) {
                    pass.report
                        .errors
                        .push(format!("ending the failed spawn of {}: {e}", task.id));
                }
            }
        }
    }
}
