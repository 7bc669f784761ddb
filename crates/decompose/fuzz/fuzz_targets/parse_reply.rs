//! Fuzzes the decomposer's reply parser: whatever a model sends, `parse_reply` returns
//! a plan or a rejection and never panics, and a rejection stays one bounded line.

#![no_main]

use decompose::{parse_reply, Profile, Roster};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let rosters = [
        Roster::default(),
        Roster::new(vec![Profile::new("coder", "Writes code")])
            .with_default_assignee(Some("coder"))
            .with_max_children(Some(3)),
    ];
    for roster in &rosters {
        if let Err(rejection) = parse_reply(&text, roster) {
            let reason = rejection.to_string();
            assert!(!reason.contains('\n'), "multi-line reason: {reason:?}");
            assert!(reason.chars().count() <= 250, "reason too long: {}", reason.len());
        }
    }
});
