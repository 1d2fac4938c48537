//! `udp_in` (source) and `udp_out` (sink): LiCoRICE's network drivers. A tick drains every
//! datagram that arrived (up to the signal's rows) with one `recvmmsg`, straight into the
//! signal's rows, and sends a tick's rows with one `sendmmsg`. Never blocks the tick.

use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use rtloop_stream::DType;

use super::{parse_options, DriverCtx, DriverError, InView, OutBuf, Sink, Source, TickInfo};
use crate::model::Signal;

/// `options:` of `udp_in`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct InOptions {
    /// Address to receive on, `host:port`.
    bind: String,
    /// Socket receive buffer in bytes (default 8 MiB; SO_RCVBUFFORCE when permitted).
    #[serde(default = "default_rcvbuf")]
    recv_buffer: usize,
}

fn default_rcvbuf() -> usize {
    8 << 20
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum SendWhat {
    All,
    Nonzero,
}

/// `options:` of `udp_out`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OutOptions {
    /// Destination, `host:port`.
    to: String,
    /// Local address to send from (default: any).
    bind: Option<String>,
    /// `all` (default) or `nonzero`: skip rows whose bytes are all zero (triggers).
    #[serde(default = "default_send")]
    send: SendWhat,
}

fn default_send() -> SendWhat {
    SendWhat::All
}

fn addr(s: &str, key: &str) -> Result<SocketAddr, String> {
    s.to_socket_addrs()
        .map_err(|e| {
            format!("{key}: {s:?} is not an address ({e}); give host:port, e.g. 127.0.0.1:5000")
        })?
        .next()
        .ok_or_else(|| format!("{key}: {s:?} resolves to no address"))
}

fn check_lengths(data: &Signal, lengths: &Signal, what: &str) -> Result<(), String> {
    if !matches!(
        lengths.dtype,
        DType::U16 | DType::U32 | DType::I32 | DType::I64
    ) {
        return Err(format!(
            "{what} {:?} is {}; lengths are uint16, uint32, int32 or int64",
            lengths.name, lengths.dtype
        ));
    }
    if lengths.row_len() != 1 || lengths.rows_per_tick() != data.rows_per_tick() {
        return Err(format!(
            "{what} {:?} must be shape [{}, 1] (one length per row of {:?}), not {:?}",
            lengths.name,
            data.rows_per_tick(),
            data.name,
            lengths.shape
        ));
    }
    if lengths.variable != data.variable {
        return Err(format!(
            "{what} {:?} must be variable exactly when {:?} is",
            lengths.name, data.name
        ));
    }
    Ok(())
}

/// Validate `udp_in` options: `packets` variable `[max, bytes]` uint8, optional `lengths`.
pub fn check_in(options: &serde_json::Value, signals: &[&Signal]) -> Result<(), String> {
    let o: InOptions = parse_options(options)?;
    addr(&o.bind, "bind")?;
    let Some(p) = signals.first() else {
        return Err("writes one packets signal (and optionally their lengths)".into());
    };
    if signals.len() > 2 {
        return Err(format!(
            "writes 1 or 2 signals (packets, lengths), got {}",
            signals.len()
        ));
    }
    if p.dtype != DType::U8 || p.shape.len() != 2 || !p.variable {
        return Err(format!(
            "signal {:?} must be variable: true, shape [max_packets, packet_bytes], dtype uint8 \
             (it is shape {:?} {}{})",
            p.name,
            p.shape,
            p.dtype,
            if p.variable {
                ", variable"
            } else {
                ", not variable"
            }
        ));
    }
    if let Some(l) = signals.get(1) {
        check_lengths(p, l, "lengths signal")?;
    }
    Ok(())
}

/// Validate `udp_out` options: any data signal (a row is a datagram), optional `lengths`.
pub fn check_out(options: &serde_json::Value, signals: &[&Signal]) -> Result<(), String> {
    let o: OutOptions = parse_options(options)?;
    addr(&o.to, "to")?;
    if let Some(b) = &o.bind {
        addr(b, "bind")?;
    }
    if signals.is_empty() || signals.len() > 2 {
        return Err(format!(
            "reads 1 or 2 signals (data, optional lengths), got {}",
            signals.len()
        ));
    }
    if signals[0].row_bytes() > 65_507 {
        return Err(format!(
            "signal {:?} has {}-byte rows; a UDP datagram holds at most 65507",
            signals[0].name,
            signals[0].row_bytes()
        ));
    }
    if let Some(l) = signals.get(1) {
        check_lengths(signals[0], l, "lengths signal")?;
    }
    Ok(())
}

fn set_rcvbuf(s: &UdpSocket, bytes: usize) {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: setsockopt on an open fd with a pointer to a c_int of the given size.
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&raw const v).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return;
        }
    }
}

fn store_len(dtype: DType, out: &mut [u8], row: usize, len: usize) {
    match dtype {
        DType::U16 => out[row * 2..row * 2 + 2].copy_from_slice(&(len as u16).to_ne_bytes()),
        DType::U32 => out[row * 4..row * 4 + 4].copy_from_slice(&(len as u32).to_ne_bytes()),
        DType::I32 => out[row * 4..row * 4 + 4].copy_from_slice(&(len as i32).to_ne_bytes()),
        _ => out[row * 8..row * 8 + 8].copy_from_slice(&(len as i64).to_ne_bytes()),
    }
}

fn load_len(dtype: DType, b: &[u8], row: usize) -> i64 {
    let get = |w: usize| &b[row * w..row * w + w];
    match dtype {
        DType::U16 => i64::from(u16::from_ne_bytes(get(2).try_into().unwrap_or_default())),
        DType::U32 => i64::from(u32::from_ne_bytes(get(4).try_into().unwrap_or_default())),
        DType::I32 => i64::from(i32::from_ne_bytes(get(4).try_into().unwrap_or_default())),
        _ => i64::from_ne_bytes(get(8).try_into().unwrap_or_default()),
    }
}

/// Open `udp_in`: binds the socket (an address in use is named).
pub fn open_in(
    options: &serde_json::Value,
    signals: &[Signal],
    ctx: &DriverCtx,
) -> Result<Box<dyn Source>, DriverError> {
    let o: InOptions = parse_options(options).map_err(DriverError)?;
    let a = addr(&o.bind, "bind").map_err(DriverError)?;
    let sock = UdpSocket::bind(a).map_err(|e| DriverError(format!("cannot bind {a}: {e}")))?;
    sock.set_nonblocking(true)?;
    set_rcvbuf(&sock, o.recv_buffer);
    let p = &signals[0];
    let max = p.rows_per_tick();
    Ok(Box::new(UdpIn {
        name: ctx.process.clone(),
        signal: p.name.clone(),
        row: p.row_bytes(),
        lengths: signals.get(1).map(|l| l.dtype),
        sock,
        iov: Vec::with_capacity(max),
        msgs: Vec::with_capacity(max),
        packets: 0,
        bytes: 0,
        oversized: 0,
        last_warn: None,
    }))
}

struct UdpIn {
    name: String,
    signal: String,
    row: usize,
    lengths: Option<DType>,
    sock: UdpSocket,
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    packets: u64,
    bytes: u64,
    oversized: u64,
    last_warn: Option<Instant>,
}

impl UdpIn {
    /// One `recvmmsg` into rows `[first, max)`; returns (accepted rows, whether the socket
    /// may hold more). A datagram larger than a row is dropped (MSG_TRUNC) and counted.
    fn recv(
        &mut self,
        rows: &mut [u8],
        first: usize,
        max: usize,
        lens: &mut Vec<usize>,
    ) -> (usize, bool) {
        let want = max - first;
        self.iov.clear();
        self.msgs.clear();
        for r in first..max {
            self.iov.push(libc::iovec {
                iov_base: rows[r * self.row..].as_mut_ptr().cast(),
                // a larger datagram is cut to this and flagged MSG_TRUNC
                iov_len: self.row,
            });
        }
        for v in &mut self.iov {
            // SAFETY: mmsghdr is plain old data; all-zero is valid (no name, no control).
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
            self.msgs.push(m);
        }
        // SAFETY: `msgs` holds `want` valid headers whose iovecs point at disjoint rows of
        // `rows` (each `row` bytes, inside the slice), which outlives the call.
        let n = unsafe {
            libc::recvmmsg(
                self.sock.as_raw_fd(),
                self.msgs.as_mut_ptr(),
                want as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n <= 0 {
            return (0, false);
        }
        let n = n as usize;
        // keep the datagrams that fit, in order, compacting over dropped ones
        let mut kept = 0;
        for i in 0..n {
            let m = &self.msgs[i];
            let len = m.msg_len as usize;
            if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                self.oversized += 1;
                self.warn_oversized();
                continue;
            }
            let (src, dst) = (first + i, first + kept);
            if src != dst {
                rows.copy_within(src * self.row..src * self.row + len, dst * self.row);
            }
            rows[dst * self.row + len..(dst + 1) * self.row].fill(0);
            lens.push(len);
            self.bytes += len as u64;
            kept += 1;
        }
        (kept, n == want)
    }

    fn warn_oversized(&mut self) {
        if self
            .last_warn
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            self.last_warn = Some(Instant::now());
            tracing::warn!(
                "udp_in {:?}: a packet larger than signal {:?}'s rows ({} bytes) was dropped \
                 ({} so far); make the signal's second dimension larger",
                self.name,
                self.signal,
                self.row,
                self.oversized
            );
        }
    }
}

impl Source for UdpIn {
    fn tick(&mut self, _t: &TickInfo, out: &mut [OutBuf<'_>]) -> Result<(), DriverError> {
        let max = out[0].rows;
        let mut lens = Vec::with_capacity(16);
        let mut filled = 0;
        loop {
            let (got, more) = self.recv(out[0].bytes, filled, max, &mut lens);
            filled += got;
            if !more || filled >= max {
                break;
            }
        }
        self.packets += filled as u64;
        out[0].rows = filled;
        if let (Some(dt), Some(l)) = (self.lengths, out.get_mut(1)) {
            for (r, &len) in lens.iter().enumerate() {
                store_len(dt, l.bytes, r, len);
            }
            l.rows = filled;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<String, DriverError> {
        Ok(format!(
            "received {} packets ({} bytes), {} oversized dropped",
            self.packets, self.bytes, self.oversized
        ))
    }
}

/// Open `udp_out`.
pub fn open_out(
    options: &serde_json::Value,
    signals: &[Signal],
    _ctx: &DriverCtx,
) -> Result<Box<dyn Sink>, DriverError> {
    let o: OutOptions = parse_options(options).map_err(DriverError)?;
    let to = addr(&o.to, "to").map_err(DriverError)?;
    let local = match &o.bind {
        Some(b) => addr(b, "bind").map_err(DriverError)?,
        None if to.is_ipv4() => "0.0.0.0:0".parse().expect("literal"),
        None => "[::]:0".parse().expect("literal"),
    };
    let sock =
        UdpSocket::bind(local).map_err(|e| DriverError(format!("cannot bind {local}: {e}")))?;
    sock.connect(to)
        .map_err(|e| DriverError(format!("cannot send to {to}: {e}")))?;
    sock.set_nonblocking(true)?;
    Ok(Box::new(UdpOut {
        send: o.send,
        sock,
        row: signals[0].row_bytes(),
        lengths: signals.get(1).map(|l| l.dtype),
        iov: Vec::new(),
        msgs: Vec::new(),
        sent: 0,
        bytes: 0,
        refused: 0,
    }))
}

struct UdpOut {
    send: SendWhat,
    sock: UdpSocket,
    row: usize,
    lengths: Option<DType>,
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    sent: u64,
    bytes: u64,
    refused: u64,
}

impl Sink for UdpOut {
    fn tick(&mut self, _t: &TickInfo, inputs: &[InView<'_>]) -> Result<(), DriverError> {
        let data = &inputs[0];
        self.iov.clear();
        for r in 0..data.rows {
            let row = &data.bytes[r * self.row..(r + 1) * self.row];
            let len = match (self.lengths, inputs.get(1)) {
                (Some(dt), Some(l)) => {
                    let n = load_len(dt, l.bytes, r);
                    if n < 0 || n as usize > self.row {
                        return Err(DriverError(format!(
                            "length {n} of row {r} is outside 0..={} (the row size of {:?})",
                            self.row, data.signal.name
                        )));
                    }
                    n as usize
                }
                _ => self.row,
            };
            if self.send == SendWhat::Nonzero && row.iter().all(|&b| b == 0) {
                continue;
            }
            self.iov.push(libc::iovec {
                iov_base: row.as_ptr() as *mut libc::c_void,
                iov_len: len,
            });
        }
        self.msgs.clear();
        for v in &mut self.iov {
            // SAFETY: as in `UdpIn::recv`.
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
            self.msgs.push(m);
        }
        let mut done = 0;
        while done < self.msgs.len() {
            // SAFETY: `msgs[done..]` are valid headers whose iovecs point into the input's
            // rows, which the kernel only reads and which outlive the call.
            let r = unsafe {
                libc::sendmmsg(
                    self.sock.as_raw_fd(),
                    self.msgs.as_mut_ptr().add(done),
                    (self.msgs.len() - done) as u32,
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                for m in &self.msgs[done..done + r as usize] {
                    self.bytes += u64::from(m.msg_len);
                }
                done += r as usize;
                self.sent += r as u64;
            } else {
                // ECONNREFUSED (nobody listening, reported by the previous send), EAGAIN
                // (socket buffer full): count the datagram and go on, never wait
                self.refused += 1;
                done += 1;
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<String, DriverError> {
        Ok(format!(
            "sent {} datagrams ({} bytes), {} refused or dropped",
            self.sent, self.bytes, self.refused
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(name: &str, shape: Vec<usize>, dtype: DType, variable: bool) -> Signal {
        Signal {
            name: name.into(),
            shape,
            dtype,
            history: 1,
            variable,
            line: 1,
        }
    }

    fn ctx() -> DriverCtx {
        DriverCtx {
            model: "m".into(),
            tick: Duration::from_millis(1),
            dir: ".".into(),
            process: "udp".into(),
        }
    }

    fn port() -> u16 {
        UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    #[test]
    fn udp_in_takes_what_arrived_drops_oversized_and_keeps_the_rest_for_next_tick() {
        let p = port();
        let pk = sig("pk", vec![4, 8], DType::U8, true);
        let ln = sig("ln", vec![4, 1], DType::U16, true);
        let mut src = open_in(
            &serde_json::json!({"bind": format!("127.0.0.1:{p}")}),
            &[pk.clone(), ln.clone()],
            &ctx(),
        )
        .unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for d in [&b"abc"[..], &[7u8; 9][..], b"12345678", b"x", b"yy", b"zzz"] {
            tx.send_to(d, ("127.0.0.1", p)).unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        let (mut b, mut l) = (vec![0xAAu8; 32], vec![0u8; 8]);
        let mut out = [
            OutBuf {
                signal: &pk,
                bytes: &mut b,
                rows: 4,
            },
            OutBuf {
                signal: &ln,
                bytes: &mut l,
                rows: 4,
            },
        ];
        src.tick(&TickInfo::default(), &mut out).unwrap();
        // the 9-byte datagram was dropped; the 4 rows hold abc, 12345678, x, yy
        assert_eq!((out[0].rows, out[1].rows), (4, 4));
        assert_eq!(&b[..8], b"abc\0\0\0\0\0");
        assert_eq!(&b[8..16], b"12345678");
        assert_eq!(&b[16..24], b"x\0\0\0\0\0\0\0");
        assert_eq!(&b[24..32], b"yy\0\0\0\0\0\0");
        let lens: Vec<u16> = l
            .chunks(2)
            .map(|c| u16::from_ne_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(lens, [3, 8, 1, 2]);
        // the rest next tick
        let (mut b, mut l) = (vec![0u8; 32], vec![0u8; 8]);
        let mut out = [
            OutBuf {
                signal: &pk,
                bytes: &mut b,
                rows: 4,
            },
            OutBuf {
                signal: &ln,
                bytes: &mut l,
                rows: 4,
            },
        ];
        src.tick(&TickInfo::default(), &mut out).unwrap();
        assert_eq!(out[0].rows, 1);
        assert_eq!(&b[..8], b"zzz\0\0\0\0\0");
        let s = src.finish().unwrap();
        assert!(
            s.contains("received 5 packets") && s.contains("1 oversized"),
            "{s}"
        );
    }

    #[test]
    fn udp_out_sends_rows_cut_to_their_lengths_and_skips_zero_rows_when_asked() {
        let p = port();
        let rx = UdpSocket::bind(("127.0.0.1", p)).unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let d = sig("d", vec![3, 4], DType::U8, true);
        let ln = sig("ln", vec![3, 1], DType::U32, true);
        let mut sink = open_out(
            &serde_json::json!({"to": format!("127.0.0.1:{p}")}),
            &[d.clone(), ln.clone()],
            &ctx(),
        )
        .unwrap();
        let bytes = b"abcdefghijkl";
        let lens: Vec<u8> = [2u32, 4, 0].iter().flat_map(|x| x.to_ne_bytes()).collect();
        sink.tick(
            &TickInfo::default(),
            &[
                InView {
                    signal: &d,
                    bytes,
                    rows: 3,
                    first: 0,
                },
                InView {
                    signal: &ln,
                    bytes: &lens,
                    rows: 3,
                    first: 0,
                },
            ],
        )
        .unwrap();
        let mut buf = [0u8; 16];
        let mut got = Vec::new();
        for _ in 0..3 {
            let n = rx.recv(&mut buf).unwrap();
            got.push(buf[..n].to_vec());
        }
        assert_eq!(got, [b"ab".to_vec(), b"efgh".to_vec(), Vec::new()]);
        // nonzero: a one-byte trigger only when set
        let t = sig("t", vec![1], DType::U8, false);
        let mut trig = open_out(
            &serde_json::json!({"to": format!("127.0.0.1:{p}"), "send": "nonzero"}),
            std::slice::from_ref(&t),
            &ctx(),
        )
        .unwrap();
        for v in [0u8, 1, 0, 0, 1] {
            trig.tick(
                &TickInfo::default(),
                &[InView {
                    signal: &t,
                    bytes: &[v],
                    rows: 1,
                    first: 0,
                }],
            )
            .unwrap();
        }
        let mut n = 0;
        rx.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        while rx.recv(&mut buf).is_ok() {
            assert_eq!(buf[0], 1);
            n += 1;
        }
        assert_eq!(n, 2);
        assert!(trig.finish().unwrap().contains("sent 2 datagrams"));
        // a length longer than the row is an error naming both
        let bad: Vec<u8> = [9u32, 0, 0].iter().flat_map(|x| x.to_ne_bytes()).collect();
        let e = sink
            .tick(
                &TickInfo::default(),
                &[
                    InView {
                        signal: &d,
                        bytes,
                        rows: 3,
                        first: 0,
                    },
                    InView {
                        signal: &ln,
                        bytes: &bad,
                        rows: 3,
                        first: 0,
                    },
                ],
            )
            .err()
            .unwrap();
        assert!(e.0.contains("length 9") && e.0.contains("0..=4"), "{e}");
    }

    #[test]
    fn every_bad_signal_or_address_is_refused_with_what_is_allowed() {
        let ok = sig("p", vec![8, 1472], DType::U8, true);
        let o = serde_json::json!({"bind": "127.0.0.1:5000"});
        assert!(check_in(&o, &[&ok]).is_ok());
        let e = check_in(&o, &[&sig("p", vec![8, 1472], DType::F32, true)]).unwrap_err();
        assert!(e.contains("uint8") && e.contains("float32"), "{e}");
        let e = check_in(&o, &[&sig("p", vec![8, 1472], DType::U8, false)]).unwrap_err();
        assert!(e.contains("variable"), "{e}");
        let e = check_in(&o, &[&ok, &sig("l", vec![4, 1], DType::U16, true)]).unwrap_err();
        assert!(e.contains("[8, 1]"), "{e}");
        let e = check_in(&o, &[&ok, &sig("l", vec![8, 1], DType::F64, true)]).unwrap_err();
        assert!(e.contains("uint16"), "{e}");
        let e = check_in(&serde_json::json!({"bind": "nowhere"}), &[&ok]).unwrap_err();
        assert!(e.contains("host:port"), "{e}");
        let e = check_in(
            &serde_json::json!({"bind": "127.0.0.1:1", "port": 3}),
            &[&ok],
        )
        .unwrap_err();
        assert!(
            e.contains("unknown field `port`") && e.contains("bind"),
            "{e}"
        );
        let e = check_out(
            &serde_json::json!({"to": "127.0.0.1:9", "send": "some"}),
            &[&ok],
        )
        .unwrap_err();
        assert!(e.contains("all") && e.contains("nonzero"), "{e}");
        let big = sig("b", vec![1, 70000], DType::U8, false);
        assert!(
            check_out(&serde_json::json!({"to": "127.0.0.1:9"}), &[&big])
                .unwrap_err()
                .contains("65507")
        );
        // an address in use is named when the driver opens
        let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
        let a = taken.local_addr().unwrap();
        let e = open_in(&serde_json::json!({"bind": a.to_string()}), &[ok], &ctx())
            .err()
            .unwrap();
        assert!(e.0.contains(&a.to_string()), "{e}");
    }
}
