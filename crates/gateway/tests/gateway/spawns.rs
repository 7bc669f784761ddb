//! The workers a tick starts are started together (`Processes::spawn_each`, on more than
//! one thread): each still runs in its own workspace, is told its own task, and has its
//! own pid held by the dispatcher and recorded on its run.

use std::time::{Duration, Instant};

use board_core::TaskId;
use gateway::planner::DispatchSettings;

use crate::dispatcher::{home, kill_workers, settings, T0};

#[test]
fn the_workers_of_one_tick_each_run_their_own_task_under_their_own_pid() {
    let h = home();
    let s = DispatchSettings {
        max_spawn: 7,
        ..settings(&[("each", "echo \"$KANBAN_TASK $$\" > mine; exec sleep 30")])
    };
    let tasks: Vec<TaskId> = (0..7).map(|i| h.task(&format!("task {i}"), "each")).collect();
    let mut d = h.dispatcher();
    let report = d.tick(&s, T0);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.spawned, tasks, "every task started, in claim order");
    let layout = board_home::Home::at(h.dir.path()).unwrap();
    let held: Vec<(TaskId, u32)> = d.workers().map(|w| (w.task_id.clone(), w.pid)).collect();
    assert_eq!(held.len(), tasks.len());
    let started = Instant::now();
    for task in &tasks {
        let noted = layout.workspace(task).join("mine");
        let line = loop {
            match std::fs::read_to_string(&noted) {
                Ok(line) if line.ends_with('\n') => break line,
                _ if started.elapsed() > Duration::from_secs(10) => panic!("{task} never wrote {noted:?}"),
                _ => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        let (told, pid) = line.trim().split_once(' ').unwrap();
        assert_eq!(
            told,
            task.as_str(),
            "the worker in {task}'s workspace was told its task"
        );
        let pid: u32 = pid.parse().unwrap();
        let holding = held.iter().find(|(t, _)| t == task).map(|(_, p)| *p);
        assert_eq!(
            holding,
            Some(pid),
            "the dispatcher holds {task}'s worker by its pid"
        );
        let recorded = h.store.get(task).unwrap().worker_pid();
        assert_eq!(recorded, Some(i64::from(pid)), "{task}'s run records its worker");
    }
    kill_workers(&d);
}
