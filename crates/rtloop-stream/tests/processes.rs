//! Writer and readers as separate processes (the current test executable re-run as a child
//! playing a role, see rtloop-testkit): every sample arrives bit-identical in every reader,
//! a SIGKILLed writer is seen dead with nothing torn, a SIGKILLed lossless reader releases
//! the writer it held back.

mod common;

use std::time::Duration;

use common::{check, create, payload_bytes, pull_checked, CH};
use rtloop_stream::{Liveness, ReadError, ReaderMode, Stream, WaitError};
use rtloop_testkit::{finish, report, role, spawn_role, unique_name, StreamGuard, Watchdog};

/// Generous bound on any wait; the watchdog (not this) is what fails a hung test.
const PATIENCE: Duration = Duration::from_secs(60);

fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| panic!("child role needs {key}"))
}

fn env_u64(key: &str) -> u64 {
    env(key).parse().unwrap_or_else(|e| panic!("{key}: {e}"))
}

/// The child roles. Each arms its own watchdog so an orphan never outlives a test run.
fn play(role: &str) {
    let _dog = Watchdog::arm(90, &format!("child role {role}"));
    let stream = Stream::open(&env("STREAM")).expect("child opens the stream");
    match role {
        // write TOTAL samples (0 = forever) in chunks of CHUNK, then exit
        "writer" => {
            let (total, chunk) = (env_u64("TOTAL"), env_u64("CHUNK"));
            let mut w = stream.writer().expect("child claims the writer");
            w.set_lossless_timeout(PATIENCE);
            while total == 0 || w.written() < total {
                let n = if total == 0 {
                    chunk
                } else {
                    chunk.min(total - w.written())
                };
                w.write_bytes(&payload_bytes(w.written(), n), None)
                    .expect("child writes");
            }
            report("written", w.written());
        }
        // pull every sample until TOTAL, checking each; an overrun is a failure
        "reader" => {
            let mode: ReaderMode = env("MODE").parse().expect("mode");
            let total = env_u64("TOTAL");
            let mut r = stream.reader(mode).expect("child registers");
            assert_eq!(r.cursor(), 0, "registered before the writer started");
            let mut got = 0u64;
            while got < total {
                r.wait_available(1, Some(PATIENCE)).expect("data arrives");
                let (first, n) = pull_checked(&mut r, 97).expect("no overrun");
                assert_eq!(first, got, "samples arrive in order, none skipped");
                got += n as u64;
            }
            report("got", got);
        }
        // register, then block until the writer dies, and say how the wait ended
        "waiting-reader" => {
            let r = stream.reader(ReaderMode::Latest).expect("child registers");
            match r.wait(u64::MAX, None) {
                Err(WaitError::WriterDead { pid, written }) => {
                    report("dead_pid", pid);
                    report("written", written);
                }
                other => panic!("expected WriterDead, got {other:?}"),
            }
        }
        // register a lossless reader and never read: only SIGKILL ends it
        "idle-lossless-reader" => {
            let _r = stream
                .reader(ReaderMode::Lossless)
                .expect("child registers");
            loop {
                std::thread::park();
            }
        }
        other => panic!("unknown role {other}"),
    }
}

/// Poll the stream's reader table until `n` readers are registered.
fn await_readers(stream: &Stream, n: usize) {
    while stream.stats().readers.len() < n {
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn every_reader_in_every_process_receives_every_sample_bit_identical() {
    const TEST: &str = "every_reader_in_every_process_receives_every_sample_bit_identical";
    if let Some(r) = role() {
        return play(&r);
    }
    let _dog = Watchdog::arm(60, TEST);
    let name = unique_name("fanout");
    let total: u64 = 6000;
    // latest-wins readers must never be lapped here: capacity holds the whole run
    let stream = create(&name, total);
    let _guard = StreamGuard::new(&name);
    let t = total.to_string();
    let readers: Vec<_> = ["latest", "latest", "lossless", "lossless"]
        .iter()
        .map(|mode| {
            spawn_role(
                TEST,
                "reader",
                &[("STREAM", &name), ("MODE", mode), ("TOTAL", &t)],
            )
        })
        .collect();
    await_readers(&stream, readers.len());
    let writer = spawn_role(
        TEST,
        "writer",
        &[("STREAM", &name), ("TOTAL", &t), ("CHUNK", "7")],
    );
    assert_eq!(finish(writer, "writer").get("written"), t.as_str());
    for (i, r) in readers.into_iter().enumerate() {
        assert_eq!(finish(r, &format!("reader {i}")).get("got"), t.as_str());
    }
    let stats = stream.stats();
    assert_eq!(stats.written, total);
    assert_eq!((stats.overruns, stats.lost_samples), (0, 0));
    assert_eq!(stream.writer_liveness(), Liveness::Closed);
}

#[test]
fn lossless_readers_in_other_processes_hold_back_a_writer_that_wraps_many_times() {
    const TEST: &str =
        "lossless_readers_in_other_processes_hold_back_a_writer_that_wraps_many_times";
    if let Some(r) = role() {
        return play(&r);
    }
    let _dog = Watchdog::arm(60, TEST);
    let name = unique_name("lossless-wrap");
    let stream = create(&name, 1); // rounded up to one page of samples
    let _guard = StreamGuard::new(&name);
    let cap = stream.info().capacity;
    let total = 150 * cap;
    let t = total.to_string();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            spawn_role(
                TEST,
                "reader",
                &[("STREAM", &name), ("MODE", "lossless"), ("TOTAL", &t)],
            )
        })
        .collect();
    await_readers(&stream, 2);
    let chunk = (cap / 3 + 1).to_string();
    let writer = spawn_role(
        TEST,
        "writer",
        &[("STREAM", &name), ("TOTAL", &t), ("CHUNK", &chunk)],
    );
    assert_eq!(finish(writer, "writer").get("written"), t.as_str());
    for (i, r) in readers.into_iter().enumerate() {
        assert_eq!(
            finish(r, &format!("lossless reader {i}")).get("got"),
            t.as_str()
        );
    }
    let stats = stream.stats();
    assert_eq!((stats.overruns, stats.lost_samples), (0, 0));
    assert!(stats.high_water <= cap);
}

#[test]
fn writer_killed_mid_stream_is_seen_dead_and_every_sample_read_is_intact() {
    const TEST: &str = "writer_killed_mid_stream_is_seen_dead_and_every_sample_read_is_intact";
    if let Some(r) = role() {
        return play(&r);
    }
    let _dog = Watchdog::arm(60, TEST);
    let name = unique_name("writer-killed");
    let stream = create(&name, 1);
    let _guard = StreamGuard::new(&name);
    let cap = stream.info().capacity;
    let mut reader = stream.reader(ReaderMode::Latest).unwrap();
    let waiting = spawn_role(TEST, "waiting-reader", &[("STREAM", &name)]);
    await_readers(&stream, 2);
    let mut writer = spawn_role(
        TEST,
        "writer",
        &[("STREAM", &name), ("TOTAL", "0"), ("CHUNK", "5")],
    );
    let writer_pid = writer.id();

    // read while it writes, across many wraps; overruns are allowed, bad data is not
    let (mut delivered, mut overruns) = (0u64, 0u64);
    while reader.written() < 20 * cap {
        reader.wait_available(1, Some(PATIENCE)).unwrap();
        match pull_checked(&mut reader, 50) {
            Ok((_, n)) => delivered += n as u64,
            Err(ReadError::Overrun { .. }) => overruns += 1,
            Err(e) => panic!("{e}"),
        }
    }
    writer.kill().unwrap(); // SIGKILL, mid-stream
    writer.wait().unwrap();

    assert_eq!(reader.writer_liveness(), Liveness::Dead { pid: writer_pid });
    let written = stream.written();
    assert_eq!(
        reader.wait(written + 1, Some(PATIENCE)),
        Err(WaitError::WriterDead {
            pid: writer_pid,
            written
        })
    );
    let seen = finish(waiting, "reader blocked in wait");
    assert_eq!(seen.get("dead_pid"), writer_pid.to_string());
    assert_eq!(seen.get("written"), written.to_string());

    // everything still kept after the crash is intact (a reservation the writer died in
    // may have cost the oldest slots: those are reported as overrun, never handed out)
    reader.seek(written.saturating_sub(cap)).unwrap();
    while reader.cursor() < written {
        match pull_checked(&mut reader, 64) {
            Ok((_, n)) => delivered += n as u64,
            Err(ReadError::Overrun { .. }) => overruns += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(delivered > 0);
    let stats = stream.stats();
    assert_eq!(stats.overruns, overruns);

    // a new writer claims the dead one's stream and continues where it stopped
    let mut w = stream
        .writer()
        .expect("the dead writer's stream can be claimed");
    assert_eq!(w.written(), written);
    w.write_bytes(&payload_bytes(written, 10), None).unwrap();
    assert_eq!(pull_checked(&mut reader, 64).unwrap(), (written, 10));
    assert!(matches!(
        reader.writer_liveness(),
        Liveness::Active { pid, .. } if pid == std::process::id()
    ));
}

#[test]
fn killed_lossless_reader_releases_the_writer_it_was_holding_back() {
    const TEST: &str = "killed_lossless_reader_releases_the_writer_it_was_holding_back";
    if let Some(r) = role() {
        return play(&r);
    }
    let _dog = Watchdog::arm(60, TEST);
    let name = unique_name("reader-killed");
    let stream = create(&name, 1);
    let _guard = StreamGuard::new(&name);
    let cap = stream.info().capacity;
    let mut idle = spawn_role(TEST, "idle-lossless-reader", &[("STREAM", &name)]);
    await_readers(&stream, 1);
    assert_eq!(stream.stats().readers[0].mode, ReaderMode::Lossless);

    let mut w = stream.writer().unwrap();
    w.set_lossless_timeout(PATIENCE);
    w.write_bytes(&payload_bytes(0, cap), None).unwrap(); // fills the ring: no room left
    let blocked = std::thread::spawn(move || {
        let r = w.write_bytes(&payload_bytes(cap, cap), None);
        (w, r)
    });
    // the writer cannot get past the idle reader
    assert_eq!(stream.stats().written, cap);
    assert_eq!(stream.stats().readers[0].cursor, 0);
    idle.kill().unwrap();
    idle.wait().unwrap();
    let (mut w, result) = blocked.join().unwrap();
    assert_eq!(result, Ok(2 * cap), "the writer was released");
    assert!(stream.stats().readers.is_empty(), "the dead slot was freed");

    // and it goes on, with a new lossless reader holding it back as before
    let mut r = stream.reader(ReaderMode::Lossless).unwrap();
    w.write_bytes(&payload_bytes(2 * cap, 3), None).unwrap();
    assert_eq!(pull_checked(&mut r, 8).unwrap(), (2 * cap, 3));
    let mut buf = vec![0u8; 3 * 8 * CH];
    r.read_into(2 * cap, 2 * cap + 3, &mut buf, None).unwrap();
    check(2 * cap, &buf).unwrap();
}
