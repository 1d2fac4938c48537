//! The by-hand check of `rtloop bench fieldtrip`'s reference (bench/README.md, "By hand,
//! FieldTrip's own server and client"):
//!
//! * `fieldtrip_by_hand serve`: run the reference server (`rtloop_peers::fieldtrip_reference`),
//!   print its address, serve until stdin closes;
//! * `fieldtrip_by_hand client HOST:PORT CHANNELS SAMPLES SECONDS`: rtloop's client as the
//!   benchmark drives it (one connection, PUT_HDR, PUT_DAT for SECONDS, then GET_DAT of the
//!   newest block for SECONDS); prints values per second written and read;
//! * `fieldtrip_by_hand inproc - CHANNELS SAMPLES SECONDS`: the same against a reference
//!   server started in this process (as the benchmark ran it until 2026-11-27).

use std::time::Instant;

use rtloop_fieldtrip::Client;
use rtloop_peers::fieldtrip_reference::ReferenceServer;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => {
            let r = ReferenceServer::start().expect("start the reference");
            println!("{}", r.addr());
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        }
        Some("client" | "inproc") if args.len() == 5 => {
            let num = |i: usize| -> f64 {
                args[i]
                    .parse()
                    .unwrap_or_else(|_| panic!("argument {i} must be a number: {:?}", args[i]))
            };
            let (ch, s, secs) = (num(2) as u32, num(3) as u32, num(4));
            // `inproc`: the reference in this process, as `rtloop bench fieldtrip` runs it
            let local = (args[0] == "inproc").then(|| ReferenceServer::start().expect("start"));
            let addr = local
                .as_ref()
                .map_or_else(|| args[1].clone(), ReferenceServer::addr);
            let mut c = Client::connect(&addr).expect("connect");
            c.put_header(ch, 1000.0, 9, &[]).expect("PUT_HDR");
            let data: Vec<u8> = (0..ch * s).flat_map(|i| (i as f32).to_ne_bytes()).collect();
            let values = f64::from(ch * s);
            let t = Instant::now();
            let mut n = 0u64;
            while n == 0 || t.elapsed().as_secs_f64() < secs {
                c.put_data_bytes(ch, 9, &data, true).expect("PUT_DAT");
                n += 1;
            }
            let write = n as f64 * values / t.elapsed().as_secs_f64();
            let newest = c.get_header().expect("GET_HDR").def.nsamples;
            let sel = Some((newest - s, newest - 1));
            let mut out = Vec::new();
            let t = Instant::now();
            let mut n = 0u64;
            while n == 0 || t.elapsed().as_secs_f64() < secs {
                c.get_data_into(sel, &mut out).expect("GET_DAT");
                n += 1;
            }
            let read = n as f64 * values / t.elapsed().as_secs_f64();
            assert_eq!(
                out.len(),
                (ch * s * 4) as usize,
                "GET_DAT returned a short block"
            );
            println!("{write:.0} {read:.0}");
        }
        _ => {
            eprintln!("usage: fieldtrip_by_hand serve | client HOST:PORT CHANNELS SAMPLES SECONDS");
            std::process::exit(2);
        }
    }
}
