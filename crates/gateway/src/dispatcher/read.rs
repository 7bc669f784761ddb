//! The one read a tick decides from: the board, the held workers and this gateway's
//! memory, gathered into a [`View`] for the pure plan.

use super::*;
use board_core::LeaseHolder;

use board_core::{Attachment, StoreResult};

use super::execute::Pass;
use crate::channel::Terms;
use crate::planner::DueRecurrence;
use crate::supervisor::WorkerFile;

/// At most this many decomposition leases are read a tick: one a call in flight, among
/// every gateway of the board.
const TRIAGE_LEASES: usize = 256;

/// The board's decomposition leases are read on a gateway's first tick and then once
/// every this many seconds, not every tick: they matter only to take over the lease of
/// a gateway of this host that stopped mid-call, which a restarted gateway does on its
/// first tick and a running one within this time. A lapsed lease on a due card needs no
/// read: leasing the card finds it lapsed and charges its attempt.
const LEASE_SCAN: Timestamp = 5;

/// At most this many scheduled tasks whose time came are resumed a tick; the rest, the
/// next tick, earliest first.
const DUE_SCHEDULED_PER_TICK: usize = 256;

impl Dispatcher {
    /// The one read a tick decides from. A failed read leaves its part empty and is
    /// returned, so the rest of the tick still runs.
    pub(super) fn read(&mut self, settings: &DispatchSettings, now: Timestamp) -> (View, Vec<ReadError>) {
        let mut failed: Vec<ReadError> = Vec::new();
        let mut got = |what: &str, result: Result<Vec<Task>, StoreError>| {
            result.unwrap_or_else(|e| {
                failed.push((what.to_owned(), e));
                Vec::new()
            })
        };
        let running = self.store.running();
        let listed = running.is_ok();
        let running = got("listing running tasks", running);
        // Leases about to expire too: a held live worker's is extended before any other
        // gateway can find it expired.
        let expiring = now.saturating_add(settings.lease_margin());
        let expired = got(
            "listing expired leases",
            self.store.expired_leases(expiring, 1000),
        );
        if listed {
            self.note_ended_runs(&running, &mut failed);
        }
        let mut view = View {
            workers: self.observe(),
            proven: self.proven(&running, &expired, now),
            foreign: running
                .iter()
                .chain(&expired)
                .filter(|t| !self.ours(t))
                .map(|t| t.id.clone())
                .collect(),
            running,
            expired,
            cooldown: self.cooldown.clone(),
            skipped: self.skipped.clone(),
            ..View::default()
        };
        self.read_triage(settings, now, &mut view, &mut failed);
        match self.store.promotable() {
            Ok(ids) => view.promotable = ids,
            Err(e) => failed.push(("listing tasks to promote".to_owned(), e)),
        }
        self.due_left = false;
        match self.store.due_scheduled(now, DUE_SCHEDULED_PER_TICK) {
            Ok(ids) => {
                self.due_left = ids.len() == DUE_SCHEDULED_PER_TICK;
                self.read_due(ids, now, &mut view, &mut failed);
            }
            Err(e) => failed.push(("listing scheduled tasks whose time came".to_owned(), e)),
        }
        self.read_claimable(settings, now, &mut view, &mut failed);
        (view, failed)
    }

    /// Sorts the scheduled tasks whose time came into those that go back to work and the
    /// recurring tasks' templates, for which it reads the next time (the clock and the
    /// zone's rules are the world's) and whether the copy made last is still open.
    fn read_due(&self, ids: Vec<TaskId>, now: Timestamp, view: &mut View, failed: &mut Vec<ReadError>) {
        for id in ids {
            let template = match self.store.get(&id) {
                Ok(task) => task,
                Err(e) => {
                    failed.push((format!("reading scheduled task {id}"), e));
                    continue;
                }
            };
            let (Some(rule), Some(due)) = (template.recurrence.clone(), template.scheduled_until) else {
                view.due_scheduled.push(id);
                continue;
            };
            let open_copy = match rule.last_copy.map(|copy| (self.store.get(&copy), copy)) {
                Some((Ok(copy), id)) if !copy.status.is_terminal() => Some(id),
                Some((Err(e), _)) if e.refusal().is_none() => {
                    failed.push((format!("reading the last copy of {id}"), e));
                    continue;
                }
                _ => None,
            };
            view.due_recurring.push(DueRecurrence {
                next: crate::recurrence::next(&rule.every, due, now),
                template,
                open_copy,
            });
        }
    }

    /// Notes how the run of each held live worker ended when it is no longer running
    /// (`running` is the whole of the running tasks): ended by the worker's report, or
    /// without it.
    fn note_ended_runs(&mut self, running: &[Task], failed: &mut Vec<ReadError>) {
        let open: BTreeSet<(&TaskId, i64)> = running
            .iter()
            .filter_map(|t| Some((&t.id, t.lease.as_ref()?.run_id)))
            .collect();
        for worker in self.workers.values_mut() {
            let run_id = worker.run.run_id;
            if worker.stopping.is_some()
                || worker.run_ended.is_some()
                || open.contains(&(&worker.task_id, run_id))
            {
                continue;
            }
            match self.store.runs(&worker.task_id) {
                Ok(runs) => {
                    let ended = runs.into_iter().find(|r| r.id == run_id && !r.is_open());
                    worker.run_ended = ended.and_then(|r| r.outcome);
                }
                Err(e) => failed.push((format!("reading the runs of {}", worker.task_id), e)),
            }
        }
    }

    fn observe(&self) -> Vec<WorkerView> {
        let gone = Observed::Exited {
            exit: Exit::Unknown,
            log_tail: String::new(),
        };
        self.workers
            .values()
            .map(|w| WorkerView {
                task: w.task_id.clone(),
                run: w.run.clone(),
                adopted: w.adopted,
                observed: self.processes.probe(&w.task_id).unwrap_or_else(|| gone.clone()),
                stopping: w.stopping.clone(),
                run_ended: w.run_ended,
                profile: w.profile.clone(),
                since: w.since,
            })
            .collect()
    }

    /// Running tasks no worker here holds that a tick would stop, whose recorded pid
    /// provably runs their run.
    fn proven(&self, running: &[Task], expired: &[Task], now: Timestamp) -> BTreeSet<TaskId> {
        let expired = expired
            .iter()
            .filter(|t| t.lease.as_ref().is_some_and(|l| l.expires <= now));
        let to_stop = running.iter().filter(|t| over_runtime(t, now)).chain(expired);
        to_stop
            .filter(|t| !self.workers.contains_key(&t.id) && self.ours(t) && self.processes.proven(t))
            .map(|t| t.id.clone())
            .collect()
    }

    /// Due triage cards with their facts, as many as the decomposition limits could use
    /// past the ones in flight or held back by this gateway's memory.
    fn read_triage(
        &mut self,
        settings: &DispatchSettings,
        now: Timestamp,
        view: &mut View,
        failed: &mut Vec<ReadError>,
    ) {
        if !settings.auto_decompose {
            return;
        }
        view.in_flight = self.decompositions.in_flight();
        view.leased = self.leased.clone();
        let scan = self
            .leases_read_at
            .is_none_or(|at| now >= at.saturating_add(LEASE_SCAN) || now < at);
        match scan.then(|| self.store.triage_leases(TRIAGE_LEASES)) {
            None => {}
            Some(Ok(leases)) => {
                self.leases_read_at = Some(now);
                let holders = leases.iter().map(|l| l.holder.as_str());
                view.gone_holders = holders
                    .filter(|h| self.gone_from_this_host(h))
                    .map(str::to_owned)
                    .collect();
                view.triage_leases = leases;
            }
            Some(Err(e)) => failed.push(("listing decomposition leases".to_owned(), e)),
        }
        view.unrecorded = self.decompositions.unrecorded_failures();
        view.floors = self.floors.clone();
        match (self.store.breaker(), self.store.spend(window_start(now))) {
            (Ok(breaker), Ok(spend)) => {
                view.breaker = breaker;
                view.spend = spend;
                let in_flight = view.in_flight.clone();
                self.safety = Some((view.breaker.clone(), view.spend.clone(), in_flight));
            }
            // Without the breaker and the spend nothing may be sent.
            (Err(e), _) | (_, Err(e)) => {
                return failed.push(("reading the provider breaker and spend".to_owned(), e))
            }
        }
        let room = decomposition_room(
            settings,
            settings.auto_decompose_concurrency,
            view.in_flight.len(),
        );
        if room == 0 {
            return;
        }
        let held = self.floors.values().filter(|f| f.blocks(now)).count();
        // A probe (or the call while in doubt) passes over the breaker's suspects, so
        // the window widens past them.
        let suspects = view.breaker.suspects.len() + usize::from(view.breaker.fault_card.is_some());
        // Cards whose lease is taken over start nothing this tick, so it widens past them.
        let window = room + view.in_flight.len() + held + suspects + view.triage_leases.len();
        let due = match self.store.due_triage(now, window) {
            Ok(d) => d,
            Err(e) => return failed.push(("listing due triage cards".to_owned(), e)),
        };
        for card in due.iter().filter(|c| !view.in_flight.contains(&c.id)) {
            match self.store.facts(&card.id) {
                Ok(facts) => view.triage.push(facts),
                Err(e) => failed.push((format!("reading {}", card.id), e)),
            }
        }
    }

    /// Work waiting for a check, then ready tasks, each in claim order. Tasks that cannot
    /// be spawned stay ready: the window widens past them, so the read stays proportional
    /// to what the tick can start.
    fn read_claimable(
        &self,
        settings: &DispatchSettings,
        now: Timestamp,
        view: &mut View,
        failed: &mut Vec<ReadError>,
    ) {
        let exited = view
            .workers
            .iter()
            .filter(|w| matches!(w.observed, Observed::Exited { .. }))
            .count();
        let room = spawn_room(settings, self.workers.len() - exited);
        if room == 0 {
            return;
        }
        let mut window = room + self.skipped.len() + view.cooldown.len();
        match self.store.checkable(window) {
            Ok(waiting) => view.checkable = waiting,
            Err(e) => failed.push(("listing work waiting for a check".to_owned(), e)),
        }
        loop {
            let batch = match self.store.claimable_except(window, &settings.external) {
                Ok(b) => b,
                Err(e) => return failed.push(("listing ready tasks".to_owned(), e)),
            };
            let full = batch.len() == window;
            let candidates = batch
                .iter()
                .filter(|t| !self.workers.contains_key(&t.id) && spawnable(t, settings, &view.cooldown, now))
                .count();
            view.claimable = batch;
            if candidates >= room || !full {
                return;
            }
            window *= 2;
        }
    }

    /// Whether a lease holder (`host/pid`) is a gateway of this host that no longer runs.
    fn gone_from_this_host(&self, holder: &str) -> bool {
        let Ok(LeaseHolder { host, pid }) = holder.parse::<LeaseHolder>() else {
            return false;
        };
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        if host != self.host || pid <= 0 || pid as u32 == std::process::id() {
            return false;
        }
        // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
        let exists = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        !exists
    }
}

impl Dispatcher {
    /// A task's files for its worker, each one's bytes read in turn (a task without
    /// files costs one indexed read), listed in `terms` for its brief; when they cannot be
    /// read, that is reported and the worker starts without them.
    pub(super) fn files_for(&self, id: &TaskId, terms: &mut Terms, pass: &mut Pass<'_>) -> Vec<WorkerFile> {
        let read = || -> StoreResult<(Vec<Attachment>, Vec<WorkerFile>)> {
            let listed = self.store.attachments(id)?;
            let mut files = Vec::with_capacity(listed.len());
            for file in &listed {
                let (_, bytes) = self.store.attachment(file.id)?;
                files.push(WorkerFile {
                    name: file.name.clone(),
                    bytes,
                });
            }
            Ok((listed, files))
        };
        match read() {
            Ok((listed, files)) => {
                terms.files = listed;
                files
            }
            Err(e) => {
                pass.report.errors.push(format!("reading the files of {id}: {e}"));
                Vec::new()
            }
        }
    }
}
