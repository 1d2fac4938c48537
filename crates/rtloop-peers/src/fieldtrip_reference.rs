//! The reference for `rtloop bench fieldtrip`: a FieldTrip buffer server that does per
//! request what FieldTrip's own C server (`realtime/src/buffer`, the `buffer` program) does,
//! built with TCP_NODELAY.
//!
//! Like FieldTrip's `tcpserver.c` / `tcpsocket.c` / `dmarequest.c`, it accepts on a
//! non-blocking socket, sleeping 1 ms whenever no connection is waiting (`ACCEPTSLEEP`: the
//! accepting thread wakes 1,000 times a second for as long as the server runs, which on a VM
//! keeps the guest's idle driver from halting vCPUs deeply, so every wake-up of the server is
//! shorter); runs a thread per connection that sleeps in `recv` for each request; sets the connection's SO_RCVBUF and
//! SO_SNDBUF to 16 KiB; reads the 8-byte prefix, then the payload into a fresh allocation;
//! takes the buffer's mutex and copies a PUT_DAT block into (or a GET_DAT range out of, into a
//! fresh reply) a ring of samples in its own memory, at most 600,000 samples and 512 MiB; and
//! sends a reply of up to 4096 bytes in one write, a larger one as two (prefix + definition,
//! then the rest). The one change is TCP_NODELAY, without which every request waits up to 40 ms
//! for a delayed ACK; the "NODELAY reference" is this build.
//!
//! It answers PUT_HDR, PUT_DAT, GET_HDR, GET_DAT and FLUSH_DAT; anything else gets the
//! request family's error reply. It is a measuring instrument, not a server to deploy.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use rtloop_fieldtrip::codec::{
    self, cmd, put_headerdef, put_prefix, put_status, DataDef, HeaderDef, Request,
};

/// The reference server's limits (FieldTrip's `MAXNUMSAMPLE`, and a memory bound).
const MAX_SAMPLES: usize = 600_000;
const MAX_BYTES: usize = 512 << 20;

#[derive(Default)]
struct Ring {
    header: Option<HeaderDef>,
    chunks: Vec<u8>,
    /// Bytes per sample.
    stride: usize,
    /// Samples the ring holds.
    slots: usize,
    /// Samples written since PUT_HDR.
    written: u64,
    data: Vec<u8>,
}

/// A running reference server on 127.0.0.1; it stops when dropped (connections end when
/// their clients close them).
pub struct ReferenceServer {
    addr: SocketAddr,
    stop: Arc<std::sync::atomic::AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl ReferenceServer {
    /// Listen on an ephemeral loopback port.
    pub fn start() -> io::Result<ReferenceServer> {
        let l = TcpListener::bind("127.0.0.1:0")?;
        l.set_nonblocking(true)?;
        let addr = l.local_addr()?;
        let ring = Arc::new(Mutex::new(Ring::default()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let accept = std::thread::Builder::new()
            .name("ft-reference".into())
            .spawn(move || {
                loop {
                    // Ordering: a flag with no data behind it: Relaxed.
                    if stop2.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let s = match l.accept() {
                        Ok((s, _)) => s,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::thread::sleep(ACCEPT_SLEEP);
                            continue;
                        }
                        Err(_) => continue,
                    };
                    // back to blocking, as tcpserver.c does for tcpsocket.c
                    if s.set_nonblocking(false).is_err() {
                        continue;
                    }
                    let ring = ring.clone();
                    let _ = std::thread::Builder::new()
                        .name("ft-reference-conn".into())
                        .spawn(move || serve(s, &ring));
                }
            })?;
        Ok(ReferenceServer {
            addr,
            stop,
            accept: Some(accept),
        })
    }

    /// `HOST:PORT` to connect to.
    #[must_use]
    pub fn addr(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for ReferenceServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        // the accept loop sees the flag within its 1 ms sleep
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// `tcpserver.c`'s `ACCEPTSLEEP`: how long the accepting thread sleeps when no connection waits.
const ACCEPT_SLEEP: std::time::Duration = std::time::Duration::from_millis(1);

/// FieldTrip's `SO_RCVBUF_SIZE` / `SO_SNDBUF_SIZE` and `tcpsocket.c`'s `MERGE_THRESHOLD`.
const SOCKET_BUFFER: usize = 16384;
const MERGE_THRESHOLD: usize = 4096;

fn serve(mut s: TcpStream, ring: &Mutex<Ring>) {
    let _ = s.set_nodelay(true);
    let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&s, SOCKET_BUFFER);
    let _ = rustix::net::sockopt::set_socket_send_buffer_size(&s, SOCKET_BUFFER);
    loop {
        let mut head = [0u8; 8];
        if s.read_exact(&mut head).is_err() {
            return;
        }
        let Ok(prefix) = codec::parse_prefix(&head) else {
            return;
        };
        let mut payload = vec![0u8; prefix.bufsize as usize];
        if s.read_exact(&mut payload).is_err() {
            return;
        }
        let order = prefix.order;
        let mut out = Vec::new();
        let respond = match codec::parse_request(&prefix, &payload) {
            Ok(parsed) => {
                let mut g = ring
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                answer(&mut g, order, &parsed.request, &mut out);
                parsed.respond
            }
            Err(_) => {
                if let Some(r) = cmd::error_reply(prefix.command) {
                    put_status(order, r, &mut out);
                }
                true
            }
        };
        drop(payload);
        if !respond || out.is_empty() {
            continue;
        }
        // the 8-byte message definition, then its buffer, as the reference does
        let sent = if out.len() <= MERGE_THRESHOLD {
            s.write_all(&out)
        } else {
            s.write_all(&out[..8]).and_then(|()| s.write_all(&out[8..]))
        };
        if sent.is_err() {
            return;
        }
    }
}

fn answer(g: &mut Ring, order: codec::ByteOrder, req: &Request<'_>, out: &mut Vec<u8>) {
    match req {
        Request::PutHdr { def, chunks } => {
            let Some(word) = codec::wordsize(def.data_type) else {
                return put_status(order, cmd::PUT_ERR, out);
            };
            let stride = word * def.nchans as usize;
            let slots = MAX_SAMPLES.min(MAX_BYTES / stride.max(1)).max(1);
            g.header = Some(*def);
            g.chunks = chunks.to_vec();
            g.stride = stride;
            g.slots = slots;
            g.written = 0;
            g.data = vec![0; slots * stride];
            put_status(order, cmd::PUT_OK, out);
        }
        Request::PutDat { def, data } => {
            let Some(h) = g.header else {
                return put_status(order, cmd::PUT_ERR, out);
            };
            if def.nchans != h.nchans || def.data_type != h.data_type || data.len() > g.data.len() {
                return put_status(order, cmd::PUT_ERR, out);
            }
            let n = data.len() / g.stride.max(1);
            let first = (g.written % g.slots as u64) as usize;
            ring_write(&mut g.data, first * g.stride, data);
            g.written += n as u64;
            put_status(order, cmd::PUT_OK, out);
        }
        Request::GetHdr => {
            let Some(mut h) = g.header else {
                return put_status(order, cmd::GET_ERR, out);
            };
            h.nsamples = g.written as u32;
            h.nevents = 0;
            h.bufsize = g.chunks.len() as u32;
            put_prefix(order, cmd::GET_OK, 24 + h.bufsize, out);
            put_headerdef(order, &h, out);
            out.extend_from_slice(&g.chunks);
        }
        Request::GetDat(sel) => {
            let Some(h) = g.header else {
                return put_status(order, cmd::GET_ERR, out);
            };
            let oldest = g.written.saturating_sub(g.slots as u64);
            let (begin, end) = match sel {
                Some(s) => (u64::from(s.begin), u64::from(s.end)),
                None => (oldest, g.written.saturating_sub(1)),
            };
            if g.written == 0 || begin < oldest || end >= g.written || begin > end {
                return put_status(order, cmd::GET_ERR, out);
            }
            let n = (end - begin + 1) as usize;
            let bytes = n * g.stride;
            codec::put_data_reply_head(
                order,
                &DataDef {
                    nchans: h.nchans,
                    nsamples: n as u32,
                    data_type: h.data_type,
                    bufsize: bytes as u32,
                },
                out,
            );
            let at = out.len();
            out.resize(at + bytes, 0);
            let first = (begin % g.slots as u64) as usize;
            ring_read(&g.data, first * g.stride, &mut out[at..]);
        }
        Request::FlushDat => {
            g.written = 0;
            put_status(order, cmd::FLUSH_OK, out);
        }
        _ => {
            let code = match req {
                Request::PutEvt(_) => cmd::PUT_ERR,
                Request::WaitDat(_) => cmd::WAIT_ERR,
                Request::FlushHdr | Request::FlushEvt => cmd::FLUSH_ERR,
                _ => cmd::GET_ERR,
            };
            put_status(order, code, out);
        }
    }
}

/// Copy `src` into the ring from byte `at`, in at most two `memcpy`s (the ring may wrap), as
/// the reference does.
fn ring_write(ring: &mut [u8], at: usize, src: &[u8]) {
    let head = src.len().min(ring.len() - at);
    ring[at..at + head].copy_from_slice(&src[..head]);
    ring[..src.len() - head].copy_from_slice(&src[head..]);
}

/// Copy out of the ring from byte `at` into `dst`, in at most two `memcpy`s.
fn ring_read(ring: &[u8], at: usize, dst: &mut [u8]) {
    let head = dst.len().min(ring.len() - at);
    dst[..head].copy_from_slice(&ring[at..at + head]);
    let n = dst.len();
    dst[head..].copy_from_slice(&ring[..n - head]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtloop_fieldtrip::Client;

    /// The reference answers the benchmark's requests as rtloop's server does.
    #[test]
    fn answers_the_requests_the_benchmark_makes() {
        let r = ReferenceServer::start().unwrap();
        let mut c = Client::connect(&r.addr()).unwrap();
        c.put_header(3, 100.0, 9, &[]).unwrap();
        for i in 0..10 {
            let v = [i as f32, -(i as f32), 0.5];
            c.put_data(3, &v).unwrap();
        }
        let h = c.get_header().unwrap();
        assert_eq!((h.def.nchans, h.def.nsamples), (3, 10));
        assert_eq!(
            c.get_data::<f32>(8, 9).unwrap(),
            [8.0, -8.0, 0.5, 9.0, -9.0, 0.5]
        );
        // out of range, and a request it does not serve: the family's error, no crash
        assert!(c.get_data::<f32>(5, 10).is_err());
        assert!(c.wait(0, 0, 10).is_err());
        assert_eq!(c.get_data::<f32>(0, 0).unwrap(), [0.0, 0.0, 0.5]);
    }

    /// Voluntary context switches of this process's threads named `name`.
    fn switches_of(name: &str) -> u64 {
        let mut n = 0;
        for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if comm.trim() != name {
                continue;
            }
            let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            n += status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
        }
        n
    }

    /// As FieldTrip's server, the reference polls for connections (a 1 ms sleep between
    /// tries), so its accepting thread wakes all the time, not only when a client connects;
    /// and it still accepts, and stops when dropped.
    #[test]
    fn accepts_by_polling_as_fieldtrips_server_does() {
        let r = ReferenceServer::start().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let before = switches_of("ft-reference");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let woke = switches_of("ft-reference") - before;
        // ~300 at 1 ms; a loaded machine stretches the sleeps, a blocking accept wakes 0 times
        assert!(
            woke >= 10,
            "the accepting thread woke {woke} times in 300 ms"
        );
        let mut c = Client::connect(&r.addr()).unwrap();
        c.put_header(1, 10.0, 9, &[]).unwrap();
        drop(r);
    }
}
