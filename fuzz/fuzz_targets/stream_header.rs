//! Fuzz the stream header parser: any bytes, any claimed file length.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // the first 8 bytes pick the file length the header is checked against
    let (len, head) = match data {
        [a, b, c, d, e, f, g, h, rest @ ..] => (u64::from_le_bytes([*a, *b, *c, *d, *e, *f, *g, *h]), rest),
        _ => (0, data),
    };
    let _ = rtloop_stream::layout::parse_header(head, len, 4096);
    let mut with_magic = head.to_vec();
    if with_magic.len() >= 8 {
        with_magic[..8].copy_from_slice(&rtloop_stream::layout::MAGIC);
        let _ = rtloop_stream::layout::parse_header(&with_magic, len, 4096);
    }
});
