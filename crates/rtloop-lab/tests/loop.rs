//! The device and the host over every real transport (the device in a thread here; the CLI
//! tests run it as its own process), device timing, overflow, and the histogram arithmetic.

use std::time::Duration;

use rtloop_lab::device::{self, DeviceConfig};
use rtloop_lab::frame::{self, LoadTester};
use rtloop_lab::host::{self, HostConfig};
use rtloop_lab::link::{self, HostSide};
use rtloop_lab::tune;
use rtloop_lab::work::Work;
use rtloop_testkit::{unique_name, Watchdog};

const LOAD: LoadTester = LoadTester {
    fps: 30_000,
    received_words: 63,
    transmitted_words: 100,
};

/// The tests of this file spin a device each; on two CPUs they take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn device_cfg(fifo: u64) -> DeviceConfig {
    DeviceConfig {
        warmup_seconds: 0.0,
        fps: LOAD.fps,
        received_words: LOAD.received_words,
        transmitted_words: LOAD.transmitted_words,
        monitor_hz: 100,
        fifo_bytes: fifo,
        max_seconds: 30.0,
    }
}

fn run_loop(
    transport: &str,
    read_size: u64,
    work: bool,
) -> (host::HostReport, device::DeviceReport) {
    let id = unique_name(transport);
    let mut side = HostSide::prepare(transport, &id, Duration::from_micros(100)).unwrap();
    let spec = side.spec().clone();
    let dev = std::thread::spawn(move || {
        let mut l = link::connect_device(&spec).unwrap();
        device::run(&device_cfg(64 << 20), &mut l).unwrap()
    });
    let mut l = side.connect().unwrap();
    let cfg = HostConfig {
        load: LOAD,
        read_size,
        every: 30,
        seconds: 1.5,
        loopbacks: None,
        warmup: 0.3,
        fifo_words: (64 << 20) / 4,
    };
    let mut w = work.then(|| Work::bandpass(63, 30_000.0, 300.0, 3000.0, -2000.0));
    let mut snapshots = 0;
    let w = w
        .as_mut()
        .map(|w| w as &mut dyn rtloop_lab::work::BlockWork);
    let h = host::run(&cfg, &mut l, w, None, &mut || Ok(()), &mut |_| {
        snapshots += 1
    })
    .unwrap();
    drop(l);
    let d = dev.join().unwrap();
    assert!(snapshots >= 1, "live progress was reported");
    (h, d)
}

#[test]
fn the_loop_closes_over_every_transport() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let _w = Watchdog::arm(120, "the_loop_closes_over_every_transport");
    for t in link::TRANSPORTS {
        let read_size = if t == "fieldtrip" { 4096 } else { 1024 };
        let (h, d) = run_loop(t, read_size, t == "stream");
        assert_eq!(d.ended, "stopped", "{t}");
        // the device keeps its own schedule: never a frame before its time; how close it
        // came to its rate depends on the CPU time it got, and the verdict says which
        assert!(
            d.frames as f64 <= d.seconds * d.fps_configured + 1.0,
            "{t}: {} frames in {} s at {} frames/s",
            d.frames,
            d.seconds,
            d.fps_configured
        );
        assert!(
            h.frames <= d.frames,
            "{t}: read {} of {}",
            h.frames,
            d.frames
        );
        let step = tune::classify(
            read_size,
            LOAD.fps,
            64 << 20,
            LOAD.bytes_per_s(),
            Some(&h),
            Some(&d),
            None,
        );
        let short = d.fps_measured < (1.0 - tune::RATE_TOLERANCE) * d.fps_configured;
        assert_eq!(
            step.class == tune::Class::Overloaded,
            short,
            "{t}: {}",
            step.notes
        );
        // every block was whole frames in order; loopbacks came back as deltas (how many in
        // 1.5 s depends on the CPU time the machine gave the two sides)
        assert!(h.frames > 0, "{t}: {} frames", h.frames);
        assert!(
            h.latency.count > 0,
            "{t}: {} loopbacks measured",
            h.latency.count
        );
        // no bound on the figures here (timing belongs in benchmarks): only that they exist
        assert!(h.latency.p50_ns > 0, "{t}: {:?}", h.latency);
        assert_eq!(h.bytes, h.blocks * read_size);
        // monitor frames and heartbeats (100 Hz each on the device's clock) in proportion to
        // the device time the host read: a host that fell behind on a loaded machine read
        // less of it, not fewer of them per second
        let device_seconds = h.frames as f64 / LOAD.fps as f64;
        let expected = device_seconds * 100.0;
        for (what, n) in [
            ("monitor frames", h.monitor_frames),
            ("heartbeats", h.heartbeats),
        ] {
            assert!(
                n as f64 >= 0.5 * expected && n > 0,
                "{t}: {n} {what} in {device_seconds:.2} s of device time: {h:?}"
            );
        }
        // the histogram holds every result: 1000 bins of 1 us plus what lies beyond
        assert_eq!(h.histogram_us.len(), 1000);
        assert_eq!(
            h.histogram_us.iter().sum::<u64>() + h.beyond_1ms,
            h.latency.count
        );
        assert!(!h.percent_used.is_empty());
        if t == "stream" {
            assert!(h.work.is_some(), "the work step ran");
        }
    }
}

#[test]
fn a_host_that_never_reads_overflows_the_fifo() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let _w = Watchdog::arm(60, "overflow");
    let id = unique_name("overflow");
    let mut side = HostSide::prepare("stream", &id, Duration::ZERO).unwrap();
    let spec = side.spec().clone();
    let dev = std::thread::spawn(move || {
        let mut l = link::connect_device(&spec).unwrap();
        // 64 KiB fills in ~14 ms at this rate
        device::run(&device_cfg(64 << 10), &mut l).unwrap()
    });
    let _host = side.connect().unwrap(); // never posts a read
    let d = dev.join().unwrap();
    assert_eq!(d.ended, "overflow");
    assert!(
        d.fifo_high_water_percent >= 99.0,
        "{}",
        d.fifo_high_water_percent
    );
}

#[test]
fn bad_settings_are_refused_with_the_allowed_range() {
    let mut cfg = device_cfg(0);
    let e = cfg.validate().unwrap_err().to_string();
    assert!(e.contains("at least 1 byte"), "{e}");
    cfg.fifo_bytes = 1;
    cfg.monitor_hz = 0;
    assert!(cfg.validate().unwrap_err().to_string().contains("1..=1000"));
    cfg.monitor_hz = 100;
    cfg.fps = 0;
    assert!(cfg
        .validate()
        .unwrap_err()
        .to_string()
        .contains("1..=27777777"));
    let e = frame::read_size("100", &LOAD).unwrap_err().to_string();
    assert!(e.contains("requires at least 160 bytes"), "{e}");
    let e = link::HostSide::prepare("carrier-pigeon", "x", Duration::ZERO).unwrap_err();
    assert!(
        e.to_string()
            .contains("allowed: stream, unix, tcp, fieldtrip"),
        "{e}"
    );
}

/// A panic in the caller's work ends `host::run` with that panic, and the monitor thread
/// that makes the live line ends with it: the scope that joins it does not wait for ever.
#[test]
fn a_panic_in_the_work_ends_the_run_and_its_monitor() {
    struct Panics;
    impl rtloop_lab::work::BlockWork for Panics {
        fn process(&mut self, _samples: &[u8]) -> u64 {
            panic!("the caller's work failed");
        }
    }
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let _w = Watchdog::arm(60, "a_panic_in_the_work_ends_the_run_and_its_monitor");
    let id = unique_name("panic");
    let mut side = HostSide::prepare("stream", &id, Duration::from_micros(100)).unwrap();
    let spec = side.spec().clone();
    // a small FIFO: with no host reading, the device ends at once by overflowing
    let dev = std::thread::spawn(move || {
        let mut l = link::connect_device(&spec).unwrap();
        device::run(&device_cfg(1 << 20), &mut l)
    });
    let mut l = side.connect().unwrap();
    let cfg = HostConfig {
        load: LOAD,
        read_size: 1024,
        every: 30,
        seconds: 5.0,
        loopbacks: None,
        warmup: 0.0,
        fifo_words: (1 << 20) / 4,
    };
    let mut work = Panics;
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        host::run(
            &cfg,
            &mut l,
            Some(&mut work),
            None,
            &mut || Ok(()),
            &mut |_| {},
        )
    }));
    let why = ran.expect_err("the panic came through");
    assert_eq!(
        why.downcast_ref::<&str>().copied(),
        Some("the caller's work failed")
    );
    // the device sees the host go
    drop(l);
    let _ = dev.join().unwrap();
}
