//! The server against hostile and broken clients, over real sockets: a client dripping a
//! message byte by byte is dropped at the message deadline, stalled connections filling the
//! connection limit make room for a good client, and partial messages of many clients stay
//! within one server-wide memory budget. Outcomes only: no timing is asserted, and every
//! wait is for a condition with a generous deadline.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtloop_fieldtrip::{Buffer, BufferConfig, Client, Server, ServerConfig};
use rtloop_testkit::{unique_name, StreamGuard, Watchdog};

fn server(cfg: ServerConfig) -> (Server, StreamGuard) {
    let name = unique_name("ft-lim");
    let mut bcfg = BufferConfig::new(&name);
    bcfg.capacity = 1000;
    bcfg.events = 16;
    bcfg.remove_on_drop = true;
    let s = Server::start(
        Arc::new(Buffer::new(bcfg)),
        ServerConfig {
            tcp: Some("127.0.0.1:0".into()),
            unix: None,
            ..cfg
        },
    )
    .unwrap();
    (s, StreamGuard::new(&name))
}

fn raw_prefix(command: u16, bufsize: u32) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&1u16.to_le_bytes());
    m.extend_from_slice(&command.to_le_bytes());
    m.extend_from_slice(&bufsize.to_le_bytes());
    m
}

const PUT_DAT: u16 = 0x0102;

/// Whether the server closed `s` (EOF or reset) within `patience`.
fn closed_by_server(s: &TcpStream, patience: Duration) -> bool {
    s.set_read_timeout(Some(patience)).unwrap();
    let mut b = [0u8; 64];
    let mut r = s;
    loop {
        match r.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {} // an error reply before the close
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false, // timed out: still open
        }
    }
}

/// A good client: put a header, write and read back data.
fn good_client_works(server: &Server) {
    let mut c = Client::connect(&server.tcp_addr().unwrap().to_string()).unwrap();
    c.put_header(2, 100.0, 9, &[]).unwrap();
    c.put_data(2, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let h = c.get_header().unwrap();
    assert_eq!(h.def.nsamples, 2);
}

#[test]
fn a_client_dripping_one_message_is_dropped_at_the_message_deadline() {
    let _w = Watchdog::arm(60, "drip");
    let (srv, _g) = server(ServerConfig {
        message_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    });
    let mut s = TcpStream::connect(srv.tcp_addr().unwrap()).unwrap();
    let msg = {
        let mut m = raw_prefix(PUT_DAT, 64);
        m.extend_from_slice(&[0u8; 64]);
        m
    };
    // one byte every 50 ms: each read succeeds, only the whole message is late
    let mut sent = 0;
    let t0 = Instant::now();
    for b in &msg {
        if s.write_all(&[*b]).is_err() {
            break; // the server closed the connection
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(50));
        if t0.elapsed() > Duration::from_secs(20) {
            break;
        }
    }
    assert!(
        sent < msg.len(),
        "the server took all {sent} bytes of a message dripped over {:?}",
        t0.elapsed()
    );
    assert!(closed_by_server(&s, Duration::from_secs(10)));
    good_client_works(&srv);
}

#[test]
fn stalled_connections_filling_the_limit_make_room_for_a_good_client() {
    let _w = Watchdog::arm(60, "limit");
    let (srv, _g) = server(ServerConfig {
        max_clients: 4,
        message_timeout: Duration::from_secs(600), // no deadline helps here: eviction must
        ..ServerConfig::default()
    });
    // four connections: two stalled mid-message, two idle
    let stalled: Vec<TcpStream> = (0..4)
        .map(|k| {
            let mut s = TcpStream::connect(srv.tcp_addr().unwrap()).unwrap();
            if k < 2 {
                s.write_all(&raw_prefix(PUT_DAT, 1000)[..5]).unwrap();
            }
            s
        })
        .collect();
    let t0 = Instant::now();
    while srv.clients() < 4 {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(5));
    }
    // every slot is taken by a connection doing nothing useful: a good client still gets in
    good_client_works(&srv);
    let dropped = stalled
        .iter()
        .filter(|s| closed_by_server(s, Duration::from_millis(500)))
        .count();
    assert!(
        dropped >= 1,
        "one stalled connection was dropped to make room"
    );
}

#[test]
fn partial_messages_of_many_clients_stay_within_the_server_memory_budget() {
    let _w = Watchdog::arm(120, "budget");
    let budget = 16 << 20;
    let (srv, _g) = server(ServerConfig {
        max_message: 64 << 20,
        memory_budget: budget,
        message_timeout: Duration::from_secs(600),
        ..ServerConfig::default()
    });
    // the good client's data, stored before the flood
    let mut good = Client::connect(&srv.tcp_addr().unwrap().to_string()).unwrap();
    good.put_header(2, 100.0, 9, &[]).unwrap();
    good.put_data(2, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    // 8 clients each announce a 6 MiB message and send 5 MiB of it: 40 MiB if held
    let part = vec![0u8; 5 << 20];
    let mut flood = Vec::new();
    let mut peak = 0;
    for _ in 0..8 {
        let mut s = TcpStream::connect(srv.tcp_addr().unwrap()).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut m = raw_prefix(PUT_DAT, 6 << 20);
        m.extend_from_slice(&part);
        let _ = s.write_all(&m); // a refused client's writes may fail: that is the point
        peak = peak.max(srv.partial_bytes());
        flood.push(s);
    }
    // watch the budget while the server takes in what was sent, until it has refused a
    // client (a loaded machine takes longer to read 40 MiB: a generous deadline, no window)
    let t0 = Instant::now();
    let mut refused = 0;
    while t0.elapsed() < Duration::from_millis(500) || refused == 0 {
        peak = peak.max(srv.partial_bytes());
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no client refused within 30 s (peak {peak} bytes of {budget})"
        );
        refused = flood
            .iter()
            .filter(|s| closed_by_server(s, Duration::from_millis(1)))
            .count();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        peak <= budget,
        "partial messages held {peak} bytes, over the budget of {budget}"
    );
    eprintln!("8 clients x 5 MiB of 6 MiB messages: peak {peak} bytes held of a {budget} budget, {refused} refused");
    assert!(refused >= 1, "clients beyond the budget are refused");
    // the good client goes on, and what it stored is still there
    let h = good.get_header().unwrap();
    assert_eq!(h.def.nsamples, 2);
    good.put_data(2, &[5.0f32, 6.0, 7.0, 8.0]).unwrap();
    assert_eq!(good.get_header().unwrap().def.nsamples, 4);
}
