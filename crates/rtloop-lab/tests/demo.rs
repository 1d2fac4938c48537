//! The demo as a library call, from a program that plays its reader child itself (no `rtloop`
//! executable): a full run checks every value, an early stop ends cleanly, a bad setting is
//! refused before anything starts, and the stream is gone afterwards each time.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use rtloop_lab::demo::{run, DemoConfig, DemoError};

fn demo_streams() -> Vec<String> {
    let me = format!("demo-{}", std::process::id());
    // where streams live ($RTLOOP_SHM_DIR or /dev/shm)
    let dir = rtloop_stream::stream_path("x");
    std::fs::read_dir(dir.parent().expect("a stream's directory"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(&me))
                .collect()
        })
        .unwrap_or_default()
}

fn main() -> ExitCode {
    if let Some(code) = rtloop_launch::play_if_child() {
        return code;
    }
    std::env::remove_var("RTLOOP_EXE");
    let cfg = DemoConfig {
        seconds: 0.5,
        channels: 16,
        rate: 2000.0,
        chunk: 2,
        ..DemoConfig::default()
    };
    // the whole run: every sample written is read or counted lost, none wrong
    let mut statuses = 0;
    let r = run(&cfg, &AtomicBool::new(false), &mut |_| statuses += 1).unwrap();
    assert_eq!(r.samples_written, 1000, "{r:?}");
    assert_eq!(r.samples_read + r.samples_lost, r.samples_written, "{r:?}");
    assert_eq!((r.errors, r.reader_done), (0, true), "{r:?}");
    assert!(r.latency.is_some_and(|l| l.count > 0), "{r:?}");
    assert!(
        demo_streams().is_empty(),
        "left behind: {:?}",
        demo_streams()
    );
    // stopped at once (Ctrl-C): ends early, nothing wrong, the stream removed
    let stop = AtomicBool::new(false);
    stop.store(true, Ordering::Relaxed);
    let long = DemoConfig {
        seconds: 60.0,
        ..cfg.clone()
    };
    let r = run(&long, &stop, &mut |_| {}).unwrap();
    assert!(r.samples_written < 120_000, "{r:?}");
    assert_eq!(r.errors, 0, "{r:?}");
    assert!(
        demo_streams().is_empty(),
        "left behind: {:?}",
        demo_streams()
    );
    // a bad setting: refused before any stream or process exists
    let e = run(
        &DemoConfig {
            channels: 0,
            ..cfg.clone()
        },
        &AtomicBool::new(false),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            DemoError::Config {
                name: "channels",
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.to_string(), "channels = 0: 1 to 65536");
    println!("demo: {statuses} status calls; full, stopped and refused runs as expected");
    ExitCode::SUCCESS
}
