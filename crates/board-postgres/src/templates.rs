//! `GraphWrites` for `PgStore`: a card and its plan in one transaction.

use board_core::plan::{Plan, PlanSettings};
use board_core::store::{Committed, StoreResult};
use board_core::template::{write_new, GraphWrites};
use board_core::{NewTask, Timestamp};

use crate::apply::PlanTx;
use crate::PgStore;

impl GraphWrites for PgStore {
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
