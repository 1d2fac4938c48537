//! Any bytes as a FieldTrip message: the prefix, every request's payload parser, the reply
//! parsers and the chunk walker must never panic; a parsed request must re-encode and parse
//! back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rtloop_fieldtrip::codec::{
    channel_names, encode_request, parse_data_payload, parse_events, parse_header_payload,
    parse_prefix, parse_request, parse_samples_events, put_chunks, ByteOrder,
};

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let Ok(prefix) = parse_prefix(data[..8].try_into().unwrap()) else {
        return;
    };
    let payload = &data[8..];
    for order in [ByteOrder::Little, ByteOrder::Big] {
        let _ = parse_header_payload(order, payload, "fuzz");
        let _ = parse_data_payload(order, payload, "fuzz");
        let _ = parse_events(order, payload, "fuzz");
        let _ = parse_samples_events(order, payload);
        let mut out = Vec::new();
        put_chunks(order, payload, &mut out);
    }
    let _ = channel_names(payload, 4);
    if let Ok(p) = parse_request(&prefix, payload) {
        let mut again = Vec::new();
        encode_request(prefix.order, &p.request, p.respond, &mut again);
        let p2 = parse_prefix(again[..8].try_into().unwrap()).unwrap();
        let back = parse_request(&p2, &again[8..]).expect("a re-encoded request parses");
        // NaN fsample never equals itself; compare the bytes instead
        let mut again2 = Vec::new();
        encode_request(prefix.order, &back.request, back.respond, &mut again2);
        assert_eq!(again, again2);
    }
});
