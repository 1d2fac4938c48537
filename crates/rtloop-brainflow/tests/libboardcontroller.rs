//! rtloop-brainflow against the real BrainFlow (the libBoardController the brainflow wheel
//! bundles, found through `RTLOOP_PYTHON` / python3 or `RTLOOP_LIBBOARDCONTROLLER`): the
//! synthetic board's streams with their channels, a marker as an event at its sample, the
//! playback board playing a file to its end, and bad input refused with a clear error.
//! Without BrainFlow the tests say so and pass, unless `RTLOOP_REQUIRE_PEERS=1` (CI).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use rtloop_brainflow::bridge::{brainflow_in, InOptions};
use rtloop_brainflow::{Board, BrainFlow, BrainFlowError, Params};
use rtloop_stream::{EventValue, ReaderMode, Stream};
use rtloop_testkit::{unique_name, StreamGuard, Watchdog};

/// BrainFlow, or None (with a message) when it is missing and peers are not required.
fn brainflow() -> Option<Arc<BrainFlow>> {
    if std::env::var_os("RTLOOP_PYTHON").is_none() {
        let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/python");
        if std::path::Path::new(venv).exists() {
            std::env::set_var("RTLOOP_PYTHON", venv);
        }
    }
    match BrainFlow::load() {
        Ok(b) => Some(b),
        Err(e) if std::env::var("RTLOOP_REQUIRE_PEERS").is_ok_and(|v| v == "1") => {
            panic!("RTLOOP_REQUIRE_PEERS=1 but BrainFlow is missing: {e} (bash scripts/python-dev.sh installs brainflow)")
        }
        Err(e) => {
            eprintln!(
                "skipped: BrainFlow not found ({e}); bash scripts/python-dev.sh installs brainflow"
            );
            None
        }
    }
}

fn read_f64(name: &str, first: u64, end: u64) -> Vec<f64> {
    let s = Stream::open(name).unwrap();
    let r = s.reader(ReaderMode::Latest).unwrap();
    let mut bytes = vec![0u8; (end - first) as usize * s.info().sample_bytes];
    r.read_into(first, end, &mut bytes, None).unwrap();
    bytes
        .chunks_exact(8)
        .map(|b| f64::from_ne_bytes(b.try_into().unwrap()))
        .collect()
}

fn wait_written(name: &str, n: u64) -> u64 {
    let s = Stream::open(name).unwrap();
    let r = s.reader(ReaderMode::Latest).unwrap();
    while r.written() < n {
        let _ = r.wait(n, Some(Duration::from_millis(100)));
    }
    r.written()
}

#[test]
fn the_synthetic_board_becomes_a_stream_per_kind_with_markers_at_their_samples() {
    let Some(bf) = brainflow() else { return };
    let _w = Watchdog::arm(120, "synthetic board bridge");
    let prefix = unique_name("bf-syn");
    let mut o = InOptions::new("synthetic");
    o.prefix = Some(prefix.clone());
    o.remove_at_end = false;
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let t = {
        let (bf, stop) = (bf.clone(), stop.clone());
        std::thread::spawn(move || {
            brainflow_in(&bf, &o, &stop, &mut |names| {
                tx.send(names.to_vec()).unwrap()
            })
        })
    };
    let names = rx.recv().unwrap();
    let _guards: Vec<StreamGuard> = names.iter().map(|n| StreamGuard::new(n)).collect();
    let suffixes: Vec<String> = names
        .iter()
        .map(|n| n[prefix.len() + 1..].to_string())
        .collect();
    assert_eq!(
        suffixes,
        [
            "eeg",
            "accel",
            "gyro",
            "ppg",
            "eda",
            "temperature",
            "resistance",
            "battery",
            "board",
            "aux.accel",
            "aux.gyro",
            "aux.ppg",
            "aux.eda",
            "aux.temperature",
            "aux.resistance",
            "aux.battery",
            "other",
            "aux.board"
        ]
    );
    let eeg = format!("{prefix}.eeg");
    let board = format!("{prefix}.board");
    wait_written(&eeg, 50);
    let synthetic = Board::parse("synthetic").unwrap();
    bf.insert_marker(synthetic, &Params::default(), 7.0, 0)
        .unwrap();
    let now = wait_written(&eeg, 60);
    wait_written(&board, now + 50);
    stop.store(true, Ordering::Relaxed);
    let report = t.join().unwrap().unwrap();
    assert_eq!(report.ended, "stopped");
    assert_eq!(report.markers, 1);
    assert_eq!(report.lost_samples, 0);

    let s = Stream::open(&eeg).unwrap();
    let info = s.info().clone();
    assert_eq!(info.n_channels, 16);
    assert_eq!(info.nominal_rate, 250.0);
    assert_eq!(info.ch_names[..4], ["Fz", "C3", "Cz", "C4"]);
    assert_eq!(info.ch_units, vec!["µV".to_string(); 16]);
    assert_eq!(info.content_type, "EEG");
    let n = s.written();
    // every stream of the default preset holds the same samples
    for suffix in ["accel", "gyro", "battery", "board"] {
        assert_eq!(
            Stream::open(&format!("{prefix}.{suffix}"))
                .unwrap()
                .written(),
            n,
            "{suffix}"
        );
    }
    assert_eq!(
        Stream::open(&board).unwrap().info().ch_names,
        ["package_num", "timestamp", "marker"]
    );
    let rows = read_f64(&board, 0, n);
    let markers: Vec<(u64, f64)> = rows
        .chunks_exact(3)
        .enumerate()
        .filter(|(_, r)| r[2] != 0.0)
        .map(|(i, r)| (i as u64, r[2]))
        .collect();
    assert_eq!(markers.len(), 1, "{markers:?}");
    let r = s.reader(ReaderMode::Latest).unwrap();
    let events = r.read_events(0, r.events_written()).unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, EventValue::from("marker"));
    assert_eq!(events[0].value, EventValue::f64(7.0));
    assert_eq!(events[0].sample, markers[0].0);
    // package numbers count up by one, wrapping after 255
    for w in rows.chunks_exact(3).collect::<Vec<_>>().windows(2) {
        assert_eq!((w[0][0] as u64 + 1) % 256, w[1][0] as u64);
    }
}

#[test]
fn a_board_that_disconnects_is_reported_and_reconnected_keeping_what_was_written() {
    let Some(bf) = brainflow() else { return };
    let _w = Watchdog::arm(120, "reconnecting bridge");
    let prefix = unique_name("bf-recon");
    // a session of its own: BrainFlow names sessions by board and parameters
    let params = Params {
        other_info: prefix.clone(),
        ..Params::default()
    };
    let mut o = InOptions::new("synthetic");
    o.params = params.clone();
    o.prefix = Some(prefix.clone());
    o.remove_at_end = false;
    o.stall = Duration::from_millis(500);
    o.retry = Duration::from_millis(200);
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let t = {
        let (bf, stop) = (bf.clone(), stop.clone());
        std::thread::spawn(move || {
            brainflow_in(&bf, &o, &stop, &mut |names| {
                tx.send(names.to_vec()).unwrap()
            })
        })
    };
    let names = rx.recv().unwrap();
    let _guards: Vec<StreamGuard> = names.iter().map(|n| StreamGuard::new(n)).collect();
    let eeg = format!("{prefix}.eeg");
    let before = wait_written(&eeg, 50);
    let kept = read_f64(&eeg, 0, before);
    // the board goes away under the bridge
    bf.release(Board::parse("synthetic").unwrap(), &params)
        .unwrap();
    wait_written(&eeg, before + 100);
    stop.store(true, Ordering::Relaxed);
    let report = t.join().unwrap().unwrap();
    assert!(report.outages >= 1, "{report:?}");
    assert!(report.reconnects >= 1, "{report:?}");
    assert_eq!(report.lost_samples, 0, "{report:?}");
    // what was written before is still there, and more came after
    assert_eq!(read_f64(&eeg, 0, before), kept);
    assert!(Stream::open(&eeg).unwrap().written() >= before + 100);
}

#[test]
fn the_playback_board_plays_a_file_to_its_end_exactly() {
    let Some(bf) = brainflow() else { return };
    let _w = Watchdog::arm(120, "playback board bridge");
    let dir = std::env::temp_dir().join(unique_name("bf-play"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("data.csv");
    // 300 samples of the synthetic board's 32 rows, 1 ms apart, values exact in decimal
    let t0 = 1_700_000_000.0;
    let mut text = String::new();
    for i in 0..300 {
        let row: Vec<String> = (0..32)
            .map(|r| match r {
                0 => format!("{}", i % 256),
                30 => format!("{:.6}", t0 + f64::from(i) * 0.001),
                31 if i == 10 || i == 200 => format!("{}", i / 10),
                31 => "0".into(),
                _ => format!("{}", f64::from(i * 32 + r) * 0.25),
            })
            .collect();
        text.push_str(&row.join("\t"));
        text.push('\n');
    }
    std::fs::write(&file, text).unwrap();
    let prefix = unique_name("bf-play");
    let mut o = InOptions::new("PLAYBACK_FILE_BOARD");
    o.params.file = file.display().to_string();
    o.params.master_board = Some("SYNTHETIC_BOARD".into());
    o.configs = vec!["old_timestamps".into()];
    o.prefix = Some(prefix.clone());
    o.remove_at_end = false;
    let stop = AtomicBool::new(false);
    let mut names = Vec::new();
    let report = brainflow_in(&bf, &o, &stop, &mut |n| names = n.to_vec()).unwrap();
    let _guards: Vec<StreamGuard> = names.iter().map(|n| StreamGuard::new(n)).collect();
    assert_eq!(report.ended, "end of file");
    assert_eq!(report.samples, 300);
    assert_eq!(report.lost_samples, 0);
    let eeg = read_f64(&format!("{prefix}.eeg"), 0, 300);
    for i in 0..300usize {
        for c in 0..16usize {
            assert_eq!(
                eeg[i * 16 + c],
                (i * 32 + c + 1) as f64 * 0.25,
                "sample {i} ch {c}"
            );
        }
    }
    // the file's markers, which BrainFlow's playback board drops, are back at their samples
    assert_eq!(report.markers, 2);
    let s = Stream::open(&format!("{prefix}.eeg")).unwrap();
    let r = s.reader(ReaderMode::Latest).unwrap();
    let ev: Vec<(u64, EventValue)> = r
        .read_events(0, r.events_written())
        .unwrap()
        .into_iter()
        .map(|e| (e.sample, e.value))
        .collect();
    assert_eq!(
        ev,
        [(10, EventValue::f64(1.0)), (200, EventValue::f64(20.0))]
    );
    let board = read_f64(&format!("{prefix}.board"), 0, 300);
    assert_eq!(
        (board[10 * 3 + 2], board[200 * 3 + 2], board[11 * 3 + 2]),
        (1.0, 20.0, 0.0)
    );
    for i in 0..300usize {
        assert_eq!(board[i * 3], (i % 256) as f64);
        assert!((board[i * 3 + 1] - (t0 + i as f64 * 0.001)).abs() < 1e-6);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_is_refused_with_what_is_wrong() {
    let Some(bf) = brainflow() else { return };
    let stop = AtomicBool::new(false);
    let run = |o: &InOptions| brainflow_in(&bf, o, &stop, &mut |_| panic!("started")).unwrap_err();
    // an unknown board
    let e = run(&InOptions::new("cytom"));
    assert!(matches!(e, BrainFlowError::UnknownBoard { .. }), "{e}");
    assert!(e.to_string().contains("cyton (0)"), "{e}");
    // a board without its serial port
    let e = run(&InOptions::new("CYTON_BOARD"));
    assert!(e.to_string().contains("needs --serial-port"), "{e}");
    // a serial port that does not exist: BrainFlow's own error, named
    let mut o = InOptions::new("cyton");
    o.params.serial_port = "/dev/rtloop-no-such-port".into();
    let e = run(&o);
    assert!(
        matches!(
            e,
            BrainFlowError::Call {
                call: "prepare_session",
                ..
            }
        ),
        "{e}"
    );
    // playback: no such file, a file of another board, an empty file
    let mut o = InOptions::new("playback_file");
    o.params.master_board = Some("synthetic".into());
    o.params.file = "/nonexistent/rtloop.csv".into();
    let e = run(&o);
    assert!(
        e.to_string()
            .starts_with("playback file /nonexistent/rtloop.csv: cannot read it"),
        "{e}"
    );
    let dir = std::env::temp_dir().join(unique_name("bf-bad"));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("short.csv");
    std::fs::write(&f, "1\t2\t3\n").unwrap();
    o.params.file = f.display().to_string();
    let e = run(&o);
    assert!(
        e.to_string()
            .contains("line 1 has 3 values; the master board's data has 32 rows"),
        "{e}"
    );
    std::fs::write(&f, "").unwrap();
    let e = run(&o);
    assert!(e.to_string().contains("holds no samples"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
    // a prefix that makes no stream name
    let mut o = InOptions::new("synthetic");
    o.prefix = Some("bad/name".into());
    let e = run(&o);
    assert!(matches!(e, BrainFlowError::Stream { .. }), "{e}");
}
