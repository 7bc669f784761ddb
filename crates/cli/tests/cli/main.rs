//! The `kanban` binary's tests: one module per suite, all in one test binary, so a build
//! links tokio, reqwest, bundled SQLite and the fake model once rather than once a suite.
//! A test's path starts with its suite (`e2e::...`, `reliability_crash::...`), which is
//! how `cargo xtask e2e` and `cargo xtask soak` pick theirs.
//!
//! `common` runs the binary against a board in a temporary home; `gateway_board` adds a
//! real gateway process and the fake model, and the checks the reliability suites end with.

mod common;
mod gateway_board;

mod attachments;
mod bad_input;
mod bad_rows;
mod boards;
mod checks;
mod config;
mod cost_safety;
mod decompose;
mod decompose_lease;
mod decompose_recovery;
mod deploy;
mod dispatch;
mod e2e;
mod fresh_home;
mod hermes_day;
mod hermes_fields;
mod hermes_lines;
mod hermes_verbs;
mod home_safety;
mod host_rig;
mod http_endpoint;
mod import_hermes;
mod lanes;
mod large_reads;
mod mcp;
mod migrate;
mod notify;
mod output_escapes;
mod private_server;
mod reading;
mod recurring;
mod reliability_crash;
mod reliability_db_faults;
mod reliability_model_faults;
mod reliability_secrets;
mod report_channel;
mod retention;
mod schedules;
mod scratch_schema;
mod serve_peers;
mod service;
mod several_gateways;
mod size_caps;
mod snapshots;
mod templates;
mod verbs;
mod verbs_habits;
mod wakeups;
mod worker;
mod worker_boundary;
