//! A UDP load generator and checker for the echo benchmark: offers N datagrams of 1472
//! bytes every millisecond (`sendmmsg`, one call per millisecond) and receives with
//! `recvmmsg`, checking every datagram's sequence-number pattern. Used against plain
//! loopback (the reference) and through the UDP echo model. It lives with the benchmarks, so
//! a program that runs models never links it.

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Datagram size (a full Ethernet frame's UDP payload).
pub const SIZE: usize = 1472;

/// What a load run counted.
#[derive(Debug, Clone, Copy, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EchoResult {
    /// Seconds of offered load.
    pub seconds: f64,
    /// Datagrams offered per millisecond.
    pub offered_per_tick: f64,
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams received.
    pub received: u64,
    /// sent − received.
    pub dropped: u64,
    /// Datagrams received per millisecond.
    pub received_per_tick: f64,
    /// Datagrams whose size or bytes were wrong.
    pub corrupted: u64,
}

fn fill(pkt: &mut [u8], seq: u64) {
    pkt[..8].copy_from_slice(&seq.to_le_bytes());
    pkt[8..].fill(seq as u8);
}

fn intact(pkt: &[u8]) -> bool {
    pkt.len() == SIZE && {
        let seq = u64::from_le_bytes(pkt[..8].try_into().unwrap_or_default());
        pkt[8..].iter().all(|&b| b == seq as u8)
    }
}

/// Offer each of `rates` (datagrams per millisecond) for `seconds_each` to
/// 127.0.0.1:`to_port` while `during` runs (it starts first and gets 1.5 s to come up,
/// unless `to_port == from_port`), and count what arrives on 127.0.0.1:`from_port`, rate by
/// rate (300 ms after each rate for stragglers). The sender never builds a backlog: a
/// millisecond it could not serve in time is skipped, so `offered_per_tick` is what it
/// managed.
pub fn udp_sweep<E: Into<Box<dyn std::error::Error + Send + Sync>> + Send>(
    to_port: u16,
    from_port: u16,
    rates: &[u32],
    seconds_each: f64,
    during: impl FnOnce() -> Result<(), E> + Send,
) -> Result<Vec<EchoResult>, UdpLoadError> {
    let rx = UdpSocket::bind(("127.0.0.1", from_port))
        .map_err(io(format!("bind 127.0.0.1:{from_port}")))?;
    rtloop_sys::set_recv_buffer(&rx, 64 << 20);
    // recvmmsg's own timeout is only checked after a datagram; SO_RCVTIMEO bounds the wait
    rx.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(io("set the read timeout"))?;
    let received = AtomicU64::new(0);
    let corrupted = AtomicU64::new(0);
    let stop_rx = AtomicBool::new(false);
    let plain = to_port == from_port;
    let mut out = Vec::new();
    let mut during_result: Result<(), UdpLoadError> = Ok(());
    std::thread::scope(|s| {
        s.spawn(|| receive(&rx, &received, &corrupted, &stop_rx));
        let runner = s.spawn(during);
        if !plain {
            std::thread::sleep(Duration::from_millis(1500));
        }
        let tx = UdpSocket::bind("127.0.0.1:0").expect("bind an ephemeral port");
        tx.connect(("127.0.0.1", to_port)).expect("connect");
        let mut seq = 0u64;
        for &per_tick in rates {
            let n = per_tick as usize;
            let mut bufs = vec![0u8; n * SIZE];
            let (r0, c0) = (
                received.load(Ordering::Relaxed),
                corrupted.load(Ordering::Relaxed),
            );
            let mut sent = 0u64;
            let t0 = Instant::now();
            let mut k = 0u64;
            while t0.elapsed().as_secs_f64() < seconds_each {
                let due = t0 + Duration::from_micros(k * 1000);
                while Instant::now() < due {
                    std::thread::sleep(Duration::from_micros(50));
                }
                for (i, pkt) in bufs.chunks_exact_mut(SIZE).enumerate() {
                    fill(pkt, seq + i as u64);
                }
                sent += send_all(&tx, &bufs, n);
                seq += n as u64;
                // the next millisecond slot, skipping those already past
                k = (k + 1).max(t0.elapsed().as_micros() as u64 / 1000);
            }
            let elapsed = t0.elapsed().as_secs_f64();
            std::thread::sleep(Duration::from_millis(300));
            let got = received.load(Ordering::Relaxed) - r0;
            out.push(EchoResult {
                seconds: elapsed,
                offered_per_tick: sent as f64 / (elapsed * 1000.0),
                sent,
                received: got,
                dropped: sent.saturating_sub(got),
                received_per_tick: got as f64 / (elapsed * 1000.0),
                corrupted: corrupted.load(Ordering::Relaxed) - c0,
            });
        }
        stop_rx.store(true, Ordering::Relaxed);
        during_result = match runner.join() {
            Ok(r) => r.map_err(|e| UdpLoadError::During(e.into())),
            Err(_) => Err(UdpLoadError::Panicked("model thread")),
        };
    });
    during_result?;
    Ok(out)
}

/// Why a load run could not be made or checked.
#[derive(Debug, thiserror::Error)]
pub enum UdpLoadError {
    /// A socket call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// One of the run's threads panicked.
    #[error("the {0} panicked")]
    Panicked(&'static str),
    /// The runtime's UDP drivers (the same-work reference).
    #[error(transparent)]
    Driver(#[from] rtloop_runtime::drivers::DriverError),
    /// What ran beside the load (the model, or the bare echo) failed.
    #[error("{0}")]
    During(Box<dyn std::error::Error + Send + Sync>),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> UdpLoadError {
    let what = what.into();
    move |source| UdpLoadError::Io { what, source }
}

fn send_all(tx: &UdpSocket, bufs: &[u8], n: usize) -> u64 {
    let mut iov: Vec<libc::iovec> = bufs
        .chunks_exact(SIZE)
        .map(|c| libc::iovec {
            iov_base: c.as_ptr() as *mut libc::c_void,
            iov_len: SIZE,
        })
        .collect();
    // SAFETY: mmsghdr is plain old data; all-zero is a valid value (no name, no control).
    let mut msgs: Vec<libc::mmsghdr> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    let mut done = 0usize;
    let mut tries = 0;
    while done < n && tries < 1000 {
        // SAFETY: `msgs[done..]` are valid mmsghdrs whose iovecs point into `bufs`, which
        // outlives the call; the socket fd is open.
        let r = unsafe {
            libc::sendmmsg(
                tx.as_raw_fd(),
                msgs.as_mut_ptr().add(done),
                (n - done) as u32,
                0,
            )
        };
        if r > 0 {
            done += r as usize;
        } else {
            tries += 1;
            std::thread::yield_now();
        }
    }
    done as u64
}

fn receive(rx: &UdpSocket, received: &AtomicU64, corrupted: &AtomicU64, stop: &AtomicBool) {
    const BATCH: usize = 256;
    let mut bufs = vec![0u8; BATCH * 2048];
    let mut iov: Vec<libc::iovec> = bufs
        .chunks_exact_mut(2048)
        .map(|c| libc::iovec {
            iov_base: c.as_mut_ptr().cast(),
            iov_len: 2048,
        })
        .collect();
    // SAFETY: as in `send_all`.
    let mut msgs: Vec<libc::mmsghdr> = (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    let mut timeout = libc::timespec {
        tv_sec: 0,
        tv_nsec: 100_000_000,
    };
    loop {
        // SAFETY: `msgs` are valid mmsghdrs whose iovecs point into `bufs`, which outlives
        // the call; MSG_WAITFORONE returns as soon as one datagram arrived.
        let r = unsafe {
            libc::recvmmsg(
                rx.as_raw_fd(),
                msgs.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_WAITFORONE,
                &mut timeout,
            )
        };
        if r > 0 {
            for m in &msgs[..r as usize] {
                let base = m.msg_hdr.msg_iov;
                // SAFETY: the kernel filled `msg_len` bytes of this message's one iovec,
                // which points into `bufs`.
                let data = unsafe {
                    std::slice::from_raw_parts((*base).iov_base as *const u8, m.msg_len as usize)
                };
                if !intact(data) {
                    corrupted.fetch_add(1, Ordering::Relaxed);
                }
            }
            received.fetch_add(r as u64, Ordering::Relaxed);
        } else if stop.load(Ordering::Relaxed) {
            return;
        }
    }
}

/// Closed-loop latency as a lab measures it from outside (LiCoRICE's headline figure): single
/// stamped datagrams sent to 127.0.0.1:`to_port` at random moments (so their phase against
/// any tick is uniform), each answered on 127.0.0.1:`reply_port`; the send-to-reply time of
/// every answered datagram. `during` runs the thing that answers (a model, or
/// [`bare_echo`]); it starts first and gets `warmup` to come up.
pub fn loop_latency<E: Into<Box<dyn std::error::Error + Send + Sync>> + Send>(
    to_port: u16,
    reply_port: u16,
    rate_hz: f64,
    seconds: f64,
    warmup: Duration,
    during: impl FnOnce() -> Result<(), E> + Send,
) -> Result<(rtloop_metrics::LatencyHistogram, u64), UdpLoadError> {
    let err = |what: &str, e: std::io::Error| io(what)(e);
    let rx =
        UdpSocket::bind(("127.0.0.1", reply_port)).map_err(|e| err("bind the reply port", e))?;
    rx.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| err("read timeout", e))?;
    let tx = UdpSocket::bind(("127.0.0.1", 0)).map_err(|e| err("bind the sender", e))?;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let server = s.spawn(during);
        let receiver = s.spawn(|| {
            let mut h = rtloop_metrics::LatencyHistogram::new();
            let mut buf = [0u8; 64];
            while !stop.load(Ordering::Relaxed) {
                if let Ok(n) = rx.recv(&mut buf) {
                    let now = rtloop_sys::monotonic_ns();
                    if n >= 16 {
                        let sent = u64::from_le_bytes(buf[8..16].try_into().unwrap_or_default());
                        h.record(now.saturating_sub(sent));
                    }
                }
            }
            h
        });
        std::thread::sleep(warmup);
        // xorshift: a uniform random gap in [0.5, 1.5) periods, no dependency needed
        let mut x = rtloop_sys::monotonic_ns() | 1;
        let period = 1.0 / rate_hz.max(1.0);
        let end = Instant::now() + Duration::from_secs_f64(seconds);
        let mut sent = 0u64;
        let mut pkt = [0u8; 16];
        while Instant::now() < end {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            std::thread::sleep(Duration::from_secs_f64(period * (0.5 + u)));
            pkt[..8].copy_from_slice(&sent.to_le_bytes());
            pkt[8..].copy_from_slice(&rtloop_sys::monotonic_ns().to_le_bytes());
            if tx.send_to(&pkt, ("127.0.0.1", to_port)).is_ok() {
                sent += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(300)); // the last answers
        stop.store(true, Ordering::Relaxed);
        let h = receiver
            .join()
            .map_err(|_| UdpLoadError::Panicked("receiver"))?;
        server
            .join()
            .map_err(|_| UdpLoadError::Panicked("answering side"))?
            .map_err(|e| UdpLoadError::During(e.into()))?;
        Ok((h, sent))
    })
}

/// The bare reference of [`loop_latency`]: a thread that sends every datagram arriving on
/// 127.0.0.1:`port_in` straight to 127.0.0.1:`port_out`, until `seconds` have passed.
pub fn bare_echo(port_in: u16, port_out: u16, seconds: f64) -> Result<(), UdpLoadError> {
    let err = |what: &str, e: std::io::Error| io(what)(e);
    let s = UdpSocket::bind(("127.0.0.1", port_in)).map_err(|e| err("bind the echo", e))?;
    s.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| err("read timeout", e))?;
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut buf = [0u8; SIZE];
    while Instant::now() < end {
        if let Ok(n) = s.recv(&mut buf) {
            let _ = s.send_to(&buf[..n], ("127.0.0.1", port_out));
        }
    }
    Ok(())
}

/// The same-work reference of the echo model: the model's own `udp_in` and `udp_out`
/// drivers (the same signals, options, `recvmmsg` and GSO `sendmmsg`) called once per
/// millisecond by one plain thread, on 127.0.0.1:`port_in` to 127.0.0.1:`port_out`, until
/// `seconds` have passed. What the model adds on top (timer, processes, streams, board) is
/// the difference between the two.
pub fn paced_driver_echo(port_in: u16, port_out: u16, seconds: f64) -> Result<(), UdpLoadError> {
    use rtloop_runtime::drivers::{DriverCtx, InView, OutBuf, TickInfo};
    use rtloop_runtime::model::Signal;
    let err = UdpLoadError::from;
    let sig = |name: &str, shape: [usize; 2], dtype| Signal {
        name: name.into(),
        shape: shape.to_vec(),
        dtype,
        history: 1,
        variable: true,
        channels: Vec::new(),
        units: Vec::new(),
        line: 0,
    };
    const ROWS: usize = 1024;
    let pk = sig("packets", [ROWS, SIZE], rtloop_stream::DType::U8);
    let ln = sig("lengths", [ROWS, 1], rtloop_stream::DType::U16);
    let ctx = DriverCtx {
        model: "reference".into(),
        tick: Duration::from_millis(1),
        out_dir: std::env::temp_dir(),
        process: "echo".into(),
    };
    let signals = [pk.clone(), ln.clone()];
    let mut src = rtloop_runtime::drivers::udp::open_in(
        &serde_json::json!({"bind": format!("127.0.0.1:{port_in}")}),
        &signals,
        &ctx,
    )
    .map_err(err)?;
    let mut sink = rtloop_runtime::drivers::udp::open_out(
        &serde_json::json!({"to": format!("127.0.0.1:{port_out}")}),
        &signals,
        &ctx,
    )
    .map_err(err)?;
    let mut packets = vec![0u8; ROWS * SIZE];
    let mut lengths = vec![0u8; ROWS * 2];
    let t0 = Instant::now();
    let mut k = 0u64;
    while t0.elapsed().as_secs_f64() < seconds {
        k += 1;
        let due = t0 + Duration::from_micros(k * 1000);
        while Instant::now() < due {
            std::thread::sleep(Duration::from_micros(50));
        }
        let info = TickInfo::default();
        let mut out = [
            OutBuf {
                signal: &pk,
                bytes: &mut packets,
                rows: ROWS,
            },
            OutBuf {
                signal: &ln,
                bytes: &mut lengths,
                rows: ROWS,
            },
        ];
        src.tick(&info, &mut out).map_err(err)?;
        let rows = out[0].rows;
        let inputs = [
            InView {
                signal: &pk,
                bytes: &packets[..rows * SIZE],
                rows,
                first: 0,
            },
            InView {
                signal: &ln,
                bytes: &lengths[..rows * 2],
                rows,
                first: 0,
            },
        ];
        sink.tick(&info, &inputs).map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_loopback_counts_what_it_sends() {
        let port = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let r = udp_sweep(port, port, &[20, 5], 0.1, || Ok::<_, UdpLoadError>(())).unwrap();
        assert_eq!(r.len(), 2);
        for x in &r {
            assert!(x.sent > 0 && x.sent % 5 == 0);
            assert_eq!(x.corrupted, 0);
            assert!(x.received <= x.sent);
        }
    }

    #[test]
    fn what_fails_beside_the_load_is_said_by_its_variant() {
        let port = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = udp_sweep(port, port, &[5], 0.05, || Err("the model did not start")).unwrap_err();
        assert!(matches!(e, UdpLoadError::During(_)), "{e:?}");
        assert_eq!(e.to_string(), "the model did not start");
        // a port already taken is an Io error naming what was being done
        let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
        let p = taken.local_addr().unwrap().port();
        let e = bare_echo(p, p, 0.1).unwrap_err();
        assert!(matches!(e, UdpLoadError::Io { .. }), "{e:?}");
        assert!(e.to_string().starts_with("bind the echo: "), "{e}");
    }

    #[test]
    fn the_paced_driver_echo_returns_what_it_gets() {
        let free = || {
            UdpSocket::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        };
        let (pin, pout) = (free(), free());
        let r = udp_sweep(pin, pout, &[5], 0.3, || paced_driver_echo(pin, pout, 2.3)).unwrap();
        assert_eq!(r.len(), 1);
        // a few datagrams per ms through two 8 MiB buffers: every one comes back intact
        assert!(r[0].sent > 0 && r[0].sent % 5 == 0);
        assert_eq!((r[0].received, r[0].corrupted), (r[0].sent, 0));
    }
}
