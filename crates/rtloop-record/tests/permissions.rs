//! Recordings are private whatever the umask: directories 0700, files 0600. (Its own test
//! binary: the umask is per process.)

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use rtloop_record::{record, Control, RecordConfig};
use rtloop_stream::{DType, Stream, StreamConfig};
use rtloop_testkit::{unique_name, StreamGuard, TempDir, Watchdog};

#[test]
fn recordings_are_owner_only_even_with_umask_000() {
    let _w = Watchdog::arm(60, "permissions");
    let old = rustix::process::umask(rustix::fs::Mode::empty());
    let name = unique_name("rec-perm");
    let _g = StreamGuard::new(&name);
    let s = Stream::create(&name, &StreamConfig::new(DType::U64, 1, 1000.0, 4096)).unwrap();
    let out = TempDir::new("rec-perm");
    let parent = out.join("new-parent");
    std::thread::scope(|sc| {
        let rec = sc.spawn(|| {
            let cfg = RecordConfig {
                split_bytes: Some(8),
                ..RecordConfig::default()
            };
            record(&name, &parent, &cfg, &Control::default()).unwrap()
        });
        let t0 = Instant::now();
        while s.stats().readers.is_empty() {
            assert!(t0.elapsed() < Duration::from_secs(30));
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut w = s.writer().unwrap();
        for i in 0..10u64 {
            w.write(&[i, i + 1]).unwrap();
        }
        drop(w);
        rec.join().unwrap()
    });
    rustix::process::umask(old);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let mut seen = 0;
    for seg in std::fs::read_dir(&parent).unwrap() {
        let seg = seg.unwrap().path();
        assert_eq!(mode(&seg), 0o700, "{}", seg.display());
        for f in std::fs::read_dir(&seg).unwrap() {
            let f = f.unwrap().path();
            assert_eq!(mode(&f), 0o600, "{}", f.display());
            seen += 1;
        }
    }
    assert!(
        seen >= 4,
        "data, timestamps, events and header of each segment"
    );
}
