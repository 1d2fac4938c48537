//! The server over real sockets: raw bytes as the protocol describes them, the Rust client
//! over TCP, the UNIX socket and in-process, streams shared with local readers, and every
//! bad input of the issue (the server stays up, nothing stored is lost).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtloop_fieldtrip::codec::{chunk, push_chunk, WireEvent};
use rtloop_fieldtrip::polling::Polling;
use rtloop_fieldtrip::{Buffer, BufferConfig, Client, ClientError, Server, ServerConfig};
use rtloop_stream::{DType, Event, ReaderMode, Stream, StreamConfig};
use rtloop_testkit::{unique_name, StreamGuard, Watchdog};

struct Fixture {
    server: Server,
    name: String,
    _guard: StreamGuard,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start(max_message: usize) -> Fixture {
    start_with(max_message, Polling::default())
}

fn start_with(max_message: usize, polling: Polling) -> Fixture {
    let name = unique_name("ft");
    let dir = std::env::temp_dir().join(format!("rtloop-test-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut bcfg = BufferConfig::new(&name);
    bcfg.capacity = 1000;
    bcfg.events = 16;
    bcfg.remove_on_drop = true;
    let server = Server::start(
        Arc::new(Buffer::new(bcfg)),
        ServerConfig {
            tcp: Some("127.0.0.1:0".into()),
            unix: Some(dir.join("ft.sock")),
            max_message,
            max_clients: 64,
            message_timeout: Duration::from_millis(500),
            memory_budget: 2 << 30,
            polling,
        },
    )
    .unwrap();
    Fixture {
        server,
        _guard: StreamGuard::new(&name),
        name,
        _dir: TempDir(dir),
    }
}

impl Fixture {
    fn tcp(&self) -> TcpStream {
        let s = TcpStream::connect(self.server.tcp_addr().unwrap()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }
    fn client(&self) -> Client {
        Client::connect(&self.server.tcp_addr().unwrap().to_string()).unwrap()
    }
    fn unix_client(&self) -> Client {
        Client::connect(&format!(
            "unix:{}",
            self.server.unix_path().unwrap().display()
        ))
        .unwrap()
    }
}

/// One raw exchange: send bytes, read exactly `reply_len` bytes back.
fn exchange(s: &mut TcpStream, req: &[u8], reply_len: usize) -> Vec<u8> {
    s.write_all(req).unwrap();
    let mut b = vec![0u8; reply_len];
    s.read_exact(&mut b).unwrap();
    b
}

/// A message built by hand from the protocol description (not with the codec).
fn raw(command: u16, payload: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&1u16.to_le_bytes());
    m.extend_from_slice(&command.to_le_bytes());
    m.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    m.extend_from_slice(payload);
    m
}

fn u32s(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn header_payload(nchans: u32, fsample: f32, data_type: u32) -> Vec<u8> {
    let mut p = u32s(&[nchans, 0, 0]);
    p.extend_from_slice(&fsample.to_le_bytes());
    p.extend_from_slice(&u32s(&[data_type, 0]));
    p
}

fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0) | Err(_))
}

#[test]
fn raw_bytes_over_a_real_socket() {
    let _w = Watchdog::arm(60, "raw_bytes_over_a_real_socket");
    let f = start(1 << 20);
    let mut s = f.tcp();
    // no header yet
    assert_eq!(
        exchange(&mut s, &raw(0x0201, &[]), 8),
        [1, 0, 5, 2, 0, 0, 0, 0]
    );
    assert_eq!(
        exchange(&mut s, &raw(0x0202, &[]), 8),
        [1, 0, 5, 2, 0, 0, 0, 0]
    );
    assert_eq!(
        exchange(&mut s, &raw(0x0102, &u32s(&[2, 1, 9, 8, 0, 0])), 8),
        [1, 0, 5, 1, 0, 0, 0, 0]
    );
    // PUT_HDR: 2 channels int16 at 1000 Hz
    assert_eq!(
        exchange(&mut s, &raw(0x0101, &header_payload(2, 1000.0, 6)), 8),
        [1, 0, 4, 1, 0, 0, 0, 0]
    );
    // PUT_DAT 3 samples
    let mut p = u32s(&[2, 3, 6, 12]);
    for v in [1i16, -1, 2, -2, 3, -3] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    assert_eq!(
        exchange(&mut s, &raw(0x0102, &p), 8),
        [1, 0, 4, 1, 0, 0, 0, 0]
    );
    // GET_HDR: nsamples 3
    let r = exchange(&mut s, &raw(0x0201, &[]), 8 + 24);
    assert_eq!(&r[..8], [1, 0, 4, 2, 24, 0, 0, 0]);
    assert_eq!(&r[8..20], u32s(&[2, 3, 0]));
    assert_eq!(&r[20..24], 1000.0f32.to_le_bytes());
    assert_eq!(&r[24..32], u32s(&[6, 0]));
    // GET_DAT [1, 2]
    let r = exchange(&mut s, &raw(0x0202, &u32s(&[1, 2])), 8 + 16 + 8);
    assert_eq!(&r[..8], [1, 0, 4, 2, 24, 0, 0, 0]);
    assert_eq!(&r[8..24], u32s(&[2, 2, 6, 8]));
    assert_eq!(&r[24..], [2, 0, 0xfe, 0xff, 3, 0, 0xfd, 0xff]);
    // begin = end + 1: an empty GET_OK
    let r = exchange(&mut s, &raw(0x0202, &u32s(&[2, 1])), 8 + 16);
    assert_eq!(&r[8..24], u32s(&[2, 0, 6, 0]));
    // begin > end + 1 (the reference crashes): GET_ERR
    assert_eq!(
        exchange(&mut s, &raw(0x0202, &u32s(&[5, 3])), 8),
        [1, 0, 5, 2, 0, 0, 0, 0]
    );
    // past the newest
    assert_eq!(
        exchange(&mut s, &raw(0x0202, &u32s(&[2, 3])), 8),
        [1, 0, 5, 2, 0, 0, 0, 0]
    );
    // end = 0xffffffff: up to the newest
    let r = exchange(&mut s, &raw(0x0202, &u32s(&[0, u32::MAX])), 8 + 16 + 12);
    assert_eq!(&r[8..24], u32s(&[2, 3, 6, 12]));
    // WAIT_DAT, timeout 0: counts at once
    assert_eq!(
        exchange(&mut s, &raw(0x0402, &u32s(&[0, 0, 0])), 16),
        [1, 0, 4, 4, 8, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0]
    );
    // WAIT_DAT with a wrong payload size: WAIT_ERR
    assert_eq!(
        exchange(&mut s, &raw(0x0402, &u32s(&[0, 0])), 8),
        [1, 0, 5, 4, 0, 0, 0, 0]
    );
    // pipelined: two requests in one write, two replies in order
    let mut two = raw(0x0402, &u32s(&[0, 0, 0]));
    two.extend(raw(0x0302, &[]));
    let r = exchange(&mut s, &two, 16 + 8);
    assert_eq!(&r[16..], [1, 0, 4, 3, 0, 0, 0, 0]);
    // FLUSH_DAT kept the header, reset the count
    let r = exchange(&mut s, &raw(0x0201, &[]), 32);
    assert_eq!(&r[8..20], u32s(&[2, 0, 0]));
    // NORESPONSE: nothing comes back, the data is stored
    s.write_all(&raw(0x0502, &p)).unwrap();
    assert_eq!(
        exchange(&mut s, &raw(0x0402, &u32s(&[0, 0, 0])), 16)[8..12],
        3u32.to_le_bytes()
    );
    // a big-endian client gets big-endian replies
    let mut be = vec![0u8, 1, 0x04, 0x02, 0, 0, 0, 12];
    be.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        exchange(&mut s, &be, 16),
        [0, 1, 4, 4, 0, 0, 0, 8, 0, 0, 0, 3, 0, 0, 0, 0]
    );
    let mut be = vec![0u8, 1, 0x02, 0x02, 0, 0, 0, 8];
    be.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
    let r = exchange(&mut s, &be, 8 + 16 + 4);
    assert_eq!(&r[..8], [0, 1, 2, 4, 0, 0, 0, 20]);
    assert_eq!(
        &r[24..],
        [0, 1, 0xff, 0xff],
        "int16 values swapped to big-endian"
    );
}

#[test]
fn a_new_connection_per_request_works() {
    let _w = Watchdog::arm(60, "stateless");
    let f = start(1 << 20);
    f.client().put_header(4, 250.0, 9, &[]).unwrap();
    for i in 0..50 {
        let mut c = f.client();
        c.put_data(4, &[i as f32; 8]).unwrap();
    }
    let mut c = f.client();
    assert_eq!(c.get_header().unwrap().def.nsamples, 100);
    let d: Vec<f32> = c.get_data(98, 99).unwrap();
    assert_eq!(d, vec![49.0; 8]);
}

#[test]
fn client_calls_over_tcp_unix_and_in_process() {
    let _w = Watchdog::arm(60, "client_calls");
    let f = start(1 << 20);
    let mut chunks = Vec::new();
    push_chunk(&mut chunks, chunk::CHANNEL_NAMES, b"Fz\0Cz\0Pz\0");
    push_chunk(&mut chunks, 99, &[9, 8, 7, 6, 5]);
    push_chunk(&mut chunks, chunk::RESOLUTIONS, &[0u8; 24]);
    let in_proc = Client::in_process(f.server.buffer().clone());
    for mut c in [f.client(), f.unix_client(), in_proc] {
        c.put_header(3, 512.0, 10, &chunks).unwrap();
        let h = c.get_header().unwrap();
        assert_eq!(
            h.chunks,
            chunks,
            "chunks come back byte-exact ({})",
            c.addr()
        );
        assert_eq!(h.labels().unwrap(), ["Fz", "Cz", "Pz"]);
        let data: Vec<f64> = (0..300).map(f64::from).collect();
        c.put_data(3, &data).unwrap();
        assert_eq!(c.get_data::<f64>(0, 99).unwrap(), data);
        assert_eq!(c.get_data::<f64>(10, 10).unwrap(), &data[30..33]);
        let mut all = Vec::new();
        let def = c.get_data_into(None, &mut all).unwrap();
        assert_eq!(def.nsamples, 100);
        // events: text and numeric, sample -1 filled in by the server
        let mut num = WireEvent::text("", "", 7);
        num.type_type = 0;
        num.type_bytes = b"level".to_vec().into();
        num.type_numel = 5;
        num.value_type = 10;
        num.value_numel = 2;
        num.value_bytes = [1.5f64, -2.0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect::<Vec<_>>()
            .into();
        num.offset = -3;
        num.duration = 4;
        c.put_events(&[WireEvent::text("trigger", "go", 50), num.clone()])
            .unwrap();
        c.put_events(&[WireEvent::text("auto", "x", -1)]).unwrap();
        let evs = c.get_events(None).unwrap();
        assert_eq!(evs.len(), 3);
        assert_eq!(evs[0], WireEvent::text("trigger", "go", 50));
        assert_eq!(evs[1], num);
        assert!(evs[2].sample >= 100, "auto sample {}", evs[2].sample);
        assert_eq!(c.get_events(Some((1, 1))).unwrap(), vec![num]);
        assert!(matches!(
            c.get_events(Some((3, 3))),
            Err(ClientError::Refused {
                reply: "GET_ERR",
                ..
            })
        ));
        assert_eq!(c.poll().unwrap(), (100, 3));
        c.flush_events().unwrap();
        assert_eq!(c.poll().unwrap(), (100, 0));
        c.flush_data().unwrap();
        assert_eq!(c.poll().unwrap(), (0, 0));
        c.put_data(3, &[1.0f64; 3]).unwrap();
        assert_eq!(c.get_data::<f64>(0, 0).unwrap(), vec![1.0; 3]);
        c.flush_header().unwrap();
        assert!(matches!(
            c.get_header(),
            Err(ClientError::Refused {
                reply: "GET_ERR",
                ..
            })
        ));
        assert!(matches!(
            c.flush_header(),
            Err(ClientError::Refused {
                reply: "FLUSH_ERR",
                ..
            })
        ));
        assert!(matches!(
            c.wait(0, 0, 0),
            Err(ClientError::Refused {
                reply: "WAIT_ERR",
                ..
            })
        ));
    }
}

#[test]
fn old_samples_are_refused_once_overwritten() {
    let _w = Watchdog::arm(60, "overwritten");
    let f = start(1 << 20);
    let mut c = f.client();
    c.put_header(1, 100.0, 7, &[]).unwrap();
    let cap = Stream::open(&f.name).unwrap().info().capacity as i32;
    let data: Vec<i32> = (0..cap + 500).collect();
    c.put_data(1, &data[..cap as usize]).unwrap();
    c.put_data(1, &data[cap as usize..]).unwrap();
    let r = c.get_data::<i32>(0, 0);
    assert!(
        matches!(
            r,
            Err(ClientError::Refused {
                reply: "GET_ERR",
                ..
            })
        ),
        "{r:?}"
    );
    assert!(c.get_data::<i32>(499, 499).is_err());
    assert_eq!(c.get_data::<i32>(500, 502).unwrap(), [500, 501, 502]);
    // no selection: the whole retained window
    let mut all = Vec::new();
    assert_eq!(
        c.get_data_into(None, &mut all).unwrap().nsamples as i32,
        cap
    );
    // more than the capacity in one PUT_DAT is refused, the buffer is intact
    let big = vec![0i32; cap as usize + 1];
    assert!(matches!(
        c.put_data(1, &big),
        Err(ClientError::Refused {
            reply: "PUT_ERR",
            ..
        })
    ));
    assert_eq!(c.get_data::<i32>(500, 500).unwrap(), [500]);
}

#[test]
fn network_data_is_a_stream_and_a_local_stream_is_served() {
    let _w = Watchdog::arm(60, "stream_backed");
    let f = start(1 << 20);
    let mut c = f.unix_client();
    let mut chunks = Vec::new();
    push_chunk(&mut chunks, chunk::CHANNEL_NAMES, b"a\0b\0");
    c.put_header(2, 1000.0, 9, &chunks).unwrap();
    let stream = Stream::open(&f.name).unwrap();
    assert_eq!(stream.info().ch_names, ["a", "b"]);
    let mut reader = stream.reader(ReaderMode::Latest).unwrap();
    c.put_data(2, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let w = reader.window_as::<f32>(0, 2).unwrap();
    assert_eq!(
        w.to_vec().unwrap(),
        [1.0, 2.0, 3.0, 4.0],
        "network data in the stream"
    );
    c.put_events(&[WireEvent::text("t", "v", 1)]).unwrap();
    let ev = reader.pull_events().unwrap();
    assert_eq!((ev[0].sample, ev[0].kind.as_text()), (1, Some("t")));

    // a locally created and written stream is served as it is
    let local = unique_name("ftlocal");
    let _g = StreamGuard::new(&local);
    let mut cfg = StreamConfig::new(DType::I16, 3, 30_000.0, 4096);
    cfg.ch_names = vec!["x".into(), "y".into(), "z".into()];
    let s = Stream::create(&local, &cfg).unwrap();
    let mut w = s.writer().unwrap();
    w.write::<i16>(&[1, 2, 3, 4, 5, 6]).unwrap();
    w.push_event(&Event::new("stim", "on", 1)).unwrap();
    let server = Server::start(
        Arc::new(Buffer::new(BufferConfig::new(&local))),
        ServerConfig {
            tcp: Some("127.0.0.1:0".into()),
            ..ServerConfig::default()
        },
    )
    .unwrap();
    let mut c = Client::connect(&server.tcp_addr().unwrap().to_string()).unwrap();
    let h = c.get_header().unwrap();
    assert_eq!(
        (h.def.nchans, h.def.nsamples, h.def.nevents, h.def.data_type),
        (3, 2, 1, 6)
    );
    assert_eq!(h.labels().unwrap(), ["x", "y", "z"]);
    assert_eq!(c.get_data::<i16>(0, 1).unwrap(), [1, 2, 3, 4, 5, 6]);
    assert_eq!(
        c.get_events(None).unwrap(),
        vec![WireEvent::text("stim", "on", 1)]
    );
    // a client may not write while the local writer holds it, nor replace it
    assert!(matches!(
        c.put_data(3, &[0i16; 3]),
        Err(ClientError::Refused { .. })
    ));
    assert!(matches!(
        c.put_header(3, 1.0, 6, &[]),
        Err(ClientError::Refused { .. })
    ));
    // WAIT_DAT wakes when the local writer commits
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        w.write::<i16>(&[7, 8, 9]).unwrap();
        w
    });
    let t0 = Instant::now();
    assert_eq!(c.wait(2, 10, 5000).unwrap(), (3, 1));
    assert!(t0.elapsed() < Duration::from_secs(4));
    drop(t.join().unwrap());
}

#[test]
fn a_wait_goes_on_across_another_clients_put_hdr_and_reports_the_new_headers_counts() {
    let _w = Watchdog::arm(60, "wait across put_hdr");
    let f = start(1 << 20);
    let mut c = f.client();
    c.put_header(1, 10.0, 9, &[]).unwrap();
    let addr = f.server.tcp_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        // while the first client waits: a new header, then more samples than it waits for
        std::thread::sleep(Duration::from_millis(200));
        let mut p = Client::connect(&addr).unwrap();
        p.put_header(1, 10.0, 9, &[]).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        p.put_data(1, &[1.0f32; 150]).unwrap();
    });
    // the reference keeps waiting through the PUT_HDR and reports the new header's counts;
    // ending at once with the replaced header's (0, 0) is what FieldTrip's test_waitdat saw
    let got = c.wait(100, 10_000, 20_000).unwrap();
    t.join().unwrap();
    assert_eq!(got, (150, 0));
}

#[test]
fn wait_wakes_on_data_and_on_events() {
    let _w = Watchdog::arm(60, "wait");
    let f = start(1 << 20);
    let mut c = f.client();
    c.put_header(1, 10.0, 9, &[]).unwrap();
    for kind in ["data", "event"] {
        // the counts before the other client can put: however late this thread runs, the
        // put comes after them and the wait below ends on it
        let (ns, ne) = c.poll().unwrap();
        let addr = f.server.tcp_addr().unwrap().to_string();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            let mut p = Client::connect(&addr).unwrap();
            if kind == "data" {
                p.put_data(1, &[1.0f32]).unwrap();
            } else {
                p.put_events(&[WireEvent::text("e", "v", 0)]).unwrap();
            }
        });
        let t0 = Instant::now();
        let got = c.wait(ns, ne, 20_000).unwrap();
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{kind} woke the waiter late"
        );
        assert!(got.0 > ns || got.1 > ne, "{kind}: {got:?}");
        t.join().unwrap();
    }
    // a timeout returns the current counts
    let t0 = Instant::now();
    assert_eq!(c.wait(100, 100, 200).unwrap(), (1, 1));
    assert!(t0.elapsed() >= Duration::from_millis(190));
}

#[test]
fn many_clients_at_once() {
    let _w = Watchdog::arm(60, "many");
    let f = start(1 << 20);
    f.client().put_header(8, 1000.0, 9, &[]).unwrap();
    let addr = f.server.tcp_addr().unwrap().to_string();
    let unix = format!("unix:{}", f.server.unix_path().unwrap().display());
    let readers: Vec<_> = (0..8)
        .map(|i| {
            let a = if i % 2 == 0 {
                addr.clone()
            } else {
                unix.clone()
            };
            std::thread::spawn(move || {
                let mut c = Client::connect(&a).unwrap();
                let mut seen = 0;
                while seen < 200 {
                    seen = c.wait(seen, u32::MAX - 1, 5000).unwrap().0;
                    let v: Vec<f32> = c.get_data(seen - 1, seen - 1).unwrap();
                    assert_eq!(v, vec![(seen - 1) as f32; 8]);
                }
            })
        })
        .collect();
    let mut w = f.client();
    for i in 0..200 {
        w.put_data(8, &[i as f32; 8]).unwrap();
        if i % 20 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    for r in readers {
        r.join().unwrap();
    }
}

/// Each bad input gets the reference's reply (or a close where it closes), the server keeps
/// serving another client throughout, and what was stored stays intact.
#[test]
fn bad_input_gets_its_reply_and_loses_nothing() {
    let _w = Watchdog::arm(120, "bad_input");
    let f = start(4096);
    let mut good = f.client();
    good.put_header(2, 100.0, 9, &[]).unwrap();
    good.put_data(2, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let intact = |c: &mut Client| {
        assert_eq!(c.get_data::<f32>(0, 1).unwrap(), [1.0, 2.0, 3.0, 4.0]);
    };
    // a client that connects and sends nothing does not hold anyone up
    let _silent = f.tcp();
    intact(&mut good);
    // wrong protocol version: closed with no reply
    let mut s = f.tcp();
    s.write_all(&[2, 0, 1, 2, 0, 0, 0, 0]).unwrap();
    assert!(closed(&mut s));
    intact(&mut good);
    // bufsize beyond the limit: the family's error reply, then closed
    let mut s = f.tcp();
    let mut m = vec![1u8, 0, 2, 1];
    m.extend_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(exchange(&mut s, &m, 8), [1, 0, 5, 1, 0, 0, 0, 0]);
    assert!(closed(&mut s));
    intact(&mut good);
    // unknown command of a known family: its error reply; of no family: closed
    let mut s = f.tcp();
    assert_eq!(
        exchange(&mut s, &raw(0x0109, &[]), 8),
        [1, 0, 5, 1, 0, 0, 0, 0]
    );
    assert_eq!(
        exchange(&mut s, &raw(0x0209, &[]), 8),
        [1, 0, 5, 2, 0, 0, 0, 0]
    );
    s.write_all(&raw(0x0601, &[])).unwrap();
    assert!(closed(&mut s));
    // data size does not match nchans x nsamples x type size
    let mut s = f.tcp();
    let put_err = [1u8, 0, 5, 1, 0, 0, 0, 0];
    assert_eq!(
        exchange(&mut s, &raw(0x0102, &u32s(&[2, 2, 9, 8, 0, 0])), 8),
        put_err
    );
    // datadef.bufsize larger than what follows
    assert_eq!(
        exchange(&mut s, &raw(0x0102, &u32s(&[2, 1, 9, 80, 0, 0])), 8),
        put_err
    );
    // a different channel count, a different type
    assert_eq!(
        exchange(&mut s, &raw(0x0102, &u32s(&[3, 1, 9, 12, 0, 0, 0])), 8),
        put_err
    );
    assert_eq!(
        exchange(&mut s, &raw(0x0102, &u32s(&[2, 1, 7, 8, 0, 0])), 8),
        put_err
    );
    // events with inconsistent sizes
    let mut ev = u32s(&[0, 10, 0, 10, 0, 0, 0, 4]);
    ev.extend_from_slice(b"abcd");
    assert_eq!(exchange(&mut s, &raw(0x0103, &ev), 8), put_err);
    let ev = u32s(&[0, 1, 0, 1, 0, 0, 0, 400]);
    assert_eq!(exchange(&mut s, &raw(0x0103, &ev), 8), put_err);
    // an event type code that does not exist
    let mut ev = u32s(&[42, 1, 0, 1, 0, 0, 0, 2]);
    ev.extend_from_slice(b"ab");
    assert_eq!(exchange(&mut s, &raw(0x0103, &ev), 8), put_err);
    // a header with an unknown data type or chunk bytes missing: refused, old one kept
    assert_eq!(
        exchange(&mut s, &raw(0x0101, &header_payload(2, 100.0, 0)), 8),
        put_err
    );
    assert_eq!(
        exchange(&mut s, &raw(0x0101, &header_payload(2, 100.0, 42)), 8),
        put_err
    );
    let mut h = header_payload(2, 100.0, 9);
    h[20] = 50;
    assert_eq!(exchange(&mut s, &raw(0x0101, &h), 8), put_err);
    // selections with begin > end + 1 or beyond the buffer
    let get_err = [1u8, 0, 5, 2, 0, 0, 0, 0];
    assert_eq!(exchange(&mut s, &raw(0x0202, &u32s(&[5, 3])), 8), get_err);
    assert_eq!(exchange(&mut s, &raw(0x0202, &u32s(&[0, 2])), 8), get_err);
    assert_eq!(exchange(&mut s, &raw(0x0202, &[0, 0, 0, 0]), 8), get_err);
    assert_eq!(exchange(&mut s, &raw(0x0203, &u32s(&[0, 0])), 8), get_err);
    assert_eq!(exchange(&mut s, &raw(0x0203, &u32s(&[3, 1])), 8), get_err);
    intact(&mut good);
    // a truncated message: the client disconnects mid-message
    let mut s = f.tcp();
    s.write_all(&raw(0x0102, &u32s(&[2, 4, 9, 32, 0]))[..20])
        .unwrap();
    drop(s);
    // a client that stops mid-message is dropped after the message timeout
    let mut s = f.tcp();
    s.write_all(&[1, 0, 2, 1, 100, 0, 0, 0, 1]).unwrap();
    assert!(closed(&mut s));
    // the header (and its counts) survived every refusal
    intact(&mut good);
    let h = good.get_header().unwrap();
    assert_eq!((h.def.nchans, h.def.nsamples, h.def.data_type), (2, 2, 9));
    // a stream that disappears from under the server: errors, no crash
    let mut u = f.unix_client();
    assert_eq!(u.poll().unwrap(), (2, 0));
}

#[test]
fn spinning_server_and_client_answer_the_same() {
    let _w = Watchdog::arm(60, "spin");
    let f = start_with(1 << 20, Polling::Fixed(Duration::from_micros(50)));
    for mut c in [f.client(), f.unix_client()] {
        c.set_spin(Duration::from_micros(50));
        c.put_header(2, 10.0, 6, &[]).unwrap();
        for i in 0..100i16 {
            c.put_data(2, &[i, -i]).unwrap();
        }
        assert_eq!(c.get_data::<i16>(99, 99).unwrap(), [99, -99]);
        assert_eq!(c.wait(99, 0, 1000).unwrap(), (100, 0));
        // a slow client (longer pause than the spin) is still served
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(c.poll().unwrap(), (100, 0));
    }
}

#[test]
fn events_the_reference_stores_are_kept_byte_for_byte() {
    let _w = Watchdog::arm(60, "wide events");
    let f = start(4 << 20);
    let mut c = f.client();
    c.put_header(2, 100.0, 9, &[]).unwrap();
    let local = Stream::open(&f.name).unwrap();
    let long_text: String = "x".repeat(5000);
    let latin1: Vec<u8> = b"caf\xe9 \xff".to_vec(); // text that is not UTF-8
    let doubles: Vec<u8> = (0..100u64).flat_map(|k| (k as f64).to_ne_bytes()).collect();
    let batch = vec![
        WireEvent::text("trigger", "ok", 1),
        // 5000-byte text value: larger than a stream event slot
        WireEvent::text("note", &long_text, 2),
        // char bytes that are not UTF-8, in the type and in the value
        WireEvent {
            type_type: 0,
            type_numel: latin1.len() as u32,
            value_type: 0,
            value_numel: latin1.len() as u32,
            sample: 3,
            offset: -1,
            duration: 4,
            type_bytes: latin1.clone().into(),
            value_bytes: latin1.clone().into(),
        },
        // 100 float64 values (800 bytes)
        WireEvent {
            type_type: 0,
            type_numel: 6,
            value_type: 10,
            value_numel: 100,
            sample: 4,
            offset: 0,
            duration: 0,
            type_bytes: b"matrix".to_vec().into(),
            value_bytes: doubles.clone().into(),
        },
    ];
    // before: one event too large (or not UTF-8) refused the whole batch with PUT_ERR
    c.put_events(&batch).unwrap();
    let back = c.get_events(None).unwrap();
    assert_eq!(back.len(), 4);
    for (sent, got) in batch.iter().zip(&back) {
        assert_eq!(sent, got, "every field and byte as sent");
    }
    // the stream holds stand-ins saying where the whole events are; the small one is itself
    let r = local.reader(ReaderMode::Latest).unwrap();
    let evs = r.read_events(0, 4).unwrap();
    assert_eq!(evs[0].value, rtloop_stream::EventValue::Text("ok".into()));
    assert_eq!(
        evs[1].value,
        rtloop_stream::EventValue::Text("5000 bytes kept whole by the FieldTrip server".into())
    );
    assert_eq!(evs[1].sample, 2);
    // an event beyond the documented limit, or with an unknown type code, is refused and
    // nothing of its batch is stored
    let huge = "y".repeat(rtloop_fieldtrip::buffer::WIDE_EVENT_MAX + 1);
    let e = c
        .put_events(&[
            WireEvent::text("a", "b", 5),
            WireEvent::text("big", &huge, 6),
        ])
        .unwrap_err();
    // (the reply is FieldTrip's bare PUT_ERR; the server logs the reason)
    assert!(e.to_string().contains("PUT_ERR"), "{e}");
    let mut bad = WireEvent::text("a", "b", 7);
    bad.value_type = 99;
    let e = c.put_events(&[bad]).unwrap_err();
    assert!(e.to_string().contains("PUT_ERR"), "{e}");
    assert_eq!(c.get_events(None).unwrap().len(), 4);
    // FLUSH_EVT forgets them all, and the ring's laps retire kept events with their slots
    for k in 0..40 {
        c.put_events(&[WireEvent::text("note", &long_text, k)])
            .unwrap();
    }
    let kept = c.get_events(None).unwrap();
    assert_eq!(kept.len(), 16, "the ring keeps 16 events");
    assert!(kept.iter().all(|e| e.value_bytes.len() == 5000));
}

#[test]
fn other_clients_are_answered_while_a_put_hdr_allocates() {
    // a 1 GiB stream takes a while to allocate; before, the buffer's lock was held for all
    // of it, and every other client's request waited (a poll waited up to 424 ms)
    let _w = Watchdog::arm(120, "put_hdr off the lock");
    let name = unique_name("ft-big");
    let _guard = StreamGuard::new(&name);
    let mut bcfg = BufferConfig::new(&name);
    bcfg.capacity = 2 << 20;
    bcfg.max_bytes = 1 << 30;
    bcfg.remove_on_drop = true;
    let server = Server::start(
        Arc::new(Buffer::new(bcfg)),
        ServerConfig {
            tcp: Some("127.0.0.1:0".into()),
            unix: None,
            max_message: 1 << 20,
            max_clients: 8,
            message_timeout: Duration::from_secs(5),
            memory_budget: 1 << 30,
            polling: Polling::default(),
        },
    )
    .unwrap();
    let addr = server.tcp_addr().unwrap().to_string();
    let mut first = Client::connect(&addr).unwrap();
    first.put_header(2, 100.0, 9, &[]).unwrap(); // 2 channels: 16 MiB
    first.put_data(2, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (ready, ready_rx) = std::sync::mpsc::channel();
    let poller = {
        let (addr, done) = (addr.clone(), done.clone());
        std::thread::spawn(move || {
            let mut c = Client::connect(&addr).unwrap();
            // room made before the PUT_HDR: a growing Vec maps memory, and a mapping waits
            // for the new stream's MAP_POPULATE in this same process (a test artefact: the
            // server answers meanwhile, this thread could not record it)
            let mut answers = Vec::with_capacity(1 << 20);
            let mut ready = Some(ready);
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let h = c.get_header().unwrap();
                if answers.len() < answers.capacity() {
                    answers.push((Instant::now(), h.def.nchans, h.def.nsamples));
                }
                if let Some(r) = ready.take() {
                    r.send(()).unwrap();
                }
            }
            answers
        })
    };
    // the PUT_HDR starts once the other client is answered in its loop (not after a sleep
    // that a loaded machine may outlast)
    ready_rx.recv().unwrap();
    let started = Instant::now();
    first.put_header(256, 1000.0, 9, &[]).unwrap(); // 256 x float32: 1 GiB
    let finished = Instant::now();
    done.store(true, std::sync::atomic::Ordering::Release);
    let answers = poller.join().unwrap();
    // answers in the middle half of the PUT_HDR: none when the lock was held throughout
    // (the first and last quarter also hold the requests' own travel)
    let quarter = (finished - started) / 4;
    let during: Vec<_> = answers
        .iter()
        .filter(|(t, _, _)| *t > started + quarter && *t < finished - quarter)
        .collect();
    assert!(
        !during.is_empty(),
        "no GET_HDR was answered in the middle of the {:?} the PUT_HDR took",
        finished - started
    );
    // what was answered meanwhile is the old header and its data, whole
    assert!(
        during
            .iter()
            .all(|(_, ch, ns)| (*ch, *ns) == (2, 2) || *ch == 256),
        "{during:?}"
    );
    assert_eq!(first.get_header().unwrap().def.nchans, 256);
}

/// The default server polls for a client in a request/response loop, holds PM QoS while one
/// does (where the process may open /dev/cpu_dma_latency), and lets both go when the client
/// pauses (`cli_serve.rs` checks that the idle server process then uses no CPU).
#[test]
fn adaptive_polling_follows_a_looping_client_and_lets_go_when_it_idles() {
    let _w = Watchdog::arm(60, "adaptive polling");
    let f = start(1 << 20);
    let may_hold = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")
        .is_ok();
    for mut c in [f.client(), f.unix_client()] {
        c.put_header(4, 100.0, 9, &[]).unwrap();
        c.put_data(4, &[1.0f32; 4 * 16]).unwrap();
        // a request/response loop, as FieldTrip clients poll for new data; "looping" is a
        // client whose next request follows the reply within LOOP_GAP, which a loaded machine
        // may stretch now and then: loop until the server counts it (a generous deadline)
        let t0 = Instant::now();
        let mut requests = 0;
        while requests < 200 || f.server.polling() != (1, may_hold) {
            assert!(
                t0.elapsed() < PATIENCE,
                "a looping client is polled for: {:?} after {requests} requests",
                f.server.polling()
            );
            assert_eq!(c.get_data::<f32>(15, 15).unwrap(), [1.0; 4]);
            requests += 1;
        }
        // the client pauses: the server lets go of the loop and of PM QoS by itself
        wait_until("a pausing client is slept on", || {
            f.server.polling() == (0, false)
        });
        // the next request is answered as ever
        assert_eq!(c.poll().unwrap(), (16, 0));
    }
    // closed connections leave nothing counted
    wait_until("closed connections leave nothing counted", || {
        f.server.polling() == (0, false)
    });
}

/// Far beyond any wait these tests expect (a loaded machine included), far below the
/// watchdogs.
const PATIENCE: Duration = Duration::from_secs(20);

/// Wait until `cond` holds, checking every millisecond; fail after [`PATIENCE`].
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < PATIENCE, "{what}: not within {PATIENCE:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn close_shuts_every_connection_and_ends_a_wait_at_once() {
    let _w = Watchdog::arm(120, "close with a wait in progress");
    let f = start(1 << 20);
    let mut c = f.client();
    c.put_header(1, 10.0, 9, &[]).unwrap();
    let mut idle = f.tcp();
    let addr = f.server.tcp_addr().unwrap().to_string();
    let waiter = std::thread::spawn(move || {
        let mut w = Client::connect(&addr).unwrap();
        // ten minutes: only a close that ends the wait lets the join below return in time
        w.wait(1_000, 1_000, 600_000)
    });
    while f.server.clients() != 3 {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(200)); // the WAIT_DAT goes out
    f.server.close();
    assert_eq!(f.server.clients(), 0, "connection threads left after close");
    assert!(f.server.is_closed());
    let got = waiter.join().unwrap();
    assert!(
        got.is_err(),
        "the wait was answered {got:?} instead of closed"
    );
    // an idle connection is closed too, and a request on it is not answered
    assert!(closed(&mut idle));
    assert!(c.get_header().is_err());
    f.server.close(); // a second close does nothing
}

#[test]
fn a_second_buffer_on_the_same_stream_is_refused_while_the_first_writes() {
    let f = start(1 << 20);
    let mut a = f.client();
    a.put_header(2, 10.0, 9, &[]).unwrap();
    a.put_data(2, &[1.0f32; 10]).unwrap();
    // a second buffer of this process on the same stream, asked PUT_HDR first
    let second = Buffer::new(BufferConfig::new(&f.name));
    let mut b = Client::in_process(Arc::new(second));
    let e = b.put_header(2, 10.0, 9, &[]).unwrap_err();
    assert!(matches!(e, ClientError::Refused { .. }), "{e}");
    a.put_data(2, &[1.0f32; 10]).unwrap();
    assert_eq!(Stream::open(&f.name).unwrap().written(), 10);
}
