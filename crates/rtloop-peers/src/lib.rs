//! # rtloop-peers
//!
//! The transports labs use today, and rtloop's stream, behind one writer/reader interface,
//! with the loops that measure them for `rtloop bench peers`: one writer process and 1..N
//! reader processes move int16 samples (384 channels at 30 kHz by default) in chunks, first
//! paced at the real rate (one-way latency, stamped at production and differenced at the
//! reader, in CLOCK_MONOTONIC), then as fast as the transport takes them (sustained
//! throughput at the slowest reader).
//!
//! | transport | what | delivery | reader waits on |
//! |---|---|---|---|
//! | `stream` | rtloop stream (2 s of history), lossless readers reading in place (zero-copy windows) | lossless | futex (after `--stream-spin-us`, default 0) |
//! | `lsl` | liblsl 1.18 outlet → inlets on localhost (the library pylsl bundles) | lossless (360 s buffer) | liblsl's condition variable |
//! | `zmq-ipc`, `zmq-tcp` | libzmq 4.3 (the library pyzmq bundles) XPUB → SUB | lossless (`ZMQ_XPUB_NODROP`) | `zmq_recv` |
//! | `unix` | a plain UNIX stream socket per reader | lossless | `read` |
//! | `iceoryx2` | iceoryx2 publish/subscribe (crates.io), 2 s of samples per reader, read in place, + an event to wake readers | lossless (`Block`) | its listener |
//!
//! LSL and ZeroMQ are called through their C libraries as shipped in the PyPI wheels (pylsl,
//! pyzmq) so the figures are the libraries', not Python's: pylsl and pyzmq are thin wrappers
//! over these same calls.
//!
//! Every sample carries three native-endian u64 words at its start (see [`payload`]): its
//! absolute index (readers count lost and reordered samples), the chunk's production stamp
//! and the phase. So samples must hold at least 24 bytes (12 int16 channels). Every reader
//! reads every byte it is given (a sum over the rest of each sample, checked against the
//! writer's pattern): the socket-based transports deliver a copy, the shared-memory ones
//! (stream, iceoryx2) are read in place, and either way each byte is read once more.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod fieldtrip_limit;
pub mod fieldtrip_reference;
pub mod payload;
pub mod ring_to_disk;
pub mod run;
pub mod spsc;
pub mod transport;

use serde::{Deserialize, Serialize};

/// Why a transport could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The transport's library is not on this machine (or not built in).
    #[error("{transport} is not available here: {reason}")]
    Unavailable {
        /// Transport name.
        transport: &'static str,
        /// What was tried.
        reason: String,
    },
    /// The transport failed while setting up or moving data.
    #[error(transparent)]
    Transport(#[from] rtloop_transport::TransportError),
    /// A ring of the SPSC comparison failed.
    #[error("spsc: {what}")]
    Ring {
        /// What went wrong.
        what: String,
    },
    /// A trial's settings are out of range.
    #[error("{0}")]
    Config(String),
    /// Talking to the parent process failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The transports compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// rtloop's shared-memory stream.
    Stream,
    /// Lab Streaming Layer (liblsl).
    Lsl,
    /// ZeroMQ over its `ipc://` transport (a UNIX socket).
    ZmqIpc,
    /// ZeroMQ over TCP on 127.0.0.1.
    ZmqTcp,
    /// A plain UNIX stream socket per reader.
    Unix,
    /// iceoryx2 publish/subscribe.
    Iceoryx2,
}

impl Transport {
    /// Every transport, rtloop first.
    pub const ALL: [Transport; 6] = [
        Transport::Stream,
        Transport::Lsl,
        Transport::ZmqIpc,
        Transport::ZmqTcp,
        Transport::Unix,
        Transport::Iceoryx2,
    ];

    /// The name used on the command line and in JSON.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Transport::Stream => "stream",
            Transport::Lsl => "lsl",
            Transport::ZmqIpc => "zmq-ipc",
            Transport::ZmqTcp => "zmq-tcp",
            Transport::Unix => "unix",
            Transport::Iceoryx2 => "iceoryx2",
        }
    }

    /// Whether this transport can be measured here; the error says why not and how to get it.
    pub fn check_available(self) -> Result<String, PeerError> {
        match self {
            Transport::Stream => Ok(format!("rtloop {}", env!("CARGO_PKG_VERSION"))),
            Transport::Unix => Ok("Linux AF_UNIX SOCK_STREAM".into()),
            Transport::Lsl => rtloop_lsl::Lsl::load()
                .map(|l| format!("liblsl {} ({})", l.version(), l.path.display()))
                .map_err(|e| PeerError::Unavailable {
                    transport: self.name(),
                    reason: e.to_string(),
                }),
            Transport::ZmqIpc | Transport::ZmqTcp => transport::zmq::Zmq::load()
                .map(|z| format!("libzmq {} ({})", z.version(), z.path.display())),
            Transport::Iceoryx2 => {
                if cfg!(feature = "iceoryx2") {
                    Ok("iceoryx2 0.7 (crates.io)".into())
                } else {
                    Err(PeerError::Unavailable {
                        transport: self.name(),
                        reason: "rtloop was built without the iceoryx2 feature".into(),
                    })
                }
            }
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Transport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Transport::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown transport {s:?}; allowed: {}",
                    Transport::ALL.map(Transport::name).join(", ")
                )
            })
    }
}

/// How readers wait for data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Wait {
    /// Each transport's blocking wait (futex, `read`, `zmq_recv`, liblsl's condition
    /// variable, an iceoryx2 listener): what a machine with fewer cores than processes needs.
    Block,
    /// Poll without blocking, as fast as the transport answers (the stream's written count,
    /// a non-blocking `read`, `ZMQ_DONTWAIT`, a zero-timeout pull, iceoryx2's `receive`):
    /// the lowest latency a reader with a core of its own gets.
    Spin,
}

impl Wait {
    /// The name used on the command line and in JSON.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Wait::Block => "block",
            Wait::Spin => "spin",
        }
    }
}

impl std::fmt::Display for Wait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One measurement: a transport, a data shape, a reader count and the phases' lengths.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Trial {
    /// What carries the samples.
    pub transport: Transport,
    /// Channels per sample (int16 each).
    pub channels: usize,
    /// Nominal sample rate, Hz: the latency phase is paced at it.
    pub rate: f64,
    /// Samples per chunk (one send, one message).
    pub chunk: usize,
    /// Reader processes.
    pub readers: usize,
    /// How readers wait.
    pub wait: Wait,
    /// Seconds of the paced latency phase.
    pub latency_seconds: f64,
    /// Seconds of the flat-out throughput phase.
    pub throughput_seconds: f64,
    /// A name unique to this trial (stream name, socket path stem, LSL outlet, service).
    pub tag: String,
    /// How long the stream's reader (and its writer waiting for room) spins before
    /// sleeping on the futex, µs.
    pub stream_spin_us: u64,
}

/// Bytes per int16 value.
pub const ITEMSIZE: usize = 2;

impl Trial {
    /// Bytes per sample.
    #[must_use]
    pub fn sample_bytes(&self) -> usize {
        self.channels * ITEMSIZE
    }

    /// Bytes per chunk.
    #[must_use]
    pub fn chunk_bytes(&self) -> usize {
        self.chunk * self.sample_bytes()
    }

    /// Nanoseconds between chunks at the nominal rate.
    #[must_use]
    pub fn period_ns(&self) -> u64 {
        (self.chunk as f64 / self.rate * 1e9) as u64
    }

    /// Refuse settings the loops cannot run, saying what is allowed.
    pub fn validate(&self) -> Result<(), PeerError> {
        let min_ch = payload::HEADER_BYTES.div_ceil(ITEMSIZE);
        if self.channels < min_ch || self.channels > 65_536 {
            return Err(PeerError::Config(format!(
                "channels {} out of range: allowed {min_ch}..=65536 (each sample carries a {}-byte header)",
                self.channels,
                payload::HEADER_BYTES
            )));
        }
        if !(self.rate.is_finite() && self.rate > 0.0 && self.rate <= 10_000_000.0) {
            return Err(PeerError::Config(format!(
                "rate {} out of range: allowed > 0 and <= 10000000 Hz",
                self.rate
            )));
        }
        if self.chunk == 0 || self.chunk > 65_536 {
            return Err(PeerError::Config(format!(
                "chunk {} out of range: allowed 1..=65536 samples",
                self.chunk
            )));
        }
        if self.chunk_bytes() > 64 << 20 {
            return Err(PeerError::Config(format!(
                "a chunk of {} samples x {} channels is {} bytes; allowed up to 64 MiB",
                self.chunk,
                self.channels,
                self.chunk_bytes()
            )));
        }
        if self.readers == 0 || self.readers > 16 {
            return Err(PeerError::Config(format!(
                "readers {} out of range: allowed 1..=16",
                self.readers
            )));
        }
        for (what, s) in [
            ("latency seconds", self.latency_seconds),
            ("throughput seconds", self.throughput_seconds),
        ] {
            if !(s.is_finite() && (0.0..=3600.0).contains(&s)) {
                return Err(PeerError::Config(format!(
                    "{what} {s} out of range: allowed 0..=3600"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> Trial {
        Trial {
            transport: Transport::Stream,
            channels: 384,
            rate: 30_000.0,
            chunk: 16,
            readers: 4,
            wait: Wait::Block,
            latency_seconds: 1.0,
            throughput_seconds: 1.0,
            tag: "t".into(),
            stream_spin_us: 0,
        }
    }

    #[test]
    fn bad_settings_are_refused_saying_what_is_allowed() {
        assert!(ok().validate().is_ok());
        let cases: Vec<(Trial, &str)> = vec![
            (
                Trial {
                    channels: 11,
                    ..ok()
                },
                "channels 11 out of range: allowed 12..=65536",
            ),
            (
                Trial { chunk: 0, ..ok() },
                "chunk 0 out of range: allowed 1..=65536",
            ),
            (
                Trial { readers: 0, ..ok() },
                "readers 0 out of range: allowed 1..=16",
            ),
            (
                Trial {
                    readers: 17,
                    ..ok()
                },
                "readers 17 out of range: allowed 1..=16",
            ),
            (Trial { rate: 0.0, ..ok() }, "rate 0 out of range"),
            (
                Trial {
                    rate: f64::NAN,
                    ..ok()
                },
                "rate NaN out of range",
            ),
            (
                Trial {
                    latency_seconds: -1.0,
                    ..ok()
                },
                "latency seconds -1 out of range: allowed 0..=3600",
            ),
            (
                Trial {
                    chunk: 65_536,
                    channels: 65_536,
                    ..ok()
                },
                "bytes; allowed up to 64 MiB",
            ),
        ];
        for (t, want) in cases {
            let e = t.validate().unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} should say {want:?}");
        }
    }

    #[test]
    fn transports_parse_by_name_and_an_unknown_one_lists_the_allowed() {
        for t in Transport::ALL {
            assert_eq!(t.name().parse::<Transport>(), Ok(t));
        }
        let e = "zeromq".parse::<Transport>().unwrap_err();
        assert_eq!(
            e,
            "unknown transport \"zeromq\"; allowed: stream, lsl, zmq-ipc, zmq-tcp, unix, iceoryx2"
        );
    }
}
