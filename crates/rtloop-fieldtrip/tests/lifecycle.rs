//! Restarts over real sockets: a PUT_HDR that replaces a large ring releases the old one
//! without holding up other clients, and the event edge cases the reference treats its own
//! way (a PUT_EVT shorter than an eventdef, sample -1 before any data).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtloop_fieldtrip::buffer::drops_under_state_lock;
use rtloop_fieldtrip::codec::WireEvent;
use rtloop_fieldtrip::{Buffer, BufferConfig, Client, ClientError, Server, ServerConfig};
use rtloop_testkit::{unique_name, StreamGuard, Watchdog};

fn serve(name: &str, capacity: u64) -> Server {
    let mut bcfg = BufferConfig::new(name);
    bcfg.capacity = capacity;
    bcfg.max_bytes = 1 << 30;
    bcfg.events = 16;
    bcfg.remove_on_drop = true;
    Server::start(
        Arc::new(Buffer::new(bcfg)),
        ServerConfig {
            tcp: Some("127.0.0.1:0".into()),
            unix: None,
            ..ServerConfig::default()
        },
    )
    .unwrap()
}

#[test]
fn a_put_hdr_releases_the_old_large_ring_without_the_lock() {
    // unmapping a 256 MiB ring takes tens of ms; done under the state lock, every other
    // client's request waited for it (256 -> 4 channels: 109-153 ms)
    let _w = Watchdog::arm(180, "old ring released off the lock");
    let name = unique_name("ft-release");
    let _guard = StreamGuard::new(&name);
    let server = serve(&name, 1 << 20);
    let addr = server.tcp_addr().unwrap().to_string();
    let mut writer = Client::connect(&addr).unwrap();
    writer.put_header(64, 1000.0, 9, &[]).unwrap(); // 64 x float32 x 2^20: 256 MiB
    writer.put_data(64, &vec![1.0f32; 64 * 4]).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let (ready, ready_rx) = std::sync::mpsc::channel();
    let poller = {
        let (addr, done) = (addr.clone(), done.clone());
        std::thread::spawn(move || {
            let mut c = Client::connect(&addr).unwrap();
            let mut worst = Duration::ZERO;
            let mut ready = Some(ready);
            while !done.load(Ordering::Acquire) {
                let t = Instant::now();
                let h = c.get_header().unwrap();
                if h.def.nsamples > 0 {
                    // refused when the header was replaced in between, else answered
                    match c.get_data::<f32>(0, 0) {
                        Ok(v) => assert!(!v.is_empty()),
                        Err(ClientError::Refused { .. }) => {}
                        Err(e) => panic!("GET_DAT: {e}"),
                    }
                }
                worst = worst.max(t.elapsed());
                if let Some(r) = ready.take() {
                    r.send(()).unwrap();
                }
            }
            worst
        })
    };
    ready_rx.recv().unwrap();
    let before = drops_under_state_lock();
    for round in 0..3 {
        writer.put_header(4, 1000.0, 9, &[]).unwrap(); // the 256 MiB ring goes
        writer.put_data(4, &[2.0f32; 8]).unwrap();
        if round < 2 {
            writer.put_header(64, 1000.0, 9, &[]).unwrap();
            writer.put_data(64, &vec![3.0f32; 64 * 2]).unwrap();
        }
    }
    done.store(true, Ordering::Release);
    let worst = poller.join().unwrap();
    println!("longest GET_HDR + GET_DAT of another client across 3 replacements of a 256 MiB ring: {worst:?}");
    assert_eq!(
        drops_under_state_lock() - before,
        0,
        "an old stream was released (unmapped) while the state lock was held"
    );
    let h = writer.get_header().unwrap();
    assert_eq!((h.def.nchans, h.def.nsamples), (4, 2));
    drop(writer);
    server.shutdown();
}

/// One raw exchange: send bytes, read the 8-byte reply.
fn exchange(s: &mut TcpStream, command: u16, payload: &[u8]) -> [u8; 8] {
    let mut m = Vec::new();
    m.extend_from_slice(&1u16.to_le_bytes());
    m.extend_from_slice(&command.to_le_bytes());
    m.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    m.extend_from_slice(payload);
    s.write_all(&m).unwrap();
    let mut b = [0u8; 8];
    s.read_exact(&mut b).unwrap();
    b
}

#[test]
fn a_put_evt_shorter_than_an_eventdef_is_refused_and_stores_nothing() {
    // the reference reads a whole 32-byte eventdef (and the bytes it names) past the end of
    // such a message and stores what it finds there; this server refuses it
    let _w = Watchdog::arm(60, "short put_evt");
    let name = unique_name("ft-short-evt");
    let _guard = StreamGuard::new(&name);
    let server = serve(&name, 1000);
    let addr = server.tcp_addr().unwrap();
    let mut c = Client::connect(&addr.to_string()).unwrap();
    c.put_header(1, 100.0, 9, &[]).unwrap();
    c.put_events(&[WireEvent::text("kept", "yes", 0)]).unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for len in [1usize, 16, 31] {
        // PUT_EVT (0x0103) -> PUT_ERR (0x0105)
        assert_eq!(
            exchange(&mut s, 0x0103, &vec![0u8; len]),
            [1, 0, 5, 1, 0, 0, 0, 0]
        );
    }
    // a whole event followed by a few bytes: refused whole, nothing of it stored
    let mut p = Vec::new();
    for v in [0u32, 1, 0, 1, 0, 0, 0, 2] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    p.extend_from_slice(b"ab");
    p.extend_from_slice(&[0u8; 5]);
    assert_eq!(exchange(&mut s, 0x0103, &p), [1, 0, 5, 1, 0, 0, 0, 0]);
    // an empty PUT_EVT stores nothing and is answered PUT_OK, as by the reference
    assert_eq!(exchange(&mut s, 0x0103, &[]), [1, 0, 4, 1, 0, 0, 0, 0]);
    let evs = c.get_events(None).unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(&*evs[0].type_bytes, b"kept");
    drop((c, s));
    server.shutdown();
}

#[test]
fn an_event_at_sample_minus_one_before_any_data_is_at_sample_zero() {
    // the reference's figure here (-2^31 on x86) comes from converting an out-of-range
    // double to int, undefined in C (other CPUs give 2^31 - 1); this server says 0: no
    // sample has come yet, so the current one is the first
    let _w = Watchdog::arm(60, "sample -1 before data");
    let name = unique_name("ft-auto-sample");
    let _guard = StreamGuard::new(&name);
    let server = serve(&name, 1000);
    let mut c = Client::connect(&server.tcp_addr().unwrap().to_string()).unwrap();
    c.put_header(1, 100.0, 9, &[]).unwrap();
    c.put_events(&[WireEvent::text("early", "x", -1)]).unwrap();
    c.put_data(1, &[0.0f32; 5]).unwrap();
    c.put_events(&[WireEvent::text("later", "y", -1)]).unwrap();
    let evs = c.get_events(None).unwrap();
    assert_eq!(evs[0].sample, 0);
    // after data: nsamples plus the time since the last PUT_DAT, as the reference
    assert!(evs[1].sample >= 5, "{}", evs[1].sample);
    drop(c);
    server.shutdown();
}
