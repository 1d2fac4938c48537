//! The `serial_out` sink against real pseudo-terminal pairs (rtloop-testkit's `Pty`): the
//! driver opens the pty's follower path like a serial device, the test reads the leader side
//! up to a mark written after each tick. No timing thresholds: only bytes, counts and
//! messages.

use std::path::Path;
use std::time::Duration;

use rtloop_runtime::drivers::{self, DriverCtx, InView, Sink, TickInfo};
use rtloop_runtime::model::{Kind, Signal};
use rtloop_stream::DType;
use rtloop_testkit::pty::Pty;
use rustix::fs::{Mode, OFlags};
use rustix::termios::{self, ControlModes, InputModes, OutputModes};
use serde_json::json;

fn sig(shape: &[usize], dtype: DType, variable: bool) -> Signal {
    Signal {
        name: "ev".into(),
        shape: shape.to_vec(),
        dtype,
        history: 1,
        variable,
        channels: Vec::new(),
        units: Vec::new(),
        line: 1,
    }
}

fn ctx() -> DriverCtx {
    DriverCtx {
        model: "m".into(),
        tick: Duration::from_millis(1),
        out_dir: Path::new(".").to_path_buf(),
        process: "stim".into(),
    }
}

fn open(options: &serde_json::Value, s: &Signal) -> Box<dyn Sink> {
    drivers::check("serial_out", Kind::Sink, options, &[s]).unwrap();
    drivers::open_sink("serial_out", options, std::slice::from_ref(s), &ctx()).unwrap()
}

/// Tick `k` of a 1 ms tick: deadline k ms, started now (as the runtime's timer does).
fn info(k: u64) -> TickInfo {
    let now = rtloop_sys::monotonic_ns();
    TickInfo {
        tick: k,
        deadline_ns: k * 1_000_000,
        start_ns: now,
        realtime_ns: 0,
        monotonic_ns: now,
    }
}

/// One tick of `rows` rows (native-endian bytes of `dtype` values).
fn tick(sink: &mut dyn Sink, s: &Signal, k: u64, bytes: &[u8], rows: usize) {
    let v = InView {
        signal: s,
        bytes,
        rows,
        first: 0,
    };
    sink.tick(&info(k), &[v]).unwrap();
}

#[test]
fn one_byte_per_nonzero_row_of_a_fixed_signal_and_nothing_for_zero_rows() {
    let p = Pty::open();
    // int32: 256 has a zero low byte, still an event; -1 too
    let s = sig(&[4, 1], DType::I32, false);
    let mut sink = open(&json!({"port": p.path, "byte": 0x41}), &s);
    let rows: [[i32; 4]; 4] = [[0, 1, 0, 0], [0, 0, 0, 0], [256, -1, 7, 0], [1, 1, 1, 1]];
    for (k, r) in rows.iter().enumerate() {
        let b: Vec<u8> = r.iter().flat_map(|v| v.to_ne_bytes()).collect();
        tick(sink.as_mut(), &s, k as u64, &b, 4);
        let want = r.iter().filter(|&&v| v != 0).count();
        assert_eq!(p.take(), vec![0x41; want], "tick {k}: {r:?}");
    }
    let line = sink.finish().unwrap();
    assert!(
        line.starts_with(&format!(
            "sent 8 events to {} at 115200 baud (1 bytes each); dropped 0 within \
             min_interval_ms, 0 on a full port; tick start to write returned p50 ",
            p.path
        )),
        "{line}"
    );
    assert!(
        line.contains(" µs, p99 ") && line.contains(" µs, max "),
        "{line}"
    );
}

#[test]
fn a_variable_signal_sends_for_the_rows_it_carries() {
    let p = Pty::open();
    let s = sig(&[8, 1], DType::U16, true);
    let mut sink = open(&json!({"port": p.path, "byte": 200}), &s);
    // 8 rows of room, 3 carried (one of them zero); the rows past them are stale bytes
    let vals: [u16; 8] = [5, 0, 9, 4, 4, 4, 4, 4];
    let b: Vec<u8> = vals.iter().flat_map(|v| v.to_ne_bytes()).collect();
    tick(sink.as_mut(), &s, 0, &b, 3);
    assert_eq!(p.take(), vec![200, 200]);
    tick(sink.as_mut(), &s, 1, &b, 0);
    assert_eq!(p.take(), Vec::<u8>::new());
    assert!(sink.finish().unwrap().starts_with("sent 2 events"));
}

#[test]
fn a_message_goes_out_byte_for_byte_in_raw_mode() {
    let p = Pty::open();
    // cooked mode would turn "\n" into "\r\n" (OPOST/ONLCR) and eat 0x03 as an interrupt
    // on input: the driver must set raw mode
    let s = sig(&[1], DType::U8, false);
    let mut sink = open(&json!({"port": p.path, "message": "T1\n"}), &s);
    tick(sink.as_mut(), &s, 0, &[3], 1);
    tick(sink.as_mut(), &s, 1, &[0], 1);
    tick(sink.as_mut(), &s, 2, &[1], 1);
    assert_eq!(p.take(), b"T1\nT1\n".to_vec());
    assert!(sink.finish().unwrap().contains("(3 bytes each)"));

    let mut sink = open(&json!({"port": p.path, "message": [0, 10, 13, 255]}), &s);
    tick(sink.as_mut(), &s, 0, &[1], 1);
    assert_eq!(p.take(), vec![0, 10, 13, 255]);
    drop(sink);
}

#[test]
fn the_port_is_set_raw_8n1_at_the_baud_rate_without_flow_control() {
    let p = Pty::open();
    // start from a port set up otherwise: 7E2, RTS/CTS and XON/XOFF, 9600, cooked output
    let mut t = termios::tcgetattr(&p.follower).unwrap();
    t.control_modes &= !ControlModes::CSIZE;
    t.control_modes |=
        ControlModes::CS7 | ControlModes::PARENB | ControlModes::CSTOPB | ControlModes::CRTSCTS;
    t.input_modes |= InputModes::IXON | InputModes::IXOFF;
    t.output_modes |= OutputModes::OPOST | OutputModes::ONLCR;
    t.set_speed(9600).unwrap();
    termios::tcsetattr(&p.follower, termios::OptionalActions::Now, &t).unwrap();

    let s = sig(&[1], DType::U8, false);
    let sink = open(&json!({"port": p.path, "byte": 1, "baud": 921600}), &s);
    let t = termios::tcgetattr(&p.follower).unwrap();
    assert_eq!(t.output_speed(), 921_600);
    assert_eq!(t.control_modes & ControlModes::CSIZE, ControlModes::CS8);
    for (flag, name) in [
        (ControlModes::PARENB, "PARENB"),
        (ControlModes::CSTOPB, "CSTOPB"),
        (ControlModes::CRTSCTS, "CRTSCTS"),
    ] {
        assert!(!t.control_modes.contains(flag), "{name} still set");
    }
    assert!(!t
        .input_modes
        .intersects(InputModes::IXON | InputModes::IXOFF));
    assert!(!t.output_modes.contains(OutputModes::OPOST));
    // exclusive while the sink has it: a second open is refused (EBUSY), except for root,
    // whom the kernel lets through (CAP_SYS_ADMIN)
    let again = rustix::fs::open(
        p.path.as_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    );
    if rustix::process::geteuid().is_root() {
        assert!(again.is_ok());
    } else {
        assert_eq!(again.err(), Some(rustix::io::Errno::BUSY));
    }
    drop(sink);
}

#[test]
fn min_interval_drops_events_closer_than_it_after_the_last_sent_one() {
    let p = Pty::open();
    let s = sig(&[1], DType::U8, false);
    let mut sink = open(
        &json!({"port": p.path, "byte": 7, "min_interval_ms": 4}),
        &s,
    );
    // events at these ticks (1 ms apart): 0 sent; 3 is 3 ms after 0: dropped; 5 sent;
    // 9 is 4 ms after 5: sent; 10 dropped; 12 dropped (3 ms after 9); 13 sent
    let events = [0u64, 3, 5, 9, 10, 12, 13];
    let sent = [0u64, 5, 9, 13];
    for k in 0..15u64 {
        let v = u8::from(events.contains(&k));
        tick(sink.as_mut(), &s, k, &[v], 1);
        let want = if sent.contains(&k) { vec![7] } else { vec![] };
        assert_eq!(p.take(), want, "tick {k}");
    }
    let line = sink.finish().unwrap();
    assert!(
        line.starts_with(&format!(
            "sent 4 events to {} at 115200 baud (1 bytes each); dropped 3 within \
             min_interval_ms, 0 on a full port",
            p.path
        )),
        "{line}"
    );
}

#[test]
fn a_full_port_never_blocks_the_tick_its_events_are_counted_as_dropped() {
    let p = Pty::open();
    let s = sig(&[4096, 1], DType::U8, false);
    let mut sink = open(&json!({"port": p.path, "byte": 1}), &s);
    // nobody reads the leader: the pty's buffer fills and later events cannot be written
    let ones = vec![1u8; 4096];
    let ticks = 64;
    for k in 0..ticks {
        tick(sink.as_mut(), &s, k, &ones, 4096);
    }
    let line = sink.finish().unwrap();
    drop(sink);
    let num = |after: &str| -> u64 {
        let i = line
            .find(after)
            .unwrap_or_else(|| panic!("{after:?} in {line}"))
            + after.len();
        line[i..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let sent = num("sent ");
    let full = num("within min_interval_ms, ");
    assert!(full > 0, "the pty buffer never filled: {line}");
    assert_eq!(sent + full, ticks * 4096, "{line}");
    // what the port took is exactly what arrives
    assert_eq!(p.take(), vec![1u8; sent as usize]);
}

fn refused(options: serde_json::Value, s: &Signal) -> String {
    drivers::check("serial_out", Kind::Sink, &options, &[s]).unwrap_err()
}

#[test]
fn bad_options_say_what_is_wrong_and_what_is_allowed() {
    let p = Pty::open();
    let s = sig(&[1], DType::U8, false);
    let e = refused(json!({"byte": 1}), &s);
    assert!(
        e.contains("port is missing") && e.contains("/dev/ttyACM0"),
        "{e}"
    );
    let e = refused(json!({"port": "/dev/ttyACM-none", "byte": 1}), &s);
    assert!(
        e.contains("port: /dev/ttyACM-none does not exist")
            && (e.contains("serial ports here:") || e.contains("no /dev/ttyACM*")),
        "{e}"
    );
    let d = rtloop_testkit::TempDir::new("serial-file");
    let f = d.path().join("notaport");
    std::fs::write(&f, b"").unwrap();
    let e = refused(json!({"port": f, "byte": 1}), &s);
    assert!(e.contains("is not a character device"), "{e}");
    let e = refused(json!({"port": p.path, "byte": 1, "baud": 100000}), &s);
    assert!(
        e.contains("baud: 100000 is not a standard rate")
            && e.contains("allowed: 2400, 4800, 9600, 19200, 38400, 57600, 115200, 230400"),
        "{e}"
    );
    let e = refused(json!({"port": p.path, "byte": 1, "baud": 1200}), &s);
    assert!(
        e.contains("bootloader") && e.contains("allowed: 2400"),
        "{e}"
    );
    for bad in [json!(256), json!(-1), json!(1.5), json!("A")] {
        let e = refused(json!({"port": p.path, "byte": bad}), &s);
        assert!(
            e.contains(&format!("byte is {bad}; allowed: an integer from 0 to 255")),
            "{e}"
        );
    }
    let e = refused(json!({"port": p.path, "byte": 1, "message": "go"}), &s);
    assert!(
        e.contains("byte and message are both given; give one"),
        "{e}"
    );
    let e = refused(json!({"port": p.path}), &s);
    assert!(
        e.contains("give what to send per event: byte (0-255) or message"),
        "{e}"
    );
    let e = refused(json!({"port": p.path, "message": [1, 300]}), &s);
    assert!(
        e.contains("message[1] is 300; allowed: an integer from 0 to 255"),
        "{e}"
    );
    let e = refused(json!({"port": p.path, "message": ""}), &s);
    assert!(e.contains("message is empty"), "{e}");
    let e = refused(json!({"port": p.path, "message": 5}), &s);
    assert!(e.contains("allowed: a string"), "{e}");
    let e = refused(
        json!({"port": p.path, "byte": 1, "min_interval_ms": -2}),
        &s,
    );
    assert!(e.contains("min_interval_ms is -2"), "{e}");
    let e = refused(json!({"port": p.path, "byte": 1, "rate": 5}), &s);
    assert!(
        e.contains("unknown field `rate`") && e.contains("baud"),
        "{e}"
    );
}

#[test]
fn signals_it_cannot_read_events_from_are_refused() {
    let p = Pty::open();
    let o = json!({"port": p.path, "byte": 1});
    let e = refused(o.clone(), &sig(&[1], DType::F32, false));
    assert!(
        e.contains("is float32; allowed: an integer dtype") && e.contains("nonzero"),
        "{e}"
    );
    let e = refused(o.clone(), &sig(&[10, 4], DType::U8, false));
    assert!(
        e.contains("has 4 values per row") && e.contains("allowed: one value per row"),
        "{e}"
    );
    let a = sig(&[1], DType::U8, false);
    let e = drivers::check("serial_out", Kind::Sink, &o, &[&a, &a]).unwrap_err();
    assert!(
        e.contains("reads one event signal") && e.contains("got 2"),
        "{e}"
    );
    // not a tty: refused when opened, by name
    let e = drivers::open_sink(
        "serial_out",
        &json!({"port": "/dev/null", "byte": 1}),
        std::slice::from_ref(&a),
        &ctx(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("/dev/null is not a serial port"), "{e}");
}
