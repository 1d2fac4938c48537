//! iceoryx2 publish/subscribe (zero-copy shared memory, from crates.io) on the same payloads
//! as the stream benchmarks, in the same run: the peer column of the stream benchmark.
//! The ports are rtloop-peers' iceoryx2 transport (the one place rtloop sets up iceoryx2),
//! with spinning readers. Delivery blocks rather than drops (no safe overflow), which
//! matches a lossless stream; the subscriber checks every message's sequence word.

use std::io::BufRead;
use std::time::Duration;

use rtloop_metrics::LatencyHistogram;
use rtloop_peers::transport::iceoryx2::{Ix2Config, Ix2Receiver, Ix2Sender};
use rtloop_peers::transport::{Receiver, Sender};
use rtloop_peers::Wait;
use rtloop_sys as sys;

use crate::{ensure, BenchError, Context};

/// Messages each subscriber's buffer holds before the publisher blocks.
const BUFFER: usize = 128;

/// How long a writer waits for its reader to subscribe.
const CONNECT: Duration = Duration::from_secs(10);

fn config(service: &str, message_bytes: usize) -> Ix2Config {
    Ix2Config {
        service: service.to_string(),
        message_bytes,
        buffer: BUFFER,
        readers: 1,
        wait: Wait::Spin,
    }
}

/// `f` of the next message, spinning on `receive` until one is there.
fn on_next<T>(rx: &mut Ix2Receiver, f: impl FnOnce(&[u8]) -> T) -> Result<T, BenchError> {
    loop {
        let message = rx
            .recv(Duration::ZERO)
            .map_err(rtloop_peers::PeerError::from)?;
        if !message.is_empty() {
            return Ok(f(message));
        }
        std::hint::spin_loop();
    }
}

fn sequence(message: &[u8]) -> u64 {
    u64::from_ne_bytes(
        message[..8]
            .try_into()
            .expect("messages hold at least 8 bytes"),
    )
}

/// Messages per second and GB/s of `n` messages of `bytes` from a publisher process to a
/// subscriber process.
pub fn throughput(n: u64, bytes: usize) -> Result<(f64, f64), BenchError> {
    let name = format!("rtloop-bench-{}-{bytes}", sys::pid());
    let (mut sub, mut sub_out) = rtloop_launch::spawn_ready(&SubRole {
        service: name.clone(),
        messages: n,
        bytes,
        cpu: Some(1),
    })?;
    let (mut pubp, mut pub_out) = rtloop_launch::spawn_ready(&PubRole {
        service: name,
        messages: n,
        bytes,
        cpu: Some(0),
    })?;
    let mut start = String::new();
    pub_out.read_line(&mut start)?;
    ensure!(pubp.wait()?.success(), "the iceoryx2 publisher", "failed");
    let start: u64 = start
        .trim()
        .parse()
        .with_context(|| format!("publisher said {start:?}"))?;
    let mut line = String::new();
    sub_out.read_line(&mut line)?;
    ensure!(sub.wait()?.success(), "the iceoryx2 subscriber", "failed");
    let end: u64 = line
        .trim()
        .parse()
        .with_context(|| format!("subscriber said {line:?}"))?;
    let secs = end.saturating_sub(start) as f64 / 1e9;
    Ok((n as f64 / secs, n as f64 * bytes as f64 / secs / 1e9))
}

/// The iceoryx2 publisher of the throughput peer column: prints its start time (ns) and
/// sends `messages` messages.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PubRole {
    /// The service.
    pub service: String,
    /// Messages to publish.
    pub messages: u64,
    /// Bytes per message (at least 8: the sequence word).
    pub bytes: usize,
    /// The CPU to pin to.
    pub cpu: Option<usize>,
}

impl rtloop_launch::ChildRole for PubRole {
    const NAME: &'static str = "ix2-pub";
}

/// The iceoryx2 subscriber of the throughput peer column: receives `messages` messages in
/// order and prints the end time (ns).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SubRole {
    /// The service.
    pub service: String,
    /// Messages to receive.
    pub messages: u64,
    /// Bytes per message.
    pub bytes: usize,
    /// The CPU to pin to.
    pub cpu: Option<usize>,
}

impl rtloop_launch::ChildRole for SubRole {
    const NAME: &'static str = "ix2-sub";
}

/// The iceoryx2 echo of the latency peer column: echoes every message of service `from`
/// to service `to` until `u64::MAX`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct EchoRole {
    /// The service read.
    pub from: String,
    /// The service written.
    pub to: String,
    /// The CPU to pin to.
    pub cpu: Option<usize>,
}

impl rtloop_launch::ChildRole for EchoRole {
    const NAME: &'static str = "ix2-echo";
}

rtloop_launch::register_role!(PubRole, pub_role);
rtloop_launch::register_role!(SubRole, sub_role);
rtloop_launch::register_role!(EchoRole, echo_role);

/// Run [`PubRole`].
pub fn pub_role(role: &PubRole) -> Result<(), BenchError> {
    ensure!(
        role.bytes >= 8,
        "a message",
        "must hold the 8-byte sequence word"
    );
    crate::pin(role.cpu);
    let mut tx = Ix2Sender::with(&config(&role.service, role.bytes))?;
    rtloop_launch::ready();
    tx.prepare(1, CONNECT)
        .map_err(rtloop_peers::PeerError::from)?;
    let mut hot = vec![0x5au8; role.bytes];
    let start = sys::monotonic_ns();
    for seq in 0..role.messages {
        hot[..8].copy_from_slice(&seq.to_ne_bytes());
        tx.send(&hot).map_err(rtloop_peers::PeerError::from)?;
    }
    println!("{start}");
    Ok(())
}

/// Run [`SubRole`].
pub fn sub_role(role: &SubRole) -> Result<(), BenchError> {
    crate::pin(role.cpu);
    let mut rx = Ix2Receiver::with(&config(&role.service, role.bytes))?;
    rtloop_launch::ready();
    for next in 0..role.messages {
        let seq = on_next(&mut rx, sequence)?;
        if seq != next {
            return Err(BenchError::mismatch("iceoryx2's sequence", seq, next));
        }
    }
    println!("{}", sys::monotonic_ns());
    Ok(())
}

/// One-way latency (RTT/2) of an 8-byte message through two services, both sides spinning
/// on `receive`.
pub fn pingpong(rounds: u64) -> Result<LatencyHistogram, BenchError> {
    let (a, b) = (
        format!("rtloop-pp-a-{}", sys::pid()),
        format!("rtloop-pp-b-{}", sys::pid()),
    );
    let mut tx = Ix2Sender::with(&config(&a, 8))?;
    let mut rx = Ix2Receiver::with(&config(&b, 8))?;
    let (mut child, _out) = rtloop_launch::spawn_ready(&EchoRole {
        from: a,
        to: b,
        cpu: Some(1),
    })?;
    tx.prepare(1, CONNECT)
        .map_err(rtloop_peers::PeerError::from)?;
    let mut h = LatencyHistogram::new();
    let warm = (rounds / 10).max(10);
    for i in 1..=rounds + warm + 1 {
        let last = i == rounds + warm + 1;
        let v = if last { u64::MAX } else { i };
        let t0 = sys::monotonic_ns();
        tx.send(&v.to_ne_bytes())
            .map_err(rtloop_peers::PeerError::from)?;
        if last {
            break;
        }
        let got = on_next(&mut rx, sequence)?;
        let t1 = sys::monotonic_ns();
        if got != i {
            return Err(BenchError::mismatch("the iceoryx2 echo", got, i));
        }
        if i > warm {
            h.record((t1 - t0) / 2);
        }
    }
    let _ = child.wait_timeout_or_kill(Duration::from_secs(5));
    Ok(h)
}

trait WaitOrKill {
    fn wait_timeout_or_kill(&mut self, t: Duration) -> std::io::Result<()>;
}

impl WaitOrKill for std::process::Child {
    fn wait_timeout_or_kill(&mut self, t: Duration) -> std::io::Result<()> {
        let end = std::time::Instant::now() + t;
        while std::time::Instant::now() < end {
            if self.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.kill()?;
        self.wait().map(drop)
    }
}

/// Run [`EchoRole`].
pub fn echo_role(role: &EchoRole) -> Result<(), BenchError> {
    crate::pin(role.cpu);
    let mut rx = Ix2Receiver::with(&config(&role.from, 8))?;
    let mut tx = Ix2Sender::with(&config(&role.to, 8))?;
    rtloop_launch::ready();
    tx.prepare(1, CONNECT)
        .map_err(rtloop_peers::PeerError::from)?;
    loop {
        let v: [u8; 8] = on_next(&mut rx, |m| m[..8].try_into().expect("8-byte messages"))?;
        if u64::from_ne_bytes(v) == u64::MAX {
            return Ok(());
        }
        tx.send(&v).map_err(rtloop_peers::PeerError::from)?;
    }
}
