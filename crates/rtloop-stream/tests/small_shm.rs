//! On a small shared-memory file system (a default container's /dev/shm is 64 MiB): a stream
//! that does not fit is refused naming the file system's free space (not MemAvailable) and how
//! to make room, and a stream that replaces another is made complete before the old one is
//! retired, so a replacement that does not fit leaves the old stream and its data as they were.
//! (Its own test binary: it points the process's streams at a 4 MiB tmpfs.)

mod common;

use common::{check, payload_bytes, CH};
use rtloop_stream::{CreateError, DType, ReaderMode, Stream, StreamConfig};
use rtloop_testkit::{unique_name, SmallShm};

#[test]
fn what_does_not_fit_is_refused_and_a_failed_replacement_keeps_the_old_stream() {
    let Some(shm) = SmallShm::mount(4) else {
        return;
    };
    let name = unique_name("small");
    // 1 MiB of samples fits
    let old = Stream::create(&name, &StreamConfig::new(DType::U64, CH, 1000.0, 32_768)).unwrap();
    let mut w = old.writer().unwrap();
    w.write_bytes(&payload_bytes(0, 1000), None).unwrap();

    // 8 MiB does not: the error names the file system and how to make room
    let big = StreamConfig::new(DType::U64, CH, 1000.0, 262_144);
    let e = Stream::create(&unique_name("big"), &big).unwrap_err();
    match &e {
        CreateError::TooLarge {
            requested_bytes,
            available_bytes,
            limit,
            ..
        } => {
            assert!(requested_bytes > available_bytes);
            assert!(
                *available_bytes < 4 << 20,
                "the tmpfs, not the machine's memory"
            );
            assert!(limit.contains(&shm.path().display().to_string()), "{limit}");
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    let text = e.to_string();
    assert!(
        text.contains("free space of") && text.contains("--shm-size"),
        "{text}"
    );

    // replacing the stream with one that does not fit: refused, the old one untouched
    let e = Stream::create_or_replace(&name, &big).unwrap_err();
    assert!(matches!(e, CreateError::TooLarge { .. }), "{e:?}");
    let again = Stream::open(&name).unwrap();
    assert_eq!(again.info().capacity, old.info().capacity);
    let r = again.reader(ReaderMode::Latest).unwrap();
    let mut out = vec![0u8; 1000 * 8 * CH];
    r.read_into(0, 1000, &mut out, None).unwrap();
    check(0, &out).unwrap();
    drop(r);
    assert!(
        std::fs::read_dir(shm.path()).unwrap().all(|f| !f
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with('.')),
        "no temporary file is left behind"
    );

    // a replacement that fits takes the name; the old handle keeps its own memory
    let new =
        Stream::create_or_replace(&name, &StreamConfig::new(DType::F32, 2, 500.0, 1024)).unwrap();
    assert_eq!(Stream::open(&name).unwrap().info().dtype, DType::F32);
    assert_eq!(new.info().path, rtloop_stream::stream_path(&name));
    let mut out = vec![0u8; 10 * 8 * CH];
    old.read_into(0, 10, &mut out, None).unwrap();
    check(0, &out).unwrap();
    drop(w);
    Stream::remove(&name).unwrap();
}
