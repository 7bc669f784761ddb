//! `GraphWrites` for `SqliteStore`: a card and its plan in one `BEGIN IMMEDIATE`
//! transaction.

use board_core::plan::{Plan, PlanSettings};
use board_core::store::{Committed, StoreResult};
use board_core::template::{write_new, GraphWrites};
use board_core::{NewTask, Timestamp};

use super::apply::PlanTx;
use crate::SqliteStore;

impl GraphWrites for SqliteStore {
    fn create_planned(
        &self,
        root: &NewTask,
        plan: &Plan,
        settings: &PlanSettings,
        now: Timestamp,
    ) -> StoreResult<Committed> {
        self.write(|tx| write_new(&mut PlanTx(tx), root, plan, settings, now))
    }
}
