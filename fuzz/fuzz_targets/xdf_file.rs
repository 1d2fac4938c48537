//! Any bytes after the XDF magic: the XDF parser (used by `rtloop replay FILE.xdf`) must
//! never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut b = b"XDF:".to_vec();
    b.extend_from_slice(data);
    let _ = rtloop_record::xdf::parse(&b);
    let _ = rtloop_record::xdf::parse(data);
});
