//! Step 5 of the plan: what starts now. Work waiting for a check goes first (a
//! verification or a review finishes work already done and lets its children start),
//! then ready tasks in claim order; at most `max_spawn` workers are held, and at most a
//! profile's `max_concurrent` of its own. All are claimed in one call, then started.

use std::collections::BTreeMap;

use board_core::{Checks, Offer, RunKind, Status, Task};

use super::{cooling, spawn_room, Action, Planner};

/// How a task waiting to be claimed would start.
enum Start {
    /// A worker of `profile` running `command`, for a run of `kind`.
    Run {
        profile: String,
        command: Vec<String>,
        kind: RunKind,
        verifiers: Vec<Vec<String>>,
        checks: Checks,
    },
    /// The profile that would run it has no command: the task waits, noted once.
    Unrunnable { profile: String },
}

impl Planner<'_> {
    pub(super) fn spawns(&mut self) {
        let mut room = spawn_room(self.settings, self.held);
        if room == 0 {
            return;
        }
        let mut per_profile: BTreeMap<String, usize> = BTreeMap::new();
        for worker in &self.view.workers {
            if let Some(profile) = &worker.profile {
                *per_profile.entry(profile.clone()).or_default() += 1;
            }
        }
        let (mut offers, mut spawns) = (Vec::new(), Vec::new());
        for task in self.view.checkable.iter().chain(&self.view.claimable) {
            if cooling(&self.view.cooldown, &task.id, self.now) || self.worker(&task.id).is_some() {
                continue;
            }
            match self.start_for(task) {
                Some(Start::Run {
                    profile,
                    command,
                    kind,
                    verifiers,
                    checks,
                }) => {
                    let cap = self.settings.gates_for(&profile).and_then(|g| g.max_concurrent);
                    let held = per_profile.get(profile.as_str()).copied().unwrap_or(0);
                    if room == 0 || cap.is_some_and(|cap| held >= cap) {
                        continue;
                    }
                    room -= 1;
                    *per_profile.entry(profile.clone()).or_default() += 1;
                    offers.push(Offer {
                        task: task.id.clone(),
                        kind,
                        checks,
                        // An unassigned task's work goes to kanban.default_assignee, and
                        // the claim says so on the task.
                        assign: task.assignee.is_none().then(|| profile.clone()),
                    });
                    spawns.push(Action::Spawn {
                        task: task.clone(),
                        profile,
                        command,
                        kind,
                        verifiers,
                    });
                }
                Some(Start::Unrunnable { profile }) if !self.view.skipped.contains(&task.id) => {
                    self.actions.push(Action::SkipNonspawnable {
                        task: task.id.clone(),
                        profile,
                    });
                }
                Some(Start::Unrunnable { .. }) | None => {}
            }
        }
        if !spawns.is_empty() {
            self.actions.push(Action::Claim { offers });
            self.actions.extend(spawns);
        }
    }

    /// How `task` would start: a ready task's profile does the work; the verifier checks
    /// reported work as the task's profile; its reviewer reviews verified work. A task
    /// in review with no reviewer (or whose reviewer is the profile that did the work,
    /// after a reassignment) waits for a person; a verification waits for a gateway that
    /// can run verifiers.
    fn start_for(&self, task: &Task) -> Option<Start> {
        let (profile, command) = self.settings.worker_for(task);
        let start = match task.status {
            Status::Ready if self.settings.external.contains(&profile) => return None,
            Status::Ready => match command {
                Some(command) => Start::Run {
                    checks: self.settings.checks_for(task),
                    profile,
                    command,
                    kind: RunKind::Work,
                    verifiers: Vec::new(),
                },
                None => Start::Unrunnable { profile },
            },
            Status::Verifying => Start::Run {
                command: self.settings.verifier.clone()?,
                profile,
                kind: RunKind::Verify,
                verifiers: self.settings.verifiers_for(task),
                checks: Checks::default(),
            },
            Status::Review => {
                let reviewer = task.reviewer.clone().filter(|r| *r != profile)?;
                match self.settings.commands.get(&reviewer).cloned().flatten() {
                    Some(command) => Start::Run {
                        profile: reviewer,
                        command,
                        kind: RunKind::Review,
                        verifiers: Vec::new(),
                        checks: Checks::default(),
                    },
                    None => Start::Unrunnable { profile: reviewer },
                }
            }
            _ => return None,
        };
        Some(start)
    }
}
