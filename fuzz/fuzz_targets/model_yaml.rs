//! Fuzz the runtime's model file parser: any UTF-8 text must give a model or a list of
//! problems, never a panic, a stack overflow or an unbounded allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        // code paths resolve against a directory that does not exist
        let path = std::path::Path::new("/nonexistent-rtloop-fuzz/model.yaml");
        if let Err(e) = rtloop_runtime::model::parse_str(text, path) {
            assert!(!e.errors.is_empty());
            let _ = e.to_string();
        }
    }
});
