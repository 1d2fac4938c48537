//! iceoryx2 publish/subscribe (zero-copy shared memory, from crates.io) on the same payloads
//! as the stream benchmarks, in the same run: the peer column of the stream benchmark.
//! Delivery blocks rather than drops (`UnableToDeliverStrategy::Block`, no safe overflow),
//! which matches a lossless stream; the subscriber checks every message's sequence word.

use std::io::BufRead;
use std::time::Duration;

use iceoryx2::port::unable_to_deliver_strategy::UnableToDeliverStrategy;
use iceoryx2::prelude::*;
use rtloop_metrics::LatencyHistogram;
use rtloop_sys as sys;

use crate::{ensure, BenchError, Context};

const BUFFER: usize = 128;

/// An iceoryx2 error (they implement Debug only) with what failed.
fn ix<E: std::fmt::Debug>(what: &str) -> impl FnOnce(E) -> BenchError + '_ {
    move |e| BenchError::Iceoryx2 {
        what: what.to_string(),
        error: format!("{e:?}"),
    }
}

fn node() -> Result<Node<ipc::Service>, BenchError> {
    // its default-config notice is noise here; errors still show
    set_log_level(LogLevel::Error);
    NodeBuilder::new()
        .create::<ipc::Service>()
        .map_err(ix("iceoryx2 node"))
}

fn service(
    node: &Node<ipc::Service>,
    name: &str,
) -> Result<
    iceoryx2::service::port_factory::publish_subscribe::PortFactory<ipc::Service, [u8], ()>,
    BenchError,
> {
    let sn: ServiceName = name.try_into().map_err(ix("iceoryx2 service name"))?;
    node.service_builder(&sn)
        .publish_subscribe::<[u8]>()
        .max_publishers(1)
        .max_subscribers(1)
        .history_size(0)
        .subscriber_max_buffer_size(BUFFER)
        .enable_safe_overflow(false)
        .open_or_create()
        .map_err(|e| BenchError::Iceoryx2 {
            what: format!("service {name}"),
            error: format!("{e:?}"),
        })
}

/// Messages per second and GB/s of `n` messages of `bytes` from a publisher process to a
/// subscriber process.
pub fn throughput(n: u64, bytes: usize) -> Result<(f64, f64), BenchError> {
    let name = format!("rtloop-bench-{}-{bytes}", sys::pid());
    let (mut sub, mut sub_out) = rtloop_launch::spawn_ready(&SubRole {
        service: name.clone(),
        messages: n,
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

/// `ix2-pub NAME N BYTES CPU`: prints its start time (ns), sends N messages.
/// The iceoryx2 publisher of the throughput peer column.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PubRole {
    /// The service.
    pub service: String,
    /// Messages to publish.
    pub messages: u64,
    /// Bytes per message.
    pub bytes: usize,
    /// The CPU to pin to.
    pub cpu: Option<usize>,
}

impl rtloop_launch::ChildRole for PubRole {
    const NAME: &'static str = "ix2-pub";
}

/// The iceoryx2 subscriber of the throughput peer column.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SubRole {
    /// The service.
    pub service: String,
    /// Messages to receive.
    pub messages: u64,
    /// The CPU to pin to.
    pub cpu: Option<usize>,
}

impl rtloop_launch::ChildRole for SubRole {
    const NAME: &'static str = "ix2-sub";
}

/// The iceoryx2 echo of the latency peer column.
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
    let (name, n, bytes) = (&role.service, role.messages, role.bytes);
    crate::pin(role.cpu);
    let node = node()?;
    let svc = service(&node, name)?;
    let publisher = svc
        .publisher_builder()
        .initial_max_slice_len(bytes)
        .unable_to_deliver_strategy(UnableToDeliverStrategy::Block)
        .create()
        .map_err(ix("iceoryx2 publisher"))?;
    rtloop_launch::ready();
    let mut hot = vec![0x5au8; bytes];
    let start = sys::monotonic_ns();
    for seq in 0..n {
        hot[..8].copy_from_slice(&seq.to_ne_bytes());
        let s = publisher.loan_slice_uninit(bytes).map_err(ix("loan"))?;
        s.write_from_slice(&hot).send().map_err(ix("send"))?;
    }
    println!("{start}");
    Ok(())
}

/// `ix2-sub NAME N BYTES CPU`: receives N messages in order, prints the end time (ns).
/// Run [`SubRole`].
pub fn sub_role(role: &SubRole) -> Result<(), BenchError> {
    let (name, n) = (&role.service, role.messages);
    crate::pin(role.cpu);
    let node = node()?;
    let svc = service(&node, name)?;
    let sub = svc
        .subscriber_builder()
        .create()
        .map_err(ix("iceoryx2 subscriber"))?;
    rtloop_launch::ready();
    let mut next = 0u64;
    while next < n {
        match sub.receive().map_err(ix("receive"))? {
            Some(s) => {
                let p = s.payload();
                let seq = u64::from_ne_bytes(p[..8].try_into().expect("8 bytes"));
                if seq != next {
                    return Err(BenchError::mismatch("iceoryx2's sequence", seq, next));
                }
                next += 1;
            }
            None => std::hint::spin_loop(),
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
    let node = node()?;
    let sa = service(&node, &a)?;
    let sb = service(&node, &b)?;
    let publisher = sa
        .publisher_builder()
        .initial_max_slice_len(8)
        .unable_to_deliver_strategy(UnableToDeliverStrategy::Block)
        .create()
        .map_err(ix("iceoryx2 publisher"))?;
    let sub = sb
        .subscriber_builder()
        .create()
        .map_err(ix("iceoryx2 subscriber"))?;
    let (mut child, _out) = rtloop_launch::spawn_ready(&EchoRole {
        from: a,
        to: b,
        cpu: Some(1),
    })?;
    let mut h = LatencyHistogram::new();
    let warm = (rounds / 10).max(10);
    for i in 1..=rounds + warm + 1 {
        let last = i == rounds + warm + 1;
        let v = if last { u64::MAX } else { i };
        let t0 = sys::monotonic_ns();
        let s = publisher.loan_slice_uninit(8).map_err(ix("loan"))?;
        s.write_from_slice(&v.to_ne_bytes())
            .send()
            .map_err(ix("send"))?;
        if last {
            break;
        }
        let got = loop {
            if let Some(s) = sub.receive().map_err(ix("receive"))? {
                break u64::from_ne_bytes(s.payload()[..8].try_into().expect("8 bytes"));
            }
            std::hint::spin_loop();
        };
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

/// `ix2-echo A B CPU`: echo every message of service A to service B until u64::MAX.
/// Run [`EchoRole`].
pub fn echo_role(role: &EchoRole) -> Result<(), BenchError> {
    let (a, b) = (&role.from, &role.to);
    crate::pin(role.cpu);
    let node = node()?;
    let sa = service(&node, a)?;
    let sb = service(&node, b)?;
    let sub = sa
        .subscriber_builder()
        .create()
        .map_err(ix("iceoryx2 subscriber"))?;
    let publisher = sb
        .publisher_builder()
        .initial_max_slice_len(8)
        .unable_to_deliver_strategy(UnableToDeliverStrategy::Block)
        .create()
        .map_err(ix("iceoryx2 publisher"))?;
    rtloop_launch::ready();
    loop {
        let Some(s) = sub.receive().map_err(ix("receive"))? else {
            std::hint::spin_loop();
            continue;
        };
        let v: [u8; 8] = s.payload()[..8].try_into().expect("8 bytes");
        drop(s);
        if u64::from_ne_bytes(v) == u64::MAX {
            return Ok(());
        }
        let out = publisher.loan_slice_uninit(8).map_err(ix("loan"))?;
        out.write_from_slice(&v).send().map_err(ix("send"))?;
    }
}
