//! What a recording promises: no event or sample is lost without saying so, and every row
//! and event is placed at the stream sample it came from — also when the recorder was
//! lapped, before its first sample or in the middle — in loading and in replay.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use rtloop_record::{record, Control, Header, RecordConfig, Recording};
use rtloop_stream::{DType, Event, ReaderMode, Stream, StreamConfig};
use rtloop_testkit::{unique_name, StreamGuard, TempDir, Watchdog};

/// Wait (bounded) until the recorder has registered its reader on `s`.
fn wait_for_reader(s: &Stream) {
    let t0 = Instant::now();
    while s.stats().readers.is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the recorder never registered"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn value(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x55
}

fn fast() -> RecordConfig {
    RecordConfig {
        flush_every: Duration::from_millis(5),
        fsync_every: Duration::from_millis(50),
        ..RecordConfig::default()
    }
}

fn read_u64s(path: &std::path::Path) -> Vec<u64> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// A recording of `n` samples of one u64 channel at 1000 Hz (`value(0..n)`), made by
/// recording a stream; its directory (removed when dropped) and its replay source.
fn recorded_at_1khz(tag: &str, n: u64) -> (TempDir, rtloop_record::replay::FlatSource) {
    let name = unique_name(tag);
    let _g = StreamGuard::new(&name);
    let s = Stream::create(&name, &StreamConfig::new(DType::U64, 1, 1000.0, 4096)).unwrap();
    let out = TempDir::new(tag);
    std::thread::scope(|sc| {
        let rec = sc.spawn(|| record(&name, &out, &fast(), &Control::default()).unwrap());
        wait_for_reader(&s);
        let mut w = s.writer().unwrap();
        let vals: Vec<u64> = (0..n).map(value).collect();
        w.write(&vals).unwrap();
        drop(w);
        rec.join().unwrap()
    });
    let src = rtloop_record::replay::open_recording(&out.join(&name)).unwrap();
    (out, src)
}

#[test]
fn row_of_follows_the_shared_cases() {
    let cases: serde_json::Value =
        serde_json::from_str(include_str!("data/row_of_cases.json")).unwrap();
    for h in cases["headers"].as_array().unwrap() {
        let mut header: Header = serde_json::from_value(serde_json::json!({
            "format": "rtloop-recording", "version": 1, "stream": "s", "dtype": "uint64",
            "n_channels": 1, "ch_names": ["a"], "ch_units": [""], "sfreq": 0.0,
            "first_sample": 0, "start_monotonic_ns": 0, "start_unix_ns": 0, "samples": 0,
            "events": 0, "lost_samples": 0, "gaps": [], "complete": true, "ended": null,
            "rtloop_version": "test",
        }))
        .unwrap();
        header.first_sample = h["first_sample"].as_u64().unwrap();
        header.gaps = serde_json::from_value(h["gaps"].clone()).unwrap();
        for c in h["cases"].as_array().unwrap() {
            let (sample, row, exact) = (
                c[0].as_u64().unwrap(),
                c[1].as_u64().unwrap(),
                c[2].as_bool().unwrap(),
            );
            assert_eq!(
                header.row_of(sample),
                (row, exact),
                "sample {sample} in {h}"
            );
            if exact {
                assert_eq!(header.sample_of(row), sample, "inverse at row {row} in {h}");
            }
        }
    }
}

#[test]
fn events_lost_when_the_event_ring_laps_the_recorder_are_counted_and_reported() {
    let _w = Watchdog::arm(60, "lost events");
    let name = unique_name("rec-lost-ev");
    let _g = StreamGuard::new(&name);
    let mut cfg = StreamConfig::new(DType::U64, 1, 1000.0, 4096);
    cfg.event_capacity = 64;
    let s = Stream::create(&name, &cfg).unwrap();
    let out = TempDir::new("rec-lost-ev");
    let report = std::thread::scope(|sc| {
        let rec = sc.spawn(|| record(&name, &out, &fast(), &Control::default()).unwrap());
        wait_for_reader(&s);
        let mut w = s.writer().unwrap();
        // a burst of 500 events into a 64-event ring, faster than any recorder loop
        for i in 0..500u64 {
            w.push_event(&Event::new("burst", "x", i)).unwrap();
        }
        w.write(&[1u64]).unwrap();
        drop(w);
        rec.join().unwrap()
    });
    let rec = Recording::open(&out.join(&name)).unwrap();
    let recorded = std::fs::read_to_string(out.join(&name).join("events.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    assert!(
        report.lost_events > 0,
        "a 64-event ring must lap on a 500-event burst"
    );
    assert_eq!(
        recorded + rec.header.lost_events,
        500,
        "every event is recorded or counted as lost"
    );
    assert_eq!(report.lost_events, rec.header.lost_events);
    assert_eq!(rec.header.events, recorded);
}

#[test]
fn lapped_before_the_first_sample_first_sample_and_gaps_agree() {
    let _w = Watchdog::arm(60, "lapped first");
    let name = unique_name("rec-lap-first");
    let _g = StreamGuard::new(&name);
    let s = Stream::create(&name, &StreamConfig::new(DType::U64, 1, 1000.0, 512)).unwrap();
    let cap = s.info().capacity;
    let mut w = s.writer().unwrap();
    let vals: Vec<u64> = (0..3 * cap).map(value).collect();
    w.write(&vals).unwrap();
    let out = TempDir::new("rec-lap-first");
    // start at sample 0, long overwritten: the first pull is lapped before any row exists
    let cfg = RecordConfig {
        start_at: Some(0),
        ..fast()
    };
    let report = std::thread::scope(|sc| {
        let rec = sc.spawn(|| record(&name, &out, &cfg, &Control::default()).unwrap());
        wait_for_reader(&s);
        drop(w);
        rec.join().unwrap()
    });
    let rec = Recording::open(&out.join(&name)).unwrap();
    let h = &rec.header;
    assert_eq!(h.first_sample, 2 * cap, "the first recorded sample");
    assert!(h.gaps.is_empty(), "no gap between rows: {:?}", h.gaps);
    assert_eq!(report.lost_samples, 2 * cap, "the loss is still counted");
    let data = read_u64s(&out.join(&name).join("data.bin"));
    for (r, v) in data.iter().enumerate() {
        assert_eq!(*v, value(h.sample_of(r as u64)), "row {r}");
    }
}

#[test]
fn in_a_lapped_recording_every_row_and_event_sits_at_its_sample_in_load_and_replay() {
    let _w = Watchdog::arm(120, "lapped recording");
    let name = unique_name("rec-lapped");
    let _g = StreamGuard::new(&name);
    let mut cfg = StreamConfig::new(DType::U64, 1, 1000.0, 64);
    cfg.event_capacity = 4096;
    let s = Stream::create(&name, &cfg).unwrap();
    let cap = s.info().capacity;
    let out = TempDir::new("rec-lapped");
    let total = 200 * cap;
    let report = std::thread::scope(|sc| {
        let rec = sc.spawn(|| record(&name, &out, &fast(), &Control::default()).unwrap());
        wait_for_reader(&s);
        let mut w = s.writer().unwrap();
        let mut next = 0u64;
        while next < total {
            // bursts of several laps in one go: the recorder is lapped mid-recording
            let n = (3 * cap + 7).min(total - next);
            let vals: Vec<u64> = (next..next + n).map(value).collect();
            w.write(&vals).unwrap();
            w.push_event(&Event::new("mark", "m", next + n / 2))
                .unwrap();
            next += n;
            std::thread::yield_now();
        }
        drop(w);
        rec.join().unwrap()
    });
    let dir = out.join(&name);
    let rec = Recording::open(&dir).unwrap();
    let h = &rec.header;
    assert!(report.lost_samples > 0, "the bursts must lap the recorder");
    assert_eq!(
        h.lost_samples,
        h.gaps.iter().map(|g| g.1).sum::<u64>() + h.first_sample,
        "lost = gaps + what was lost before the first row"
    );
    let data = read_u64s(&dir.join("data.bin"));
    assert_eq!(data.len() as u64, rec.samples);
    for (r, v) in data.iter().enumerate() {
        assert_eq!(*v, value(h.sample_of(r as u64)), "row {r} holds its sample");
    }
    // every event whose sample was recorded names the row holding that sample
    let events: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut exact = 0;
    for e in &events {
        let sample = e["sample"].as_u64().unwrap();
        let (row, recorded) = h.row_of(sample);
        if recorded {
            assert_eq!(data[row as usize], value(sample));
            exact += 1;
        }
    }
    assert!(exact > 0, "some events fall on recorded samples");
    // replay: each event lands on the replayed sample that holds its original sample
    let replayed = unique_name("rec-replayed");
    let _g2 = StreamGuard::new(&replayed);
    let stop = AtomicBool::new(false);
    // kept: the replayed stream is read after the replay ended
    let src = rtloop_record::replay::open_recording(&dir).unwrap();
    let opts = rtloop_record::PlayOptions {
        keep: true,
        ..rtloop_record::PlayOptions::default()
    };
    let rep = rtloop_record::play(&src, &replayed, &opts, &stop).unwrap();
    assert_eq!(rep.samples, rec.samples);
    let rs = Stream::open(&replayed).unwrap();
    let r = rs.reader(ReaderMode::Latest).unwrap();
    let n_ev = rs.events_written();
    let evs = r.read_events(0, n_ev).unwrap();
    let written = rs.written();
    let first_kept = written.saturating_sub(rs.info().capacity);
    for (orig, ev) in events.iter().zip(&evs) {
        let (row, recorded) = h.row_of(orig["sample"].as_u64().unwrap());
        assert_eq!(ev.sample, row, "replayed event at its row");
        if recorded && row >= first_kept && row < written {
            let mut one = [0u8; 8];
            rs.read_into(row, row + 1, &mut one, None).unwrap();
            assert_eq!(
                u64::from_ne_bytes(one),
                value(orig["sample"].as_u64().unwrap())
            );
        }
    }
}

#[test]
fn a_paced_replay_whose_thread_began_late_reports_no_less_than_the_span() {
    // paced series share a start a little after they are set up; a thread that begins after
    // that start catches up to it, and the replay still took the span from the moment its
    // first sample was due (it used to count from the thread's own start, and so came out
    // shorter than the span on a loaded machine)
    let _w = Watchdog::arm(60, "late replay");
    let (_out, src) = recorded_at_1khz("rec-late", 100);
    let replayed = unique_name("rec-late-replayed");
    let _g2 = StreamGuard::new(&replayed);
    let opts = rtloop_record::PlayOptions {
        speed: Some(1.0),
        keep: true,
        // the shared start had passed 30 ms before this thread began
        start: Some(Instant::now() - Duration::from_millis(30)),
        ..rtloop_record::PlayOptions::default()
    };
    let rep = rtloop_record::play(&src, &replayed, &opts, &AtomicBool::new(false)).unwrap();
    assert_eq!(rep.samples, 100);
    // the file's span: 100 samples at 1000 Hz, each earlier one a period before the last
    assert!((rep.recorded_seconds - 0.099).abs() < 1e-9, "{rep:?}");
    assert!(
        rep.seconds >= rep.recorded_seconds - 1e-6,
        "a paced replay took {} s of a {} s span",
        rep.seconds,
        rep.recorded_seconds
    );
}

#[test]
fn a_paced_replay_sleeps_between_its_blocks_instead_of_spinning() {
    // at 1 kHz a paced replay writes a block every millisecond. It used to spin out every wait
    // shorter than 2 ms, which at that rate is all of them: a whole core busy for the whole
    // replay, at the SCHED_FIFO priority the examples give it, where the kernel's real-time
    // throttling then stopped it for about 50 ms once a second (the model saw no sample for
    // 50 ticks and then a burst). Measured: the CPU time of the thread that plays, over the
    // wall time it took. Spinning gives about 1 (about 0.6 when two other busy processes
    // share the two vCPUs); sleeping to just before each block, a few per cent.
    let _w = Watchdog::arm(60, "paced replay CPU");
    let (_out, src) = recorded_at_1khz("rec-pace", 1500);
    let replayed = unique_name("rec-pace-replayed");
    let _g2 = StreamGuard::new(&replayed);
    let t0 = Instant::now();
    let opts = rtloop_record::PlayOptions {
        speed: Some(1.0),
        keep: true,
        // a shared start still ahead, as the command line sets for several series
        start: Some(t0 + Duration::from_millis(100)),
        ..rtloop_record::PlayOptions::default()
    };
    let cpu0 = rtloop_sys::thread_cpu_ns();
    let rep = rtloop_record::play(&src, &replayed, &opts, &AtomicBool::new(false)).unwrap();
    let (cpu, wall) = (rtloop_sys::thread_cpu_ns() - cpu0, t0.elapsed());
    assert_eq!(rep.samples, 1500);
    // paced still: the last sample no sooner than the start and the recording's span
    assert!(wall.as_secs_f64() >= 0.1 + 1.499 - 1e-3, "{wall:?}");
    assert!(rep.seconds >= rep.recorded_seconds - 1e-6, "{rep:?}");
    let busy = cpu as f64 * 1e-9 / wall.as_secs_f64();
    eprintln!("paced replay: {:.1} % of a core", busy * 100.0);
    assert!(
        busy < 0.25,
        "the paced replay kept its thread busy {:.0} % of the {:.2} s it took",
        busy * 100.0,
        wall.as_secs_f64()
    );
}
