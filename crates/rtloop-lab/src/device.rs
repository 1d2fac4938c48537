//! The emulated device: its own clock, frames produced on schedule, a bounded hardware FIFO,
//! reads posted by the host, loopbacks answered with HubClockDelta = now − value.
//!
//! The device runs in its own process and is never driven by the host: it produces every
//! frame at its scheduled time (CLOCK_MONOTONIC; the hub clock is the same time in 250 MHz
//! ticks) whatever the host does. A frame goes straight into the read the host has posted if
//! there is room there (ONIX: the DMA transfer is posted before the data is produced), else
//! into the FIFO, which drains into the next posted read. A FIFO that passes its capacity ends
//! the run, as ONIX ends acquisition.
//!
//! Frames carry the hub clock of the moment they are produced. Real hardware produces each
//! frame exactly on schedule; this process may itself be late (the OS or the hypervisor
//! preempted it). Stamping the production time keeps such a stall of the *emulator* out of
//! the loop latency it measures for the host and the transport; how late the emulator was is
//! counted separately ([`DeviceReport::lateness`]). After such a stall it makes the frames it
//! missed at twice its rate ([`crate::pacing`]), not in one burst the host would have to queue
//! behind: real hardware never sends that burst.

use std::collections::VecDeque;
use std::time::Duration;

use rtloop_metrics::{LatencyHistogram, Summary};
use rtloop_sys::monotonic_ns;
use serde::Serialize;

use crate::frame::{self, h2d, ticks, ConfigError, LoadTester, HEARTBEAT_HZ};
use crate::link::DeviceLink;
use crate::pacing::Pacer;

/// The device's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct DeviceConfig {
    /// Load tester frames per second.
    pub fps: u64,
    /// 16-bit words per frame.
    pub received_words: u64,
    /// 32-bit words per loopback (the host sends them; the device discards them).
    pub transmitted_words: u64,
    /// Memory monitor frames per second (1..=1000; the tutorial uses 100).
    pub monitor_hz: u64,
    /// Hardware FIFO capacity in bytes.
    pub fifo_bytes: u64,
    /// Longest run (a safety stop if the host never says stop).
    pub max_seconds: f64,
    /// Seconds the host warms up before it measures: the FIFO's high water is reported
    /// for the measured window (as the host's PercentUsed is) and for the whole run.
    #[serde(default)]
    pub warmup_seconds: f64,
}

impl DeviceConfig {
    /// The load tester part.
    #[must_use]
    pub fn load(&self) -> LoadTester {
        LoadTester {
            fps: self.fps,
            received_words: self.received_words,
            transmitted_words: self.transmitted_words,
        }
    }

    /// Check every limit.
    pub fn validate(&self) -> Result<u64, ConfigError> {
        let clk_div = self.load().validate()?;
        if self.fifo_bytes == 0 {
            return Err(ConfigError::FifoZero);
        }
        if !(1..=1000).contains(&self.monitor_hz) {
            return Err(ConfigError::MonitorRate(self.monitor_hz));
        }
        Ok(clk_div)
    }
}

/// How a device run ended and what it saw.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceReport {
    /// `"stopped"` (the host said stop), `"overflow"`, `"time limit"` or `"link closed"`.
    pub ended: String,
    /// Load tester frames produced.
    pub frames: u64,
    /// Bytes produced (all frames).
    pub bytes: u64,
    /// Seconds from the first frame to the end.
    pub seconds: f64,
    /// The rate actually produced, frames/s.
    pub fps_achieved: f64,
    /// The rate configured (250 MHz / CLK_DIV).
    pub fps_configured: f64,
    /// Largest FIFO fill in bytes in the measured window (after the warm-up), exact: taken
    /// at every device step, where the memory monitor samples at `monitor_hz`.
    pub fifo_high_water: u64,
    /// `fifo_high_water` as PercentUsed.
    pub fifo_high_water_percent: f64,
    /// The FIFO's most bytes over the whole run, warm-up included.
    #[serde(default)]
    pub fifo_high_water_run: u64,
    /// Loopbacks received.
    pub loopbacks: u64,
    /// How late this process produced frames against their schedule (not the host's doing).
    pub lateness: Summary,
    /// The most load-tester frames made in one step in the measured window (after the
    /// warm-up, as `fifo_high_water`): after a stall of this process it makes up at twice its
    /// rate, so this stays a few frames however long the stall was (while its steps are
    /// short: two steps in a row slower than 25 µs each widen it to twice their length).
    #[serde(default)]
    pub burst_max_frames: u64,
    /// The catch-up window of the step that made `burst_max_frames` (ns): a step makes at
    /// most this over half the frame period, plus one. 50 µs unless the device's own last two
    /// steps were both longer (its schedule as achieved, not a fixed figure).
    #[serde(default)]
    pub burst_window_ns: u64,
    /// Times this process was preempted in the measured window (another task took its CPU),
    /// if known.
    #[serde(default)]
    pub preempted: Option<u64>,
    /// Load-tester frames made in the measured window (after the warm-up, until the host said
    /// stop).
    #[serde(default)]
    pub frames_measured: u64,
    /// Seconds of the measured window, on the device's clock.
    #[serde(default)]
    pub seconds_measured: f64,
    /// The rate achieved in the measured window, frames/s: below `fps_configured` when this
    /// process did not get the CPU time to make its frames (a loaded machine), which makes
    /// the run "overloaded" whatever its FIFO shows.
    #[serde(default)]
    pub fps_measured: f64,
}

/// A run that cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// A setting out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The link failed.
    #[error("device link: {0}")]
    Link(#[from] rtloop_transport::TransportError),
    /// The host sent something that is not a message.
    #[error("host-to-device message: {0}")]
    Protocol(#[from] frame::h2d::ParseError),
}

/// Run the device until the host says stop, the FIFO overflows or the time limit passes.
pub fn run(cfg: &DeviceConfig, link: &mut DeviceLink) -> Result<DeviceReport, DeviceError> {
    let clk_div = cfg.validate()?;
    let lt = cfg.load();
    let period_ns = frame::ticks_to_ns(clk_div);
    let monitor_ns = 1_000_000_000 / cfg.monitor_hz;
    let heartbeat_ns = 1_000_000_000 / HEARTBEAT_HZ;
    let start = monotonic_ns();
    let deadline = start + Duration::from_secs_f64(cfg.max_seconds).as_nanos() as u64;
    let mut pacer = Pacer::new(start, period_ns);
    let (mut next_mm, mut next_hb) = (start, start);
    let mut burst_max = 0u64;
    let mut fifo: VecDeque<u8> = VecDeque::new();
    let mut fresh: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut inbox: Vec<u32> = Vec::new();
    let mut credit: u64 = 0;
    // the posted read being filled
    let mut block: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut delta: u64 = 0;
    let mut counter: u16 = 0;
    let mut lateness = LatencyHistogram::new();
    let (mut frames, mut bytes, mut loopbacks, mut high_water) = (0u64, 0u64, 0u64, 0u64);
    let measure_from =
        start + Duration::from_secs_f64(cfg.warmup_seconds.max(0.0)).as_nanos() as u64;
    let mut measured_high_water = 0u64;
    // the measured window as the device saw it: its first step at or after `measure_from`,
    // and the frames made from then on
    let mut measuring_since: Option<u64> = None;
    let mut frames_measured = 0u64;
    let mut burst_window = 0u64;
    let mut preempted_at_start: Option<Option<u64>> = None;
    let ended = loop {
        let now = monotonic_ns();
        // the host's messages: posted reads, loopbacks, stop
        link.poll(&mut inbox)?;
        let mut stop = false;
        let used = h2d::parse(&inbox, |m| match m {
            h2d::Msg::Credit(b) => credit += u64::from(b),
            h2d::Msg::Loopback(v) => {
                delta = ticks(now).saturating_sub(v);
                loopbacks += 1;
            }
            h2d::Msg::Stop => stop = true,
        })
        .map_err(DeviceError::Protocol)?;
        inbox.drain(..used);
        if stop {
            break "stopped";
        }
        if now >= deadline {
            break "time limit";
        }
        // every frame whose time has come (or, catching up, that may be made now), stamped
        // with the time it is made
        let mut made = 0u64;
        while let Some(late) = pacer.take(now) {
            lateness.record(late);
            frame::put_load_tester(&mut fresh, &lt, ticks(now), delta, counter);
            counter = counter.wrapping_add(lt.received_words as u16);
            made += 1;
        }
        frames += made;
        if now >= measure_from {
            measuring_since.get_or_insert(now);
            frames_measured += made;
            if made > burst_max {
                burst_max = made;
                burst_window = pacer.window_ns();
            }
        }
        if next_mm <= now {
            let used_words = (fifo.len() / 4) as u32;
            frame::put_memory_monitor(&mut fresh, ticks(now), used_words);
            while next_mm <= now {
                next_mm += monitor_ns;
            }
        }
        if next_hb <= now {
            frame::put_heartbeat(&mut fresh, ticks(now));
            while next_hb <= now {
                next_hb += heartbeat_ns;
            }
        }
        bytes += fresh.len() as u64;
        // into the posted read if nothing is queued before them, else into the FIFO
        if fifo.is_empty() && credit > 0 {
            let n = (credit as usize).min(fresh.len());
            block.extend_from_slice(&fresh[..n]);
            credit -= n as u64;
            fifo.extend(&fresh[n..]);
        } else {
            fifo.extend(&fresh);
        }
        fresh.clear();
        while credit > 0 && !fifo.is_empty() {
            let (a, _) = fifo.as_slices();
            let n = (credit as usize).min(a.len());
            block.extend_from_slice(&a[..n]);
            fifo.drain(..n);
            credit -= n as u64;
        }
        // a read completes when it is full (the DMA transfer's completion): hand it over
        // whole, one transport write per block
        if credit == 0 && !block.is_empty() {
            link.send(&block)?;
            block.clear();
        }
        high_water = high_water.max(fifo.len() as u64);
        if now >= measure_from {
            measured_high_water = measured_high_water.max(fifo.len() as u64);
            if preempted_at_start.is_none() {
                preempted_at_start = Some(rtloop_sys::thread_preemptions());
            }
        }
        if fifo.len() as u64 > cfg.fifo_bytes {
            break "overflow";
        }
        core::hint::spin_loop();
    };
    if ended == "stopped" || ended == "time limit" {
        let _ = link.finish();
    }
    let end = monotonic_ns();
    let seconds = (end - start) as f64 * 1e-9;
    let seconds_measured = measuring_since.map_or(0.0, |t| (end - t) as f64 * 1e-9);
    Ok(DeviceReport {
        ended: ended.to_owned(),
        frames,
        bytes,
        seconds,
        fps_achieved: frames as f64 / seconds.max(1e-9),
        fps_configured: lt.actual_fps(),
        fifo_high_water: measured_high_water,
        fifo_high_water_percent: 100.0 * measured_high_water as f64 / cfg.fifo_bytes as f64,
        fifo_high_water_run: high_water,
        loopbacks,
        lateness: lateness.summary(),
        burst_max_frames: burst_max,
        burst_window_ns: burst_window,
        frames_measured,
        seconds_measured,
        fps_measured: if seconds_measured > 0.0 {
            frames_measured as f64 / seconds_measured
        } else {
            0.0
        },
        preempted: rtloop_sys::thread_preemptions()
            .zip(preempted_at_start.flatten())
            .map(|(end, start)| end.saturating_sub(start)),
    })
}
