//! Record while a writer writes: the recording equals what was written, the header says so,
//! events are there, and the loader takes its count from the files.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use rtloop_record::{record, Control, RecordConfig, Recording};
use rtloop_stream::{DType, Event, Stream, StreamConfig};
use rtloop_testkit::{unique_name, StreamGuard, TempDir, Watchdog};

fn tmpdir(tag: &str) -> TempDir {
    TempDir::new(&format!("rec-{tag}"))
}

/// Wait (bounded) until the recorder has registered its reader on `s`.
fn wait_for_reader(s: &Stream) {
    let t0 = std::time::Instant::now();
    while s.stats().readers.is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the recorder never registered"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn round_trip_record_then_load_is_identical() {
    let _w = Watchdog::arm(60, "round_trip");
    let name = unique_name("rec");
    let _g = StreamGuard::new(&name);
    let mut cfg = StreamConfig::new(DType::I16, 4, 1000.0, 4096);
    cfg.ch_names = vec!["a".into(), "b".into(), "c".into(), "d".into()];
    let s = Stream::create(&name, &cfg).unwrap();
    let out = tmpdir("rt");
    let stop = AtomicBool::new(false);
    let (report, written) = std::thread::scope(|sc| {
        let rec = sc.spawn(|| {
            record(
                &name,
                &out,
                &RecordConfig {
                    flush_every: Duration::from_millis(10),
                    fsync_every: Duration::from_millis(50),
                    ..RecordConfig::default()
                },
                &Control::default(),
            )
            .unwrap()
        });
        // the recorder registers before anything is written
        wait_for_reader(&s);
        let mut w = s.writer().unwrap();
        let mut all = Vec::new();
        for k in 0..200i16 {
            let block: Vec<i16> = (0..40)
                .map(|i| k.wrapping_mul(40).wrapping_add(i))
                .collect();
            w.write(&block).unwrap();
            all.extend_from_slice(&block);
            if k == 50 {
                w.push_event(&Event::new("stim", "on", 500)).unwrap();
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        drop(w); // the writer closes: the recording ends by itself
        (rec.join().unwrap(), all)
    });
    assert_eq!(report.ended, "writer closed");
    assert_eq!(report.samples, 2000);
    assert_eq!(report.lost_samples, 0);
    let rec = Recording::open(&out.join(&name)).unwrap();
    assert_eq!(rec.samples, 2000);
    assert!(rec.header.complete);
    assert_eq!(rec.header.ch_names, ["a", "b", "c", "d"]);
    assert_eq!(
        (
            rec.header.dtype.as_str(),
            rec.header.n_channels,
            rec.header.sfreq
        ),
        ("int16", 4, 1000.0)
    );
    let bytes = std::fs::read(out.join(&name).join("data.bin")).unwrap();
    let got: Vec<i16> = bytes
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(got, written);
    let stamps = std::fs::read(out.join(&name).join("timestamps.bin")).unwrap();
    assert_eq!(stamps.len(), 2000 * 8);
    let t: Vec<u64> = stamps
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert!(t.windows(2).all(|w| w[0] <= w[1]), "stamps are monotonic");
    let ev = std::fs::read_to_string(out.join(&name).join("events.jsonl")).unwrap();
    assert!(
        ev.contains("\"stim\"") && ev.contains("\"sample\":500"),
        "{ev}"
    );
    // replay at the original pace into a new stream: the same samples and event, and never
    // ahead of the recorded schedule
    let again = unique_name("replayed");
    let _g2 = StreamGuard::new(&again);
    let rep = replay_kept(&out.join(&name), &again, Some(1.0), &stop);
    assert_eq!((rep.samples, rep.events), (2000, 1));
    assert!(rep.seconds >= rep.recorded_seconds * 0.99, "{rep:?}");
    let s2 = Stream::open(&again).unwrap();
    assert_eq!(s2.info().ch_names, ["a", "b", "c", "d"]);
    let r2 = s2.reader(rtloop_stream::ReaderMode::Latest).unwrap();
    let w = r2.window_as::<i16>(0, 2000).unwrap();
    assert_eq!(w.to_vec().unwrap(), written);
    let ev = r2.read_events(0, 1).unwrap();
    assert_eq!(
        (ev[0].sample, ev[0].kind.as_text()),
        (500 - rec.header.first_sample, Some("stim"))
    );
    // as fast as possible
    let rep = replay_kept(&out.join(&name), &again, None, &stop);
    assert_eq!(rep.samples, 2000);
    let _ = std::fs::remove_dir_all(&out);
}

/// A lossless recorder writes the samples to the file where they lie in the ring (no copy
/// out first) and moves its cursor only after the write: with a ring of 512 samples (64
/// asked, rounded to whole pages) lapped 37 times by a writer that never sleeps, the file
/// holds exactly what was written, with every stamp, and nothing is lost. (Moving the cursor
/// before the write, with a 2 ms pause between, makes it fail.)
#[test]
fn a_lossless_recording_writes_in_place_exactly_what_was_written() {
    let _w = Watchdog::arm(120, "lossless_in_place");
    let name = unique_name("recll");
    let _g = StreamGuard::new(&name);
    let s = Stream::create(&name, &StreamConfig::new(DType::U64, 3, 0.0, 64)).unwrap();
    let out = tmpdir("ll");
    let total = 64 * 300u64;
    let (report, stamps_written) = std::thread::scope(|sc| {
        let rec = sc.spawn(|| {
            record(
                &name,
                &out,
                &RecordConfig {
                    lossless: true,
                    flush_every: Duration::from_millis(10),
                    fsync_every: Duration::from_millis(200),
                    ..RecordConfig::default()
                },
                &Control::default(),
            )
            .unwrap()
        });
        wait_for_reader(&s);
        let mut w = s.writer().unwrap();
        let mut stamps = Vec::new();
        let mut i = 0u64;
        while i < total {
            // 1 to 7 samples a write, each channel holding a value of its sample
            let n = (1 + i % 7).min(total - i);
            let block: Vec<u64> = (i..i + n)
                .flat_map(|k| [k, k.wrapping_mul(31), !k])
                .collect();
            let stamp = 1_000 + i;
            w.write_bytes(
                &block
                    .iter()
                    .flat_map(|v| v.to_ne_bytes())
                    .collect::<Vec<u8>>(),
                Some(stamp),
            )
            .unwrap();
            stamps.extend(std::iter::repeat_n(stamp, n as usize));
            i += n;
        }
        drop(w);
        (rec.join().unwrap(), stamps)
    });
    assert_eq!(report.ended, "writer closed");
    assert_eq!((report.samples, report.lost_samples), (total, 0));
    let bytes = std::fs::read(out.join(&name).join("data.bin")).unwrap();
    let got: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let want: Vec<u64> = (0..total)
        .flat_map(|k| [k, k.wrapping_mul(31), !k])
        .collect();
    assert!(got == want, "the recording differs from what was written");
    let st: Vec<u64> = std::fs::read(out.join(&name).join("timestamps.bin"))
        .unwrap()
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(st, stamps_written, "every sample keeps its stamp");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_input_names_the_problem() {
    let stop = AtomicBool::new(false);
    let e = record(
        "no-such-stream-xyz",
        &tmpdir("bad"),
        &RecordConfig::default(),
        &Control::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("no-such-stream-xyz"), "{e}");
    let d = tmpdir("foreign");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("header.json"), b"{\"format\": \"something-else\"}").unwrap();
    let e = Recording::open(&d).unwrap_err();
    assert!(e.to_string().contains("not an rtloop recording"), "{e}");
    let e = rtloop_record::replay(&d, "x", None, &stop).unwrap_err();
    assert!(e.to_string().contains("not an rtloop recording"), "{e}");
    let e = Recording::open(&tmpdir("missing")).unwrap_err();
    assert!(e.to_string().contains("header.json"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn long_recordings_split_into_segments_that_join_up() {
    let _w = Watchdog::arm(60, "split");
    let name = unique_name("split");
    let _g = StreamGuard::new(&name);
    let s = Stream::create(&name, &StreamConfig::new(DType::I32, 2, 1000.0, 1 << 16)).unwrap();
    let out = tmpdir("split");
    let written: Vec<i32> = (0..20_000).collect();
    let report = std::thread::scope(|sc| {
        let rec = sc.spawn(|| {
            let cfg = RecordConfig {
                flush_every: Duration::from_millis(5),
                split_bytes: Some(16_000),
                ..RecordConfig::default()
            };
            record(&name, &out, &cfg, &Control::default()).unwrap()
        });
        wait_for_reader(&s);
        let mut w = s.writer().unwrap();
        for c in written.chunks(200) {
            w.write(c).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
        drop(w);
        rec.join().unwrap()
    });
    assert_eq!(report.samples, 10_000);
    let mut joined = Vec::new();
    let mut k = 1;
    let mut next_first = None;
    loop {
        let dir = rtloop_record::segment_dir(&out, &name, k);
        let Ok(r) = Recording::open(&dir) else { break };
        assert_eq!(r.header.segment, k);
        assert!(r.header.complete);
        if let Some(f) = next_first {
            assert_eq!(r.header.first_sample, f, "segments join without a gap");
        }
        next_first = Some(r.header.first_sample + r.samples);
        let b = std::fs::read(dir.join("data.bin")).unwrap();
        joined.extend(
            b.chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap())),
        );
        k += 1;
    }
    assert!(k > 3, "split into {} segments", k - 1);
    assert_eq!(joined, written);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn every_pushed_event_is_recorded_or_counted_lost_when_the_ring_laps_the_recorder() {
    // a 4-event ring and a writer pushing as fast as it can: the ring laps the recorder
    // between its pulls, often twice in a row; each round checks the count
    let _w = Watchdog::arm(240, "event laps");
    const PUSHED: u64 = 200_000;
    for round in 0..6 {
        let name = unique_name("rec-evlap");
        let _g = StreamGuard::new(&name);
        let mut cfg = StreamConfig::new(DType::F32, 1, 100.0, 1024);
        cfg.event_capacity = 4;
        let s = Stream::create(&name, &cfg).unwrap();
        let out = tmpdir("evlap");
        let report = std::thread::scope(|sc| {
            let rec =
                sc.spawn(|| record(&name, &out, &RecordConfig::default(), &Control::default()));
            wait_for_reader(&s);
            let mut w = s.writer().unwrap();
            for i in 0..PUSHED {
                w.push_event(&Event::new("n", i.to_string().as_str(), 0))
                    .unwrap();
                // a sample now and then keeps the recorder looping (it pulls events once
                // per loop) instead of sleeping until samples come
                if i % 16 == 0 {
                    w.write(&[i as f32]).unwrap();
                }
            }
            drop(w);
            rec.join().unwrap().unwrap()
        });
        assert_eq!(
            report.events + report.lost_events,
            PUSHED,
            "round {round}: {} recorded + {} lost",
            report.events,
            report.lost_events
        );
        let r = Recording::open(&out.join(&name)).unwrap();
        assert_eq!(
            (r.header.events, r.header.lost_events),
            (report.events, report.lost_events)
        );
        let lines = std::fs::read_to_string(out.join(&name).join("events.jsonl")).unwrap();
        assert_eq!(lines.lines().count() as u64, report.events);
        // what was recorded is in order, without repeats
        let values: Vec<u64> = lines
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["value"].as_str().unwrap().parse().unwrap()
            })
            .collect();
        assert!(values.windows(2).all(|p| p[0] < p[1]), "round {round}");
    }
}

/// Replay a recording into `name`, keeping the stream after the replay ends (a replayed
/// stream ends with its replay otherwise), so the test can read it afterwards.
fn replay_kept(
    dir: &std::path::Path,
    name: &str,
    speed: Option<f64>,
    stop: &std::sync::atomic::AtomicBool,
) -> rtloop_record::ReplayReport {
    let src = rtloop_record::replay::open_recording(dir).unwrap();
    let opts = rtloop_record::PlayOptions {
        speed,
        keep: true,
        ..rtloop_record::PlayOptions::default()
    };
    rtloop_record::play(&src, name, &opts, stop).unwrap()
}
