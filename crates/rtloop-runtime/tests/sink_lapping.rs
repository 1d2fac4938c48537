//! Sinks never act on rows the writer lapped. The test plays a model's source itself: it
//! writes the signal's stream (a ring of 4 ticks) and publishes each tick on the model's
//! board, while the model's real sinks run as their own processes: `udp_out` to a UDP socket
//! of the test, `logger` to SQLite, `recorder` to disk and `lsl_out` to an LSL inlet of the
//! test (when liblsl is found). Every value of sample `i` is `i` in every channel, so a row
//! whose channels disagree, or that is not the row its tick published, is torn.
//!
//! Between ticks the writer laps the sinks on purpose: every 8th tick before publishing it
//! (the tick is lost for certain: overruns are asserted), on most others at a random moment
//! while the sinks are reading it. Torn values that reach the UDP socket, the log, the
//! recording or the LSL inlet are counted: there must be none. `RTLOOP_SOAK=1` runs 100,000
//! ticks instead of 10,000.

use std::collections::BTreeSet;
use std::net::UdpSocket;
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtloop_runtime::board::{Board, ProcState};
use rtloop_runtime::process::{model_hash, run_driver_process, ChildArgs, ProcessReport};
use rtloop_stream::{DType, Stream, StreamConfig, Writer};
use rtloop_testkit::{role, spawn_role, unique_name, StreamGuard, TempDir, Watchdog};

/// Rows per tick.
const ROWS: usize = 8;
/// Values per row.
const CH: usize = 4;
/// The stream keeps 4 ticks, rounded up to a page (16 ticks of these rows): small, so the
/// writer laps it in a few µs.
const CAPACITY: u64 = 32;
/// The child's role: its `ChildArgs` as JSON.
const ARGS_ENV: &str = "RTLOOP_TEST_SINK_ARGS";
const TEST: &str = "sinks_act_only_on_validated_rows_of_a_lapped_input";

/// liblsl for the `lsl_out` sink and the test's inlet, or None (said on stderr).
fn lsl() -> Option<Arc<rtloop_lsl::Lsl>> {
    if std::env::var_os("RTLOOP_PYTHON").is_none() {
        // the repository's dev environment, if it exists, has pylsl
        let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/python");
        if Path::new(venv).exists() {
            std::env::set_var("RTLOOP_PYTHON", venv);
        }
    }
    match rtloop_lsl::Lsl::load() {
        Ok(l) => Some(Arc::new(l)),
        Err(e) if std::env::var("RTLOOP_REQUIRE_PEERS").is_ok_and(|v| v == "1") => {
            panic!("RTLOOP_REQUIRE_PEERS=1 but liblsl is missing: {e}")
        }
        Err(e) => {
            eprintln!("lsl_out not tested: liblsl not found ({e})");
            None
        }
    }
}

/// Write `n` samples, every value of sample `i` being `i`.
fn put(w: &mut Writer, n: usize, scratch: &mut Vec<u8>) {
    scratch.clear();
    let i0 = w.written();
    for i in i0..i0 + n as u64 {
        for _ in 0..CH {
            scratch.extend_from_slice(&(i as f64).to_ne_bytes());
        }
    }
    w.write_bytes(scratch, None).unwrap();
}

/// Write twice the stream's capacity: every slot a sink may be reading is overwritten.
fn lap(w: &mut Writer, scratch: &mut Vec<u8>) {
    let cap = w.info().capacity as usize;
    for _ in 0..4 {
        put(w, cap / 2, scratch);
    }
}

/// The values of a row read back (f64), from native bytes.
fn values(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// Rows checked and torn among them, for rows that arrive in order without their tick:
/// a row is torn if its channels disagree, it is not a row of a published tick, or it does
/// not come after the row before it.
fn check_ordered(rows: &[Vec<f64>], published: &BTreeSet<u64>) -> (u64, u64) {
    let mut torn = 0;
    let mut last: Option<f64> = None;
    for r in rows {
        let v = r[0];
        let ok = r.len() == CH
            && r.iter().all(|&x| x == v)
            && v.fract() == 0.0
            && v >= 0.0
            && published.contains(&(v as u64))
            && last.is_none_or(|l| v > l);
        torn += u64::from(!ok);
        last = Some(v);
    }
    (rows.len() as u64, torn)
}

/// Kills and reaps the sink processes if the test fails before they end.
struct Sinks(Vec<(String, Child)>);

impl Drop for Sinks {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn sink_child() {
    let _w = Watchdog::arm(600, "a sink process of the lapping test");
    let json = std::env::var(ARGS_ENV).expect("the sink's role");
    let args = ChildArgs::parse(&[json]).unwrap();
    if let Err(e) = run_driver_process(&args) {
        panic!("sink {}: {e}", args.process);
    }
}

#[test]
fn sinks_act_only_on_validated_rows_of_a_lapped_input() {
    if role().is_some() {
        return sink_child();
    }
    let soak = std::env::var("RTLOOP_SOAK").is_ok_and(|v| v == "1");
    // ends with a quiet tick (k % 8 == 0), so every sink delivers its last tick
    let ticks: u64 = if soak { 100_001 } else { 10_001 };
    let _w = Watchdog::arm(if soak { 3000 } else { 300 }, "the lapping test");
    let lsl = lsl();
    let dir = TempDir::new("sink-lapping");
    let name = unique_name("lap");
    let lsl_name = format!("{name}-outlet");
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = rx.local_addr().unwrap().port();
    let lsl_sink = if lsl.is_some() {
        format!("  lsl:\n    driver: lsl_out\n    in: [x]\n    options: {{name: \"{lsl_name}\"}}\n")
    } else {
        String::new()
    };
    let text = format!(
        "config:\n  name: \"{name}\"\n  tick_us: 1000\nsignals:\n  x: {{shape: [{ROWS}, {CH}], dtype: float64}}\n\
         sources:\n  src:\n    driver: synthetic\n    out: [x]\n\
         sinks:\n  udp:\n    driver: udp_out\n    in: [x]\n    options: {{to: \"127.0.0.1:{port}\"}}\n\
         \x20 log:\n    driver: logger\n    in: [x]\n    options: {{path: log.db}}\n\
         \x20 rec:\n    driver: recorder\n    in: [x]\n    options: {{out: rec}}\n{lsl_sink}"
    );
    let path = dir.path().join("lap.yaml");
    std::fs::write(&path, &text).unwrap();
    let model = rtloop_runtime::model::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let index = |p: &str| model.processes.iter().position(|q| q.name == p).unwrap();
    let src = index("src");
    let x = model.signals.iter().position(|s| s.name == "x").unwrap();
    let board = Board::create(
        &name,
        model.processes.len(),
        model.signals.len(),
        1_000_000,
        model_hash(&text),
        0,
    )
    .unwrap();
    let stream_name = format!("{name}.x");
    let _guard = StreamGuard::new(&stream_name);
    let stream = Stream::create(
        &stream_name,
        &StreamConfig::new(DType::F64, CH, 8000.0, CAPACITY),
    )
    .unwrap();
    let mut w = stream.writer().unwrap();

    let (run_dir, out_dir) = (dir.path().join("run"), dir.path().join("out"));
    std::fs::create_dir_all(&run_dir).unwrap();
    std::fs::create_dir_all(&out_dir).unwrap();
    let sink_names: Vec<&str> = ["udp", "log", "rec"]
        .into_iter()
        .chain(lsl.is_some().then_some("lsl"))
        .collect();
    let mut sinks = Sinks(Vec::new());
    for s in &sink_names {
        let args = ChildArgs {
            model: path.clone(),
            process: (*s).to_string(),
            run_dir: run_dir.clone(),
            module_so: None,
            out_dir: out_dir.clone(),
        };
        let json = args.to_json().unwrap();
        sinks
            .0
            .push(((*s).to_string(), spawn_role(TEST, s, &[(ARGS_ENV, &json)])));
    }
    let sink_ix: Vec<usize> = sink_names.iter().map(|s| index(s)).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !sink_ix.iter().all(|&p| board.state(p) == ProcState::Ready) {
        for (&p, s) in sink_ix.iter().zip(&sink_names) {
            assert_ne!(
                board.state(p),
                ProcState::Failed,
                "sink {s} failed to start"
            );
        }
        assert!(Instant::now() < deadline, "the sinks did not start");
        std::thread::sleep(Duration::from_millis(10));
    }

    // the UDP rows as they arrive (drained all along, so the socket buffer never fills)
    let stop = Arc::new(AtomicBool::new(false));
    rx.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let udp = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut rows = Vec::new();
            let mut b = [0u8; 2048];
            loop {
                match rx.recv(&mut b) {
                    Ok(n) => rows.push(values(&b[..n])),
                    Err(_) if stop.load(Ordering::Relaxed) => return rows,
                    Err(_) => {}
                }
            }
        })
    };
    let mut inlet = lsl.as_ref().map(|l| {
        rtloop_lsl::io::Inlet::open(l.clone(), &lsl_name, Some("name"), 30.0, &|| false)
            .unwrap_or_else(|e| panic!("{e}"))
    });

    // the ticks: ends[k] is where tick k ends; `published` every row a sink may deliver
    let mut ends = Vec::with_capacity(ticks as usize);
    let mut published = BTreeSet::new();
    let mut prelapped = 0u64;
    let mut scratch = Vec::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for k in 0..ticks {
        let now = rtloop_sys::monotonic_ns();
        board.start_tick(k, now, now);
        put(&mut w, ROWS, &mut scratch);
        let end = w.written();
        ends.push(end);
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        if k % 8 == 1 {
            // lapped before it is published: every sink must count it lost
            lap(&mut w, &mut scratch);
            prelapped += 1;
        } else {
            published.extend(end - ROWS as u64..end);
        }
        board.set_tick_end(x, k, end);
        board.finish_tick(src, k);
        if k % 8 > 1 {
            // (tick 0 mod 8 is quiet: nothing overwrites it) lapped at a random moment, 0 to ~250 µs after the sinks were told: before,
            // while or after they read it
            let wait = match seed % 10 {
                0 => 0,
                n => (1u64 << ((seed >> 8) % 9)) * 1000 * n / 10,
            };
            let until = Instant::now() + Duration::from_nanos(wait);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            lap(&mut w, &mut scratch);
        }
        for &p in &sink_ix {
            assert!(
                board.wait_done(p, k, Duration::ZERO),
                "sink {p} ended before tick {k} (state {:?})",
                board.state(p)
            );
        }
    }
    // what the outlet pushed, taken while it lives (an outlet that goes away drops what it
    // has not sent yet); then the inlet closes first, so liblsl does not try to reconnect
    let mut lsl_rows = Vec::new();
    if let Some(mut inlet) = inlet.take() {
        let mut data = vec![0f64; 512 * CH];
        let mut ts = vec![0f64; 512];
        loop {
            let n = inlet.pull(bytes_of(&mut data), &mut ts, 512, 1.0).unwrap();
            if n == 0 {
                break;
            }
            lsl_rows.extend(data[..n * CH].chunks_exact(CH).map(<[f64]>::to_vec));
        }
    }
    // the sinks end after the last tick
    board.request_stop(ticks, 0);
    board.set_state(src, ProcState::Exited);
    for (s, c) in std::mem::take(&mut sinks.0) {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "sink {s}: {}", out.status);
    }
    let report = |s: &str| -> ProcessReport {
        serde_json::from_slice(&std::fs::read(run_dir.join(format!("{s}.json"))).unwrap()).unwrap()
    };

    let mut summary = Vec::new();
    // every sink counted at least the ticks lapped before they were published
    for s in &sink_names {
        let r = report(s);
        assert!(r.error.is_none(), "sink {s}: {:?}", r.error);
        assert!(
            r.input_overruns >= prelapped,
            "sink {s}: {} overruns, {prelapped} ticks were lapped before it read them",
            r.input_overruns
        );
        summary.push(format!(
            "{s}: {} overruns ({})",
            r.input_overruns, r.summary
        ));
    }

    stop.store(true, Ordering::Relaxed);
    let udp_rows = udp.join().unwrap();
    let (udp_n, udp_torn) = check_ordered(&udp_rows, &published);
    let (lsl_n, lsl_torn) = check_ordered(&lsl_rows, &published);

    // the log: each logged tick must hold exactly the rows that tick published
    let db = rusqlite::Connection::open(out_dir.join("log.db")).unwrap();
    let cols: String = (0..ROWS * CH).map(|i| format!(", v{i}")).collect();
    let mut st = db
        .prepare(&format!("SELECT tick{cols} FROM sig_x ORDER BY tick"))
        .unwrap();
    let logged: Vec<(u64, Vec<f64>)> = st
        .query_map([], |r| {
            let k: i64 = r.get(0)?;
            let v = (1..=ROWS * CH)
                .map(|i| r.get::<_, f64>(i))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((k as u64, v))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut log_torn = 0u64;
    for (k, v) in &logged {
        let first = ends[*k as usize] - ROWS as u64;
        for (j, &x) in v.iter().enumerate() {
            log_torn += u64::from(x != (first + (j / CH) as u64) as f64);
        }
    }
    let log_n = logged.len() as u64 * (ROWS * CH) as u64;

    // the recording: every row holds the stream sample its header maps it to
    let rec = rtloop_record::Recording::open(&rtloop_record::segment_dir(
        &out_dir.join("rec"),
        &stream_name,
        1,
    ))
    .unwrap();
    let data = std::fs::read(rec.dir.join("data.bin")).unwrap();
    let mut rec_torn = 0u64;
    // `Header::sample_of` row by row, walking the gaps once
    let (mut skipped, mut gaps) = (0u64, rec.header.gaps.iter().peekable());
    for (row, b) in data
        .chunks_exact(CH * 8)
        .take(rec.samples as usize)
        .enumerate()
    {
        while let Some(&&(at, lost)) = gaps.peek() {
            if at > row as u64 {
                break;
            }
            skipped += lost;
            gaps.next();
        }
        let i = (rec.header.first_sample + row as u64 + skipped) as f64;
        rec_torn += u64::from(values(b).iter().any(|&x| x != i));
    }
    let last = rec.samples.saturating_sub(1);
    assert_eq!(
        rec.header.first_sample + last + skipped,
        rec.header.sample_of(last),
        "the walk over the gaps maps rows as the recording's header does"
    );

    eprintln!(
        "{ticks} ticks, {prelapped} lapped before publishing; {}\n\
         torn: udp {udp_torn} of {udp_n} rows, log {log_torn} of {log_n} values, \
         recording {rec_torn} of {} rows, lsl {lsl_torn} of {lsl_n} rows",
        summary.join("; "),
        rec.samples
    );
    // not vacuous: every sink delivered rows (the quiet ticks at least)
    assert!(
        udp_n > 0 && log_n > 0 && rec.samples > 0,
        "a sink delivered nothing"
    );
    assert!(lsl.is_none() || lsl_n > 0, "lsl_out delivered nothing");
    assert_eq!(
        (udp_torn, log_torn, rec_torn, lsl_torn),
        (0, 0, 0, 0),
        "torn values reached a sink's output (udp, log, recording, lsl)"
    );
}

/// `f64`s as their bytes (for the inlet, which takes native bytes of the dtype).
fn bytes_of(v: &mut [f64]) -> &mut [u8] {
    let len = std::mem::size_of_val(v);
    // SAFETY: any bytes are a valid f64 and u8 has no alignment requirement; the slice
    // covers exactly `v`'s memory and borrows it mutably for its lifetime.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), len) }
}
