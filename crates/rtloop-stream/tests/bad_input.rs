//! Every bad input gets a clear error — the exact variant, a message that says what was
//! wrong and what is allowed — and nothing already written is lost.

mod common;

use std::time::Duration;

use common::{check, create, payload_bytes, CH};
use rtloop_stream::{
    stream_path, ClaimError, CreateError, DType, Event, EventValue, Liveness, NameError, OpenError,
    ReadError, ReaderMode, RemoveError, Stream, StreamConfig, WriteError, LAYOUT_VERSION,
};
use rtloop_testkit::{role, spawn_role, unique_name, StreamGuard, Watchdog};

/// A stream holding samples `[0, n)` of the test payload, its writer and a latest reader.
/// A stream holding samples `[0, n)`, kept after its writer closes (these tests look at the
/// file once the writer is gone).
fn filled(label: &str, n: u64) -> (StreamGuard, Stream, rtloop_stream::Writer) {
    let name = unique_name(label);
    let stream = Stream::create(
        &name,
        &StreamConfig {
            keep: true,
            ..StreamConfig::new(DType::U64, CH, 1000.0, n)
        },
    )
    .unwrap();
    let guard = StreamGuard::new(&name);
    let mut w = stream.writer().unwrap();
    w.write_bytes(&payload_bytes(0, n), None).unwrap();
    (guard, stream, w)
}

/// Assert samples `[first, end)` still read back exactly as written.
fn assert_intact(stream: &Stream, first: u64, end: u64) {
    let r = stream.reader(ReaderMode::Latest).unwrap();
    let mut buf = vec![0u8; (end - first) as usize * 8 * CH];
    r.read_into(first, end, &mut buf, None).unwrap();
    check(first, &buf).unwrap();
    assert_eq!(stream.written(), end);
}

/// The error of a window request that must fail (`Window` has no `Debug` for `unwrap_err`).
fn window_err(r: &rtloop_stream::Reader, first: u64, end: u64) -> ReadError {
    match r.window(first, end) {
        Ok(w) => panic!(
            "window [{}, {}) should have been refused",
            w.first(),
            w.end()
        ),
        Err(e) => e,
    }
}

fn assert_says(err: &impl std::fmt::Display, words: &[&str]) {
    let msg = err.to_string();
    for w in words {
        assert!(msg.contains(w), "message {msg:?} should say {w:?}");
    }
}

#[test]
fn write_of_another_dtype_is_refused_and_stored_samples_stay() {
    let (_g, stream, mut w) = filled("bad-dtype", 10);
    let err = w.write(&[1.5f32; CH]).unwrap_err();
    assert_eq!(
        err,
        WriteError::DTypeMismatch {
            name: stream.name().to_owned(),
            expected: DType::U64,
            got: DType::F32,
        }
    );
    assert_says(
        &err,
        &["holds uint64 samples", "got float32 data", "convert"],
    );
    assert_intact(&stream, 0, 10);
}

#[test]
fn write_that_is_not_whole_samples_is_refused_with_the_expected_shape() {
    let (_g, stream, mut w) = filled("bad-channels", 10);
    let err = w.write(&[7u64; CH + 1]).unwrap_err();
    assert_eq!(
        err,
        WriteError::ChannelMismatch {
            name: stream.name().to_owned(),
            n_channels: CH,
            values: CH + 1,
        }
    );
    assert_says(
        &err,
        &[
            "4 channels",
            "5 values",
            "not a whole number",
            "(n_samples, 4)",
        ],
    );
    assert_intact(&stream, 0, 10);
}

#[test]
fn windows_outside_the_kept_range_or_reversed_are_refused() {
    let name = unique_name("bad-window");
    let stream = create(&name, 1);
    let _g = StreamGuard::new(&name);
    let cap = stream.info().capacity;
    let mut w = stream.writer().unwrap();
    let written = cap + 10;
    w.write_bytes(&payload_bytes(0, written), None).unwrap();
    let r = stream.reader(ReaderMode::Latest).unwrap();

    let err = window_err(&r, 5, 20);
    assert_eq!(
        err,
        ReadError::TooOld {
            first: 5,
            end: 20,
            oldest: 10,
            capacity: cap
        }
    );
    assert_says(&err, &["[5, 20)", "before the oldest kept sample 10"]);

    let err = window_err(&r, written - 1, written + 1);
    assert_eq!(
        err,
        ReadError::NotYetWritten {
            first: written - 1,
            end: written + 1,
            written
        }
    );
    assert_says(&err, &["beyond", &format!("{written} samples written")]);

    let err = window_err(&r, 20, 15);
    assert_eq!(err, ReadError::Reversed { first: 20, end: 15 });
    assert_says(&err, &["[20, 15)", "reversed", "first must be <= end"]);

    // the copying read refuses the same windows the same way
    let mut buf = vec![0u8; 15 * 8 * CH];
    assert!(matches!(
        r.read_into(5, 20, &mut buf, None),
        Err(ReadError::TooOld { oldest: 10, .. })
    ));
    assert_intact(&stream, 10, written);
}

#[test]
fn capacity_zero_is_refused_and_leaves_no_file() {
    let name = unique_name("cap-zero");
    let err = Stream::create(&name, &StreamConfig::new(DType::I16, 2, 100.0, 0)).unwrap_err();
    assert!(matches!(err, CreateError::ZeroCapacity), "{err:?}");
    assert_says(&err, &["capacity must be at least 1 sample", "got 0"]);
    assert!(!stream_path(&name).exists());
}

#[test]
fn capacity_beyond_memory_is_refused_with_the_sizes_and_leaves_no_file() {
    let name = unique_name("cap-huge");
    // 8 TiB of samples: more than this machine has, but no arithmetic overflow
    let cfg = StreamConfig::new(DType::F64, 1, 100.0, 1 << 40);
    let err = Stream::create(&name, &cfg).unwrap_err();
    match &err {
        CreateError::TooLarge {
            capacity,
            sample_bytes,
            requested_bytes,
            available_bytes,
            ..
        } => {
            assert_eq!((*capacity, *sample_bytes), (1 << 40, 8));
            assert!(requested_bytes > available_bytes);
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_says(
        &err,
        &[
            "1099511627776 samples x 8 B",
            "are available",
            "smaller capacity",
        ],
    );
    assert!(!stream_path(&name).exists());

    // a capacity whose size overflows is refused the same way
    let cfg = StreamConfig::new(DType::F64, 16, 100.0, u64::MAX / 2);
    let err = Stream::create(&name, &cfg).unwrap_err();
    assert!(matches!(err, CreateError::TooLarge { .. }), "{err:?}");
    assert!(!stream_path(&name).exists());
}

#[test]
fn names_with_slash_empty_or_too_long_are_refused_by_create_open_and_remove() {
    let long = "n".repeat(65);
    for (bad, reason) in [
        ("a/b", "it contains '/'"),
        ("../etc", "it contains '/'"),
        (".hidden", "it starts with '.'"),
        ("", "it is empty"),
        (long.as_str(), "it is too long"),
    ] {
        let want = NameError {
            name: bad.to_owned(),
            reason,
        };
        let err = Stream::create(bad, &StreamConfig::new(DType::U8, 1, 0.0, 8)).unwrap_err();
        match &err {
            CreateError::Name(e) => assert_eq!(e, &want),
            other => panic!("expected a name error for {bad:?}, got {other:?}"),
        }
        assert_says(&err, &[reason, "allowed: 1 to 64 characters"]);
        assert!(matches!(Stream::open(bad), Err(OpenError::Name(e)) if e == want));
        assert!(Stream::remove(bad).is_err());
    }
    // 64 characters is still fine
    let ok = unique_name(&"n".repeat(64));
    assert_eq!(ok.len(), 64);
    create(&ok, 8);
    let _g = StreamGuard::new(&ok);
    assert!(Stream::open(&ok).is_ok());
}

#[test]
fn stream_of_another_layout_version_is_refused_and_left_untouched() {
    let (_g, stream, w) = filled("old-layout", 10);
    drop(w);
    let path = stream_path(stream.name());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&7u32.to_ne_bytes());
    std::fs::write(&path, &bytes).unwrap();

    let err = Stream::open(stream.name()).unwrap_err();
    match &err {
        OpenError::LayoutVersion {
            path: p,
            found,
            expected,
        } => {
            assert_eq!((p, *found, *expected), (&path, 7, LAYOUT_VERSION));
        }
        other => panic!("expected LayoutVersion, got {other:?}"),
    }
    assert_says(
        &err,
        &[
            "layout version 7",
            &format!("reads version {LAYOUT_VERSION}"),
            "recreate the stream",
        ],
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "open changed nothing");
    // the samples are still there for a matching version
    bytes[8..12].copy_from_slice(&LAYOUT_VERSION.to_ne_bytes());
    std::fs::write(&path, &bytes).unwrap();
    assert_intact(&Stream::open(stream.name()).unwrap(), 0, 10);
}

#[test]
fn file_that_is_not_a_stream_is_refused_with_the_reason() {
    let name = unique_name("garbage");
    let path = stream_path(&name);
    let _g = StreamGuard::new(&name);
    // too short to hold a header
    std::fs::write(&path, b"hello, not a stream").unwrap();
    let err = Stream::open(&name).unwrap_err();
    assert!(matches!(err, OpenError::NotAStream { .. }), "{err:?}");
    assert_says(
        &err,
        &["is not an rtloop stream", "smaller than a stream header"],
    );
    // long enough, but the wrong magic
    let garbage: Vec<u8> = (0..3 * 4096u32).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(&path, &garbage).unwrap();
    let err = Stream::open(&name).unwrap_err();
    assert!(matches!(err, OpenError::NotAStream { .. }), "{err:?}");
    assert_says(&err, &["is not an rtloop stream", "not the stream magic"]);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        garbage,
        "open changed nothing"
    );
}

#[test]
fn symlink_under_a_stream_name_is_refused_by_open_and_remove_and_left_alone() {
    let (_g, stream, _w) = filled("link-target", 5);
    let name = unique_name("link");
    let link = stream_path(&name);
    let _lg = StreamGuard::new(&name);
    std::os::unix::fs::symlink(stream_path(stream.name()), &link).unwrap();
    let err = Stream::open(&name).unwrap_err();
    assert!(matches!(err, OpenError::Refused { .. }), "{err:?}");
    assert_says(&err, &["is refused", "symbolic link"]);
    let err = Stream::remove(&name).unwrap_err();
    assert!(matches!(err, RemoveError::NotAStream { .. }), "{err:?}");
    assert_says(&err, &["is not removed", "symbolic link"]);
    assert!(link.symlink_metadata().is_ok(), "the link is left alone");
    assert_intact(&stream, 0, 5);
}

#[test]
fn stream_file_of_another_user_is_refused() {
    use std::os::unix::fs::MetadataExt;
    let (_g, stream, w) = filled("other-user", 5);
    drop(w);
    let path = stream_path(stream.name());
    // only root may give a file away; as another user this test has nothing to check
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().uid(), 65534);
        let err = Stream::open(stream.name()).unwrap_err();
        assert!(matches!(err, OpenError::Refused { .. }), "{err:?}");
        assert_says(&err, &["owned by user 65534", "private to the user"]);
        let err = Stream::remove(stream.name()).unwrap_err();
        assert!(matches!(err, RemoveError::NotAStream { .. }), "{err:?}");
        assert!(path.exists(), "left alone");
        std::os::unix::fs::chown(&path, Some(0), None).unwrap();
    } else {
        eprintln!("not root: cannot make a file of another user here");
    }
}

#[test]
fn remove_refuses_a_file_that_is_not_a_stream_and_leaves_it() {
    let name = unique_name("not-stream");
    let path = stream_path(&name);
    let _g = StreamGuard::new(&name);
    std::fs::write(&path, b"a lab's notes, not a stream").unwrap();
    let err = Stream::remove(&name).unwrap_err();
    assert!(matches!(err, RemoveError::NotAStream { .. }), "{err:?}");
    assert_says(&err, &["is not removed", "stream magic", "by hand"]);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"a lab's notes, not a stream"
    );
    // a real stream is removed
    let (_g2, stream, w) = filled("removable", 1);
    drop(w);
    Stream::remove(stream.name()).unwrap();
    assert!(!stream_path(stream.name()).exists());
}

#[test]
fn second_writer_in_the_same_process_is_refused_with_the_holders_pid() {
    let (_g, stream, _w) = filled("second-writer", 10);
    let err = stream.writer().unwrap_err();
    let pid = std::process::id();
    assert_eq!(
        err,
        ClaimError::WriterBusy {
            name: stream.name().to_owned(),
            pid
        }
    );
    assert_says(
        &err,
        &[
            &format!("pid {pid}"),
            "already has a writer",
            "exactly one writer",
        ],
    );
    assert_intact(&stream, 0, 10);
}

#[test]
fn second_writer_from_another_process_is_refused_with_the_holders_pid() {
    const TEST: &str = "second_writer_from_another_process_is_refused_with_the_holders_pid";
    if role().is_some() {
        // hold the writer with 10 samples written until killed
        let _dog = Watchdog::arm(90, "child holding the writer");
        let stream = Stream::open(&std::env::var("STREAM").unwrap()).unwrap();
        let mut w = stream.writer().unwrap();
        w.write_bytes(&payload_bytes(0, 10), None).unwrap();
        loop {
            std::thread::park();
        }
    }
    let _dog = Watchdog::arm(60, TEST);
    let name = unique_name("writer-elsewhere");
    // kept: a dead writer's stream that is not kept is reclaimed by the next create anywhere
    let stream = Stream::create(
        &name,
        &StreamConfig {
            keep: true,
            ..StreamConfig::new(DType::U64, CH, 1000.0, 10)
        },
    )
    .unwrap();
    let _g = StreamGuard::new(&name);
    let mut holder = spawn_role(TEST, "hold-writer", &[("STREAM", &name)]);
    let holder_pid = holder.id();
    while stream.written() < 10 {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(matches!(
        stream.writer_liveness(),
        Liveness::Active { pid, .. } if pid == holder_pid
    ));
    let err = stream.writer().unwrap_err();
    assert_eq!(
        err,
        ClaimError::WriterBusy {
            name: name.clone(),
            pid: holder_pid
        }
    );
    assert_says(
        &err,
        &[&format!("(pid {holder_pid})"), "already has a writer"],
    );
    assert_intact(&stream, 0, 10);
    holder.kill().unwrap();
    holder.wait().unwrap();
    // once the holder is gone the stream can be claimed, with its samples intact
    let w = stream.writer().unwrap();
    assert_eq!(w.written(), 10);
    assert_intact(&stream, 0, 10);
}

#[test]
fn event_too_large_for_a_slot_is_refused_and_earlier_events_stay() {
    let (_g, stream, mut w) = filled("big-event", 4);
    let first = Event::new("trigger", EventValue::i64(1), 2);
    assert_eq!(w.push_event(&first).unwrap(), 0);
    let big = Event::new("note", "x".repeat(600).as_str(), 3);
    let err = w.push_event(&big).unwrap_err();
    assert_eq!(
        err,
        WriteError::EventTooLarge {
            bytes: 604,
            max: 464
        }
    );
    assert_says(&err, &["604 bytes", "at most 464 fit"]);
    assert_eq!(w.events_written(), 1);
    let r = stream.reader(ReaderMode::Latest).unwrap();
    let back = r.read_events(0, 1).unwrap();
    assert_eq!((back[0].kind.clone(), back[0].sample), (first.kind, 2));
    assert_intact(&stream, 0, 4);
}

#[test]
fn output_buffer_of_the_wrong_size_is_refused_with_both_sizes() {
    let (_g, stream, _w) = filled("bad-buffer", 10);
    let r = stream.reader(ReaderMode::Latest).unwrap();
    let mut small = vec![0u8; 3];
    let err = r.read_into(0, 2, &mut small, None).unwrap_err();
    assert_eq!(
        err,
        ReadError::BufferSize {
            needed: 2 * 8 * CH,
            got: 3
        }
    );
    assert_says(&err, &["holds 3 bytes", "needs 64"]);
    assert_intact(&stream, 0, 10);
}

#[test]
fn metadata_round_trips_and_bad_metadata_is_refused_with_what_is_allowed() {
    let name = unique_name("meta");
    let _g = StreamGuard::new(&name);
    let mut cfg = StreamConfig::new(DType::F32, 3, 250.0, 1024);
    cfg.content_type = "EEG".into();
    cfg.source_id = "amp-7".into();
    cfg.ch_types = vec!["eeg".into(), "eeg".into(), "stim".into()];
    cfg.description = r#"{"montage":"10-20"}"#.into();
    drop(Stream::create(&name, &cfg).unwrap());
    let i = Stream::open(&name).unwrap().info().clone();
    assert_eq!(
        (
            i.content_type.as_str(),
            i.source_id.as_str(),
            i.description.as_str()
        ),
        ("EEG", "amp-7", r#"{"montage":"10-20"}"#)
    );
    assert_eq!(i.ch_types, ["eeg", "eeg", "stim"]);
    assert_eq!(i.creator_pid, std::process::id());

    let bad = |f: &dyn Fn(&mut StreamConfig)| {
        let name = unique_name("meta-bad");
        let _g = StreamGuard::new(&name);
        let mut cfg = StreamConfig::new(DType::F32, 3, 250.0, 1024);
        f(&mut cfg);
        let e = Stream::create(&name, &cfg).unwrap_err();
        assert!(matches!(e, CreateError::Labels(_)), "{e:?}");
        // nothing was created
        assert!(Stream::open(&name).is_err());
        e.to_string()
    };
    let e = bad(&|c| c.ch_types = vec!["eeg".into()]);
    assert!(
        e.contains("1 channel types given for 3 channels; give one per channel or none"),
        "{e}"
    );
    let e = bad(&|c| c.ch_types = vec!["a\nb".into(); 3]);
    assert!(
        e.contains("at most 31 bytes of UTF-8 without NUL or newline"),
        "{e}"
    );
    let e = bad(&|c| c.content_type = "x".repeat(32));
    assert!(
        e.contains("content type") && e.contains("at most 31 bytes"),
        "{e}"
    );
    let e = bad(&|c| c.source_id = "x".repeat(64));
    assert!(
        e.contains("source id") && e.contains("at most 63 bytes"),
        "{e}"
    );
    let e = bad(&|c| c.description = "d".repeat(rtloop_stream::META_TEXT_MAX + 1));
    assert!(e.contains("at most 3776 bytes together"), "{e}");
    // exactly the limit fits
    let name = unique_name("meta-max");
    let _g = StreamGuard::new(&name);
    let mut cfg = StreamConfig::new(DType::F32, 3, 250.0, 1024);
    cfg.ch_types = vec!["t".repeat(31); 3];
    cfg.description = "d".repeat(rtloop_stream::META_TEXT_MAX - (3 * 31 + 2));
    let s = Stream::create(&name, &cfg).unwrap();
    assert_eq!(
        s.info().description.len(),
        rtloop_stream::META_TEXT_MAX - 95
    );
    assert_eq!(
        Stream::open(&name).unwrap().info().ch_types,
        vec!["t".repeat(31); 3]
    );
}

#[test]
fn latest_of_more_than_the_capacity_names_both_numbers() {
    let (_g, stream, _w) = filled("bad-latest", 10);
    let cap = stream.info().capacity;
    let r = stream.reader(ReaderMode::Latest).unwrap();
    let err = match r.latest(cap + 1) {
        Ok(w) => panic!("latest({}) gave [{}, {})", cap + 1, w.first(), w.end()),
        Err(e) => e,
    };
    assert_eq!(
        err,
        ReadError::MoreThanCapacity {
            requested: cap + 1,
            capacity: cap
        }
    );
    assert_says(
        &err,
        &[
            &format!("latest {} samples", cap + 1),
            &format!("keeps {cap}"),
            &format!("at most {cap}"),
        ],
    );
    // the capacity itself is allowed (fewer come back while fewer were written)
    let w = r.latest(cap).unwrap();
    assert_eq!((w.first(), w.end()), (0, 10));
    assert_intact(&stream, 0, 10);
}

#[test]
fn seek_past_written_is_refused_and_the_cursor_stays() {
    let (_g, stream, mut w) = filled("bad-seek", 10);
    let mut r = stream.reader(ReaderMode::Latest).unwrap();
    r.seek(4).unwrap();
    let err = r.seek(11).unwrap_err();
    assert_eq!(
        err,
        ReadError::SeekBeyondWritten {
            sample: 11,
            written: 10
        }
    );
    assert_says(&err, &["sample 11", "only 10 samples", "at most 10"]);
    assert_eq!(r.cursor(), 4, "a refused seek does not move the cursor");
    // a pull goes on from where the reader was (before, it underflowed `written - cursor`)
    let mut out = vec![0u8; 20 * 8 * CH];
    let p = r.pull_into(&mut out, None, 20).unwrap();
    assert_eq!((p.first, p.n), (4, 6));
    check(4, &out[..6 * 8 * CH]).unwrap();
    // seeking to `written` itself is allowed: nothing to pull until the writer goes on
    r.seek(10).unwrap();
    assert_eq!(r.pull_into(&mut out, None, 20).unwrap().n, 0);
    w.write_bytes(&payload_bytes(10, 2), None).unwrap();
    let p = r.pull_into(&mut out, None, 20).unwrap();
    assert_eq!((p.first, p.n), (10, 2));
    check(10, &out[..2 * 8 * CH]).unwrap();
}

/// What is left to misuse from safe code once a window's range is private: keeping it
/// while the writer laps it. Its copies are refused then, never handed out torn or stale,
/// also while the writer is only half way through filling the slots.
#[test]
fn a_window_kept_while_the_writer_refills_its_slots_copies_nothing() {
    let (_g, stream, mut w) = filled("kept-window", 10);
    let cap = stream.info().capacity;
    let r = stream.reader(ReaderMode::Latest).unwrap();
    let win = r.window(0, 10).unwrap();
    let typed = r.window_as::<u64>(0, 10).unwrap();
    assert_eq!(typed.to_vec().unwrap(), common::payload(0, 10));
    // fill the ring up to the window's first slot, then reserve over it and half fill it
    w.write_bytes(&payload_bytes(10, cap - 10), None).unwrap();
    let mut g = w.reserve(5).unwrap();
    g.bytes_mut().fill(0xAB);
    let mut out = vec![0u8; win.len_bytes()];
    let err = win.copy_to(&mut out).unwrap_err();
    assert!(
        matches!(err, ReadError::Overrun { oldest: 5, lost: 5 }),
        "{err:?}"
    );
    assert!(win.check().is_err());
    assert!(matches!(typed.to_vec(), Err(ReadError::Overrun { .. })));
    assert!(typed.check().is_err());
    g.cancel();
}
