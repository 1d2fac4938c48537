//! Any text as a SpikeGLX `.meta` (used by `rtloop replay FILE.bin`), read as an AP and as an
//! LF file: the parser and the gain rules must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rtloop_record::formats::spikeglx;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(m) = spikeglx::parse_meta(&text) {
        let _ = spikeglx::layout(&m, "run_g0_t0.imec0.ap");
        let _ = spikeglx::layout(&m, "run_g0_t0.imec0.lf");
        let _ = spikeglx::layout(&m, "run_g0_t0.nidq");
    }
});
