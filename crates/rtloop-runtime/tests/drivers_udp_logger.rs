//! The `udp_in` / `udp_out` drivers over real loopback sockets and the `logger` sink on real
//! SQLite files. No timing thresholds: where a test depends on the network, it ticks until
//! what was sent has arrived (with a generous deadline) and checks what each tick held.

use std::net::UdpSocket;
use std::path::Path;
use std::time::{Duration, Instant};

use rtloop_runtime::drivers::{
    self, logger, udp, DriverCtx, DriverError, InView, OutBuf, Sink, Source, TickInfo,
};
use rtloop_runtime::model::{Kind, Signal};
use rtloop_stream::DType;
use rusqlite::Connection;
use serde_json::json;

/// How long a test waits for loopback datagrams before failing (never reached normally).
const PATIENCE: Duration = Duration::from_secs(20);

fn sig(name: &str, shape: &[usize], dtype: DType, variable: bool) -> Signal {
    Signal {
        name: name.into(),
        shape: shape.to_vec(),
        dtype,
        history: 1,
        variable,
        channels: Vec::new(),
        units: Vec::new(),
        line: 1,
    }
}

fn ctx(dir: &Path) -> DriverCtx {
    DriverCtx {
        model: "m".into(),
        tick: Duration::from_millis(1),
        out_dir: dir.to_path_buf(),
        process: "drv".into(),
    }
}

fn here() -> DriverCtx {
    ctx(Path::new("."))
}

/// A free loopback port (bound and released).
fn port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A directory for one test, removed when the test ends (also on failure).
fn tmp(tag: &str) -> rtloop_testkit::TempDir {
    rtloop_testkit::TempDir::new(&format!("drivers-{tag}"))
}

/// One `udp_in` tick into fresh buffers (filled with 0xAA so zeroing is visible): the
/// packets of the tick (each cut to its length) and the rows it reported.
fn tick_in(
    src: &mut dyn Source,
    pk: &Signal,
    ln: Option<&Signal>,
) -> (Vec<Vec<u8>>, usize, Vec<u8>) {
    let mut b = vec![0xAAu8; pk.rows_per_tick() * pk.row_bytes()];
    let mut l = vec![0xAAu8; ln.map_or(0, |l| l.rows_per_tick() * l.row_bytes())];
    let mut out = vec![OutBuf {
        signal: pk,
        bytes: &mut b,
        rows: pk.rows_per_tick(),
    }];
    if let Some(ls) = ln {
        out.push(OutBuf {
            signal: ls,
            bytes: &mut l,
            rows: ls.rows_per_tick(),
        });
    }
    src.tick(&TickInfo::default(), &mut out).unwrap();
    let rows = out[0].rows;
    if ln.is_some() {
        assert_eq!(out[1].rows, rows, "lengths rows follow packet rows");
    }
    drop(out);
    let row = pk.row_bytes();
    let mut packets = Vec::new();
    for r in 0..rows {
        let bytes = &b[r * row..(r + 1) * row];
        let len = match ln.map(|s| s.dtype) {
            Some(DType::U16) => usize::from(u16::from_ne_bytes([l[2 * r], l[2 * r + 1]])),
            Some(DType::I64) => {
                usize::try_from(i64::from_ne_bytes(l[8 * r..8 * r + 8].try_into().unwrap()))
                    .unwrap()
            }
            Some(other) => panic!("test helper reads uint16 or int64 lengths, not {other}"),
            // without lengths: up to the last nonzero byte
            None => bytes.iter().rposition(|&x| x != 0).map_or(0, |p| p + 1),
        };
        assert!(
            bytes[len..].iter().all(|&x| x == 0),
            "row {r} is zeroed after its {len} bytes: {bytes:?}"
        );
        packets.push(bytes[..len].to_vec());
    }
    (packets, rows, b)
}

/// Tick until `want` packets arrived; returns them and the rows of every tick that had
/// any. Fails if more than `want` arrive.
fn drain(
    src: &mut dyn Source,
    pk: &Signal,
    ln: Option<&Signal>,
    want: usize,
) -> (Vec<Vec<u8>>, Vec<usize>) {
    let start = Instant::now();
    let (mut got, mut per_tick) = (Vec::new(), Vec::new());
    while got.len() < want {
        assert!(
            start.elapsed() < PATIENCE,
            "only {} of {want} datagrams arrived",
            got.len()
        );
        let (p, rows, _) = tick_in(src, pk, ln);
        assert!(
            rows <= pk.rows_per_tick(),
            "{rows} rows > {}",
            pk.rows_per_tick()
        );
        if rows == 0 {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        per_tick.push(rows);
        got.extend(p);
    }
    assert_eq!(got.len(), want, "more datagrams than were sent");
    (got, per_tick)
}

// ---------------------------------------------------------------------------------------
// udp_in

#[test]
fn udp_in_fills_rows_and_lengths_drops_oversized_and_keeps_the_rest_for_next_tick() {
    let p = port();
    let pk = sig("pkts", &[4, 8], DType::U8, true);
    let ln = sig("lens", &[4, 1], DType::U16, true);
    let opts = json!({"bind": format!("127.0.0.1:{p}"), "recv_buffer": 1 << 20});
    udp::check_in(&opts, &[&pk, &ln]).unwrap();
    let mut src = udp::open_in(&opts, &[pk.clone(), ln.clone()], &here()).unwrap();
    // nothing sent yet: an empty tick, not a wait
    let (_, rows, _) = tick_in(src.as_mut(), &pk, Some(&ln));
    assert_eq!(rows, 0);
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let sent: Vec<Vec<u8>> = vec![
        b"abc".to_vec(),
        vec![7u8; 9], // one byte too many: dropped
        b"12345678".to_vec(),
        Vec::new(), // an empty datagram is a packet of length 0
        b"x".to_vec(),
        vec![9u8; 2000], // dropped
        b"yy".to_vec(),
        b"zzz".to_vec(),
        vec![1, 0, 2],
        b"last one".to_vec(),
    ];
    for d in &sent {
        tx.send_to(d, ("127.0.0.1", p)).unwrap();
    }
    let kept: Vec<Vec<u8>> = sent.iter().filter(|d| d.len() <= 8).cloned().collect();
    let (got, per_tick) = drain(src.as_mut(), &pk, Some(&ln), kept.len());
    assert_eq!(got, kept, "every datagram that fits, in order");
    // 8 packets in rows of 4: never more than 4 a tick, so at least two ticks
    assert!(per_tick.len() >= 2, "{per_tick:?}");
    let s = src.finish().unwrap();
    let bytes: usize = kept.iter().map(Vec::len).sum();
    assert_eq!(
        s,
        format!("received 8 packets ({bytes} bytes), 2 oversized dropped")
    );
}

#[test]
fn udp_in_takes_more_than_one_recvmmsg_holds_in_a_tick() {
    // the kernel handles at most 1024 messages a call; a signal of 1100 rows still fills
    let p = port();
    let pk = sig("pkts", &[1100, 8], DType::U8, true);
    let ln = sig("lens", &[1100, 1], DType::I64, true);
    let opts = json!({"bind": format!("127.0.0.1:{p}")});
    udp::check_in(&opts, &[&pk, &ln]).unwrap();
    let mut src = udp::open_in(&opts, &[pk.clone(), ln.clone()], &here()).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let sent: Vec<Vec<u8>> = (0..2500u32)
        .map(|i| {
            let mut d = i.to_le_bytes().to_vec();
            d.truncate(1 + (i % 4) as usize);
            d[0] |= 1; // never all zero
            d
        })
        .collect();
    for d in &sent {
        tx.send_to(d, ("127.0.0.1", p)).unwrap();
    }
    let (got, per_tick) = drain(src.as_mut(), &pk, Some(&ln), sent.len());
    assert_eq!(got, sent);
    assert!(per_tick.len() >= 3, "{per_tick:?}");
    assert!(src.finish().unwrap().starts_with("received 2500 packets"));
}

#[test]
fn udp_in_without_a_lengths_signal() {
    let p = port();
    let pk = sig("pkts", &[2, 4], DType::U8, true);
    let opts = json!({"bind": format!("127.0.0.1:{p}")});
    udp::check_in(&opts, &[&pk]).unwrap();
    let mut src = udp::open_in(&opts, std::slice::from_ref(&pk), &here()).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    for d in [&b"ab"[..], b"cdef", b"g"] {
        tx.send_to(d, ("127.0.0.1", p)).unwrap();
    }
    let (got, _) = drain(src.as_mut(), &pk, None, 3);
    assert_eq!(got, [b"ab".to_vec(), b"cdef".to_vec(), b"g".to_vec()]);
}

#[test]
fn udp_in_names_an_address_in_use() {
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
    let a = taken.local_addr().unwrap();
    let pk = sig("pkts", &[8, 1472], DType::U8, true);
    let e = udp::open_in(&json!({"bind": a.to_string()}), &[pk], &here())
        .err()
        .unwrap();
    // an OS error, with the address it could not bind
    assert!(
        matches!(&e, DriverError::Io { source, .. } if source.kind() == std::io::ErrorKind::AddrInUse),
        "{e:?}"
    );
    let m = e.to_string();
    assert!(m.contains(&a.to_string()) && m.contains("in use"), "{m}");
}

// ---------------------------------------------------------------------------------------
// udp_out

fn receiver() -> (UdpSocket, u16) {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(PATIENCE)).unwrap();
    let p = rx.local_addr().unwrap().port();
    (rx, p)
}

fn recv(rx: &UdpSocket) -> Vec<u8> {
    let mut buf = [0u8; 65_536];
    let n = rx.recv(&mut buf).expect("a datagram");
    buf[..n].to_vec()
}

fn view<'a>(s: &'a Signal, bytes: &'a [u8], rows: usize) -> InView<'a> {
    InView {
        signal: s,
        bytes,
        rows,
        first: 0,
    }
}

#[test]
fn udp_out_sends_each_row_cut_to_its_length() {
    let (rx, p) = receiver();
    let d = sig("d", &[4, 4], DType::U8, true);
    let ln = sig("ln", &[4, 1], DType::U32, true);
    let opts = json!({"to": format!("127.0.0.1:{p}"), "bind": "127.0.0.1:0"});
    drivers::check("udp_out", Kind::Sink, &opts, &[&d, &ln]).unwrap();
    let mut sink = udp::open_out(&opts, &[d.clone(), ln.clone()], &here()).unwrap();
    let bytes = b"abcdefghijklmnop";
    let lens: Vec<u8> = [2u32, 4, 0, 3]
        .iter()
        .flat_map(|x| x.to_ne_bytes())
        .collect();
    // 3 of the 4 rows this tick
    sink.tick(
        &TickInfo::default(),
        &[view(&d, &bytes[..12], 3), view(&ln, &lens[..12], 3)],
    )
    .unwrap();
    let got: Vec<Vec<u8>> = (0..3).map(|_| recv(&rx)).collect();
    assert_eq!(got, [b"ab".to_vec(), b"efgh".to_vec(), Vec::new()]);
    // an empty tick sends nothing; the next tick's datagram is the next one received
    sink.tick(&TickInfo::default(), &[view(&d, &[], 0), view(&ln, &[], 0)])
        .unwrap();
    sink.tick(
        &TickInfo::default(),
        &[view(&d, &bytes[12..], 1), view(&ln, &lens[12..], 1)],
    )
    .unwrap();
    assert_eq!(recv(&rx), b"mno");
    assert_eq!(
        sink.finish().unwrap(),
        "sent 4 datagrams (9 bytes), 0 refused/dropped"
    );
}

#[test]
fn udp_out_sends_whole_rows_of_any_dtype() {
    let (rx, p) = receiver();
    let d = sig("f", &[2, 3], DType::F32, false);
    let opts = json!({"to": format!("127.0.0.1:{p}")});
    let mut sink = udp::open_out(&opts, std::slice::from_ref(&d), &here()).unwrap();
    let vals: Vec<u8> = (0..6)
        .flat_map(|i| (i as f32 * 1.5).to_ne_bytes())
        .collect();
    sink.tick(&TickInfo::default(), &[view(&d, &vals, 2)])
        .unwrap();
    assert_eq!(recv(&rx), vals[..12]);
    assert_eq!(recv(&rx), vals[12..]);
}

#[test]
fn udp_out_nonzero_skips_rows_of_zero_bytes() {
    let (rx, p) = receiver();
    let t = sig("trigger", &[2], DType::U8, false);
    let opts = json!({"to": format!("127.0.0.1:{p}"), "send": "nonzero"});
    drivers::check("udp_out", Kind::Sink, &opts, &[&t]).unwrap();
    let mut trig = udp::open_out(&opts, std::slice::from_ref(&t), &here()).unwrap();
    let ticks: [[u8; 2]; 6] = [[0, 0], [1, 0], [0, 0], [0, 2], [0, 0], [3, 3]];
    for v in &ticks {
        trig.tick(&TickInfo::default(), &[view(&t, v, 1)]).unwrap();
    }
    // loopback keeps order: exactly the nonzero rows, then nothing more
    for want in [[1u8, 0], [0, 2], [3, 3]] {
        assert_eq!(recv(&rx), want);
    }
    assert_eq!(
        trig.finish().unwrap(),
        "sent 3 datagrams (6 bytes), 0 refused/dropped"
    );
    rx.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 8];
    assert!(rx.recv(&mut buf).is_err(), "no datagram for a zero row");
}

#[test]
fn udp_out_counts_refused_datagrams_when_nobody_listens() {
    let p = port(); // nobody listens
    let d = sig("d", &[1], DType::U8, false);
    let mut sink = udp::open_out(
        &json!({"to": format!("127.0.0.1:{p}")}),
        std::slice::from_ref(&d),
        &here(),
    )
    .unwrap();
    let start = Instant::now();
    // the first datagram goes out; its ICMP "port unreachable" makes a later send fail
    loop {
        sink.tick(&TickInfo::default(), &[view(&d, &[1], 1)])
            .unwrap();
        let s = sink.finish().unwrap();
        if !s.ends_with(" 0 refused/dropped") {
            assert!(
                s.starts_with("sent ") && s.contains("refused/dropped"),
                "{s}"
            );
            break;
        }
        assert!(start.elapsed() < PATIENCE, "never refused: {s}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn udp_out_refuses_bad_lengths_naming_both_signals() {
    let (_rx, p) = receiver();
    let d = sig("data", &[3, 4], DType::U8, true);
    let ln = sig("lens", &[3, 1], DType::I32, true);
    let mut sink = udp::open_out(
        &json!({"to": format!("127.0.0.1:{p}")}),
        &[d.clone(), ln.clone()],
        &here(),
    )
    .unwrap();
    let bytes = [0u8; 12];
    for bad in [9i32, -1] {
        let lens: Vec<u8> = [1i32, bad, 0]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        let e = sink
            .tick(
                &TickInfo::default(),
                &[view(&d, &bytes, 3), view(&ln, &lens, 3)],
            )
            .err()
            .unwrap();
        // the tick's data broke the rules: what, where and what is allowed
        assert!(matches!(e, DriverError::Data(_)), "{e:?}");
        let m = e.to_string();
        assert!(
            m.contains(&format!("length {bad}"))
                && m.contains("'lens'")
                && m.contains("'data'")
                && m.contains("0..=4"),
            "{m}"
        );
    }
    // lengths for 2 rows, data for 3
    let lens: Vec<u8> = [1i32, 1, 1].iter().flat_map(|x| x.to_ne_bytes()).collect();
    let e = sink
        .tick(
            &TickInfo::default(),
            &[view(&d, &bytes, 3), view(&ln, &lens[..8], 2)],
        )
        .err()
        .unwrap();
    assert!(matches!(e, DriverError::Data(_)), "{e:?}");
    let m = e.to_string();
    assert!(m.contains("2 rows") && m.contains("has 3"), "{m}");
}

// ---------------------------------------------------------------------------------------
// check(): every refusal says what is wrong and what is allowed

#[test]
fn udp_in_check_refuses_bad_signals_and_addresses() {
    let ok = sig("p", &[8, 1472], DType::U8, true);
    let ln = sig("l", &[8, 1], DType::U16, true);
    let o = json!({"bind": "127.0.0.1:5000"});
    udp::check_in(&o, &[&ok]).unwrap();
    udp::check_in(&o, &[&ok, &ln]).unwrap();
    for dt in [DType::U32, DType::I32, DType::I64] {
        udp::check_in(&o, &[&ok, &sig("l", &[8, 1], dt, true)]).unwrap();
    }
    let err = |sigs: &[&Signal]| udp::check_in(&o, sigs).unwrap_err();
    let e = err(&[&sig("p", &[8, 1472], DType::F32, true)]);
    assert!(e.contains("uint8") && e.contains("float32"), "{e}");
    let e = err(&[&sig("p", &[8, 1472], DType::U8, false)]);
    assert!(
        e.contains("variable: true") && e.contains("not variable"),
        "{e}"
    );
    let e = err(&[&sig("p", &[1472], DType::U8, true)]);
    assert!(
        e.contains("[max_packets, packet_bytes]") && e.contains("[1472]"),
        "{e}"
    );
    let e = err(&[&sig("p", &[2, 3, 4], DType::U8, true)]);
    assert!(e.contains("[2, 3, 4]"), "{e}");
    // lengths: dtype, shape, max_packets, variable
    let e = err(&[&ok, &sig("l", &[8, 1], DType::F64, true)]);
    assert!(
        e.contains("uint16, uint32, int32, int64") && e.contains("float64"),
        "{e}"
    );
    let e = err(&[&ok, &sig("l", &[4, 1], DType::U16, true)]);
    assert!(e.contains("[8, 1]") && e.contains("[4, 1]"), "{e}");
    let e = err(&[&ok, &sig("l", &[8, 2], DType::U16, true)]);
    assert!(e.contains("[8, 1]"), "{e}");
    let e = err(&[&ok, &sig("l", &[8, 1], DType::U16, false)]);
    assert!(e.contains("variable"), "{e}");
    // how many signals
    assert!(err(&[]).contains("packets"));
    assert!(err(&[&ok, &ln, &ln]).contains("1 or 2"));
    // addresses
    for bad in ["nowhere", "127.0.0.1", "127.0.0.1:70000", "", "1.2.3.4.5:6"] {
        let e = udp::check_in(&json!({"bind": bad}), &[&ok]).unwrap_err();
        assert!(
            e.contains("bind") && e.contains("host:port"),
            "{bad:?}: {e}"
        );
    }
    udp::check_in(&json!({"bind": "[::1]:5000"}), &[&ok]).unwrap();
    // options
    let e = udp::check_in(&json!({}), &[&ok]).unwrap_err();
    assert!(e.contains("bind"), "{e}");
    let e = udp::check_in(&json!({"bind": "127.0.0.1:1", "port": 3}), &[&ok]).unwrap_err();
    assert!(
        e.contains("unknown field `port`") && e.contains("bind") && e.contains("recv_buffer"),
        "{e}"
    );
    // through the registry too
    let e = drivers::check("udp_in", Kind::Sink, &o, &[&ok]).unwrap_err();
    assert!(e.contains("source"), "{e}");
}

#[test]
fn udp_out_check_refuses_bad_signals_and_addresses() {
    let d = sig("d", &[8, 100], DType::U8, true);
    let o = json!({"to": "127.0.0.1:9"});
    udp::check_out(&o, &[&d]).unwrap();
    udp::check_out(&o, &[&sig("f", &[3], DType::F64, false)]).unwrap();
    let e = udp::check_out(&json!({"to": "127.0.0.1:9", "send": "some"}), &[&d]).unwrap_err();
    assert!(e.contains("all") && e.contains("nonzero"), "{e}");
    let e = udp::check_out(&json!({"to": "localhost"}), &[&d]).unwrap_err();
    assert!(e.contains("to") && e.contains("host:port"), "{e}");
    let e = udp::check_out(&json!({"to": "127.0.0.1:9", "bind": "x:y"}), &[&d]).unwrap_err();
    assert!(e.contains("bind") && e.contains("host:port"), "{e}");
    let e = udp::check_out(&json!({"bind": "127.0.0.1:9"}), &[&d]).unwrap_err();
    assert!(e.contains("`to`"), "{e}");
    let e = udp::check_out(&json!({"to": "127.0.0.1:9", "port": 1}), &[&d]).unwrap_err();
    assert!(
        e.contains("unknown field `port`") && e.contains("send"),
        "{e}"
    );
    let big = sig("b", &[1, 70000], DType::U8, false);
    assert!(udp::check_out(&o, &[&big]).unwrap_err().contains("65507"));
    // lengths: one per row of the data, same variability
    let e = udp::check_out(&o, &[&d, &sig("l", &[4, 1], DType::U32, true)]).unwrap_err();
    assert!(e.contains("[8, 1]"), "{e}");
    let e = udp::check_out(&o, &[&d, &sig("l", &[8, 1], DType::U8, true)]).unwrap_err();
    assert!(e.contains("uint16"), "{e}");
    let e = udp::check_out(&o, &[&d, &sig("l", &[8, 1], DType::U32, false)]).unwrap_err();
    assert!(e.contains("variable"), "{e}");
    assert!(udp::check_out(&o, &[]).unwrap_err().contains("1 or 2"));
}

// ---------------------------------------------------------------------------------------
// logger

fn power_bytes(k: u64) -> Vec<u8> {
    (0..4)
        .flat_map(|c| (k as f32 * 0.5 - c as f32 / 8.0).to_ne_bytes())
        .collect()
}

fn packet_rows(k: u64) -> usize {
    (k % 9) as usize // 0..=8 rows
}

fn packet_bytes(k: u64) -> Vec<u8> {
    (0..packet_rows(k) * 16)
        .map(|i| (k as usize * 7 + i) as u8)
        .collect()
}

fn tick_info(k: u64) -> TickInfo {
    TickInfo {
        tick: k,
        deadline_ns: 1_000_000 * k,
        start_ns: 1_000_000 * k + 7,
        realtime_ns: 1_700_000_000_000_000_000 + k,
        monotonic_ns: 1_000_000 * k + 11,
    }
}

fn log_ticks(l: &mut dyn Sink, ticks: std::ops::Range<u64>, small: &Signal, pk: &Signal) {
    for k in ticks {
        let (v, p) = (power_bytes(k), packet_bytes(k));
        l.tick(
            &tick_info(k),
            &[view(small, &v, 1), view(pk, &p, packet_rows(k))],
        )
        .unwrap();
    }
}

/// A logger's directory is made when it is missing (as the recorder's `out` is), with a new
/// file per run or `overwrite`; a directory that cannot be made says which.
#[test]
fn logger_makes_its_directory() {
    let d = tmp("mkdir");
    let small = sig("power", &[4], DType::F32, false);
    for (path, overwrite) in [("logs/a/run.db", false), ("logs/b/run.db", true)] {
        let opts = json!({"path": path, "overwrite": overwrite});
        let mut l = logger::open(&opts, std::slice::from_ref(&small), &ctx(&d)).unwrap();
        let v = power_bytes(0);
        l.tick(&tick_info(0), &[view(&small, &v, 1)]).unwrap();
        l.finish().unwrap();
        let n: i64 = Connection::open(d.join(path))
            .unwrap()
            .query_row("SELECT COUNT(*) FROM ticks", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1, "{path}");
    }
    std::fs::write(d.join("file"), b"").unwrap();
    let opts = json!({"path": "file/run.db"});
    let e = logger::open(&opts, &[small], &ctx(&d))
        .err()
        .expect("refused");
    let msg = e.to_string();
    assert!(
        msg.contains("cannot create") && msg.contains("file"),
        "{msg}"
    );
}

#[test]
fn logger_stores_every_tick_and_value() {
    let d = tmp("all");
    let small = sig("power", &[4], DType::F32, false);
    let pk = sig("spikes.raw", &[8, 16], DType::U8, true);
    // 250 ticks in batches of 7 are 36 batches: all fit in the default queue of 64, so
    // none is dropped however slow the disk
    let opts = json!({"path": "run/log.db", "batch_ticks": 7});
    std::fs::create_dir_all(d.join("run")).unwrap();
    drivers::check("logger", Kind::Sink, &opts, &[&small, &pk]).unwrap();
    let mut l = logger::open(&opts, &[small.clone(), pk.clone()], &ctx(&d)).unwrap();
    let n = 250u64;
    log_ticks(l.as_mut(), 0..n, &small, &pk);
    // `path` links to this run's own file, which the summary names
    let path = d.join("run/log.db");
    let file = d.join("run").join(std::fs::read_link(&path).unwrap());
    assert_eq!(
        l.finish().unwrap(),
        format!("logged {n} ticks to {} (0 dropped)", file.display())
    );

    let db = Connection::open(&path).unwrap();
    // ticks
    let mut st = db
        .prepare("SELECT tick, deadline_ns, start_ns, monotonic_ns, realtime_ns FROM ticks ORDER BY tick")
        .unwrap();
    let ticks: Vec<[i64; 5]> = st
        .query_map([], |r| {
            Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?])
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(ticks.len(), n as usize);
    for (k, t) in ticks.iter().enumerate() {
        let i = tick_info(k as u64);
        assert_eq!(
            *t,
            [
                i.tick as i64,
                i.deadline_ns as i64,
                i.start_ns as i64,
                i.monotonic_ns as i64,
                i.realtime_ns as i64
            ]
        );
    }
    // signals
    let mut st = db
        .prepare("SELECT name, dtype, shape, rows_per_tick, variable, table_name FROM signals ORDER BY name")
        .unwrap();
    let meta: Vec<(String, String, String, i64, i64, String)> = st
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        meta,
        [
            (
                "power".into(),
                "float32".into(),
                "[4]".into(),
                1,
                0,
                "sig_power".into()
            ),
            (
                "spikes.raw".into(),
                "uint8".into(),
                "[8,16]".into(),
                8,
                1,
                "sig_spikes_raw".into()
            ),
        ]
    );
    // the small fixed signal: one typed column per value
    let ty: String = db
        .query_row("SELECT typeof(v0) FROM sig_power LIMIT 1", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ty, "real");
    let mut st = db
        .prepare("SELECT tick, v0, v1, v2, v3 FROM \"sig_power\" ORDER BY tick")
        .unwrap();
    let rows: Vec<(i64, [f64; 4])> = st
        .query_map([], |r| {
            Ok((r.get(0)?, [r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?]))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), n as usize);
    for (k, (t, v)) in rows.iter().enumerate() {
        assert_eq!(*t, k as i64);
        let want: Vec<f64> = power_bytes(k as u64)
            .chunks(4)
            .map(|c| f64::from(f32::from_ne_bytes(c.try_into().unwrap())))
            .collect();
        assert_eq!(v.to_vec(), want, "tick {k}");
    }
    // the variable signal: the tick's rows as one blob
    let mut st = db
        .prepare("SELECT tick, rows, data FROM \"sig_spikes_raw\" ORDER BY tick")
        .unwrap();
    let rows: Vec<(i64, i64, Vec<u8>)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), n as usize);
    for (k, (t, r, b)) in rows.iter().enumerate() {
        assert_eq!(
            (*t, *r as usize, b.clone()),
            (k as i64, packet_rows(k as u64), packet_bytes(k as u64)),
            "tick {k}"
        );
    }
}

#[test]
fn logger_integers_and_wide_signals() {
    let d = tmp("types");
    let ints = sig("i", &[2, 3], DType::I16, false); // 6 values: columns
    let wide = sig("w", &[65], DType::F64, false); // 65 values: a blob
    let opts = json!({"path": "t.db"});
    let mut l = logger::open(&opts, &[ints.clone(), wide.clone()], &ctx(&d)).unwrap();
    let iv: Vec<u8> = [-3i16, 0, 7, i16::MIN, i16::MAX, 1]
        .iter()
        .flat_map(|x| x.to_ne_bytes())
        .collect();
    let wv: Vec<u8> = (0..65).flat_map(|x| f64::from(x).to_le_bytes()).collect();
    l.tick(&tick_info(0), &[view(&ints, &iv, 2), view(&wide, &wv, 1)])
        .unwrap();
    l.finish().unwrap();
    let db = Connection::open(d.join("t.db")).unwrap();
    let v: Vec<i64> = db
        .query_row("SELECT v0, v1, v2, v3, v4, v5 FROM sig_i", [], |r| {
            (0..6).map(|i| r.get(i)).collect()
        })
        .unwrap();
    assert_eq!(v, [-3, 0, 7, -32768, 32767, 1]);
    let (rows, blob): (i64, Vec<u8>) = db
        .query_row("SELECT rows, data FROM sig_w", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((rows, blob), (1, wv));
}

/// One value of a one-value float signal in the log at `path`.
fn logged_value(path: &Path) -> f64 {
    Connection::open(path)
        .unwrap()
        .query_row("SELECT v0 FROM sig_a", [], |r| r.get(0))
        .unwrap()
}

fn log_one(opts: &serde_json::Value, s: &Signal, d: &Path, v: f32) -> String {
    let mut l = logger::open(opts, std::slice::from_ref(s), &ctx(d)).unwrap();
    l.tick(&tick_info(0), &[view(s, &v.to_ne_bytes(), 1)])
        .unwrap();
    l.finish().unwrap()
}

#[test]
fn a_rerun_logs_to_a_new_file_and_the_path_opens_the_newest() {
    let d = tmp("rerun");
    let s = sig("a", &[1], DType::F32, false);
    let opts = json!({"path": "run.db"});
    let first = log_one(&opts, &s, &d, 1.5);
    // the same model again, also after a run that failed and left its file behind
    let second = log_one(&opts, &s, &d, 2.5);
    let third = log_one(&opts, &s, &d, 3.5);
    let mut logs: Vec<String> = std::fs::read_dir(&*d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("run-") && n.ends_with(".db"))
        .collect();
    logs.sort();
    assert_eq!(logs.len(), 3, "{logs:?}");
    // each summary names its own file; the values of each run are in it
    let mut values: Vec<f64> = logs.iter().map(|n| logged_value(&d.join(n))).collect();
    values.sort_by(f64::total_cmp);
    assert_eq!(values, [1.5, 2.5, 3.5]);
    for (summary, v) in [(&first, 1.5), (&second, 2.5), (&third, 3.5)] {
        let file = logs
            .iter()
            .find(|n| summary.contains(n.as_str()))
            .unwrap_or_else(|| panic!("{summary}"));
        assert_eq!(logged_value(&d.join(file)), v);
    }
    // `run.db` is a link to the newest
    assert!(std::fs::symlink_metadata(d.join("run.db"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(logged_value(&d.join("run.db")), 3.5);
}

#[test]
fn log_names_carry_the_utc_start_time_and_never_collide() {
    assert_eq!(logger::utc_stamp(0), "19700101T000000Z");
    assert_eq!(logger::utc_stamp(951_782_400), "20000229T000000Z");
    assert_eq!(logger::utc_stamp(1_795_745_277), "20261127T020757Z");
    let d = tmp("names");
    let named = d.join("x.db");
    let a = logger::new_log_path(&named, 1_795_745_277).unwrap();
    let b = logger::new_log_path(&named, 1_795_745_277).unwrap();
    assert_eq!(a, d.join("x-20261127T020757Z.db"));
    assert_eq!(b, d.join("x-20261127T020757Z-2.db"));
    assert_eq!(
        std::fs::read_link(&named).unwrap(),
        Path::new("x-20261127T020757Z-2.db")
    );
}

#[test]
fn overwrite_writes_the_path_itself_and_an_old_file_there_is_kept_otherwise() {
    let d = tmp("exists");
    let s = sig("a", &[1], DType::F32, false);
    std::fs::write(d.join("old.db"), b"precious").unwrap();
    // a regular file at `path` (a log from before runs had their own) is never touched
    let summary = log_one(&json!({"path": "old.db"}), &s, &d, 1.5);
    assert_eq!(std::fs::read(d.join("old.db")).unwrap(), b"precious");
    assert!(
        summary.contains("old-") && !summary.contains("old.db"),
        "{summary}"
    );
    // overwrite: exactly `path`, replaced
    let summary = log_one(&json!({"path": "old.db", "overwrite": true}), &s, &d, 2.5);
    assert!(summary.contains("old.db"), "{summary}");
    assert!(!std::fs::symlink_metadata(d.join("old.db"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(logged_value(&d.join("old.db")), 2.5);
    // a directory that cannot be made (a file is in its place) is named
    std::fs::write(d.join("blocker"), b"").unwrap();
    let e = logger::open(&json!({"path": "blocker/dir.db"}), &[s], &ctx(&d))
        .err()
        .unwrap();
    assert!(e.to_string().contains("blocker"), "{e}");
}

#[test]
fn logger_check_says_what_is_allowed() {
    let s = sig("a", &[2], DType::F32, false);
    let e = logger::check(&json!({"file": "x.db"}), &[&s]).unwrap_err();
    for k in [
        "unknown field `file`",
        "path",
        "overwrite",
        "batch_ticks",
        "queue_batches",
    ] {
        assert!(e.contains(k), "{k}: {e}");
    }
    let e = logger::check(&json!({}), &[&s]).unwrap_err();
    assert!(e.contains("path"), "{e}");
    let e = logger::check(&json!({"path": ""}), &[&s]).unwrap_err();
    assert!(e.contains("path"), "{e}");
    let e = logger::check(&json!({"path": "x.db", "batch_ticks": 0}), &[&s]).unwrap_err();
    assert!(e.contains("at least 1"), "{e}");
    let e = logger::check(&json!({"path": "x.db", "queue_batches": 0}), &[&s]).unwrap_err();
    assert!(e.contains("at least 1"), "{e}");
    let e = logger::check(&json!({"path": "x.db", "batch_ticks": "many"}), &[&s]).unwrap_err();
    assert!(
        e.contains("\"many\"") && e.contains("expected usize"),
        "{e}"
    );
    let e = logger::check(&json!({"path": "x.db"}), &[]).unwrap_err();
    assert!(e.contains("at least one signal"), "{e}");
    let (a, b) = (
        sig("x.y", &[2], DType::F32, false),
        sig("x-y", &[2], DType::F32, false),
    );
    let e = logger::check(&json!({"path": "x.db"}), &[&a, &b]).unwrap_err();
    assert!(e.contains("sig_x_y"), "{e}");
}

#[test]
fn logger_table_names_are_never_sql() {
    assert_eq!(logger::table_name("eeg-1.raw_A"), "sig_eeg_1_raw_A");
    let evil = "a\"; DROP TABLE ticks; --";
    assert_eq!(logger::table_name(evil), "sig_a___DROP_TABLE_ticks____");
    let d = tmp("names");
    let s = sig(evil, &[1], DType::U8, false);
    let mut l = logger::open(&json!({"path": "n.db"}), std::slice::from_ref(&s), &ctx(&d)).unwrap();
    l.tick(&tick_info(0), &[view(&s, &[42], 1)]).unwrap();
    l.finish().unwrap();
    let db = Connection::open(d.join("n.db")).unwrap();
    let (name, table): (String, String) = db
        .query_row("SELECT name, table_name FROM signals", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(
        (name.as_str(), table.as_str()),
        (evil, "sig_a___DROP_TABLE_ticks____")
    );
    let v: i64 = db
        .query_row(&format!("SELECT v0 FROM \"{table}\""), [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 42);
    let n: i64 = db
        .query_row("SELECT COUNT(*) FROM ticks", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
}

/// Hold the database's write lock from another connection (as a slow disk would hold the
/// writer): the writer thread cannot commit while it is held.
fn lock(path: &Path) -> Connection {
    let c = Connection::open(path).unwrap();
    c.execute_batch("BEGIN EXCLUSIVE").unwrap();
    c
}

#[test]
fn logger_drops_batches_when_the_writer_is_behind_and_never_waits() {
    let d = tmp("behind");
    let small = sig("power", &[4], DType::F32, false);
    let pk = sig("pk", &[8, 16], DType::U8, true);
    let opts = json!({"path": "b.db", "batch_ticks": 1, "queue_batches": 1});
    let mut l = logger::open(&opts, &[small.clone(), pk.clone()], &ctx(&d)).unwrap();
    let held = lock(&d.join("b.db"));
    // the writer holds at most one batch and the queue one more: the rest are dropped
    log_ticks(l.as_mut(), 0..20, &small, &pk);
    held.execute_batch("ROLLBACK").unwrap();
    drop(held);
    let s = l.finish().unwrap();
    let (logged, dropped) = parse_logged(&s);
    assert!(dropped >= 18 && logged + dropped == 20, "{s}");
    let db = Connection::open(d.join("b.db")).unwrap();
    let n: i64 = db
        .query_row("SELECT COUNT(*) FROM ticks", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n as u64, logged);
    let n: i64 = db
        .query_row("SELECT COUNT(*) FROM sig_pk", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n as u64, logged);
}

/// (logged, dropped) of "logged N ticks to PATH (M dropped)".
fn parse_logged(s: &str) -> (u64, u64) {
    let logged = s
        .strip_prefix("logged ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{s}"));
    let dropped = s
        .rsplit('(')
        .next()
        .and_then(|r| r.strip_suffix(" dropped)"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{s}"));
    (logged, dropped)
}

#[test]
fn logger_writer_errors_are_reported_and_committed_ticks_stay_readable() {
    let d = tmp("fail");
    let small = sig("power", &[4], DType::F32, false);
    let pk = sig("pk", &[8, 16], DType::U8, true);
    let opts = json!({"path": "f.db", "batch_ticks": 1});
    let path = d.join("f.db");
    let mut l = logger::open(&opts, &[small.clone(), pk.clone()], &ctx(&d)).unwrap();
    log_ticks(l.as_mut(), 0..3, &small, &pk);
    // wait until the writer committed them
    let reader = Connection::open(&path).unwrap();
    let start = Instant::now();
    while reader
        .query_row("SELECT COUNT(*) FROM ticks", [], |r| r.get::<_, i64>(0))
        .unwrap()
        < 3
    {
        assert!(start.elapsed() < PATIENCE, "the writer never committed");
        std::thread::sleep(Duration::from_millis(5));
    }
    // the writer cannot get the lock (SQLite gives up after its 5 s busy timeout)
    let held = lock(&path);
    // the error names this run's file, which `f.db` links to
    let file = std::fs::read_link(&path).unwrap().display().to_string();
    log_ticks(l.as_mut(), 3..5, &small, &pk);
    let e = l.finish().expect_err("the writer's error");
    assert!(matches!(e, DriverError::Database { .. }), "{e:?}");
    let m = e.to_string();
    assert!(
        m.contains("database is locked") && m.contains(&file) && m.contains("stay readable"),
        "{m}"
    );
    held.execute_batch("ROLLBACK").unwrap();
    let n: i64 = reader
        .query_row("SELECT COUNT(*) FROM sig_pk", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 3);
}

/// One tick of `lens.len()` datagrams (rows of `row` bytes) through `udp_out` with `gso`
/// on or off: each arrives alone, byte for byte and in order, and all are counted.
fn send_tick_and_compare(row: usize, lens: &[u32], gso: bool, messages: usize) {
    let n = lens.len();
    let d = sig("d", &[n, row], DType::U8, true);
    let ln = sig("ln", &[n, 1], DType::U32, true);
    let mut bytes = vec![0u8; n * row];
    for (r, x) in bytes.chunks_exact_mut(row).enumerate() {
        for (i, b) in x.iter_mut().enumerate() {
            *b = (r * 7 + i) as u8;
        }
    }
    let len_bytes: Vec<u8> = lens.iter().flat_map(|x| x.to_ne_bytes()).collect();
    let want: Vec<Vec<u8>> = bytes
        .chunks_exact(row)
        .zip(lens)
        .map(|(x, &l)| x[..l as usize].to_vec())
        .collect();
    let (rx, p) = receiver();
    let opts = json!({"to": format!("127.0.0.1:{p}"), "gso": gso});
    drivers::check("udp_out", Kind::Sink, &opts, &[&d, &ln]).unwrap();
    let mut sink = udp::open_out(&opts, &[d.clone(), ln.clone()], &here()).unwrap();
    sink.tick(
        &TickInfo::default(),
        &[view(&d, &bytes, n), view(&ln, &len_bytes, n)],
    )
    .unwrap();
    for (k, w) in want.iter().enumerate() {
        assert_eq!(
            &recv(&rx),
            w,
            "datagram {k} of {n} (row {row} B, gso {gso})"
        );
    }
    let total: u64 = lens.iter().map(|&l| u64::from(l)).sum();
    let gso_part = if gso {
        format!(", {messages} GSO messages")
    } else {
        String::new()
    };
    assert_eq!(
        sink.finish().unwrap(),
        format!("sent {n} datagrams ({total} bytes{gso_part}), 0 refused/dropped")
    );
}

/// Runs of equal-sized datagrams go out as UDP GSO messages: a run longer than the
/// 64-datagram cap, sizes changing inside a tick, an empty datagram, and 1472-byte ones
/// where 64 KiB per message is the limit (44 each). The receiver still gets each datagram
/// alone, byte for byte and in order, with `gso` on (the default) and off.
#[test]
fn udp_out_sends_runs_of_equal_datagrams_each_arriving_alone_with_and_without_gso() {
    let mut small: Vec<u32> = vec![256; 100];
    small.extend([100, 100, 100, 256, 0]);
    small.extend(vec![256; 45]);
    let large: Vec<u32> = vec![1472; 50];
    for gso in [true, false] {
        // 64 + 36 of 256 B, 3 of 100 B, then 256 and 0 alone, 45 of 256 B
        send_tick_and_compare(256, &small, gso, 4);
        // 44 + 6 of 1472 B
        send_tick_and_compare(1472, &large, gso, 2);
    }
    let d = sig("d", &[4, 8], DType::U8, true);
    let e = drivers::check(
        "udp_out",
        Kind::Sink,
        &json!({"to": "127.0.0.1:9", "gso": "yes"}),
        &[&d],
    )
    .unwrap_err();
    assert!(e.contains("gso"), "{e}");
}

/// `act: arrival`: a tick that starts with nothing waits for the first datagram (here sent
/// 20 ms into a 2 s tick) and takes it in the same tick; `act: tick` (the default) takes only
/// what was there at the start. With nothing arriving, the tick ends at the cutoff with no
/// rows. A cutoff not shorter than the tick is refused.
#[test]
fn udp_in_acting_on_arrival_takes_a_datagram_within_the_tick_it_arrives_in() {
    let pk = sig("pk", &[8, 64], DType::U8, true);
    let tick = Duration::from_secs(2);
    let ctx = DriverCtx { tick, ..here() };
    for (act, want_rows) in [("arrival", 1usize), ("tick", 0)] {
        let p = port();
        let opts = json!({"bind": format!("127.0.0.1:{p}"), "act": act});
        drivers::check("udp_in", Kind::Source, &opts, &[&pk]).unwrap();
        let mut src = udp::open_in(&opts, std::slice::from_ref(&pk), &ctx).unwrap();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
            tx.send_to(b"mid-tick", ("127.0.0.1", p)).unwrap();
        });
        let start = rtloop_sys::monotonic_ns();
        let info = TickInfo {
            deadline_ns: start,
            ..TickInfo::default()
        };
        let mut b = vec![0u8; 8 * 64];
        let mut out = [OutBuf {
            signal: &pk,
            bytes: &mut b,
            rows: 8,
        }];
        src.tick(&info, &mut out).unwrap();
        assert_eq!(out[0].rows, want_rows, "act: {act}");
        sender.join().unwrap();
        if want_rows == 1 {
            assert_eq!(&b[..8], b"mid-tick");
        }
    }
    // nothing arrives: the tick waits to its cutoff (never past it) and carries no rows
    let p = port();
    let opts = json!({"bind": format!("127.0.0.1:{p}"), "act": "arrival", "cutoff_us": 1_900_000});
    let mut src = udp::open_in(&opts, std::slice::from_ref(&pk), &ctx).unwrap();
    let start = rtloop_sys::monotonic_ns();
    let mut b = vec![0u8; 8 * 64];
    let mut out = [OutBuf {
        signal: &pk,
        bytes: &mut b,
        rows: 8,
    }];
    src.tick(
        &TickInfo {
            deadline_ns: start,
            ..TickInfo::default()
        },
        &mut out,
    )
    .unwrap();
    assert_eq!(out[0].rows, 0);
    assert!(
        rtloop_sys::monotonic_ns() >= start + 100_000_000,
        "waited to the cutoff"
    );
    // a cutoff of a whole tick or more leaves no time to wait
    let opts = json!({"bind": "127.0.0.1:0", "act": "arrival", "cutoff_us": 2_000_000});
    let e = udp::open_in(&opts, std::slice::from_ref(&pk), &ctx)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("cutoff_us 2000000 is not shorter than the tick (2000000 µs)"),
        "{e}"
    );
    // act is `tick` or `arrival`
    let e = drivers::check(
        "udp_in",
        Kind::Source,
        &json!({"bind": "127.0.0.1:0", "act": "soon"}),
        &[&pk],
    )
    .unwrap_err();
    assert!(e.contains("soon") && e.contains("arrival"), "{e}");
}
