//! The gateway's tests through its public API, one module per suite, all in one test
//! binary so a build links it once.

mod binary;
mod dispatcher;
mod fencing;
mod plan_and_tick;
mod spawns;
mod worker_boundary;
