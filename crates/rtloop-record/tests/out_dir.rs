//! Where a recording is written: the `--out` directory it creates is owner-only whatever
//! the umask, a link planted where it creates something is never followed (the link's
//! target stays untouched), and a directory of another user is refused. (Its own test
//! binary: one test sets the umask, which is per process.)

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use rtloop_record::{record, Control, RecordConfig, RecordError, Recording, Session, StartError};
use rtloop_stream::{DType, Stream, StreamConfig};
use rtloop_testkit::{unique_name, StreamGuard, TempDir, Watchdog};

fn stream(label: &str) -> (StreamGuard, Stream, String) {
    let name = unique_name(label);
    let g = StreamGuard::new(&name);
    let s = Stream::create(&name, &StreamConfig::new(DType::U64, 1, 1000.0, 4096)).unwrap();
    (g, s, name)
}

fn wait_for_reader(s: &Stream) {
    let t0 = std::time::Instant::now();
    while s.stats().readers.is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(30), "no recorder came");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// A directory outside the recording holding a file that must not change.
fn precious(label: &str) -> (TempDir, Vec<u8>) {
    let d = TempDir::new(label);
    let text = b"{\"precious\": true}".to_vec();
    std::fs::write(d.join("header.json"), &text).unwrap();
    (d, text)
}

fn untouched(d: &Path, text: &[u8]) {
    assert_eq!(std::fs::read(d.join("header.json")).unwrap(), text);
    let names: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["header.json"], "nothing written beside it");
}

#[test]
fn the_out_directory_a_session_creates_is_owner_only_under_umask_000() {
    let _w = Watchdog::arm(60, "out dir mode");
    let (_g, s, name) = stream("rec-umask");
    let tmp = TempDir::new("rec-umask");
    let out = tmp.join("parent").join("out");
    let old = rustix::process::umask(rustix::fs::Mode::empty());
    let cfg = RecordConfig {
        duration: Some(Duration::from_millis(50)),
        ..RecordConfig::default()
    };
    let session = Session::start(std::slice::from_ref(&name), &out, &cfg, false);
    rustix::process::umask(old);
    let session = session.unwrap();
    wait_for_reader(&s);
    let (reports, errors) = session.join();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(reports.len(), 1);
    for d in [tmp.join("parent"), out.clone(), out.join(&name)] {
        assert_eq!(mode(&d), 0o700, "{}", d.display());
    }
    for f in std::fs::read_dir(out.join(&name)).unwrap() {
        let f = f.unwrap().path();
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }
}

#[test]
fn a_link_planted_at_the_recordings_directory_is_refused() {
    let _w = Watchdog::arm(60, "planted link");
    let (_g, _s, name) = stream("rec-link");
    let out = TempDir::new("rec-link");
    let (target, text) = precious("rec-link-target");
    std::os::unix::fs::symlink(target.path(), out.join(&name)).unwrap();
    // bounded: a recorder that followed the link would wait for a writer that never comes
    let cfg = RecordConfig {
        duration: Some(Duration::from_secs(1)),
        ..RecordConfig::default()
    };
    let e = record(&name, &out, &cfg, &Control::default()).unwrap_err();
    assert!(matches!(e, RecordError::Refused { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("is a symbolic link") && msg.contains(&name),
        "{msg}"
    );
    // Session::start gets as far as the stream's thread: the same refusal, and the session
    // says it never started
    let session = Session::start(std::slice::from_ref(&name), &out, &cfg, false).unwrap();
    let e = session.wait_started(Duration::from_secs(30)).unwrap_err();
    assert!(matches!(&e, StartError::Ended(s) if *s == name), "{e}");
    let (reports, errors) = session.join();
    assert!(reports.is_empty());
    assert!(matches!(errors[..], [RecordError::Refused { .. }]));
    untouched(&target, &text);
    assert!(std::fs::symlink_metadata(out.join(&name))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_link_planted_at_a_file_of_an_existing_recording_is_replaced_not_followed() {
    let _w = Watchdog::arm(60, "planted file link");
    let (_g, s, name) = stream("rec-flink");
    let out = TempDir::new("rec-flink");
    let (target, text) = precious("rec-flink-target");
    std::fs::create_dir(out.join(&name)).unwrap();
    std::os::unix::fs::symlink(
        target.join("header.json"),
        out.join(&name).join("header.json"),
    )
    .unwrap();
    std::os::unix::fs::symlink(target.join("header.json"), out.join(&name).join("data.bin"))
        .unwrap();
    std::thread::scope(|sc| {
        let rec = sc.spawn(|| record(&name, &out, &RecordConfig::default(), &Control::default()));
        wait_for_reader(&s);
        let mut w = s.writer().unwrap();
        w.write(&[1u64, 2, 3]).unwrap();
        drop(w);
        rec.join().unwrap().unwrap()
    });
    untouched(&target, &text);
    let r = Recording::open(&out.join(&name)).unwrap();
    assert_eq!(r.samples, 3);
    assert!(r.header.complete);
}

#[test]
fn a_link_planted_at_the_next_segment_ends_the_recording_with_a_refusal() {
    let _w = Watchdog::arm(60, "planted segment link");
    let (_g, s, name) = stream("rec-seg");
    let out = TempDir::new("rec-seg");
    let (target, text) = precious("rec-seg-target");
    std::os::unix::fs::symlink(target.path(), out.join(format!("{name}.0002"))).unwrap();
    let control = Control::default();
    let result = std::thread::scope(|sc| {
        let rec = sc.spawn(|| {
            let cfg = RecordConfig {
                split_bytes: Some(8),
                ..RecordConfig::default()
            };
            record(&name, &out, &cfg, &control)
        });
        wait_for_reader(&s);
        let mut w = s.writer().unwrap();
        // one sample fills the first segment: the split comes while the writer is alive
        w.write(&[7u64]).unwrap();
        let t0 = std::time::Instant::now();
        while !rec.is_finished() && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(5));
        }
        // a recorder that went on into the link is stopped here, to be judged below
        control
            .stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let r = rec.join().unwrap();
        drop(w);
        r
    });
    let e = result.unwrap_err();
    assert!(matches!(e, RecordError::Refused { .. }), "{e}");
    assert!(e.to_string().contains(".0002"), "{e}");
    untouched(&target, &text);
    // what was recorded before stays readable, and says why it ended
    let first = Recording::open(&out.join(&name)).unwrap();
    assert_eq!(first.samples, 1);
    assert!(first.header.complete);
    assert!(
        first
            .header
            .ended
            .as_deref()
            .is_some_and(|e| e.contains("next segment")),
        "{:?}",
        first.header.ended
    );
}

#[test]
fn a_directory_of_another_user_is_refused() {
    let _w = Watchdog::arm(60, "other owner");
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: making a directory of another user needs root");
        return;
    }
    let (_g, _s, name) = stream("rec-owner");
    let tmp = TempDir::new("rec-owner");
    let nobody = Some(rustix::process::Uid::from_raw(65534));
    // the --out directory itself
    let out = tmp.join("theirs");
    std::fs::create_dir(&out).unwrap();
    rustix::fs::chown(&out, nobody, None).unwrap();
    let e = Session::start(
        std::slice::from_ref(&name),
        &out,
        &RecordConfig::default(),
        false,
    )
    .err()
    .expect("refused");
    let msg = e.to_string();
    assert!(matches!(e, RecordError::Refused { .. }), "{msg}");
    assert!(msg.contains("belongs to uid 65534"), "{msg}");
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "nothing written"
    );
    // a recording's directory of another user inside one of ours
    let mine = tmp.join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::create_dir(mine.join(&name)).unwrap();
    rustix::fs::chown(mine.join(&name), nobody, None).unwrap();
    let cfg = RecordConfig {
        duration: Some(Duration::from_secs(1)),
        ..RecordConfig::default()
    };
    let e = record(&name, &mine, &cfg, &Control::default()).unwrap_err();
    assert!(e.to_string().contains("belongs to uid 65534"), "{e}");
    assert_eq!(std::fs::read_dir(mine.join(&name)).unwrap().count(), 0);
    assert_eq!(std::fs::metadata(mine.join(&name)).unwrap().uid(), 65534);
}

#[test]
fn a_session_that_says_it_started_misses_nothing_written_after() {
    let _w = Watchdog::arm(60, "started");
    let (_g, s, name) = stream("rec-started");
    let out = TempDir::new("rec-started");
    let session = Session::start(
        std::slice::from_ref(&name),
        &out,
        &RecordConfig::default(),
        false,
    )
    .unwrap();
    session.wait_started(Duration::from_secs(30)).unwrap();
    // written at once, with no other wait: every sample is in the recording
    let mut w = s.writer().unwrap();
    w.write(&[7u64, 8, 9]).unwrap();
    drop(w);
    let (reports, errors) = session.join();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(reports[0].samples, 3, "{:?}", reports[0]);
    let rec = Recording::open(&out.join(&name)).unwrap();
    assert_eq!((rec.header.first_sample, rec.samples), (0, 3));
}
