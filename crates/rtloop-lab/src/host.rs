//! The host: post a read of ReadSize bytes, wait for it to fill, deliver the whole frames in
//! it, loop back the hub clock of every Nth load-tester frame, post the next read, do the
//! work; collect HubClockDelta (distinct until changed, as the ONIX workflow does),
//! PercentUsed over time and the host queue depth.
//!
//! The live progress is made by a monitor thread beside the loop, never by the loop itself:
//! the snapshot's percentiles and the caller's printing took 120-330 µs once a second, and a
//! loopback due in that time waited for them (and a caller's stderr that nobody reads could
//! block the loop for good). The loop only hands each new latency over a bounded channel and
//! stores its other figures in atomics; the monitor sleeps between snapshots, so the loop
//! never wakes it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rtloop_metrics::{LatencyHistogram, Summary};
use serde::Serialize;

use crate::frame::{self, h2d, Assembler, Frame, LoadTester};
use crate::link::HostLink;
use crate::work::BlockWork;

/// The host's settings.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// The load (to size frames and loopbacks).
    pub load: LoadTester,
    /// Bytes per read (validated, a multiple of 4).
    pub read_size: u64,
    /// Loop back every Nth load-tester frame.
    pub every: u64,
    /// Stop after this long.
    pub seconds: f64,
    /// Or once this many loopback results were collected.
    pub loopbacks: Option<u64>,
    /// Discard results from the first this-many seconds (warm-up).
    pub warmup: f64,
    /// The device FIFO's size in 32-bit words (its TOTAL_MEM register), for PercentUsed.
    pub fifo_words: u64,
}

/// One live progress line.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// Seconds since the start.
    pub t: f64,
    /// Loopbacks so far.
    pub loopbacks: u64,
    /// Latency so far.
    pub latency: Summary,
    /// Latest PercentUsed.
    pub percent_used: f64,
    /// Largest PercentUsed so far in the measured window (0 during the warm-up).
    pub percent_used_max: f64,
    /// Still warming up: nothing is measured yet.
    pub warming_up: bool,
    /// Largest host queue depth so far (frames).
    pub queue_max: u64,
    /// The 0–1000 µs histogram so far in 1 µs bins, and the count beyond 1 ms last.
    pub histogram_us: Vec<u64>,
}

/// The host's results.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HostReport {
    /// ReadSize used.
    pub read_size: u64,
    /// Seconds measured (after warm-up).
    pub seconds: f64,
    /// Blocks read.
    pub blocks: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Load tester frames delivered.
    pub frames: u64,
    /// Memory monitor frames delivered.
    pub monitor_frames: u64,
    /// Heartbeats delivered.
    pub heartbeats: u64,
    /// Loopbacks sent.
    pub loopbacks_sent: u64,
    /// Closed-loop latency (HubClockDelta), every distinct value after warm-up.
    pub latency: Summary,
    /// Counts of the 0–1000 µs histogram in 1 µs bins (ONIX's visualiser).
    pub histogram_us: Vec<u64>,
    /// Results beyond 1000 µs.
    pub beyond_1ms: u64,
    /// PercentUsed over time: (seconds, percent).
    pub percent_used: Vec<(f64, f64)>,
    /// Largest PercentUsed.
    pub percent_used_max: f64,
    /// Frames waiting in the host when a block completed: mean and max.
    pub queue_mean: f64,
    /// Largest host queue depth.
    pub queue_max: u64,
    /// Data rate actually read, bytes/s.
    pub bytes_per_s: f64,
    /// Times the host's thread was preempted in the measured window (another task took its
    /// CPU), if known: where a spinning host's stalls come from, beside the hypervisor's.
    pub preempted: Option<u64>,
    /// Time per block spent in the work step.
    pub work: Option<Summary>,
    /// Threshold crossings the work step found (if any).
    pub work_events: u64,
    /// The latency histogram itself (for plots).
    #[serde(skip)]
    pub hist: LatencyHistogram,
}

/// Why the host stopped early.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The link failed (for example the device ended: see its report).
    #[error("host link: {0}")]
    Link(#[from] rtloop_transport::TransportError),
    /// A malformed frame.
    #[error(transparent)]
    Frame(#[from] frame::FrameError),
    /// The device stopped (overflow, crash): the caller's check said so.
    #[error("{0}")]
    Device(String),
}

/// Latencies the channel to the monitor holds: a preallocated ring (no allocation in the
/// loop) of a second's loopbacks up to 65,536 a second (6.5 M frames/s at the default
/// loopback period); a full ring drops from the live line only, never from the report.
const MONITOR_CHANNEL: usize = 1 << 16;

/// What the loop hands the monitor thread: new latencies over a bounded channel (sent
/// without a wake-up: the monitor is asleep, not waiting on it), the rest as the latest
/// values.
struct MonitorFeed {
    latencies: mpsc::SyncSender<u64>,
    /// PercentUsed now and its max, as f64 bits.
    percent_used: AtomicU64,
    percent_used_max: AtomicU64,
    queue_max: AtomicU64,
    measuring: AtomicBool,
    done: AtomicBool,
}

/// Ends the monitor when the loop ends, also when it unwinds from a panic (the scope joins
/// the monitor before it passes the panic on).
struct StopMonitor<'a> {
    feed: &'a MonitorFeed,
    thread: std::thread::Thread,
}

impl Drop for StopMonitor<'_> {
    fn drop(&mut self) {
        // SYNC: Relaxed: a stop flag; nothing is published through it (the monitor reads
        // nothing after it), and unpark wakes the monitor to see it.
        self.feed.done.store(true, Ordering::Relaxed);
        self.thread.unpark();
    }
}

impl MonitorFeed {
    /// The figures of one block. Relaxed: each is a latest value on its own, read once a
    /// second; nothing else is published through them.
    fn block(&self, pct: f64, pct_max: f64, queue_max: u64, measuring: bool) {
        self.percent_used.store(pct.to_bits(), Ordering::Relaxed);
        self.percent_used_max
            .store(pct_max.to_bits(), Ordering::Relaxed);
        self.queue_max.store(queue_max, Ordering::Relaxed);
        self.measuring.store(measuring, Ordering::Relaxed);
    }
}

/// The monitor thread: a snapshot for `progress` every second from its own copy of the
/// latencies, until the loop says it is done.
fn monitor(
    feed: &MonitorFeed,
    latencies: mpsc::Receiver<u64>,
    start: Instant,
    progress: &mut (dyn FnMut(&Snapshot) + Send),
) {
    // on whichever CPU is free rather than the loop's (it inherited the loop's pinning)
    let _ = rtloop_sys::allow_all_cpus();
    // two significant figures: timed here once a second (cold caches), a full histogram's
    // summary and bins took 100-170 µs, a coarse one's 25-50 µs; the report keeps the loop's
    let mut hist = LatencyHistogram::coarse();
    let mut next = Duration::from_secs(1);
    loop {
        // SYNC: Relaxed: the stop flag (see StopMonitor).
        if feed.done.load(Ordering::Relaxed) {
            return;
        }
        let now = start.elapsed();
        if now < next {
            std::thread::park_timeout(next - now);
            continue;
        }
        next += Duration::from_secs(1);
        while let Ok(ns) = latencies.try_recv() {
            hist.record(ns);
        }
        let measuring = feed.measuring.load(Ordering::Relaxed);
        progress(&Snapshot {
            t: start.elapsed().as_secs_f64(),
            loopbacks: hist.len(),
            latency: hist.summary(),
            percent_used: f64::from_bits(feed.percent_used.load(Ordering::Relaxed)),
            percent_used_max: f64::from_bits(feed.percent_used_max.load(Ordering::Relaxed)),
            warming_up: !measuring,
            queue_max: feed.queue_max.load(Ordering::Relaxed),
            histogram_us: hist.bins(1000, 1_001_000),
        });
    }
}

/// Run the host loop. `check` is called between waits (about every 100 ms) and ends the run
/// with its error (the device process died); `progress` gets a snapshot about every second,
/// on a monitor thread of its own.
pub fn run(
    cfg: &HostConfig,
    link: &mut HostLink,
    work: Option<&mut dyn BlockWork>,
    live: Option<&mut crate::live::LiveStreams>,
    check: &mut dyn FnMut() -> Result<(), String>,
    progress: &mut (dyn FnMut(&Snapshot) + Send),
) -> Result<HostReport, HostError> {
    let (tx, rx) = mpsc::sync_channel(MONITOR_CHANNEL);
    let feed = MonitorFeed {
        latencies: tx,
        percent_used: AtomicU64::new(0f64.to_bits()),
        percent_used_max: AtomicU64::new(0f64.to_bits()),
        queue_max: AtomicU64::new(0),
        measuring: AtomicBool::new(false),
        done: AtomicBool::new(false),
    };
    let start = Instant::now();
    std::thread::scope(|scope| {
        let feed_ref = &feed;
        let watcher = scope.spawn(move || monitor(feed_ref, rx, start, progress));
        let _stop = StopMonitor {
            feed: &feed,
            thread: watcher.thread().clone(),
        };
        // the scope joins the monitor once `_stop` has told it to end; a `progress` that
        // never returns still holds `run` there (the loop itself has finished by then)
        run_loop(cfg, link, work, live, check, &feed, start)
    })
}

fn run_loop(
    cfg: &HostConfig,
    link: &mut HostLink,
    mut work: Option<&mut dyn BlockWork>,
    mut live: Option<&mut crate::live::LiveStreams>,
    check: &mut dyn FnMut() -> Result<(), String>,
    feed: &MonitorFeed,
    start: Instant,
) -> Result<HostReport, HostError> {
    let lt = cfg.load;
    let mut asm = Assembler::new(lt.payload_bytes().max(frame::MEMORY_MONITOR_PAYLOAD));
    let mut block = vec![0u8; cfg.read_size as usize];
    let mut out: Vec<u32> = Vec::new();
    let mut hist = LatencyHistogram::new();
    let mut work_hist = LatencyHistogram::new();
    let mut last_delta = 0u64;
    let (mut blocks, mut frames, mut monitor, mut beats, mut sent) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut lt_index, mut queue_sum, mut queue_max, mut work_events) = (0u64, 0u64, 0u64, 0u64);
    let mut pct: Vec<(f64, f64)> = Vec::new();
    let (mut pct_now, mut pct_max) = (0.0f64, 0.0f64);
    let mut samples: Vec<u8> = Vec::new();
    // what one block adds to the live streams, published once per block
    let (mut live_lat, mut live_pct): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    let warm = Duration::from_secs_f64(cfg.warmup);
    let end = Duration::from_secs_f64(cfg.warmup + cfg.seconds);
    let mut measuring_since: Option<Instant> = None;
    let mut preempted_at_start: Option<u64> = None;
    let mut bytes_measured = 0u64;
    h2d::credit(&mut out, cfg.read_size as u32);
    link.send(&out)?;
    out.clear();
    loop {
        let elapsed = start.elapsed();
        let measuring = elapsed >= warm;
        if measuring && measuring_since.is_none() {
            measuring_since = Some(Instant::now());
            preempted_at_start = rtloop_sys::thread_preemptions();
        }
        if elapsed >= end || cfg.loopbacks.is_some_and(|n| hist.len() >= n) || crate::interrupted()
        {
            break;
        }
        // one block, exactly ReadSize bytes
        let mut filled = 0;
        while filled < block.len() {
            link.read(&mut block, &mut filled, Duration::from_millis(100))?;
            if filled < block.len() {
                check().map_err(HostError::Device)?;
            }
        }
        blocks += 1;
        if measuring {
            bytes_measured += block.len() as u64;
        }
        // deliver whole frames; loop back every Nth hub clock at once
        let mut queued = 0u64;
        let t = start.elapsed().as_secs_f64();
        let work_on = work.is_some();
        asm.push(&block, |f| {
            queued += 1;
            match f {
                Frame::LoadTester { hub, delta, words } => {
                    frames += 1;
                    if work_on {
                        samples.extend_from_slice(&words[..2 * lt.received_words as usize]);
                    }
                    if lt_index % cfg.every == 0 {
                        h2d::loopback(&mut out, hub, lt.transmitted_words as usize);
                        sent += 1;
                    }
                    lt_index += 1;
                    if delta != 0 && delta != last_delta {
                        last_delta = delta;
                        if measuring {
                            let ns = frame::ticks_to_ns(delta);
                            hist.record(ns);
                            // a ring the monitor drains once a second: no wake-up, no
                            // allocation; full, it drops from the live line only
                            let _ = feed.latencies.try_send(ns);
                            live_lat.push(ns as f64 / 1e3);
                        }
                    }
                }
                Frame::MemoryMonitor { used_words, .. } => {
                    monitor += 1;
                    pct_now = 100.0 * f64::from(used_words) / cfg.fifo_words.max(1) as f64;
                    live_pct.push(pct_now);
                    if measuring {
                        pct.push((t, pct_now));
                    }
                }
                Frame::Heartbeat { .. } => beats += 1,
                Frame::Other { .. } => {}
            }
        })?;
        // the loopbacks and the next posted read go out together: one transport write per
        // block (the read is posted before the work, as the read thread does)
        h2d::credit(&mut out, cfg.read_size as u32);
        link.send(&out)?;
        out.clear();
        queue_sum += queued;
        queue_max = queue_max.max(queued);
        if let Some(l) = live.as_mut() {
            l.latencies(&live_lat);
            l.percent_used(&live_pct);
        }
        live_lat.clear();
        live_pct.clear();
        if let Some(w) = work.as_mut() {
            let t0 = Instant::now();
            work_events += w.process(&samples);
            samples.clear();
            work_hist.record(t0.elapsed().as_nanos() as u64);
            if w.failed() {
                break;
            }
        }
        if measuring {
            pct_max = pct_max.max(pct_now);
        }
        feed.block(pct_now, pct_max, queue_max, measuring);
    }
    let mut stop = Vec::new();
    h2d::stop(&mut stop);
    let _ = link.send(&stop);
    let seconds = measuring_since.map_or(0.0, |s| s.elapsed().as_secs_f64());
    // 1000 bins of 1 µs, and one more that collects everything from 1 ms up
    let mut bins = hist.bins(1000, 1_001_000);
    let beyond = bins.pop().unwrap_or(0);
    Ok(HostReport {
        read_size: cfg.read_size,
        seconds,
        blocks,
        bytes: blocks * cfg.read_size,
        frames,
        monitor_frames: monitor,
        heartbeats: beats,
        loopbacks_sent: sent,
        latency: hist.summary(),
        beyond_1ms: beyond,
        histogram_us: bins,
        percent_used: pct,
        percent_used_max: pct_max,
        queue_mean: queue_sum as f64 / blocks.max(1) as f64,
        queue_max,
        bytes_per_s: bytes_measured as f64 / seconds.max(1e-9),
        preempted: rtloop_sys::thread_preemptions()
            .zip(preempted_at_start)
            .map(|(end, start)| end.saturating_sub(start)),
        work: work.map(|_| work_hist.summary()),
        work_events,
        hist,
    })
}
