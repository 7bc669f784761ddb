//! `MemStore`'s card-and-plan writes: decided on a draft of the tables, kept whole or
//! not at all.

use crate::graph::NewTask;
use crate::plan::{Plan, PlanSettings};
use crate::store::{Committed, StoreResult};
use crate::template::{write_new, GraphWrites};
use crate::types::Timestamp;

use super::MemStore;

impl GraphWrites for MemStore {
    fn create_planned(
        &self,
        root: &NewTask,
        plan: &Plan,
        settings: &PlanSettings,
        now: Timestamp,
    ) -> StoreResult<Committed> {
        let mut board = self.board();
        let mut draft = board.clone();
        let committed = write_new(&mut draft, root, plan, settings, now)?;
        *board = draft;
        Ok(committed)
    }
}
