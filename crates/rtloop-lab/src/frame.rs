//! Frames, limits and ReadSize: the ONIX load tester's semantics (device ID 27), the memory
//! monitor's (ID 28) and a heartbeat, with ONIX's numbers.

use serde::Serialize;

/// The hub clock: 250 MHz ticks, as the ONIX PCIe host's (HubClockDelta / 250000 = ms).
pub const CLOCK_HZ: u64 = 250_000_000;
/// Clock cycles of overhead per load-tester frame (4 to produce the hub clock + 5 state machine).
pub const FRAME_OVERHEAD_CYCLES: u64 = 9;
/// ONI frame header: acquisition clock u64, device address u32, payload size u32.
pub const HEADER_BYTES: usize = 16;
/// Device addresses, as in the ONIX tutorial.
pub const ADDR_HEARTBEAT: u32 = 0;
/// The memory monitor's address.
pub const ADDR_MEMORY_MONITOR: u32 = 10;
/// The load tester's address.
pub const ADDR_LOAD_TESTER: u32 = 11;
/// Heartbeat rate (ONIX's breakout board: a persistent heartbeat of at least 100 Hz).
pub const HEARTBEAT_HZ: u64 = 100;
/// Memory monitor frame payload: hub clock u64 + used 32-bit words u32.
pub const MEMORY_MONITOR_PAYLOAD: usize = 12;
/// Heartbeat payload: hub clock u64.
pub const HEARTBEAT_PAYLOAD: usize = 8;

/// Nanoseconds of CLOCK_MONOTONIC → hub clock ticks.
#[must_use]
pub fn ticks(ns: u64) -> u64 {
    ns / (1_000_000_000 / CLOCK_HZ)
}

/// Hub clock ticks → nanoseconds.
#[must_use]
pub fn ticks_to_ns(t: u64) -> u64 {
    t * (1_000_000_000 / CLOCK_HZ)
}

/// A setting refused before anything starts, with what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// FramesPerSecond out of range.
    #[error("FramesPerSecond {fps} is out of range: allowed 1..={max} (the 250 MHz clock / 9 cycles per frame)")]
    Fps {
        /// Asked for.
        fps: u64,
        /// The limit.
        max: u64,
    },
    /// ReceivedWords above the limit for this rate.
    #[error("ReceivedWords {words} is more than the {max} 16-bit words a frame can carry at {fps} frames/s (CLK_DIV {clk_div} - 9 cycles of overhead)")]
    ReceivedWords {
        /// Asked for.
        words: u64,
        /// The limit at this rate.
        max: u64,
        /// The rate.
        fps: u64,
        /// 250 MHz / rate.
        clk_div: u64,
    },
    /// TransmittedWords above the limit.
    #[error("TransmittedWords {0} is more than the 65535 allowed")]
    TransmittedWords(u64),
    /// ReadSize below the largest frame.
    #[error("The requested read size of {requested} bytes is too small for the current hardware configuration, which requires at least {minimum} bytes")]
    ReadSizeTooSmall {
        /// Asked for (after rounding up to a multiple of 4).
        requested: u64,
        /// The largest frame, rounded up to 4.
        minimum: u64,
    },
    /// ReadSize not a number.
    #[error("ReadSize {0:?} is not a number of bytes; give a whole number (it is rounded up to a multiple of 4)")]
    ReadSizeNotANumber(String),
    /// ReadSize above the limit.
    #[error("ReadSize {0} is more than the 16 MiB allowed")]
    ReadSizeTooLarge(u64),
    /// FIFO capacity zero.
    #[error("FIFO capacity must be at least 1 byte (the hardware buffer; ONIX has 2 GB), got 0")]
    FifoZero,
    /// Memory monitor rate out of range.
    #[error("memory monitor SamplesPerSecond {0} is out of range: allowed 1..=1000")]
    MonitorRate(u64),
    /// Loopback period zero.
    #[error(
        "the loopback period N must be at least 1 (every Nth load-tester frame is looped back)"
    )]
    EveryZero,
}

/// The load tester's settings (ConfigureLoadTester).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LoadTester {
    /// Frames per second asked for.
    pub fps: u64,
    /// 16-bit counter words per device→host frame.
    pub received_words: u64,
    /// 32-bit dummy words per host→device loopback frame.
    pub transmitted_words: u64,
}

impl LoadTester {
    /// Check ONIX's limits; returns CLK_DIV (250 MHz / rate, the real rate is CLOCK_HZ / it).
    pub fn validate(&self) -> Result<u64, ConfigError> {
        let max = CLOCK_HZ / FRAME_OVERHEAD_CYCLES;
        if self.fps == 0 || self.fps > max {
            return Err(ConfigError::Fps { fps: self.fps, max });
        }
        let clk_div = CLOCK_HZ / self.fps;
        let words_max = clk_div - FRAME_OVERHEAD_CYCLES;
        if self.received_words > words_max {
            return Err(ConfigError::ReceivedWords {
                words: self.received_words,
                max: words_max,
                fps: self.fps,
                clk_div,
            });
        }
        if self.transmitted_words > 65535 {
            return Err(ConfigError::TransmittedWords(self.transmitted_words));
        }
        Ok(clk_div)
    }

    /// The rate the device really runs at (250 MHz / CLK_DIV).
    #[must_use]
    pub fn actual_fps(&self) -> f64 {
        CLOCK_HZ as f64 / (CLOCK_HZ / self.fps.max(1)) as f64
    }

    /// Payload bytes of one frame: hub clock, delta, the words, padded to 4.
    #[must_use]
    pub fn payload_bytes(&self) -> usize {
        round4(16 + 2 * self.received_words as usize)
    }

    /// Bytes per frame on the wire (header + payload).
    #[must_use]
    pub fn frame_bytes(&self) -> usize {
        HEADER_BYTES + self.payload_bytes()
    }

    /// The data rate in bytes/s (load tester frames only).
    #[must_use]
    pub fn bytes_per_s(&self) -> f64 {
        self.actual_fps() * self.frame_bytes() as f64
    }

    /// The smallest ReadSize: the largest frame any device sends, rounded up to 4.
    #[must_use]
    pub fn min_read_size(&self) -> u64 {
        round4(
            HEADER_BYTES
                + self
                    .payload_bytes()
                    .max(MEMORY_MONITOR_PAYLOAD)
                    .max(HEARTBEAT_PAYLOAD),
        ) as u64
    }
}

/// Round up to a multiple of 4 (ONIX: (v + 3) & !3).
#[must_use]
pub fn round4(v: usize) -> usize {
    (v + 3) & !3
}

/// Parse and validate a ReadSize: a whole number, rounded up to a multiple of 4, at least the
/// largest frame.
pub fn read_size(text: &str, lt: &LoadTester) -> Result<u64, ConfigError> {
    let v: u64 = text
        .trim()
        .parse()
        .map_err(|_| ConfigError::ReadSizeNotANumber(text.to_owned()))?;
    check_read_size(v, lt)
}

/// Validate a ReadSize given as a number.
pub fn check_read_size(v: u64, lt: &LoadTester) -> Result<u64, ConfigError> {
    if v > 16 << 20 {
        return Err(ConfigError::ReadSizeTooLarge(v));
    }
    let v = round4(v as usize) as u64;
    let minimum = lt.min_read_size();
    if v < minimum {
        return Err(ConfigError::ReadSizeTooSmall {
            requested: v,
            minimum,
        });
    }
    Ok(v)
}

/// Append a frame header.
pub fn put_header(out: &mut Vec<u8>, acq_clock: u64, address: u32, size: usize) {
    out.extend_from_slice(&acq_clock.to_le_bytes());
    out.extend_from_slice(&address.to_le_bytes());
    out.extend_from_slice(&(size as u32).to_le_bytes());
}

/// Append one load-tester frame: counter words start at `counter` and wrap.
pub fn put_load_tester(out: &mut Vec<u8>, lt: &LoadTester, hub: u64, delta: u64, counter: u16) {
    let size = lt.payload_bytes();
    put_header(out, hub, ADDR_LOAD_TESTER, size);
    let start = out.len();
    out.extend_from_slice(&hub.to_le_bytes());
    out.extend_from_slice(&delta.to_le_bytes());
    for i in 0..lt.received_words {
        out.extend_from_slice(&counter.wrapping_add(i as u16).to_le_bytes());
    }
    out.resize(start + size, 0);
}

/// Append one memory-monitor frame.
pub fn put_memory_monitor(out: &mut Vec<u8>, hub: u64, used_words: u32) {
    put_header(out, hub, ADDR_MEMORY_MONITOR, MEMORY_MONITOR_PAYLOAD);
    out.extend_from_slice(&hub.to_le_bytes());
    out.extend_from_slice(&used_words.to_le_bytes());
}

/// Append one heartbeat frame.
pub fn put_heartbeat(out: &mut Vec<u8>, hub: u64) {
    put_header(out, hub, ADDR_HEARTBEAT, HEARTBEAT_PAYLOAD);
    out.extend_from_slice(&hub.to_le_bytes());
}

/// A frame as the host sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Load tester: HubClock, HubClockDelta, counter words (little-endian u16s).
    LoadTester {
        /// Hub clock when produced.
        hub: u64,
        /// The latest loopback result (0 before the first).
        delta: u64,
        /// The counter words' bytes.
        words: &'a [u8],
    },
    /// Memory monitor: hub clock and FIFO words in use.
    MemoryMonitor {
        /// Hub clock.
        hub: u64,
        /// 32-bit words in the FIFO.
        used_words: u32,
    },
    /// Heartbeat.
    Heartbeat {
        /// Hub clock.
        hub: u64,
    },
    /// Any other address (skipped).
    Other {
        /// The address.
        address: u32,
    },
}

/// A malformed frame: the stream of frames cannot be followed past it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed frame at byte {at}: {what}")]
pub struct FrameError {
    /// Offset in the assembler's input.
    pub at: u64,
    /// What was wrong.
    pub what: String,
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"))
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"))
}

/// Reassembles whole frames from read blocks (a frame may straddle any number of blocks).
#[derive(Debug)]
pub struct Assembler {
    carry: Vec<u8>,
    max_payload: usize,
    consumed: u64,
}

impl Assembler {
    /// Frames with payloads up to `max_payload` bytes.
    #[must_use]
    pub fn new(max_payload: usize) -> Self {
        Assembler {
            carry: Vec::new(),
            max_payload,
            consumed: 0,
        }
    }

    /// Bytes of an incomplete frame held over.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.carry.len()
    }

    /// Feed one block; `f` gets every frame completed by it, in order. Returns how many.
    pub fn push(
        &mut self,
        block: &[u8],
        mut f: impl FnMut(Frame<'_>),
    ) -> Result<usize, FrameError> {
        let mut n = 0;
        let mut rest = block;
        // finish the frame carried over from the previous block
        if !self.carry.is_empty() {
            let need = self.frame_len(&self.carry, rest)?;
            match need {
                Some(total) => {
                    let take = total - self.carry.len();
                    if rest.len() < take {
                        self.carry.extend_from_slice(rest);
                        return Ok(0);
                    }
                    self.carry.extend_from_slice(&rest[..take]);
                    rest = &rest[take..];
                    let frame = std::mem::take(&mut self.carry);
                    f(parse(&frame));
                    self.consumed += total as u64;
                    n += 1;
                }
                None => {
                    // still no whole header
                    let take = (HEADER_BYTES - self.carry.len()).min(rest.len());
                    self.carry.extend_from_slice(&rest[..take]);
                    rest = &rest[take..];
                    if self.carry.len() < HEADER_BYTES {
                        return Ok(0);
                    }
                    return self.push(rest, f).map(|k| k + n);
                }
            }
        }
        while rest.len() >= HEADER_BYTES {
            let size = u32_at(rest, 12) as usize;
            if size > self.max_payload {
                return Err(FrameError {
                    at: self.consumed,
                    what: format!(
                        "payload of {size} bytes, more than any device sends ({})",
                        self.max_payload
                    ),
                });
            }
            let total = HEADER_BYTES + size;
            if rest.len() < total {
                break;
            }
            f(parse(&rest[..total]));
            self.consumed += total as u64;
            rest = &rest[total..];
            n += 1;
        }
        self.carry.extend_from_slice(rest);
        Ok(n)
    }

    /// Total length of the carried frame once its header is complete (`None` before).
    fn frame_len(&self, carry: &[u8], more: &[u8]) -> Result<Option<usize>, FrameError> {
        if carry.len() < HEADER_BYTES {
            if carry.len() + more.len() < HEADER_BYTES {
                return Ok(None);
            }
            let mut h = carry.to_vec();
            h.extend_from_slice(&more[..HEADER_BYTES - carry.len()]);
            return self.size_of(&h).map(Some);
        }
        self.size_of(carry).map(Some)
    }

    fn size_of(&self, header: &[u8]) -> Result<usize, FrameError> {
        let size = u32_at(header, 12) as usize;
        if size > self.max_payload {
            return Err(FrameError {
                at: self.consumed,
                what: format!(
                    "payload of {size} bytes, more than any device sends ({})",
                    self.max_payload
                ),
            });
        }
        Ok(HEADER_BYTES + size)
    }
}

fn parse(frame: &[u8]) -> Frame<'_> {
    let address = u32_at(frame, 8);
    let p = &frame[HEADER_BYTES..];
    match address {
        ADDR_LOAD_TESTER if p.len() >= 16 => Frame::LoadTester {
            hub: u64_at(p, 0),
            delta: u64_at(p, 8),
            words: &p[16..],
        },
        ADDR_MEMORY_MONITOR if p.len() >= 12 => Frame::MemoryMonitor {
            hub: u64_at(p, 0),
            used_words: u32_at(p, 8),
        },
        ADDR_HEARTBEAT if p.len() >= 8 => Frame::Heartbeat { hub: u64_at(p, 0) },
        address => Frame::Other { address },
    }
}

/// Host→device messages, as 32-bit words: a posted read (credit) or a loopback.
pub mod h2d {
    /// `[CREDIT, bytes]`: the host posted a read of `bytes`.
    pub const CREDIT: u32 = 1;
    /// `[LOOPBACK, 2 + TransmittedWords, value lo, value hi, dummies...]`.
    pub const LOOPBACK: u32 = 2;
    /// `[STOP, 0]`: end the run.
    pub const STOP: u32 = 3;

    /// Append a credit message.
    pub fn credit(out: &mut Vec<u32>, bytes: u32) {
        out.extend_from_slice(&[CREDIT, bytes]);
    }

    /// Append a loopback message.
    pub fn loopback(out: &mut Vec<u32>, value: u64, transmitted_words: usize) {
        out.extend_from_slice(&[
            LOOPBACK,
            2 + transmitted_words as u32,
            value as u32,
            (value >> 32) as u32,
        ]);
        out.resize(out.len() + transmitted_words, 0);
    }

    /// Append a stop message.
    pub fn stop(out: &mut Vec<u32>) {
        out.extend_from_slice(&[STOP, 0]);
    }

    /// A parsed message.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Msg {
        /// A posted read.
        Credit(u32),
        /// A loopback value.
        Loopback(u64),
        /// End.
        Stop,
    }

    /// A host-to-device message the device cannot take.
    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    pub enum ParseError {
        /// A loopback too short to hold its 64-bit hub clock.
        #[error("loopback of {0} words, needs at least 2")]
        ShortLoopback(usize),
        /// A tag that is no message.
        #[error("unknown host-to-device message {0}")]
        Unknown(u32),
    }

    /// Parse whole messages off the front of `words`; returns how many words were used.
    pub fn parse(words: &[u32], mut f: impl FnMut(Msg)) -> Result<usize, ParseError> {
        let mut i = 0;
        while i + 2 <= words.len() {
            let (tag, arg) = (words[i], words[i + 1]);
            match tag {
                CREDIT => {
                    f(Msg::Credit(arg));
                    i += 2;
                }
                STOP => {
                    f(Msg::Stop);
                    i += 2;
                }
                LOOPBACK => {
                    let n = arg as usize;
                    if n < 2 {
                        return Err(ParseError::ShortLoopback(n));
                    }
                    if i + 2 + n > words.len() {
                        break;
                    }
                    let v = u64::from(words[i + 2]) | (u64::from(words[i + 3]) << 32);
                    f(Msg::Loopback(v));
                    i += 2 + n;
                }
                other => return Err(ParseError::Unknown(other)),
            }
        }
        Ok(i)
    }
}

/// ONIX presets: the tutorial's loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Profile {
    /// Name.
    pub name: &'static str,
    /// The load.
    pub load: LoadTester,
    /// What it emulates.
    pub about: &'static str,
}

/// The presets.
pub const PROFILES: [Profile; 2] = [
    Profile {
        name: "2xnp2",
        load: LoadTester {
            fps: 60_000,
            received_words: 392,
            transmitted_words: 100,
        },
        about: "2 x Neuropixels 2.0: 60 kHz x 392 words (~49 MB/s), 100 words back",
    },
    Profile {
        name: "intan64",
        load: LoadTester {
            fps: 30_000,
            received_words: 63,
            transmitted_words: 100,
        },
        about: "one 64-channel Intan chip (headstage-64): 30 kHz x 63 words (~4.8 MB/s), 100 words back",
    },
];

/// A profile name that is not a preset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown profile {name:?}; allowed: {}", PROFILES.iter().map(|p| p.name).collect::<Vec<_>>().join(", "))]
pub struct UnknownProfile {
    /// What was asked for.
    pub name: String,
}

/// A preset by name, or an error naming the allowed ones.
pub fn profile(name: &str) -> Result<Profile, UnknownProfile> {
    PROFILES
        .iter()
        .copied()
        .find(|p| p.name == name)
        .ok_or_else(|| UnknownProfile {
            name: name.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NP2: LoadTester = PROFILES[0].load;
    const INTAN: LoadTester = PROFILES[1].load;

    #[test]
    fn limits_as_onix() {
        assert_eq!(NP2.validate(), Ok(4166));
        assert_eq!(NP2.frame_bytes(), 816);
        assert_eq!(NP2.min_read_size(), 816);
        assert_eq!(INTAN.min_read_size(), 160);
        assert!(
            (NP2.actual_fps() - 60_009.6).abs() < 0.1,
            "{}",
            NP2.actual_fps()
        );
        let max = CLOCK_HZ / 9;
        let lt = |fps, w| LoadTester {
            fps,
            received_words: w,
            transmitted_words: 0,
        };
        assert_eq!(lt(0, 1).validate(), Err(ConfigError::Fps { fps: 0, max }));
        assert_eq!(
            lt(max + 1, 1).validate(),
            Err(ConfigError::Fps { fps: max + 1, max })
        );
        assert!(lt(max, 0).validate().is_ok());
        // at 1 MHz CLK_DIV is 250: at most 241 words
        assert!(lt(1_000_000, 241).validate().is_ok());
        assert!(matches!(
            lt(1_000_000, 242).validate(),
            Err(ConfigError::ReceivedWords { max: 241, .. })
        ));
    }

    #[test]
    fn read_size_rounding_and_minimum() {
        assert_eq!(read_size("885", &INTAN), Ok(888));
        assert_eq!(read_size("256", &INTAN), Ok(256));
        assert_eq!(
            read_size("128", &INTAN),
            Err(ConfigError::ReadSizeTooSmall {
                requested: 128,
                minimum: 160
            })
        );
        let e = read_size("128", &INTAN).unwrap_err().to_string();
        assert!(e.contains("requires at least 160 bytes"), "{e}");
        assert!(matches!(
            read_size("abc", &INTAN),
            Err(ConfigError::ReadSizeNotANumber(_))
        ));
        assert!(matches!(
            read_size("-4", &INTAN),
            Err(ConfigError::ReadSizeNotANumber(_))
        ));
        assert_eq!(read_size("1024", &NP2), Ok(1024));
        assert!(read_size("812", &NP2).is_err());
    }

    #[test]
    fn unknown_profile_lists_the_allowed() {
        let e = profile("np9").unwrap_err().to_string();
        assert_eq!(e, "unknown profile \"np9\"; allowed: 2xnp2, intan64");
    }

    fn stream_of_frames(lt: &LoadTester, n: usize) -> Vec<u8> {
        let mut v = Vec::new();
        for i in 0..n {
            match i % 7 {
                3 => put_memory_monitor(&mut v, i as u64, i as u32),
                5 => put_heartbeat(&mut v, i as u64),
                _ => put_load_tester(&mut v, lt, i as u64, 2 * i as u64, i as u16),
            }
        }
        v
    }

    proptest! {
        #[test]
        fn frames_come_out_whole_across_any_block_edges(
            words in 0u64..50, n in 1usize..40, cuts in proptest::collection::vec(1usize..200, 1..30)
        ) {
            let lt = LoadTester { fps: 1000, received_words: words, transmitted_words: 0 };
            let bytes = stream_of_frames(&lt, n);
            let mut a = Assembler::new(lt.payload_bytes().max(12));
            let mut seen = Vec::new();
            let mut at = 0;
            let mut k = 0;
            while at < bytes.len() {
                let len = cuts[k % cuts.len()].min(bytes.len() - at);
                a.push(&bytes[at..at + len], |f| seen.push(match f {
                    Frame::LoadTester { hub, delta, words } => {
                        assert_eq!(delta, 2 * hub);
                        assert_eq!(words.len(), lt.payload_bytes() - 16);
                        if words.len() >= 2 {
                            assert_eq!(u16::from_le_bytes([words[0], words[1]]), hub as u16);
                        }
                        hub
                    }
                    Frame::MemoryMonitor { hub, used_words } => { assert_eq!(u64::from(used_words), hub); hub }
                    Frame::Heartbeat { hub } => hub,
                    Frame::Other { .. } => panic!("no other frames"),
                })).unwrap();
                at += len;
                k += 1;
            }
            prop_assert_eq!(seen, (0..n as u64).collect::<Vec<_>>());
            prop_assert_eq!(a.pending(), 0);
        }
    }

    #[test]
    fn oversized_frames_are_refused() {
        let mut v = Vec::new();
        put_header(&mut v, 0, ADDR_LOAD_TESTER, 100_000);
        let e = Assembler::new(800).push(&v, |_| {}).unwrap_err();
        assert!(e.what.contains("100000"), "{e}");
    }

    #[test]
    fn host_to_device_messages() {
        let mut w = Vec::new();
        h2d::credit(&mut w, 2048);
        h2d::loopback(&mut w, 0x1_2345_6789, 3);
        h2d::stop(&mut w);
        let mut got = Vec::new();
        assert_eq!(h2d::parse(&w, |m| got.push(m)), Ok(w.len()));
        assert_eq!(
            got,
            [
                h2d::Msg::Credit(2048),
                h2d::Msg::Loopback(0x1_2345_6789),
                h2d::Msg::Stop
            ]
        );
        // a partial loopback waits for the rest
        let mut got = Vec::new();
        assert_eq!(h2d::parse(&w[..5], |m| got.push(m)), Ok(2));
        assert_eq!(
            h2d::parse(&[9, 0], |_| {}),
            Err(h2d::ParseError::Unknown(9))
        );
    }
}
