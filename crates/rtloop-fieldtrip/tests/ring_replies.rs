//! Large GET_DAT replies go from the stream's ring to the socket without a copy, checked
//! after the kernel took them: a writer that laps the ring meanwhile must never get a
//! client a whole reply with overwritten values (the reply is cut short instead).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rtloop_fieldtrip::{Buffer, BufferConfig, Client, ClientError, Server, ServerConfig};
use rtloop_stream::{DType, Stream, StreamConfig};
use rtloop_testkit::{unique_name, StreamGuard, Watchdog};

struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A local stream of `nchans` uint64 channels (written by the test) served over a UNIX
/// socket.
struct Fixture {
    server: Server,
    stream: Stream,
    _guard: StreamGuard,
    _dir: TempDir,
}

fn start(label: &str, nchans: u64, capacity: u64) -> Fixture {
    let name = unique_name(label);
    let guard = StreamGuard::new(&name);
    let dir = std::env::temp_dir().join(format!("rtloop-test-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let stream = Stream::create(
        &name,
        &StreamConfig::new(DType::U64, nchans as usize, 1000.0, capacity),
    )
    .unwrap();
    let server = Server::start(
        Arc::new(Buffer::new(BufferConfig::new(&name))),
        ServerConfig {
            tcp: None,
            unix: Some(dir.join("ft.sock")),
            ..ServerConfig::default()
        },
    )
    .unwrap();
    Fixture {
        server,
        stream,
        _guard: guard,
        _dir: TempDir(dir),
    }
}

impl Fixture {
    fn unix(&self) -> UnixStream {
        let s = UnixStream::connect(self.server.unix_path().unwrap()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s
    }
    fn client(&self) -> Client {
        Client::connect(&format!(
            "unix:{}",
            self.server.unix_path().unwrap().display()
        ))
        .unwrap()
    }
}

/// The samples `[first, end)` as the writer writes them: each value names its sample and
/// channel, so a value from another lap of the ring shows.
fn values(first: u64, end: u64, nchans: u64) -> Vec<u64> {
    (first * nchans..end * nchans).collect()
}

/// A GET_DAT of samples `[begin, end]` (inclusive, as the protocol counts), built by hand.
fn get_dat(begin: u32, end: u32) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&1u16.to_le_bytes());
    m.extend_from_slice(&0x0202u16.to_le_bytes());
    m.extend_from_slice(&8u32.to_le_bytes());
    m.extend_from_slice(&begin.to_le_bytes());
    m.extend_from_slice(&end.to_le_bytes());
    m
}

/// Read until the reply is whole or the server closes; the bytes read.
fn read_reply(s: &mut UnixStream, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    let mut have = 0;
    while have < len {
        match s.read(&mut b[have..]) {
            Ok(0) => break,
            Ok(n) => have += n,
            Err(e) => panic!("reading the reply: {e}"),
        }
    }
    b.truncate(have);
    b
}

fn as_u64(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// The writer laps the whole ring while a 16 MiB reply (twice what the socket holds) is
/// being sent from it: the check after the send finds it, the last bytes are not sent and
/// the connection closes, so the client has a short reply, not 16 MiB with values of a
/// later lap. The next request, with the writer idle, gets its reply whole and intact.
#[test]
fn a_reply_the_writer_laps_while_it_is_sent_is_cut_short_never_torn() {
    let _w = Watchdog::arm(120, "a_reply_the_writer_laps_while_it_is_sent");
    let (nchans, block) = (256u64, 8192u64);
    let f = start("ftlap", nchans, 3 * block);
    let cap = f.stream.info().capacity;
    let mut w = f.stream.writer().unwrap();
    w.write(&values(0, cap, nchans)).unwrap();

    let len = 24 + (block * nchans * 8) as usize;
    let mut s = f.unix();
    s.write_all(&get_dat((cap - block) as u32, (cap - 1) as u32))
        .unwrap();
    // the head comes in the same write as the values: once it is here, the server is
    // sending them, and the socket cannot take more than half of them
    let mut head = [0u8; 24];
    s.read_exact(&mut head).unwrap();
    assert_eq!(u16::from_le_bytes([head[2], head[3]]), 0x0204, "GET_OK");
    // the writer laps the ring twice while the server waits for the client to read
    for lap in 1..3 {
        w.write(&values(lap * cap, (lap + 1) * cap, nchans))
            .unwrap();
    }
    let rest = read_reply(&mut s, len - 24);
    assert!(
        rest.len() < len - 24,
        "a whole reply of {} bytes came although the writer overwrote its samples while they were sent; first values {:?}",
        rest.len(),
        &as_u64(&rest)[..4]
    );
    let (ring, cut) = f.server.buffer().ring_replies();
    assert_eq!((ring, cut), (1, 1), "sent from the ring, and cut short");

    // the writer idle: the newest block comes whole and intact, from the ring
    let written = f.stream.written();
    let mut s = f.unix();
    s.write_all(&get_dat((written - block) as u32, (written - 1) as u32))
        .unwrap();
    let reply = read_reply(&mut s, len);
    assert_eq!(reply.len(), len);
    assert!(
        as_u64(&reply[24..]) == values(written - block, written, nchans),
        "the values of samples [{}, {written})",
        written - block
    );
    assert_eq!(f.server.buffer().ring_replies(), (2, 1));
}

/// Stress: a writer laps a 32 MiB ring over and over while two clients read the newest
/// blocks (1 to 2 MiB, sent from the ring) and older ones near the writer (copied)
/// over the UNIX socket, and a third reads 12 MiB blocks slowly (the writer laps them while
/// they are sent); every reply that comes whole holds exactly the values written at its
/// samples. A request whose samples were overwritten before it was answered is refused,
/// one lapped while it was sent is cut short (the client reconnects); neither is torn.
#[test]
fn replies_sent_from_a_ring_the_writer_laps_are_never_torn() {
    let _w = Watchdog::arm(300, "replies_sent_from_a_ring_the_writer_laps");
    let nchans = 64u64;
    let f = Arc::new(start("ftstress", nchans, 65536));
    let cap = f.stream.info().capacity;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stream, stop) = (f.stream.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut w = stream.writer().unwrap();
            let mut next = 0u64;
            while !stop.load(Ordering::Relaxed) {
                w.write(&values(next, next + 64, nchans)).unwrap();
                next += 64;
                // quiet moments now and then, so some replies are sent far from the writer
                if next % (cap / 2) == 0 {
                    std::thread::sleep(Duration::from_micros(300));
                }
            }
        })
    };
    while f.stream.written() < cap {
        std::thread::yield_now();
    }
    let clients: Vec<_> = (0..2u64)
        .map(|k| {
            let f = f.clone();
            std::thread::spawn(move || {
                let (mut whole, mut refused, mut cut, mut torn) = (0u32, 0u32, 0u32, 0u32);
                let mut c = f.client();
                for round in 0..200u64 {
                    let n = 2048 << ((round + k) % 2); // 2048 or 4096 samples: 1 or 2 MiB
                    let written = f.stream.written();
                    // every fifth request near the oldest samples kept
                    let back = if round % 5 == 4 { cap - 2 * n } else { 0 };
                    let (first, written) = (written - back - n, written - back);
                    match c.get_data::<u64>(first as u32, (written - 1) as u32) {
                        Ok(v) => {
                            whole += 1;
                            if v != values(first, written, nchans) {
                                torn += 1;
                            }
                        }
                        Err(ClientError::Refused { .. }) => refused += 1,
                        Err(_) => {
                            cut += 1;
                            c = f.client();
                        }
                    }
                }
                (whole, refused, cut, torn)
            })
        })
        .collect();
    let slow = {
        let f = f.clone();
        std::thread::spawn(move || {
            let (mut whole, mut refused, mut cut, mut torn) = (0u32, 0u32, 0u32, 0u32);
            let n = 24576u64; // 12 MiB: more than the socket holds
            let len = 24 + (n * nchans * 8) as usize;
            for _ in 0..6 {
                let written = f.stream.written();
                let mut s = f.unix();
                s.write_all(&get_dat((written - n) as u32, (written - 1) as u32))
                    .unwrap();
                let mut b = vec![0u8; len];
                s.read_exact(&mut b[..8]).unwrap();
                if u16::from_le_bytes([b[2], b[3]]) != 0x0204 {
                    // GET_ERR: the writer overwrote the samples before they were answered
                    refused += 1;
                    continue;
                }
                let mut have = 8;
                while have < len {
                    match s.read(&mut b[have..(have + (64 << 10)).min(len)]) {
                        Ok(0) => break,
                        Ok(k) => have += k,
                        Err(e) => panic!("reading the reply: {e}"),
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                if have < len {
                    cut += 1;
                } else {
                    whole += 1;
                    if as_u64(&b[24..]) != values(written - n, written, nchans) {
                        torn += 1;
                    }
                }
            }
            (whole, refused, cut, torn)
        })
    };
    let mut sum = (0, 0, 0, 0);
    for t in clients.into_iter().chain([slow]) {
        let (a, b, c, d) = t.join().unwrap();
        sum = (sum.0 + a, sum.1 + b, sum.2 + c, sum.3 + d);
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let (whole, refused, cut, torn) = sum;
    let (ring, ring_cut) = f.server.buffer().ring_replies();
    eprintln!(
        "406 requests: {whole} whole, {refused} refused, {cut} cut short; {ring} sent from the ring, {ring_cut} of them cut"
    );
    assert_eq!(torn, 0, "whole replies holding values of another lap");
    assert_eq!(whole + refused + cut, 406);
    assert!(ring > 0, "no reply was sent from the ring");
    assert!(
        u64::from(cut) >= ring_cut,
        "each reply the server cut short reached a client as a failed read"
    );
}
