//! Every channel end to end in one process: what is sent arrives once, in order, in whole
//! units (`recv`) or exactly filling a block (`fill`); a poll never blocks; a close is
//! reported after what came before it; bad endpoints and missing receivers are typed errors.

use std::sync::Arc;
use std::time::Duration;

use rtloop_fieldtrip::{Buffer, BufferConfig, Server, ServerConfig};
use rtloop_stream::{DType, StreamConfig};
use rtloop_testkit::{unique_name, Watchdog};
use rtloop_transport::socket::{self, FanoutSender, Listener};
use rtloop_transport::stream::{StreamReceiver, StreamSender};
use rtloop_transport::{
    BlockReceiver, Endpoint, Receiver, ReceiverOptions, Sender, TransportError,
};

const WAIT: Duration = Duration::from_secs(5);

fn words(from: u32, n: u32) -> Vec<u8> {
    (from..from + n).flat_map(u32::to_le_bytes).collect()
}

/// Receive until `want` bytes came, by `recv`.
fn recv_all(rx: &mut dyn Receiver, want: usize, unit: usize) -> Vec<u8> {
    let mut got = Vec::new();
    while got.len() < want {
        let b = rx.recv(WAIT).unwrap();
        assert_eq!(b.len() % unit, 0, "whole units only");
        assert!(!b.is_empty(), "nothing within {WAIT:?}");
        got.extend_from_slice(b);
    }
    got
}

/// Fill one block of `len` bytes.
fn fill(rx: &mut dyn BlockReceiver, len: usize) -> Vec<u8> {
    let mut block = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        rx.fill(&mut block, &mut filled, WAIT).unwrap();
    }
    block
}

/// Sends 3 words, then 5, then 8: `recv` hands out the first 8, `fill` a block of 8 made of
/// what is left; a poll with nothing there returns at once.
fn exchange(tx: &mut dyn Sender, rx: &mut dyn BlockReceiver) {
    assert!(rx.recv(Duration::ZERO).unwrap().is_empty());
    tx.send(&words(0, 3)).unwrap();
    tx.send(&words(3, 5)).unwrap();
    assert_eq!(recv_all(rx, 32, 4), words(0, 8));
    tx.send(&words(8, 8)).unwrap();
    tx.finish().unwrap();
    assert_eq!(fill(rx, 32), words(8, 8));
    // a poll does not wait: far below the WAIT a blocking receive would take, far above
    // what a loaded machine adds
    let t = std::time::Instant::now();
    assert!(rx.recv(Duration::ZERO).unwrap().is_empty());
    assert!(t.elapsed() < WAIT / 5, "a poll does not wait");
    assert!(rx.recv(Duration::from_millis(20)).unwrap().is_empty());
}

#[test]
fn a_stream_channel_hands_out_whole_samples_in_place_and_fills_blocks() {
    let _w = Watchdog::arm(60, "stream channel");
    let name = unique_name("transport-stream");
    let mut tx =
        StreamSender::create(&name, &StreamConfig::new(DType::U32, 1, 0.0, 1 << 12)).unwrap();
    assert_eq!(tx.endpoint(), name);
    let opts = ReceiverOptions::new(4, 1024).spin(Duration::from_micros(50));
    let mut rx = Endpoint::Stream(name.clone()).receiver(opts).unwrap();
    exchange(&mut tx, rx.as_mut());
    // a receiver from the start sees what was sent before it registered
    let mut late = StreamReceiver::open(&name, opts)
        .unwrap()
        .from_start()
        .unwrap();
    assert_eq!(recv_all(&mut late, 64, 4), words(0, 16));
    drop((rx, late, tx));
    assert!(
        Endpoint::Stream(name).sender().is_err(),
        "the creator removed it"
    );
}

#[test]
fn socket_channels_carry_both_ways_over_one_connection() {
    let _w = Watchdog::arm(60, "socket channels");
    let path = std::env::temp_dir().join(format!("{}.sock", unique_name("transport")));
    for at in [
        Endpoint::Unix(path.clone()),
        Endpoint::Tcp("127.0.0.1:0".into()),
    ] {
        let l = Listener::bind(&at).unwrap();
        let at = l.endpoint().unwrap();
        let client = socket::connect(&at).unwrap();
        let server = l.accept(WAIT).unwrap().expect("connected");
        let opts = ReceiverOptions::new(4, 4).spin(Duration::from_micros(50));
        let (mut c_tx, mut c_rx) = client.split(opts).unwrap();
        let (mut s_tx, mut s_rx) = server.split(opts).unwrap();
        exchange(&mut c_tx, &mut s_rx);
        exchange(&mut s_tx, &mut c_rx);
        // a unit cut by a read's end comes with the next
        s_tx.send(&[1, 2]).unwrap();
        assert!(c_rx.recv(Duration::from_millis(20)).unwrap().is_empty());
        s_tx.send(&[3, 4]).unwrap();
        assert_eq!(c_rx.recv(WAIT).unwrap(), &[1, 2, 3, 4]);
        // what came before a close is handed out, then the close is reported: poll until
        // the close arrives (not a sleep that a loaded machine may outlast)
        s_tx.send(&words(7, 1)).unwrap();
        drop((s_tx, s_rx));
        let t = std::time::Instant::now();
        let mut got = Vec::new();
        let e = loop {
            match c_rx.recv(Duration::ZERO) {
                Ok([]) => {
                    assert!(t.elapsed() < WAIT, "{at}: no close within {WAIT:?}");
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(b) => got.extend_from_slice(b),
                Err(e) => break e,
            }
        };
        assert_eq!(got, words(7, 1), "{at}");
        assert!(matches!(e, TransportError::Closed { .. }), "{at}: {e}");
    }
    assert!(!path.exists(), "the listener removed its socket file");
}

#[test]
fn a_fanout_sender_reaches_every_receiver_and_says_how_many_came() {
    let _w = Watchdog::arm(60, "fanout");
    let path = std::env::temp_dir().join(format!("{}.sock", unique_name("fanout")));
    let mut tx = FanoutSender::bind(&Endpoint::Unix(path.clone())).unwrap();
    let at = Endpoint::Unix(tx.endpoint().into());
    let mut rxs: Vec<_> = (0..2)
        .map(|_| {
            socket::connect(&at)
                .unwrap()
                .receiver(ReceiverOptions::new(4, 64))
        })
        .collect();
    tx.prepare(2, WAIT).unwrap();
    tx.send(&words(0, 4)).unwrap();
    for rx in &mut rxs {
        assert_eq!(recv_all(rx, 16, 4), words(0, 4));
    }
    let e = tx.prepare(3, Duration::from_millis(20)).unwrap_err();
    assert!(
        matches!(
            e,
            TransportError::NotConnected {
                connected: 2,
                wanted: 3,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "unix: 2 of 3 receivers connected within 20ms"
    );
}

#[test]
fn a_fieldtrip_channel_puts_and_waits_for_words() {
    let _w = Watchdog::arm(60, "fieldtrip channel");
    let mut cfg = BufferConfig::new(&unique_name("transport-ft"));
    cfg.remove_on_drop = true;
    let server = Server::start(
        Arc::new(Buffer::new(cfg)),
        ServerConfig {
            tcp: Some("127.0.0.1:0".into()),
            ..ServerConfig::default()
        },
    )
    .unwrap();
    let at = Endpoint::FieldTrip(server.tcp_addr().unwrap().to_string());
    let mut tx = at.sender().unwrap();
    let mut rx = at.receiver(ReceiverOptions::new(4, 1024)).unwrap();
    exchange(tx.as_mut(), rx.as_mut());
    drop((tx, rx));
    server.buffer().close();
    server.shutdown();
}

#[test]
fn endpoints_that_cannot_work_are_typed_errors() {
    let e = Listener::bind(&Endpoint::Stream("s".into())).unwrap_err();
    assert!(matches!(e, TransportError::Unknown { .. }), "{e}");
    let gone = std::env::temp_dir().join(format!("{}.sock", unique_name("gone")));
    let e = socket::connect(&Endpoint::Unix(gone.clone())).unwrap_err();
    match &e {
        TransportError::Endpoint {
            transport: "unix",
            action: "connect to",
            source,
            ..
        } => assert_eq!(source.kind(), std::io::ErrorKind::NotFound),
        other => panic!("{other}"),
    }
    assert!(e.to_string().contains(&gone.display().to_string()), "{e}");
    let e = Endpoint::Stream(unique_name("nowhere"))
        .receiver(ReceiverOptions::new(4, 1))
        .err()
        .unwrap();
    assert!(matches!(e, TransportError::Stream { .. }), "{e}");
}
