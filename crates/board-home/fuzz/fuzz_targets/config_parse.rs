//! Fuzzes the config loader: whatever `config.yaml` holds, `Config::parse` returns a
//! config or a one-line error and never panics, and no key ever shows in what it prints.

#![no_main]

use board_home::config::Config;
use libfuzzer_sys::fuzz_target;

const CANARY: &str = "sk-fuzz-canary-0b4e7d";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let env = |name: &str| (name == "OPENAI_API_KEY" || name == "FUZZ_KEY").then(|| CANARY.to_owned());
    match Config::parse(text, &env) {
        Ok(loaded) => {
            let shown = format!("{} {:?}", loaded.config.effective_json(), loaded.warnings);
            assert!(
                !shown.contains(CANARY),
                "the key from the environment was printed"
            );
            let _ = loaded.config.effective_yaml();
            let _ = loaded.config.kanban.dispatch_interval();
        }
        Err(e) => {
            let message = e.to_string();
            assert!(!message.contains('\n'), "multi-line error: {message:?}");
            assert!(!message.contains(CANARY), "the key was printed");
        }
    }
});
