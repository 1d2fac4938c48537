//! rtloop-lsl against the real liblsl (the one the pylsl wheel bundles, found through
//! `RTLOOP_PYTHON` / python3, or `RTLOOP_LIBLSL`): an outlet and an inlet of every channel
//! format round trip every value; a stream bridged out to LSL and back in arrives with every
//! sample intact; bad input gets a clear error. Without liblsl the tests say so and pass,
//! unless `RTLOOP_REQUIRE_PEERS=1` (CI), where a missing peer is a failure.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtloop_lsl::bridge::{lsl_in, lsl_out, InOptions, OutOptions};
use rtloop_lsl::io::{Inlet, Outlet, OutletSpec};
use rtloop_lsl::{Lsl, LslError};
use rtloop_stream::{DType, ReaderMode, Stream, StreamConfig};
use rtloop_testkit::{unique_name, StreamGuard, Watchdog};

/// liblsl, or None (with a message) when it is missing and peers are not required.
fn lsl() -> Option<Arc<Lsl>> {
    if std::env::var_os("RTLOOP_PYTHON").is_none() {
        // the repository's dev environment, if it exists, has pylsl
        let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/python");
        if std::path::Path::new(venv).exists() {
            std::env::set_var("RTLOOP_PYTHON", venv);
        }
    }
    match Lsl::load() {
        Ok(l) => Some(Arc::new(l)),
        Err(e) if std::env::var("RTLOOP_REQUIRE_PEERS").is_ok_and(|v| v == "1") => {
            panic!("RTLOOP_REQUIRE_PEERS=1 but liblsl is missing: {e} (bash scripts/python-dev.sh installs pylsl)")
        }
        Err(e) => {
            eprintln!("skipped: liblsl not found ({e}); bash scripts/python-dev.sh installs pylsl");
            None
        }
    }
}

fn spec(name: &str, dtype: Option<DType>, channels: usize) -> OutletSpec {
    OutletSpec {
        name: name.to_owned(),
        kind: "Test".into(),
        source_id: format!("rtloop-test:{name}"),
        channels,
        rate: 100.0,
        dtype,
        labels: (0..channels).map(|c| format!("c{c}")).collect(),
        units: vec!["uV".into(); channels],
    }
}

/// Bytes of `n` samples of `ch` channels of `d`, value = sample * 8 + channel (fits int8).
fn values(d: DType, n: usize, ch: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        for c in 0..ch {
            let v = ((i * 8 + c) % 120) as i64;
            match d {
                DType::F32 => out.extend_from_slice(&(v as f32).to_ne_bytes()),
                DType::F64 => out.extend_from_slice(&(v as f64).to_ne_bytes()),
                DType::I8 => out.extend_from_slice(&(v as i8).to_ne_bytes()),
                DType::I16 => out.extend_from_slice(&(v as i16).to_ne_bytes()),
                DType::I32 => out.extend_from_slice(&(v as i32).to_ne_bytes()),
                DType::I64 => out.extend_from_slice(&v.to_ne_bytes()),
                other => panic!("{other} has no LSL format"),
            }
        }
    }
    out
}

#[test]
fn every_channel_format_round_trips_through_a_real_outlet_and_inlet() {
    let _w = Watchdog::arm(120, "lsl formats");
    let Some(lsl) = lsl() else { return };
    for d in [
        DType::F32,
        DType::F64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
    ] {
        let name = unique_name(&format!("lsl-{d}"));
        let out = Outlet::create(lsl.clone(), &spec(&name, Some(d), 3)).unwrap();
        let mut inlet = Inlet::open(lsl.clone(), &name, Some("name"), 10.0, &|| false).unwrap();
        assert_eq!(inlet.dtype, Some(d));
        assert_eq!(inlet.meta.labels, ["c0", "c1", "c2"]);
        let n = 50;
        let sent = values(d, n, 3);
        let ts: Vec<f64> = (0..n).map(|i| 1000.0 + i as f64).collect();
        // liblsl delivers only what is pushed after the inlet connected: push until it flows
        let mut got: Vec<u8> = Vec::new();
        let mut buf = vec![0u64; n * 3]; // 8-aligned, big enough for every dtype
        let bytes = |b: &mut Vec<u64>| {
            // SAFETY: viewing a Vec<u64> as its bytes (same memory, u8 has no alignment).
            unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr().cast::<u8>(), b.len() * 8) }
        };
        let mut tsb = vec![0f64; n];
        let t0 = Instant::now();
        while got.len() < sent.len() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "{d}: only {} of {} bytes arrived",
                got.len(),
                sent.len()
            );
            if got.is_empty() {
                out.push(&sent, &ts).unwrap();
            }
            let k = inlet.pull(bytes(&mut buf), &mut tsb, n, 0.2).unwrap();
            got.extend_from_slice(&bytes(&mut buf)[..k * 3 * d.itemsize()]);
            if got.len() > sent.len() {
                got.truncate(sent.len()); // a second push while the first was still in flight
            }
        }
        assert_eq!(got, sent, "{d}: every value intact");
    }
}

#[test]
fn a_stream_bridged_out_to_lsl_and_back_arrives_intact() {
    let _w = Watchdog::arm(120, "lsl bridge");
    let Some(lsl) = lsl() else { return };
    let src = unique_name("lsl-src");
    let back = unique_name("lsl-back");
    let (_g1, _g2) = (StreamGuard::new(&src), StreamGuard::new(&back));
    let s = Stream::create(&src, &StreamConfig::new(DType::I32, 2, 1000.0, 1 << 14)).unwrap();
    let stop = AtomicBool::new(false);
    let outlet_name = format!("{src}-out");
    let total = 2000usize;
    let (lsl2, lsl3) = (lsl.clone(), lsl.clone());
    let out_opts = OutOptions {
        stream: src.clone(),
        name: Some(outlet_name.clone()),
        kind: None,
        source_id: None,
        duration: None,
    };
    let out_ready = std::sync::Mutex::new(false);
    let in_opts = InOptions {
        query: outlet_name.clone(),
        by: Some("name".into()),
        stream: Some(back.clone()),
        timeout: 30.0,
        capacity: Some(1 << 14),
        duration: None,
        remove_at_end: false,
    };
    let in_ready = std::sync::Mutex::new(false);
    std::thread::scope(|sc| {
        let out = sc.spawn(|| {
            lsl_out(&lsl2, &out_opts, &stop, &mut |_| {
                *out_ready.lock().unwrap() = true;
            })
        });
        let inn = sc.spawn(|| {
            lsl_in(&lsl3, &in_opts, &stop, &mut |_, _| {
                *in_ready.lock().unwrap() = true;
            })
        });
        let t0 = Instant::now();
        while !(*in_ready.lock().unwrap() && *out_ready.lock().unwrap()) {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "bridges never got ready"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let back_stream = {
            let t0 = Instant::now();
            loop {
                if let Ok(b) = Stream::open(&back) {
                    break b;
                }
                assert!(t0.elapsed() < Duration::from_secs(30));
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        let mut r = back_stream.reader(ReaderMode::Lossless).unwrap();
        let mut w = s.writer().unwrap();
        // push until the inlet side has the first sample (LSL drops what comes before)
        let mut next = 0i32;
        let mut got: Vec<i32> = Vec::new();
        let mut buf = vec![0u8; 512 * 8];
        let t0 = Instant::now();
        while got.len() < total * 2 {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "only {} values came back",
                got.len()
            );
            if (next as usize) < total && (got.is_empty() || next as usize * 2 <= got.len() + 512) {
                let block: Vec<i32> = (next..next + 10).flat_map(|i| [i, -i]).collect();
                w.write(&block).unwrap();
                next += 10;
            }
            let _ = r.wait_available(1, Some(Duration::from_millis(20)));
            let p = r.pull_into(&mut buf, None, 512).unwrap();
            got.extend(
                buf[..p.n * 8]
                    .chunks_exact(4)
                    .map(|c| i32::from_ne_bytes(c.try_into().unwrap())),
            );
        }
        stop.store(true, Ordering::Relaxed);
        out.join().unwrap().unwrap();
        inn.join().unwrap().unwrap();
        // what came back is a contiguous run of what was written, every pair intact
        let first = got[0];
        for (k, pair) in got.chunks_exact(2).enumerate() {
            assert_eq!(pair, [first + k as i32, -(first + k as i32)], "sample {k}");
        }
        assert_eq!(back_stream.info().ch_names.len(), 2);
    });
}

#[test]
fn bad_input_gets_a_clear_error() {
    let _w = Watchdog::arm(60, "lsl bad input");
    let Some(lsl) = lsl() else { return };
    // an outlet that does not exist: the error says what was looked for and what was seen
    let missing = unique_name("lsl-none");
    let e = Inlet::open(lsl.clone(), &missing, Some("name"), 0.5, &|| false)
        .err()
        .expect("no such outlet");
    assert!(e.to_string().contains(&missing), "{e}");
    // a stream of a dtype LSL cannot carry
    let name = unique_name("lsl-u16");
    let _g = StreamGuard::new(&name);
    Stream::create(&name, &StreamConfig::new(DType::U16, 1, 100.0, 1024)).unwrap();
    let stop = AtomicBool::new(false);
    let e = lsl_out(
        &lsl,
        &OutOptions {
            stream: name.clone(),
            name: None,
            kind: None,
            source_id: None,
            duration: None,
        },
        &stop,
        &mut |_| {},
    )
    .expect_err("uint16 has no LSL format");
    assert!(matches!(e, LslError::Unmappable(_)), "{e:?}");
    assert!(e.to_string().contains("no LSL channel format"), "{e}");
    // an outlet of a dtype LSL cannot carry is refused before anything is announced
    let e = Outlet::create(lsl.clone(), &spec("x", Some(DType::U32), 1))
        .err()
        .expect("uint32 has no LSL format");
    assert!(e.to_string().contains("no LSL channel format"), "{e}");
}
