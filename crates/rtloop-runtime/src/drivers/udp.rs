//! `udp_in` (source) and `udp_out` (sink): LiCoRICE's network drivers. A tick drains the
//! datagrams that arrived (up to the signal's rows) with `recvmmsg`, straight into the
//! signal's rows, and sends a tick's rows with `sendmmsg`. Neither ever blocks the tick:
//! every call is `MSG_DONTWAIT`, what does not fit waits for the next tick (`udp_in`) or
//! is counted as dropped (`udp_out`).
//!
//! `udp_out` hands runs of equal-sized datagrams to the kernel as one UDP GSO message
//! (`UDP_SEGMENT`): one trip through the stack per run instead of per datagram, which
//! measured about 1.2-1.4x the zero-drop rate of plain `sendmmsg` on a 2-vCPU VM's loopback
//! (the receiver still gets separate datagrams). A kernel without it falls back to one
//! message per datagram.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use rtloop_stream::DType;

use super::{parse_options, DriverCtx, DriverError, InView, OutBuf, Sink, Source, TickInfo};
use crate::model::Signal;

/// Most messages the kernel takes in one `recvmmsg` / `sendmmsg` (UIO_MAXIOV); more rows
/// are handled by further calls in the same tick.
const MAX_VLEN: usize = 1024;

/// Largest UDP payload (IPv4).
const MAX_DATAGRAM: usize = 65_507;

/// Most datagrams in one GSO message (the kernel's UDP_MAX_SEGMENTS is 64 or more).
const GSO_MAX_SEGMENTS: usize = 64;

/// `UDP_SEGMENT` (linux/udp.h): the cmsg / socket option that sets a GSO message's
/// datagram size.
const UDP_SEGMENT: libc::c_int = 103;

/// Warnings about dropped datagrams are rate-limited to one per this.
const WARN_EVERY: Duration = Duration::from_secs(1);

/// `options:` of `udp_in`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct InOptions {
    /// Address to receive on, `host:port`.
    bind: String,
    /// Socket receive buffer in bytes (default 8 MiB; past `net.core.rmem_max` when
    /// permitted: `rtloop_sys::set_recv_buffer`).
    #[serde(default = "default_rcvbuf")]
    recv_buffer: usize,
    /// `tick` (default): take what arrived when the tick starts. `arrival`: if nothing is
    /// there yet, wait for the first datagram until `cutoff_us` before the tick ends, so
    /// data is acted on within the tick it arrives in.
    #[serde(default)]
    act: Act,
    /// With `act: arrival`, stop waiting this long before the tick ends (default 200 µs:
    /// the rest of the tick is for the processes downstream).
    #[serde(default = "default_cutoff_us")]
    cutoff_us: u64,
}

/// When `udp_in` takes its datagrams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Act {
    /// At the tick's start: what arrived since the last tick.
    #[default]
    Tick,
    /// As soon as a datagram arrives (until the cutoff before the tick's end).
    Arrival,
}

fn default_cutoff_us() -> u64 {
    200
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
    /// Send runs of equal-sized datagrams as one UDP GSO message (default true).
    #[serde(default = "default_gso")]
    gso: bool,
}

fn default_gso() -> bool {
    true
}

fn default_send() -> SendWhat {
    SendWhat::All
}

/// `s` as a socket address (`std::net::ToSocketAddrs`: `host:port`, IPv6 as `[::1]:port`).
fn addr(s: &str, key: &str) -> Result<SocketAddr, String> {
    s.to_socket_addrs()
        .map_err(|e| {
            format!(
                "{key}: {s:?} is not an address ({e}); give host:port, e.g. 127.0.0.1:5000 \
                 or [::1]:5000"
            )
        })?
        .next()
        .ok_or_else(|| format!("{key}: {s:?} resolves to no address; give host:port"))
}

/// The optional second signal of both drivers: one length per row of `data`.
fn check_lengths(data: &Signal, lengths: &Signal) -> Result<(), String> {
    if !matches!(
        lengths.dtype,
        DType::U16 | DType::U32 | DType::I32 | DType::I64
    ) {
        return Err(format!(
            "lengths signal {:?} is {}; allowed dtypes for lengths: uint16, uint32, int32, int64",
            lengths.name, lengths.dtype
        ));
    }
    let rows = data.rows_per_tick();
    let shape_ok = lengths.shape == [rows, 1] || (rows == 1 && lengths.shape == [1]);
    if !shape_ok {
        return Err(format!(
            "lengths signal {:?} must have shape {:?} (one length per row of {:?}), not {:?}",
            lengths.name,
            [rows, 1],
            data.name,
            lengths.shape
        ));
    }
    if lengths.variable != data.variable {
        return Err(format!(
            "lengths signal {:?} must be variable: {} like {:?} (a length per row it carries)",
            lengths.name, data.variable, data.name
        ));
    }
    Ok(())
}

/// Validate `udp_in` options and signals: the packets, variable `[max_packets,
/// packet_bytes]` uint8, and optionally their lengths, variable `[max_packets, 1]`.
pub fn check_in(options: &serde_json::Value, signals: &[&Signal]) -> Result<(), String> {
    let o: InOptions = parse_options(options)?;
    addr(&o.bind, "bind")?;
    let Some(p) = signals.first() else {
        return Err(
            "writes one packets signal (variable, [max_packets, packet_bytes], uint8) and \
             optionally their lengths"
                .into(),
        );
    };
    if signals.len() > 2 {
        return Err(format!(
            "writes 1 or 2 signals (packets, optional lengths), got {}",
            signals.len()
        ));
    }
    let mut wrong = Vec::new();
    if !p.variable {
        wrong.push("it is not variable".to_string());
    }
    if p.shape.len() != 2 || p.shape.contains(&0) {
        wrong.push(format!("its shape is {:?}", p.shape));
    }
    if p.dtype != DType::U8 {
        wrong.push(format!("its dtype is {}", p.dtype));
    }
    if !wrong.is_empty() {
        return Err(format!(
            "packets signal {:?} must be variable: true, shape [max_packets, packet_bytes] \
             (both at least 1), dtype uint8, but {}",
            p.name,
            wrong.join(", ")
        ));
    }
    if let Some(l) = signals.get(1) {
        check_lengths(p, l)?;
    }
    Ok(())
}

/// Validate `udp_out` options and signals: any data signal (a row is a datagram), and
/// optionally one length per row.
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
    if signals[0].row_bytes() > MAX_DATAGRAM {
        return Err(format!(
            "signal {:?} has {}-byte rows; a UDP datagram holds at most {MAX_DATAGRAM}",
            signals[0].name,
            signals[0].row_bytes()
        ));
    }
    if let Some(l) = signals.get(1) {
        check_lengths(signals[0], l)?;
    }
    Ok(())
}

fn store_len(dtype: DType, out: &mut [u8], row: usize, len: usize) {
    // a length is at most 65535 (a datagram), so every allowed dtype holds it
    match dtype {
        DType::U16 => out[row * 2..row * 2 + 2].copy_from_slice(&(len as u16).to_ne_bytes()),
        DType::U32 => out[row * 4..row * 4 + 4].copy_from_slice(&(len as u32).to_ne_bytes()),
        DType::I32 => out[row * 4..row * 4 + 4].copy_from_slice(&(len as i32).to_ne_bytes()),
        _ => out[row * 8..row * 8 + 8].copy_from_slice(&(len as i64).to_ne_bytes()),
    }
}

/// Length of `row` in a lengths signal of `dtype`; `None` if `b` is too short.
fn load_len(dtype: DType, b: &[u8], row: usize) -> Option<i64> {
    let w = dtype.itemsize();
    let x = b.get(row * w..row * w + w)?;
    Some(match dtype {
        DType::U16 => i64::from(u16::from_ne_bytes(x.try_into().ok()?)),
        DType::U32 => i64::from(u32::from_ne_bytes(x.try_into().ok()?)),
        DType::I32 => i64::from(i32::from_ne_bytes(x.try_into().ok()?)),
        _ => i64::from_ne_bytes(x.try_into().ok()?),
    })
}

/// An all-zero message header with one iovec.
fn header(iov: &mut libc::iovec) -> libc::mmsghdr {
    // SAFETY: mmsghdr is plain old data (integers and raw pointers); all-zero is a valid
    // value (no address, no control data, no iovecs).
    let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
    m.msg_hdr.msg_iov = iov;
    m.msg_hdr.msg_iovlen = 1;
    m
}

/// Open `udp_in`: binds the socket (an address in use is named).
pub fn open_in(
    options: &serde_json::Value,
    signals: &[Signal],
    ctx: &DriverCtx,
) -> Result<Box<dyn Source>, DriverError> {
    let o: InOptions = parse_options(options).map_err(DriverError::Config)?;
    let a = addr(&o.bind, "bind").map_err(DriverError::Config)?;
    let p = signals
        .first()
        .ok_or_else(|| DriverError::Config("udp_in writes a packets signal".into()))?;
    let sock = UdpSocket::bind(a).map_err(|e| DriverError::io(format!("cannot bind {a}"), e))?;
    sock.set_nonblocking(true)
        .map_err(|e| DriverError::io("cannot make the UDP socket non-blocking", e))?;
    rtloop_sys::set_recv_buffer(&sock, o.recv_buffer);
    let max = p.rows_per_tick();
    let cutoff = Duration::from_micros(o.cutoff_us);
    if o.act == Act::Arrival && cutoff >= ctx.tick {
        return Err(DriverError::Config(format!(
            "udp_in: cutoff_us {} is not shorter than the tick ({} µs); act: arrival waits \
             until cutoff_us before the tick ends, so it must be between 0 and the tick",
            o.cutoff_us,
            ctx.tick.as_micros()
        )));
    }
    Ok(Box::new(UdpIn {
        act: o.act,
        wait_until_ns: (ctx.tick - cutoff).as_nanos() as u64,
        name: ctx.process.clone(),
        signal: p.name.clone(),
        row: p.row_bytes(),
        max,
        lengths: signals.get(1).map(|l| l.dtype),
        sock,
        iov: Vec::with_capacity(max.min(MAX_VLEN)),
        msgs: Vec::with_capacity(max.min(MAX_VLEN)),
        packets: 0,
        bytes: 0,
        oversized: 0,
        last_warn: None,
    }))
}

struct UdpIn {
    /// When the datagrams are taken.
    act: Act,
    /// With `act: arrival`, wait until this long after the tick's deadline (its start).
    wait_until_ns: u64,
    /// The process's name.
    name: String,
    /// The packets signal's name.
    signal: String,
    /// Bytes per row (largest datagram kept).
    row: usize,
    /// Rows per tick.
    max: usize,
    /// Dtype of the lengths signal, if there is one.
    lengths: Option<DType>,
    sock: UdpSocket,
    /// Reused for every call: no allocation in the tick.
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    packets: u64,
    bytes: u64,
    oversized: u64,
    last_warn: Option<Instant>,
}

impl UdpIn {
    /// One `recvmmsg` into rows `first..max` of `rows` (lengths into `lens`); returns the
    /// rows accepted and whether the socket may hold more. A datagram larger than a row
    /// is dropped and counted, the ones after it move up into its row.
    fn recv(
        &mut self,
        rows: &mut [u8],
        first: usize,
        max: usize,
        mut lens: Option<&mut [u8]>,
    ) -> Result<(usize, bool), DriverError> {
        let row = self.row;
        let want = (max - first).min(MAX_VLEN);
        if want == 0 {
            return Ok((0, false));
        }
        self.iov.clear();
        self.msgs.clear();
        for r in rows[first * row..(first + want) * row].chunks_exact_mut(row) {
            self.iov.push(libc::iovec {
                iov_base: r.as_mut_ptr().cast(),
                // a larger datagram is cut to this and flagged MSG_TRUNC
                iov_len: row,
            });
        }
        for v in &mut self.iov {
            self.msgs.push(header(v));
        }
        // SAFETY: `msgs` holds `want` valid headers, each with one iovec (in `self.iov`,
        // not touched during the call) pointing at a distinct `row`-byte row inside `rows`,
        // which is borrowed mutably for the whole call. No address or control buffers.
        let n = unsafe {
            libc::recvmmsg(
                self.sock.as_raw_fd(),
                self.msgs.as_mut_ptr(),
                want as libc::c_uint,
                // MSG_TRUNC: msg_len is the datagram's real length, even if cut
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok((0, false)),
                _ => Err(DriverError::io(
                    format!("udp_in {:?}: cannot receive", self.name),
                    e,
                )),
            };
        }
        let n = n as usize;
        let mut kept = 0;
        for i in 0..n {
            let len = self.msgs[i].msg_len as usize;
            let cut = self.msgs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            if cut || len > row {
                self.oversized += 1;
                self.warn_oversized(len);
                continue;
            }
            // keep the datagrams that fit in order, moving them over dropped ones
            let (src, dst) = (first + i, first + kept);
            if src != dst {
                rows.copy_within(src * row..src * row + len, dst * row);
            }
            rows[dst * row + len..(dst + 1) * row].fill(0);
            if let (Some(dt), Some(l)) = (self.lengths, lens.as_deref_mut()) {
                store_len(dt, l, dst, len);
            }
            self.bytes += len as u64;
            kept += 1;
        }
        // rows a dropped datagram was cut into, or moved away from, are zeroed again
        rows[(first + kept) * row..(first + n) * row].fill(0);
        Ok((kept, n == want))
    }

    fn warn_oversized(&mut self, len: usize) {
        if self.last_warn.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
            self.last_warn = Some(Instant::now());
            tracing::warn!(
                "udp_in '{}': a {len}-byte packet is larger than signal '{}' rows ({} bytes); \
                 dropped ({} so far)",
                self.name,
                self.signal,
                self.row,
                self.oversized
            );
        }
    }
}

impl UdpIn {
    /// `act: arrival`: sleep until the socket is readable or `until_ns` (CLOCK_MONOTONIC)
    /// has come. True if a datagram is there.
    fn wait_readable(&self, until_ns: u64) -> Result<bool, DriverError> {
        loop {
            let now = rtloop_sys::monotonic_ns();
            if now >= until_ns {
                return Ok(false);
            }
            let left = until_ns - now;
            let ts = libc::timespec {
                tv_sec: (left / 1_000_000_000) as libc::time_t,
                tv_nsec: (left % 1_000_000_000) as libc::c_long,
            };
            let mut fd = libc::pollfd {
                fd: self.sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd for an open socket, a valid timespec, no signal mask.
            let r = unsafe { libc::ppoll(&mut fd, 1, &ts, std::ptr::null()) };
            if r > 0 {
                return Ok(true);
            }
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(DriverError::io(
                        format!("udp_in '{}': waiting for a datagram", self.name),
                        e,
                    ));
                }
            }
        }
    }
}

impl Source for UdpIn {
    fn tick(&mut self, t: &TickInfo, out: &mut [OutBuf<'_>]) -> Result<(), DriverError> {
        let Some((pk, rest)) = out.split_first_mut() else {
            return Ok(());
        };
        let max = self.max.min(pk.bytes.len() / self.row.max(1));
        let mut lens = match (self.lengths, rest.first_mut()) {
            (Some(_), Some(l)) => Some(l),
            _ => None,
        };
        let mut filled = 0;
        let mut waited = false;
        loop {
            let (got, more) =
                self.recv(pk.bytes, filled, max, lens.as_mut().map(|l| &mut *l.bytes))?;
            filled += got;
            if filled == 0 && !waited && self.act == Act::Arrival {
                // nothing yet: act on the first datagram that arrives in this tick
                waited = true;
                if self.wait_readable(t.deadline_ns + self.wait_until_ns)? {
                    continue;
                }
                break;
            }
            if !more || filled >= max {
                break;
            }
        }
        self.packets += filled as u64;
        pk.rows = filled;
        if let Some(l) = lens {
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

/// Open `udp_out`: binds (to `bind` or any port) and connects the socket to `to`, so a
/// missing listener is reported (ECONNREFUSED) and counted.
pub fn open_out(
    options: &serde_json::Value,
    signals: &[Signal],
    ctx: &DriverCtx,
) -> Result<Box<dyn Sink>, DriverError> {
    let o: OutOptions = parse_options(options).map_err(DriverError::Config)?;
    let to = addr(&o.to, "to").map_err(DriverError::Config)?;
    let d = signals
        .first()
        .ok_or_else(|| DriverError::Config("udp_out reads a data signal".into()))?;
    let local = match &o.bind {
        Some(b) => addr(b, "bind").map_err(DriverError::Config)?,
        None if to.is_ipv4() => SocketAddr::from(([0, 0, 0, 0], 0)),
        None => SocketAddr::from(([0u16; 8], 0)),
    };
    let sock =
        UdpSocket::bind(local).map_err(|e| DriverError::io(format!("cannot bind {local}"), e))?;
    sock.connect(to)
        .map_err(|e| DriverError::io(format!("cannot send to {to}"), e))?;
    sock.set_nonblocking(true)
        .map_err(|e| DriverError::io("cannot make the UDP socket non-blocking", e))?;
    let rows = d.rows_per_tick();
    Ok(Box::new(UdpOut {
        name: ctx.process.clone(),
        to,
        send: o.send,
        sock,
        row: d.row_bytes(),
        lengths: signals.get(1).map(|l| l.dtype),
        iov: Vec::with_capacity(rows),
        msgs: Vec::with_capacity(rows),
        runs: Vec::with_capacity(rows),
        ctrl: Vec::with_capacity(rows),
        gso: o.gso,
        gso_messages: 0,
        sent: 0,
        bytes: 0,
        refused: 0,
        last_error: None,
        last_warn: None,
    }))
}

struct UdpOut {
    /// The process's name.
    name: String,
    to: SocketAddr,
    send: SendWhat,
    sock: UdpSocket,
    /// Bytes per row of the data signal.
    row: usize,
    /// Dtype of the lengths signal, if there is one.
    lengths: Option<DType>,
    /// Reused every tick: no allocation once the first tick sized them.
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    /// Datagrams in each message of `msgs` (more than 1: a GSO message).
    runs: Vec<usize>,
    /// A control buffer per message (the UDP_SEGMENT cmsg), aligned for cmsghdr.
    ctrl: Vec<[u64; 4]>,
    /// Use UDP GSO (cleared if the kernel refuses it).
    gso: bool,
    /// GSO messages sent (each carrying 2 or more datagrams).
    gso_messages: u64,
    sent: u64,
    bytes: u64,
    /// Datagrams not sent: ECONNREFUSED, socket buffer full, other send errors.
    refused: u64,
    /// The last send error other than ECONNREFUSED / EAGAIN.
    last_error: Option<io::Error>,
    last_warn: Option<Instant>,
}

impl UdpOut {
    /// Build this tick's iovecs: one per row to send, cut to its length.
    fn gather(&mut self, inputs: &[InView<'_>]) -> Result<(), DriverError> {
        self.iov.clear();
        let Some(data) = inputs.first() else {
            return Ok(());
        };
        let lens = match (self.lengths, inputs.get(1)) {
            (Some(dt), Some(l)) => {
                if l.rows != data.rows {
                    return Err(DriverError::Data(format!(
                        "udp_out '{}': lengths signal '{}' has {} rows this tick but data \
                         signal '{}' has {}; they must match",
                        self.name, l.signal.name, l.rows, data.signal.name, data.rows
                    )));
                }
                Some((dt, l))
            }
            _ => None,
        };
        let row = self.row;
        for r in 0..data.rows {
            let Some(bytes) = data.bytes.get(r * row..(r + 1) * row) else {
                return Err(DriverError::Data(format!(
                    "udp_out '{}': signal '{}' has {} rows but only {} bytes",
                    self.name,
                    data.signal.name,
                    data.rows,
                    data.bytes.len()
                )));
            };
            let len = match lens {
                Some((dt, l)) => {
                    let n = load_len(dt, l.bytes, r).unwrap_or(-1);
                    if n < 0 || n as usize > row {
                        return Err(DriverError::Data(format!(
                            "udp_out '{}': length {n} in row {r} of signal '{}' is outside \
                             0..={row}, the {row}-byte rows of signal '{}'",
                            self.name, l.signal.name, data.signal.name
                        )));
                    }
                    n as usize
                }
                None => row,
            };
            if self.send == SendWhat::Nonzero && bytes.iter().all(|&b| b == 0) {
                continue;
            }
            self.iov.push(libc::iovec {
                // the kernel only reads from it (sendmmsg)
                iov_base: bytes.as_ptr().cast_mut().cast(),
                iov_len: len,
            });
        }
        Ok(())
    }

    fn warn_error(&mut self, e: io::Error) {
        if self.last_warn.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
            self.last_warn = Some(Instant::now());
            tracing::warn!(
                "udp_out '{}': cannot send to {}: {e}; datagrams dropped ({} so far)",
                self.name,
                self.to,
                self.refused
            );
        }
        self.last_error = Some(e);
    }
}

impl UdpOut {
    /// Group this tick's iovecs into messages: with GSO, runs of up to
    /// [`GSO_MAX_SEGMENTS`] equal-sized datagrams (at most 64 KiB in all) become one
    /// message with a UDP_SEGMENT cmsg; otherwise one message per datagram.
    fn build_messages(&mut self) {
        self.msgs.clear();
        self.runs.clear();
        let n = self.iov.len();
        let mut i = 0;
        while i < n {
            let len = self.iov[i].iov_len;
            let mut j = i + 1;
            if self.gso && len > 0 {
                let most = GSO_MAX_SEGMENTS.min(MAX_DATAGRAM / len).max(1);
                while j < n && j - i < most && self.iov[j].iov_len == len {
                    j += 1;
                }
            }
            // SAFETY: mmsghdr is plain old data; all-zero is valid (see `header`).
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = self.iov[i..].as_mut_ptr();
            m.msg_hdr.msg_iovlen = j - i;
            self.msgs.push(m);
            self.runs.push(j - i);
            i = j;
        }
        // control buffers last: `ctrl` must not move once pointed at
        if self.ctrl.len() < self.msgs.len() {
            self.ctrl.resize(self.msgs.len(), [0; 4]);
        }
        let mut at = 0;
        for (k, m) in self.msgs.iter_mut().enumerate() {
            let first = at;
            at += self.runs[k];
            if self.runs[k] < 2 {
                continue;
            }
            let seg = self.iov[first].iov_len as u16;
            let buf = &mut self.ctrl[k];
            m.msg_hdr.msg_control = buf.as_mut_ptr().cast();
            // SAFETY: CMSG_SPACE/CMSG_LEN are pure arithmetic; CMSG_FIRSTHDR reads the
            // msghdr's control fields, which point at `buf` (32 bytes, 8-aligned, more
            // than CMSG_SPACE(2) = 24), and the writes stay inside it.
            unsafe {
                m.msg_hdr.msg_controllen = libc::CMSG_SPACE(2) as usize;
                let c = libc::CMSG_FIRSTHDR(&m.msg_hdr);
                (*c).cmsg_level = libc::SOL_UDP;
                (*c).cmsg_type = UDP_SEGMENT;
                (*c).cmsg_len = libc::CMSG_LEN(2) as usize;
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg);
            }
        }
    }
}

impl Sink for UdpOut {
    fn tick(&mut self, _t: &TickInfo, inputs: &[InView<'_>]) -> Result<(), DriverError> {
        self.gather(inputs)?;
        self.build_messages();
        let mut total = self.msgs.len();
        let mut done = 0;
        while done < total {
            let vlen = (total - done).min(MAX_VLEN);
            // SAFETY: `msgs[done..done + vlen]` are valid headers whose iovecs (in
            // `self.iov`) point at bytes of rows of the input, which the kernel only reads
            // and which are borrowed for this tick, and whose control data (if any) is in
            // `self.ctrl`; neither vector changes during the call.
            let r = unsafe {
                libc::sendmmsg(
                    self.sock.as_raw_fd(),
                    self.msgs.as_mut_ptr().add(done),
                    vlen as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                let r = r as usize;
                for (m, &n) in self.msgs[done..done + r]
                    .iter()
                    .zip(&self.runs[done..done + r])
                {
                    self.bytes += u64::from(m.msg_len);
                    self.sent += n as u64;
                    self.gso_messages += u64::from(n > 1);
                }
                done += r;
                continue;
            }
            let e = if r == 0 {
                io::Error::from(io::ErrorKind::WriteZero)
            } else {
                io::Error::last_os_error()
            };
            let lost = self.runs[done];
            match e.raw_os_error() {
                Some(libc::EINTR) => {}
                // a kernel or route without UDP GSO: from now on one message per datagram,
                // starting with the rest of this tick
                Some(libc::EIO | libc::EINVAL | libc::ENOPROTOOPT | libc::EOPNOTSUPP)
                    if self.gso && lost > 1 =>
                {
                    self.gso = false;
                    let first: usize = self.runs[..done].iter().sum();
                    self.iov.drain(..first);
                    self.build_messages();
                    (done, total) = (0, self.msgs.len());
                }
                // nobody listening (an ICMP error of an earlier datagram): this message
                // was not sent, the error is cleared, the next ones go out
                Some(libc::ECONNREFUSED) => {
                    self.refused += lost as u64;
                    done += 1;
                }
                // socket buffer full: the rest of this tick is dropped, never waited for
                Some(libc::EAGAIN | libc::ENOBUFS) => {
                    self.refused += self.runs[done..].iter().sum::<usize>() as u64;
                    done = total;
                }
                // anything else (no route, ...): counted and reported, the model goes on
                _ => {
                    self.refused += lost as u64;
                    done += 1;
                    self.warn_error(e);
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<String, DriverError> {
        let last = self
            .last_error
            .as_ref()
            .map(|e| format!(" (last error: {e})"))
            .unwrap_or_default();
        let gso = if self.gso_messages > 0 {
            format!(", {} GSO messages", self.gso_messages)
        } else {
            String::new()
        };
        Ok(format!(
            "sent {} datagrams ({} bytes{gso}), {} refused/dropped{last}",
            self.sent, self.bytes, self.refused
        ))
    }
}
