//! Any text as an Open Ephys `structure.oebin`, any bytes as one of its `.npy` files, and any
//! TTL edges (used by `rtloop replay` on Open Ephys binary recordings): never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rtloop_record::formats::{npy, openephys};

fuzz_target!(|data: &[u8]| {
    let _ = openephys::parse_oebin(&String::from_utf8_lossy(data));
    if let Ok(a) = npy::parse(data) {
        if let Some(v) = a.ints() {
            let half = v.len() / 2;
            let first = v.first().copied().unwrap_or(0);
            let _ = openephys::ttl_events(&v[..half], &v[half..], first);
        }
    }
});
