//! The limit for `rtloop bench fieldtrip`: a bare request/response server that moves the
//! same bytes as a FieldTrip buffer server and nothing else.
//!
//! Each connection reads a request (the 8-byte prefix, then its payload, into memory reused
//! from request to request) and writes, in one write, a reply of the size FieldTrip's server
//! would send: PUT_OK for PUT_HDR and PUT_DAT, GET_OK with a 24-byte header for GET_HDR,
//! GET_OK with a 16-byte data definition and the selected samples' bytes for GET_DAT. It keeps
//! no ring and takes no lock: a GET_DAT's values are whatever its reused reply memory holds,
//! so what it costs is the socket's round trip and the bytes on it. It waits for requests as
//! rtloop's server does ([`Polling`], TCP_NODELAY, TCP_QUICKACK before each read), over TCP and
//! a UNIX socket, so a ratio against it is what rtloop's buffer costs on top of moving the
//! bytes. It is a measuring instrument, not a FieldTrip server: it does not keep data.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rtloop_fieldtrip::codec::{
    self, cmd, put_headerdef, put_prefix, put_status, DataDef, HeaderDef, Request,
};
use rtloop_fieldtrip::polling::{PollShared, PolledSocket, Polling};
use rtloop_fieldtrip::server::QuickAck;

/// A running limit server (TCP on 127.0.0.1, and a UNIX socket); it stops accepting when
/// dropped (connections end when their clients close them).
pub struct LimitServer {
    tcp: SocketAddr,
    unix: PathBuf,
    stop: Arc<AtomicBool>,
    accept: Vec<std::thread::JoinHandle<()>>,
}

impl LimitServer {
    /// Listen on an ephemeral loopback port and at `unix` (which must not exist), waiting
    /// for requests as `polling` says.
    pub fn start(unix: &Path, polling: Polling) -> io::Result<LimitServer> {
        let tl = TcpListener::bind("127.0.0.1:0")?;
        let tcp = tl.local_addr()?;
        let ul = UnixListener::bind(unix)?;
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(PollShared::new(polling));
        let mut accept = Vec::new();
        let (stop2, shared2) = (stop.clone(), shared.clone());
        accept.push(
            std::thread::Builder::new()
                .name("ft-limit-tcp".into())
                .spawn(move || {
                    for s in tl.incoming() {
                        // Ordering: a flag with no data behind it: Relaxed.
                        if stop2.load(Ordering::Relaxed) {
                            break;
                        }
                        let Ok(s) = s else { continue };
                        let _ = s.set_nodelay(true);
                        let shared = shared2.clone();
                        let _ = std::thread::Builder::new()
                            .name("ft-limit-conn".into())
                            .spawn(move || {
                                serve(PolledSocket::new(QuickAck(s), &shared, polling));
                            });
                    }
                })?,
        );
        let stop2 = stop.clone();
        accept.push(
            std::thread::Builder::new()
                .name("ft-limit-unix".into())
                .spawn(move || {
                    for s in ul.incoming() {
                        if stop2.load(Ordering::Relaxed) {
                            break;
                        }
                        let Ok(s) = s else { continue };
                        // as rtloop's server sizes its UNIX sockets
                        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&s, 4 << 20);
                        let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&s, 4 << 20);
                        let shared = shared.clone();
                        let _ = std::thread::Builder::new()
                            .name("ft-limit-conn".into())
                            .spawn(move || serve(PolledSocket::new(s, &shared, polling)));
                    }
                })?,
        );
        Ok(LimitServer {
            tcp,
            unix: unix.to_owned(),
            stop,
            accept,
        })
    }

    /// `HOST:PORT` to connect to.
    #[must_use]
    pub fn tcp_addr(&self) -> String {
        self.tcp.to_string()
    }

    /// `unix:PATH` to connect to.
    #[must_use]
    pub fn unix_addr(&self) -> String {
        format!("unix:{}", self.unix.display())
    }
}

impl Drop for LimitServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // wake the accept loops
        let _ = TcpStream::connect(self.tcp);
        let _ = UnixStream::connect(&self.unix);
        for t in self.accept.drain(..) {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.unix);
    }
}

/// What one connection remembers: the header it was given and how many samples since.
#[derive(Default)]
struct State {
    header: Option<HeaderDef>,
    stride: usize,
    written: u64,
}

/// Read into `buf[*have..]` until it holds `need` bytes; false if the client went away.
fn fill<S: Read>(s: &mut S, buf: &mut Vec<u8>, have: &mut usize, need: usize) -> bool {
    if buf.len() < need {
        buf.resize(need.max(64 << 10), 0);
    }
    while *have < need {
        match s.read(&mut buf[*have..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => *have += n,
        }
    }
    true
}

fn serve<S: Read + Write + AsFd>(mut s: PolledSocket<'_, S>) {
    // requests are read as rtloop's server reads them: as many bytes as are there, so a
    // small request's prefix and payload take one read
    let mut inbuf = vec![0u8; 64 << 10];
    let mut have = 0;
    // replies are built at the front of memory that only grows: a GET_DAT's values are
    // what the memory holds (zeros, or an earlier reply's), never copied or cleared again
    let mut out: Vec<u8> = Vec::new();
    let mut st = State::default();
    loop {
        if !fill(&mut s, &mut inbuf, &mut have, 8) {
            return;
        }
        let head: [u8; 8] = inbuf[..8].try_into().expect("8 bytes");
        let Ok(prefix) = codec::parse_prefix(&head) else {
            return;
        };
        let need = 8 + prefix.bufsize as usize;
        if !fill(&mut s, &mut inbuf, &mut have, need) {
            return;
        }
        let payload = &inbuf[8..need];
        let order = prefix.order;
        let mut reply = Vec::with_capacity(32);
        let (respond, values) = match codec::parse_request(&prefix, payload) {
            Ok(parsed) => (
                parsed.respond,
                answer(&mut st, &prefix, &parsed.request, &mut reply),
            ),
            Err(_) => {
                if let Some(r) = cmd::error_reply(prefix.command) {
                    put_status(order, r, &mut reply);
                }
                (true, 0)
            }
        };
        let len = reply.len() + values;
        if out.len() < len {
            out.resize(len, 0);
        }
        out[..reply.len()].copy_from_slice(&reply);
        // a pipelined next request, if any, moves to the front
        inbuf.copy_within(need..have, 0);
        have -= need;
        if respond && len > 0 && s.write_all(&out[..len]).is_err() {
            return;
        }
    }
}

/// Put the reply's fixed part into `out`; returns how many value bytes follow it.
fn answer(st: &mut State, prefix: &codec::Prefix, req: &Request<'_>, out: &mut Vec<u8>) -> usize {
    let order = prefix.order;
    match req {
        Request::PutHdr { def, .. } => {
            let Some(word) = codec::wordsize(def.data_type) else {
                {
                    put_status(order, cmd::PUT_ERR, out);
                    return 0;
                }
            };
            st.header = Some(*def);
            st.stride = word * def.nchans as usize;
            st.written = 0;
            put_status(order, cmd::PUT_OK, out);
            0
        }
        Request::PutDat { data, .. } => {
            if st.header.is_none() {
                {
                    put_status(order, cmd::PUT_ERR, out);
                    return 0;
                }
            }
            st.written += (data.len() / st.stride.max(1)) as u64;
            put_status(order, cmd::PUT_OK, out);
            0
        }
        Request::GetHdr => {
            let Some(mut h) = st.header else {
                {
                    put_status(order, cmd::GET_ERR, out);
                    return 0;
                }
            };
            h.nsamples = st.written as u32;
            h.nevents = 0;
            h.bufsize = 0;
            put_prefix(order, cmd::GET_OK, 24, out);
            put_headerdef(order, &h, out);
            0
        }
        Request::GetDat(sel) => {
            let Some(h) = st.header else {
                {
                    put_status(order, cmd::GET_ERR, out);
                    return 0;
                }
            };
            let (begin, end) = match sel {
                Some(s) => (u64::from(s.begin), u64::from(s.end)),
                None => (0, st.written.saturating_sub(1)),
            };
            if st.written == 0 || end >= st.written || begin > end {
                {
                    put_status(order, cmd::GET_ERR, out);
                    return 0;
                }
            }
            let n = (end - begin + 1) as usize;
            let bytes = n * st.stride;
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
            bytes
        }
        // anything else (events, WAIT_DAT, FLUSH_*): the request family's error
        _ => {
            if let Some(r) = cmd::error_reply(prefix.command) {
                put_status(order, r, out);
            }
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtloop_fieldtrip::Client;

    /// Over TCP and the UNIX socket, the limit answers the benchmark's requests with replies
    /// of the sizes a FieldTrip server sends, and refuses what it cannot answer.
    #[test]
    fn answers_with_replies_of_the_right_size_over_tcp_and_unix() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("limit.sock");
        let l = LimitServer::start(&sock, Polling::default()).unwrap();
        for addr in [l.tcp_addr(), l.unix_addr()] {
            let mut c = Client::connect(&addr).unwrap();
            // no header yet: the family's error
            assert!(c.get_data::<f32>(0, 0).is_err(), "{addr}");
            c.put_header(3, 100.0, 9, &[]).unwrap();
            for _ in 0..10 {
                c.put_data(3, &[1.0f32; 3 * 4]).unwrap();
            }
            let h = c.get_header().unwrap();
            assert_eq!((h.def.nchans, h.def.nsamples), (3, 40), "{addr}");
            // a GET_DAT of n samples brings n x 3 float32 values, whatever they are
            assert_eq!(c.get_data::<f32>(36, 39).unwrap().len(), 12, "{addr}");
            assert_eq!(c.get_data::<f32>(0, 0).unwrap().len(), 3, "{addr}");
            assert!(
                c.get_data::<f32>(39, 40).is_err(),
                "beyond the samples written"
            );
        }
        drop(l);
        assert!(!sock.exists(), "the socket is removed when the limit stops");
    }
}
