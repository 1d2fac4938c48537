//! How a connection waits for its next request: adaptive polling.
//!
//! On a virtual machine a thread asleep in `recv` takes about 40 µs to wake (its vCPU halts),
//! and a loopback round trip pays that twice: the server waking for the request and the
//! client waking for the reply. A client in a request/response loop (FieldTrip's
//! `GET_DAT` polling, a MATLAB loop of `ft_read_data`) spends most of its time in those two
//! wake-ups. The server cannot change the client, but it can
//!
//! * poll the socket for the next request for a short window instead of sleeping, once it
//!   has seen that this client sends its next request soon after each reply, and
//! * while such a client is active, hold the kernel's PM QoS request
//!   (`/dev/cpu_dma_latency` = 0), which keeps idle vCPUs from halting, so the *client's*
//!   wake-up for the reply costs a few µs instead of tens.
//!
//! Polling costs a core for as long as it waits, and wins at most one wake-up per request, so
//! it is bounded: the server polls only for a client whose next request follows the reply
//! within [`SPIN_GAP`] (about one wake-up), for at most twice that. A client that loops more
//! slowly (one asking every 200 µs) is slept on, with the PM QoS request still held for its
//! replies; every [`PROBE_EVERY`]th request is polled for once to see whether it has become
//! faster (a gap measured after a sleep includes the server's own wake-up).
//!
//! Both stop by themselves: a client that pauses longer than [`LOOP_GAP`] is no longer polled
//! for, and the PM QoS request is dropped once no client has sent anything for [`LINGER`]. An
//! idle server sleeps in `recv` and holds nothing. At most `cpus - 1` connections poll at once,
//! so polling never takes every CPU.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A client whose next request follows the previous reply within this gap is in a
/// request/response loop and is polled for.
pub const LOOP_GAP: Duration = Duration::from_micros(300);
/// A looping client that sends nothing for this long is taken as idle: its connection
/// sleeps and stops counting toward the PM QoS request.
pub const LINGER: Duration = Duration::from_millis(20);
/// A looping client whose next request follows the reply within this gap is polled for: the
/// polling costs about what the wake-up it saves costs. A slower client is slept on.
pub const SPIN_GAP: Duration = Duration::from_micros(50);
/// A looping client too slow to poll for is polled for once every this many requests, to
/// notice when it speeds up.
pub const PROBE_EVERY: u32 = 16;
/// Bounds of the polling window (twice the client's recent gap, within these).
const WINDOW_MIN: Duration = Duration::from_micros(30);
const WINDOW_MAX: Duration = Duration::from_micros(100);

/// How the server waits for requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polling {
    /// Sleep in `recv` at once (the reference server's way).
    Off,
    /// Poll each connection this long after every reply, whatever the client does.
    Fixed(Duration),
    /// Poll only for clients in a request/response loop, and hold PM QoS while one is
    /// active if `pm_qos` (and the process may open `/dev/cpu_dma_latency`).
    Adaptive {
        /// Hold `/dev/cpu_dma_latency` = 0 while a client loops.
        pm_qos: bool,
    },
}

impl Default for Polling {
    fn default() -> Self {
        Polling::Adaptive { pm_qos: true }
    }
}

impl std::str::FromStr for Polling {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "adaptive" => Ok(Polling::Adaptive { pm_qos: true }),
            "off" | "0" => Ok(Polling::Off),
            _ => s
                .parse::<u64>()
                .ok()
                .filter(|us| *us <= 1_000_000)
                .map(|us| Polling::Fixed(Duration::from_micros(us)))
                .ok_or_else(|| {
                    format!("{s:?} is not a polling mode: want adaptive, off, or microseconds to poll after every reply (0..=1000000)")
                }),
        }
    }
}

impl std::fmt::Display for Polling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Polling::Off => f.write_str("off"),
            Polling::Fixed(d) => write!(f, "{}", d.as_micros()),
            Polling::Adaptive { .. } => f.write_str("adaptive"),
        }
    }
}

/// What the connections of one server share: how many poll now, and the PM QoS request.
#[derive(Debug)]
pub struct PollShared {
    // Ordering: a counter that only bounds how many threads poll; no data is published
    // through it, so Relaxed (a momentary overshoot by one poller is harmless).
    pollers: AtomicUsize,
    max_pollers: usize,
    pm_qos: bool,
    /// Looping connections and the open `/dev/cpu_dma_latency` while there is one.
    qos: Mutex<(usize, Option<File>)>,
    /// Whether opening `/dev/cpu_dma_latency` failed once (then never tried again).
    qos_denied: std::sync::atomic::AtomicBool,
    // Ordering: statistics only, read for reports: Relaxed.
    polls: std::sync::atomic::AtomicU64,
}

impl PollShared {
    /// Shared state for `polling`.
    #[must_use]
    pub fn new(polling: Polling) -> Self {
        PollShared {
            pollers: AtomicUsize::new(0),
            max_pollers: rtloop_sys::online_cpus().saturating_sub(1).max(1),
            pm_qos: matches!(polling, Polling::Adaptive { pm_qos: true }),
            qos: Mutex::new((0, None)),
            qos_denied: std::sync::atomic::AtomicBool::new(false),
            polls: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// How many times a connection has polled for a request (each at most one window).
    #[must_use]
    pub fn polls(&self) -> u64 {
        self.polls.load(Ordering::Relaxed)
    }

    /// Whether the PM QoS request is held now.
    #[must_use]
    pub fn holds_pm_qos(&self) -> bool {
        self.lock().1.is_some()
    }

    /// Connections counted as looping now.
    #[must_use]
    pub fn looping(&self) -> usize {
        self.lock().0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, Option<File>)> {
        self.qos
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn enter_loop(&self) {
        let mut q = self.lock();
        q.0 += 1;
        if q.0 == 1 && self.pm_qos && !self.qos_denied.load(Ordering::Relaxed) {
            match rtloop_sys::hold_cpu_dma_latency() {
                Ok(f) => q.1 = Some(f),
                Err(e) => {
                    self.qos_denied.store(true, Ordering::Relaxed);
                    tracing::info!("cannot hold /dev/cpu_dma_latency ({e}); polling without it (clients wake ~40 µs slower on a VM)");
                }
            }
        }
    }

    fn leave_loop(&self) {
        let mut q = self.lock();
        q.0 = q.0.saturating_sub(1);
        if q.0 == 0 {
            q.1 = None; // closing the file drops the request
        }
    }

    fn try_poll(&self) -> bool {
        if self.pollers.fetch_add(1, Ordering::Relaxed) < self.max_pollers {
            true
        } else {
            self.pollers.fetch_sub(1, Ordering::Relaxed);
            false
        }
    }

    fn done_polling(&self) {
        self.pollers.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection's socket that waits for requests as [`Polling`] says; replies go through
/// it too, so it knows when each reply left.
#[derive(Debug)]
pub struct PolledSocket<'a, S> {
    sock: S,
    shared: &'a PollShared,
    mode: Polling,
    /// When the last reply was written, until the next request's first byte arrives.
    replied: Option<Instant>,
    /// The client's recent gap between a reply and its next request (smoothed).
    gap: Duration,
    looping: bool,
    /// Requests slept on since the last poll of a looping client (for [`PROBE_EVERY`]).
    unpolled: u32,
    /// The current poll is a probe of a client too slow to poll for.
    probing: bool,
}

impl<'a, S: Read + Write + AsFd> PolledSocket<'a, S> {
    /// Wrap `sock`.
    pub fn new(sock: S, shared: &'a PollShared, mode: Polling) -> Self {
        PolledSocket {
            sock,
            shared,
            mode,
            replied: None,
            gap: LOOP_GAP,
            looping: false,
            unpolled: 0,
            probing: false,
        }
    }

    /// Whether this connection counts as a client in a request/response loop.
    #[must_use]
    pub fn looping(&self) -> bool {
        self.looping
    }

    fn window(&mut self) -> Option<Duration> {
        self.probing = false;
        match self.mode {
            Polling::Off => None,
            Polling::Fixed(d) => (!d.is_zero()).then_some(d),
            Polling::Adaptive { .. } if !self.looping => None,
            Polling::Adaptive { .. } if self.gap <= SPIN_GAP => {
                self.unpolled = 0;
                Some((self.gap * 2).clamp(WINDOW_MIN, WINDOW_MAX))
            }
            Polling::Adaptive { .. } => {
                self.unpolled += 1;
                if self.unpolled < PROBE_EVERY {
                    return None;
                }
                self.unpolled = 0;
                self.probing = true;
                Some(WINDOW_MAX)
            }
        }
    }

    /// Non-blocking reads for up to `window`.
    fn poll_for(&mut self, buf: &mut [u8], window: Duration) -> Option<io::Result<usize>> {
        if !self.shared.try_poll() {
            return None;
        }
        self.shared.polls.fetch_add(1, Ordering::Relaxed);
        // as `QuickAck` does before each blocking read: acknowledge a request's first
        // segment at once (an error on a UNIX socket is expected and harmless)
        let _ = rustix::net::sockopt::set_tcp_quickack(&self.sock, true);
        let started = Instant::now();
        let got = 'spin: loop {
            for _ in 0..32 {
                match rustix::net::recv(&self.sock, &mut *buf, rustix::net::RecvFlags::DONTWAIT) {
                    Ok((n, _)) => break 'spin Some(Ok(n)),
                    Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {
                        core::hint::spin_loop();
                    }
                    // let the blocking read report it
                    Err(_) => break 'spin None,
                }
            }
            if started.elapsed() >= window {
                break None;
            }
        };
        self.shared.done_polling();
        got
    }

    /// The first byte of a request arrived (`polled`: while polling, so the moment is exact):
    /// learn the client's gap.
    fn arrived(&mut self, polled: bool) {
        let Some(replied) = self.replied.take() else {
            return;
        };
        let Polling::Adaptive { .. } = self.mode else {
            return;
        };
        let gap = replied.elapsed();
        if polled && self.probing && gap <= SPIN_GAP {
            // a probe caught a fast client: gaps measured after sleeping were inflated by
            // the server's wake-up, this one is not
            self.gap = gap;
        } else {
            // smooth over a few requests so one slow reply neither starts nor stops a loop
            self.gap = (self.gap * 3 + gap) / 4;
        }
        if !self.looping && gap <= LOOP_GAP {
            self.looping = true;
            self.shared.enter_loop();
        } else if self.looping && self.gap > LOOP_GAP * 4 {
            self.leave();
        }
    }

    fn leave(&mut self) {
        if self.looping {
            self.looping = false;
            self.shared.leave_loop();
        }
    }
}

impl<S: Read + Write + AsFd> Read for PolledSocket<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return self.sock.read(buf);
        }
        if self.replied.is_some() {
            if let Some(window) = self.window() {
                if let Some(r) = self.poll_for(buf, window) {
                    if matches!(r, Ok(n) if n > 0) {
                        self.arrived(true);
                    }
                    return r;
                }
            }
            if self.looping {
                // nothing within the window: wait up to LINGER before counting the client
                // as idle and letting the PM QoS request go
                let mut fds = [rustix::event::PollFd::new(
                    &self.sock,
                    rustix::event::PollFlags::IN,
                )];
                let linger = rustix::event::Timespec {
                    tv_sec: 0,
                    tv_nsec: LINGER.as_nanos() as i64,
                };
                if let Ok(0) = rustix::event::poll(&mut fds, Some(&linger)) {
                    self.leave();
                }
            }
        }
        let r = self.sock.read(buf);
        if matches!(r, Ok(n) if n > 0) {
            self.arrived(false);
        }
        r
    }
}

impl<S: Write> Write for PolledSocket<'_, S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.sock.write(buf)?;
        self.replied = Some(Instant::now());
        Ok(n)
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let n = self.sock.write_vectored(bufs)?;
        self.replied = Some(Instant::now());
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
    }
}

impl<S> Drop for PolledSocket<'_, S> {
    fn drop(&mut self) {
        if self.looping {
            self.looping = false;
            self.shared.leave_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn modes_parse_and_bad_ones_say_what_is_allowed() {
        assert_eq!(
            "adaptive".parse::<Polling>(),
            Ok(Polling::Adaptive { pm_qos: true })
        );
        assert_eq!("off".parse::<Polling>(), Ok(Polling::Off));
        assert_eq!(
            "50".parse::<Polling>(),
            Ok(Polling::Fixed(Duration::from_micros(50)))
        );
        let e = "fast".parse::<Polling>().unwrap_err();
        assert!(e.contains("adaptive, off, or microseconds"), "{e}");
        assert!("2000000".parse::<Polling>().is_err());
    }

    /// A client answering at once is taken as looping; one that pauses longer than the
    /// linger is let go, and with it the shared count (and any PM QoS request).
    #[test]
    fn a_looping_client_is_polled_for_and_released_when_it_pauses() {
        let shared = PollShared::new(Polling::Adaptive { pm_qos: false });
        let (server, mut client) = UnixStream::pair().unwrap();
        let mut s = PolledSocket::new(server, &shared, Polling::Adaptive { pm_qos: false });
        let mut b = [0u8; 8];
        // a tight request/reply loop
        for _ in 0..20 {
            client.write_all(b"req").unwrap();
            let n = s.read(&mut b).unwrap();
            assert_eq!(&b[..n], b"req");
            s.write_all(b"rep").unwrap();
            client.read_exact(&mut b[..3]).unwrap();
        }
        assert!(s.looping(), "a client answering at once loops");
        assert_eq!(shared.looping(), 1);
        // the client pauses well beyond LINGER, then sends again
        let t = std::thread::spawn(move || {
            std::thread::sleep(LINGER * 5);
            client.write_all(b"late").unwrap();
            client
        });
        let n = s.read(&mut b).unwrap();
        assert_eq!(&b[..n], b"late");
        assert!(!s.looping(), "a pause beyond the linger ends the loop");
        assert_eq!(shared.looping(), 0);
        assert!(!shared.holds_pm_qos());
        drop(t.join().unwrap());
    }

    /// A client that loops, but asks only every ~150 µs, is slept on: polling for it would
    /// cost most of a core to save one wake-up per request. It is still counted as looping
    /// (PM QoS), and polled for only once every PROBE_EVERY requests.
    #[test]
    fn a_slowly_looping_client_is_slept_on_but_for_probes() {
        let shared = PollShared::new(Polling::Adaptive { pm_qos: false });
        let (server, mut client) = UnixStream::pair().unwrap();
        let requests = 160u64;
        let t = std::thread::spawn(move || {
            let mut b = [0u8; 3];
            for _ in 0..requests {
                client.write_all(b"req").unwrap();
                client.read_exact(&mut b).unwrap();
                std::thread::sleep(Duration::from_micros(150));
            }
        });
        let mut s = PolledSocket::new(server, &shared, Polling::Adaptive { pm_qos: false });
        let mut b = [0u8; 3];
        let mut looped = 0;
        for _ in 0..requests {
            s.read_exact(&mut b).unwrap();
            s.write_all(b"rep").unwrap();
            looped += u64::from(s.looping());
        }
        t.join().unwrap();
        // whether the pause stays under LOOP_GAP depends on the machine's load; polling must
        // stay within the probes whenever it does
        assert!(
            shared.polls() <= looped / u64::from(PROBE_EVERY) + 1,
            "{} polls for {looped} requests of a looping client asking every 150 µs",
            shared.polls()
        );
    }

    /// A client answering at once is polled for.
    #[test]
    fn a_fast_looping_client_is_polled_for() {
        let shared = PollShared::new(Polling::Adaptive { pm_qos: false });
        let (server, mut client) = UnixStream::pair().unwrap();
        let requests = 400u64;
        let t = std::thread::spawn(move || {
            let mut b = [0u8; 3];
            for _ in 0..requests {
                client.write_all(b"req").unwrap();
                client.read_exact(&mut b).unwrap();
            }
        });
        let mut s = PolledSocket::new(server, &shared, Polling::Adaptive { pm_qos: false });
        let mut b = [0u8; 3];
        let mut looped = 0;
        for _ in 0..requests {
            s.read_exact(&mut b).unwrap();
            s.write_all(b"rep").unwrap();
            looped += u64::from(s.looping());
        }
        t.join().unwrap();
        // once it has looped long enough, it is polled for (at least the probes); a loaded
        // machine may keep its gap above LOOP_GAP, and then nothing is asserted
        if looped >= u64::from(2 * PROBE_EVERY) {
            assert!(shared.polls() > 0, "{looped} looping requests, no poll");
        }
    }

    #[test]
    fn off_never_polls_and_dropping_a_looping_socket_releases_it() {
        let shared = PollShared::new(Polling::Off);
        let (server, mut client) = UnixStream::pair().unwrap();
        let mut s = PolledSocket::new(server, &shared, Polling::Off);
        let mut b = [0u8; 4];
        for _ in 0..5 {
            client.write_all(b"x").unwrap();
            s.read_exact(&mut b[..1]).unwrap();
            s.write_all(b"y").unwrap();
            client.read_exact(&mut b[..1]).unwrap();
        }
        assert!(!s.looping());
        let shared = PollShared::new(Polling::Adaptive { pm_qos: false });
        let (server, mut client) = UnixStream::pair().unwrap();
        let mut s = PolledSocket::new(server, &shared, Polling::Adaptive { pm_qos: false });
        for _ in 0..5 {
            client.write_all(b"x").unwrap();
            s.read_exact(&mut b[..1]).unwrap();
            s.write_all(b"y").unwrap();
            client.read_exact(&mut b[..1]).unwrap();
        }
        assert_eq!(shared.looping(), 1);
        drop(s);
        assert_eq!(shared.looping(), 0);
    }
}
