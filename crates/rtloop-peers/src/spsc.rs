//! The stream against a bare single-producer single-consumer ring doing the same work.
//!
//! `rtloop bench stream` divides the stream's throughput by this reference, so the ratio
//! says what rtloop's protocol costs and nothing else. Both sides run the same way:
//!
//! * the same two processes, pinned to the same CPUs (producer on 0, consumer on 1);
//! * the same slot size and the same footprint (`capacity` packets of `packet_bytes`, one
//!   shared file in the stream directory);
//! * the producer copies one cache-hot packet into the next slot and writes the packet's
//!   sequence number into its first word, one packet per publication;
//! * the consumer takes what is available (up to 256 packets at a time) and checks each
//!   packet's first word in place, or (`copy_out`) copies every packet out into its own
//!   buffer first and checks it there;
//! * lossless: the producer waits for room; both sides spin while they wait (the stream's
//!   reader and writer spin before they would sleep, and in a throughput run they never get
//!   to sleep).
//!
//! The bare ring is Lamport's queue with cached indices: a `head` and a `tail` counter on
//! their own 128-byte lines, Release stores and Acquire loads, nothing else (no ownership
//! claims, no stamps, no overwrite markers, no statistics, no liveness).
//!
//! The same ring with records ([`Ring::BareRecords`]) also keeps, per packet, the records a
//! stream keeps, where a stream keeps them, and nothing else of its protocol: the
//! overwrite marker beside `head` (stored before the copy, checked by the consumer), the
//! packet's stamp from the writer's clock in a stamp array, the liveness heartbeat and commit
//! count on an owner line, and the load of a sleepers word after each publication. The
//! stream against it says what the stream's code costs beyond the records themselves; the
//! bare ring against it, what the records cost.
//!
//! The stamped ring ([`Ring::BareStamped`]) is the bare ring plus one of those records: each
//! packet's stamp, read from the writer's clock (the CPU's time-stamp counter, see
//! `rtloop_sys::StampClock`) and stored in the stamp array. The stream against it says what
//! everything but the stamp costs; the bare ring against it, what stamping every packet
//! costs (at 64 B, most of the gap: bench/README, "What 64 B packets are made of").

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rtloop_launch::ChildRole;
use rtloop_stream::{DType, ReaderMode, Stream, StreamConfig};
use rtloop_sys as sys;
use serde::{Deserialize, Serialize};

use crate::PeerError;

/// Which ring a pair runs over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ring {
    /// An rtloop stream (lossless reader).
    Stream,
    /// The bare reference ring.
    Bare,
    /// The bare ring that also stamps every packet from the writer's clock (see the module
    /// docs).
    #[serde(rename = "bare_stamped")]
    BareStamped,
    /// The bare ring that also keeps the stream's per-packet records (see the module docs).
    #[serde(rename = "bare_records")]
    BareRecords,
}

/// One producer/consumer run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairConfig {
    /// The ring.
    pub ring: Ring,
    /// The ring's name (a stream name, or the bare ring's file name).
    pub name: String,
    /// Bytes per packet (a multiple of 8).
    pub packet_bytes: u64,
    /// Packets the ring holds.
    pub capacity: u64,
    /// Packets to move.
    pub packets: u64,
    /// The consumer copies every packet out before checking it.
    pub copy_out: bool,
}

/// What a pair measured.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct PairResult {
    /// Packets whose first word was right.
    pub ok: u64,
    /// Packets whose first word was wrong.
    pub errors: u64,
    /// From the producer's first packet to the consumer's last check.
    pub seconds: f64,
    /// Packets per second.
    pub packets_per_s: f64,
    /// GB/s (1e9 bytes) of packets delivered.
    pub gb_per_s: f64,
}

/// The producer process of a pair.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProducerRole {
    /// The pair.
    pub pair: PairConfig,
    /// The CPU to pin to.
    pub cpu: Option<usize>,
}

impl ChildRole for ProducerRole {
    const NAME: &'static str = "spsc-producer";
}

/// The consumer process of a pair.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConsumerRole {
    /// The pair.
    pub pair: PairConfig,
    /// The CPU to pin to.
    pub cpu: Option<usize>,
}

impl ChildRole for ConsumerRole {
    const NAME: &'static str = "spsc-consumer";
}

/// The first word of packet `seq` (a pattern no neighbouring packet shares).
fn first_word(seq: u64) -> u64 {
    seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA5A5_A5A5
}

fn err(what: impl std::fmt::Display) -> PeerError {
    PeerError::Ring {
        what: what.to_string(),
    }
}

/// How long both sides of a stream pair spin before they would sleep: longer than any wait
/// in a throughput run, so they spin throughout, as the bare ring's sides do.
const SPIN: Duration = Duration::from_secs(10);

/// Packets handed over per consumer step at most (as the verification receiver does).
const BATCH: u64 = 256;

// ---------------------------------------------------------------------------------------
// the bare ring

/// Bytes before the slots: the `head` line (with the overwrite marker of the ring with
/// records at word 1) and the `tail` line.
const BARE_HEADER: usize = 256;

/// Bytes of the records after the slots, before the stamps: the owner line (heartbeat,
/// commit count) and the sleepers line (data and space sleepers), 128 B each.
const RECORDS_LINES: usize = 256;

/// The bare ring's shared file, mapped: header, slots, then the records (which only the
/// ring with records touches).
struct BareRing {
    file: sys::SharedFile,
    slot: usize,
    capacity: u64,
}

impl BareRing {
    fn path(name: &str) -> PathBuf {
        sys::shm_dir().join(format!(".rtloop-bare-{name}"))
    }

    fn len(slot: usize, capacity: u64) -> usize {
        BARE_HEADER + slot * capacity as usize + RECORDS_LINES + 8 * capacity as usize
    }

    fn create(name: &str, slot: usize, capacity: u64) -> Result<BareRing, PeerError> {
        let path = Self::path(name);
        let len = Self::len(slot, capacity);
        // every page faulted in up front, as the stream's are
        let file = sys::SharedFile::create(&path, len, true)
            .map_err(|e| err(format!("create {}: {e}", path.display())))?;
        Ok(BareRing {
            file,
            slot,
            capacity,
        })
    }

    fn open(name: &str, slot: usize, capacity: u64) -> Result<BareRing, PeerError> {
        let path = Self::path(name);
        let len = Self::len(slot, capacity);
        let file = sys::SharedFile::open(&path, len, true)
            .map_err(|e| err(format!("open {}: {e}", path.display())))?;
        Ok(BareRing {
            file,
            slot,
            capacity,
        })
    }

    /// `head` (packets published) or `tail` (packets consumed).
    fn counter(&self, k: usize) -> &AtomicU64 {
        self.word(k * 128)
    }

    /// The shared word at byte `offset` of the header or the records lines.
    fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(offset % 8 == 0 && offset + 8 <= self.records_offset() + RECORDS_LINES);
        // SAFETY: `offset` is 8-aligned and inside the mapping (asserted), and every word
        // there is only ever accessed atomically by both processes; the mapping outlives
        // `&self`.
        unsafe { &*self.file.base().as_ptr().add(offset).cast::<AtomicU64>() }
    }

    /// Where the records lines begin (after the slots).
    fn records_offset(&self) -> usize {
        BARE_HEADER + self.slot * self.capacity as usize
    }

    /// The stamp of packet `i`.
    fn stamp_ptr(&self, i: u64) -> *mut u64 {
        let off = self.records_offset() + RECORDS_LINES + (i % self.capacity) as usize * 8;
        // SAFETY: the stamps follow the records lines, `capacity` of them: inside the mapping.
        unsafe { self.file.base().as_ptr().add(off).cast::<u64>() }
    }

    fn slot_ptr(&self, i: u64) -> *mut u8 {
        // SAFETY: `i % capacity` is a slot index, so the offset is inside the mapping.
        unsafe {
            self.file
                .base()
                .as_ptr()
                .add(BARE_HEADER + (i % self.capacity) as usize * self.slot)
        }
    }
}

/// The words of the ring with records, where a stream keeps them.
struct Records<'a> {
    /// Beside `head`: slots of packets below `reserved - capacity` may be being overwritten.
    reserved: &'a AtomicU64,
    /// Owner line: the last commit's time, and commits so far.
    heartbeat: &'a AtomicU64,
    commits: &'a AtomicU64,
    /// Sleepers line: readers asleep for data, a writer asleep for room.
    data_waiters: &'a AtomicU64,
    space_waiters: &'a AtomicU64,
}

impl BareRing {
    fn records(&self) -> Records<'_> {
        let r = self.records_offset();
        Records {
            reserved: self.word(8),
            heartbeat: self.word(r),
            commits: self.word(r + 8),
            data_waiters: self.word(r + 128),
            space_waiters: self.word(r + 192),
        }
    }
}

/// The bare producer; with `STAMPS`, it also stamps every packet from the writer's clock;
/// with `RECORDS` too, it keeps the rest of the stream's per-packet records.
fn bare_produce<const STAMPS: bool, const RECORDS: bool>(p: &PairConfig) -> Result<u64, PeerError> {
    let ring = BareRing::open(&p.name, p.packet_bytes as usize, p.capacity)?;
    let (head, tail) = (ring.counter(0), ring.counter(1));
    let rec = ring.records();
    let mut clock = sys::StampClock::new();
    let hot = vec![0x5Au8; ring.slot];
    let start = sys::monotonic_ns();
    let mut cached_tail = 0u64;
    for seq in 0..p.packets {
        while seq - cached_tail >= p.capacity {
            // SYNC: Acquire pairs with the consumer's Release of `tail`: the slots it
            // consumed are free to overwrite.
            cached_tail = tail.load(Ordering::Acquire);
            if seq - cached_tail >= p.capacity {
                std::hint::spin_loop();
            }
        }
        if RECORDS {
            // SYNC: as the stream's `begin_overwrite`: Relaxed store, then a Release fence
            // that orders the slot's stores after it.
            rec.reserved.store(seq + 1, Ordering::Relaxed);
            std::sync::atomic::fence(Ordering::Release);
        }
        let dst = ring.slot_ptr(seq);
        // SAFETY: slot `seq` is not published (`seq >= head`) and was consumed (`seq -
        // tail < capacity`), so the consumer does not read it; it is `slot` bytes long and
        // 8-aligned (the header is 256 B and slots are multiples of 8 B).
        unsafe {
            std::ptr::copy_nonoverlapping(hot.as_ptr(), dst, ring.slot);
            dst.cast::<u64>().write(first_word(seq));
        }
        let stamp = if STAMPS {
            let stamp = clock.now_ns();
            // SAFETY: an aligned word of the stamps, which only this producer stores to.
            unsafe { ring.stamp_ptr(seq).write_volatile(stamp) };
            stamp
        } else {
            0
        };
        // SYNC: Release publishes the packet's bytes (and its stamp) with the new head.
        head.store(seq + 1, Ordering::Release);
        if RECORDS {
            // as the stream's light publication: a compiler barrier, then the sleepers word
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
            // SYNC: Relaxed: as the stream's (its barrier carries the ordering).
            std::hint::black_box(rec.data_waiters.load(Ordering::Relaxed));
            // SYNC: Relaxed: liveness and statistics, read without ordering.
            rec.heartbeat.store(stamp, Ordering::Relaxed);
            rec.commits.store(seq + 1, Ordering::Relaxed);
        }
    }
    Ok(start)
}

/// The bare consumer; with `RECORDS`, it also checks the overwrite marker and looks for a
/// sleeping producer after handing slots back, as a stream's lossless reader does.
fn bare_consume<const RECORDS: bool>(
    p: &PairConfig,
    ready: &mut dyn FnMut(),
) -> Result<(u64, u64), PeerError> {
    let ring = BareRing::open(&p.name, p.packet_bytes as usize, p.capacity)?;
    let (head, tail) = (ring.counter(0), ring.counter(1));
    let rec = ring.records();
    let mut copy = vec![
        0u64;
        if p.copy_out {
            (BATCH as usize) * ring.slot / 8
        } else {
            0
        }
    ];
    let words = ring.slot / 8;
    ready();
    let (mut consumed, mut errors) = (0u64, 0u64);
    while consumed < p.packets {
        // SYNC: Acquire pairs with the producer's Release of `head`: the packets before it
        // are complete.
        let available = head.load(Ordering::Acquire) - consumed;
        if available == 0 {
            std::hint::spin_loop();
            continue;
        }
        let n = available.min(BATCH).min(p.packets - consumed);
        // SYNC: Acquire, read after `head`: at least the marker of the packets published.
        let overwritten = RECORDS
            && consumed
                < rec
                    .reserved
                    .load(Ordering::Acquire)
                    .saturating_sub(p.capacity);
        if overwritten {
            // overwritten before we read them (never in a lossless run): counted as wrong
            errors += n;
        } else {
            for k in 0..n {
                let seq = consumed + k;
                let src = ring.slot_ptr(seq);
                let first = if p.copy_out {
                    let dst = &mut copy[k as usize * words..(k as usize + 1) * words];
                    // SAFETY: slot `seq` is published (`seq < head`) and not yet released to
                    // the producer (`seq >= tail`), so nothing writes it; `dst` is `slot` bytes.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            src,
                            dst.as_mut_ptr().cast::<u8>(),
                            ring.slot,
                        );
                    }
                    dst[0]
                } else {
                    // SAFETY: as above; the first word is 8-aligned.
                    unsafe { src.cast::<u64>().read() }
                };
                if first != first_word(seq) {
                    errors += 1;
                }
            }
        }
        consumed += n;
        // SYNC: Release hands the slots back after every read of them above.
        tail.store(consumed, Ordering::Release);
        if RECORDS {
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
            // SYNC: Relaxed: as the stream reader's (its barrier carries the ordering).
            std::hint::black_box(rec.space_waiters.load(Ordering::Relaxed));
        }
    }
    Ok((consumed - errors, errors))
}

// ---------------------------------------------------------------------------------------
// the stream

fn stream_produce(p: &PairConfig) -> Result<u64, PeerError> {
    let stream = Stream::open(&p.name).map_err(err)?;
    let mut w = stream.writer().map_err(err)?;
    w.set_lossless_timeout(Duration::from_secs(60));
    // spin while waiting for room, as the bare ring's producer does (the default spins 50 µs
    // and then sleeps on the futex, which a throughput run must not measure)
    w.set_spin(SPIN);
    let hot = vec![0x5A5A_5A5A_5A5A_5A5Au64; p.packet_bytes as usize / 8];
    let start = sys::monotonic_ns();
    for seq in 0..p.packets {
        let mut g = w.reserve(1).map_err(err)?;
        let pkt = g.as_mut_slice::<u64>().map_err(err)?;
        pkt.copy_from_slice(&hot);
        pkt[0] = first_word(seq);
        g.commit();
    }
    Ok(start)
}

fn stream_consume(p: &PairConfig, ready: &mut dyn FnMut()) -> Result<(u64, u64), PeerError> {
    let stream = Stream::open(&p.name).map_err(err)?;
    let mut r = stream.reader(ReaderMode::Lossless).map_err(err)?;
    r.set_spin(SPIN);
    let words = p.packet_bytes as usize / 8;
    let mut copy = vec![
        0u8;
        if p.copy_out {
            BATCH as usize * p.packet_bytes as usize
        } else {
            0
        }
    ];
    ready();
    let (mut consumed, mut errors) = (0u64, 0u64);
    while consumed < p.packets {
        r.wait_available(1, Some(Duration::from_secs(60)))
            .map_err(err)?;
        let first = r.cursor();
        let end = (first + r.available().min(BATCH)).min(p.packets);
        let window = r.window_as::<u64>(first, end).map_err(err)?;
        if p.copy_out {
            let bytes = &mut copy[..(end - first) as usize * p.packet_bytes as usize];
            window.window().copy_to(bytes).map_err(err)?;
            for (k, pkt) in bytes.chunks_exact(p.packet_bytes as usize).enumerate() {
                let w0 = u64::from_ne_bytes(pkt[..8].try_into().expect("8 bytes"));
                if w0 != first_word(first + k as u64) {
                    errors += 1;
                }
            }
        } else {
            // SAFETY: a lossless reader's window: the writer waits for this reader and does
            // not store to these samples until the cursor moves past them (below).
            let values = unsafe { window.values() };
            for (k, pkt) in values.chunks_exact(words).enumerate() {
                if pkt[0] != first_word(first + k as u64) {
                    errors += 1;
                }
            }
        }
        consumed = end;
        r.seek(end).map_err(err)?;
    }
    Ok((consumed - errors, errors))
}

// ---------------------------------------------------------------------------------------
// the processes

#[derive(Serialize, Deserialize)]
struct Report {
    start_ns: u64,
    end_ns: u64,
    ok: u64,
    errors: u64,
}

rtloop_launch::register_role!(ProducerRole, run_producer);
rtloop_launch::register_role!(ConsumerRole, run_consumer);

/// In the producer process: run [`ProducerRole`], print its start time.
pub fn run_producer(role: &ProducerRole) -> Result<(), PeerError> {
    if let Some(c) = role.cpu {
        let _ = sys::pin_to_cpu(c);
    }
    // a stream's writer publishes with a fence until the process is registered for the
    // light barrier (about 10 ms): measure the steady state, not the start
    let _ = rtloop_stream::prepare_light_publication(Duration::from_secs(1));
    rtloop_launch::ready();
    let start_ns = match role.pair.ring {
        Ring::Stream => stream_produce(&role.pair)?,
        Ring::Bare => bare_produce::<false, false>(&role.pair)?,
        Ring::BareStamped => bare_produce::<true, false>(&role.pair)?,
        Ring::BareRecords => bare_produce::<true, true>(&role.pair)?,
    };
    let r = Report {
        start_ns,
        end_ns: 0,
        ok: 0,
        errors: 0,
    };
    println!("{}", serde_json::to_string(&r).map_err(err)?);
    Ok(())
}

/// In the consumer process: run [`ConsumerRole`], print its end time and checks.
pub fn run_consumer(role: &ConsumerRole) -> Result<(), PeerError> {
    if let Some(c) = role.cpu {
        let _ = sys::pin_to_cpu(c);
    }
    // as the producer: a lossless reader's cursor store is light once registered
    let _ = rtloop_stream::prepare_light_publication(Duration::from_secs(1));
    let (ok, errors) = match role.pair.ring {
        Ring::Stream => stream_consume(&role.pair, &mut rtloop_launch::ready)?,
        // the stamps are the producer's: the consumer of the stamped ring is the bare one
        Ring::Bare | Ring::BareStamped => {
            bare_consume::<false>(&role.pair, &mut rtloop_launch::ready)?
        }
        Ring::BareRecords => bare_consume::<true>(&role.pair, &mut rtloop_launch::ready)?,
    };
    let r = Report {
        start_ns: 0,
        end_ns: sys::monotonic_ns(),
        ok,
        errors,
    };
    println!("{}", serde_json::to_string(&r).map_err(err)?);
    Ok(())
}

/// Run one pair: make the ring, start the consumer (ready once registered) and then the
/// producer, collect both reports. The ring is removed afterwards.
pub fn run_pair(pair: &PairConfig) -> Result<PairResult, PeerError> {
    if pair.packet_bytes == 0 || pair.packet_bytes % 8 != 0 || pair.capacity == 0 {
        return Err(PeerError::Config(format!(
            "packet_bytes must be a positive multiple of 8 and capacity positive, got {} and {}",
            pair.packet_bytes, pair.capacity
        )));
    }
    // the ring lives as long as this function: removed on every way out
    enum Made {
        Stream(String),
        Bare(#[allow(dead_code)] BareRing),
    }
    impl Drop for Made {
        fn drop(&mut self) {
            if let Made::Stream(name) = self {
                let _ = Stream::remove(name);
            }
        }
    }
    let _made = match pair.ring {
        Ring::Stream => {
            let cfg = StreamConfig::new(
                DType::U64,
                pair.packet_bytes as usize / 8,
                0.0,
                pair.capacity,
            );
            let s = Stream::create(&pair.name, &cfg).map_err(err)?;
            if s.info().capacity != pair.capacity {
                let _ = Stream::remove(&pair.name);
                return Err(PeerError::Config(format!(
                    "capacity {} is not a whole number of pages of {}-byte packets (the stream would round it to {}); the bare ring must have the same footprint",
                    pair.capacity,
                    pair.packet_bytes,
                    s.info().capacity
                )));
            }
            Made::Stream(pair.name.clone())
        }
        Ring::Bare | Ring::BareStamped | Ring::BareRecords => Made::Bare(BareRing::create(
            &pair.name,
            pair.packet_bytes as usize,
            pair.capacity,
        )?),
    };
    let pin = sys::online_cpus() >= 2;
    let (mut consumer, mut c_out) = rtloop_launch::spawn_ready(&ConsumerRole {
        pair: pair.clone(),
        cpu: pin.then_some(1),
    })
    .map_err(err)?;
    let (mut producer, mut p_out) = rtloop_launch::spawn_ready(&ProducerRole {
        pair: pair.clone(),
        cpu: pin.then_some(0),
    })
    .map_err(err)?;
    let read =
        |out: &mut std::io::BufReader<std::process::ChildStdout>| -> Result<Report, PeerError> {
            use std::io::BufRead;
            let mut line = String::new();
            out.read_line(&mut line)?;
            serde_json::from_str(line.trim())
                .map_err(|e| err(format!("a child's report {line:?}: {e}")))
        };
    let p = read(&mut p_out);
    let c = read(&mut c_out);
    let (ps, cs) = (producer.wait()?, consumer.wait()?);
    let (p, c) = (p?, c?);
    if !ps.success() || !cs.success() {
        return Err(err(format!("producer {ps}, consumer {cs}")));
    }
    let seconds = c.end_ns.saturating_sub(p.start_ns) as f64 / 1e9;
    let delivered = c.ok + c.errors;
    Ok(PairResult {
        ok: c.ok,
        errors: c.errors,
        seconds,
        packets_per_s: delivered as f64 / seconds.max(1e-9),
        gb_per_s: delivered as f64 * pair.packet_bytes as f64 / seconds.max(1e-9) / 1e9,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_records_lie_beside_the_slots_not_on_them() {
        // every slot filled with one pattern, every record word written: no record lands
        // on a slot or on another record, and the last stamp ends where the file ends
        let (slot, cap) = (64usize, 8u64);
        let name = format!("records-layout-{}", sys::pid());
        let ring = BareRing::create(&name, slot, cap).unwrap();
        for i in 0..cap {
            // SAFETY: slot `i` of a ring nobody else maps.
            unsafe { std::ptr::write_bytes(ring.slot_ptr(i), 0xAB, slot) };
        }
        let rec = ring.records();
        let words = [
            rec.reserved,
            rec.heartbeat,
            rec.commits,
            rec.data_waiters,
            rec.space_waiters,
        ];
        for (k, w) in words.iter().enumerate() {
            w.store(k as u64 + 1, Ordering::Relaxed);
        }
        for i in 0..cap {
            // SAFETY: stamp `i` of a ring nobody else maps.
            unsafe { ring.stamp_ptr(i).write(100 + i) };
        }
        for i in 0..cap {
            // SAFETY: as above.
            let bytes = unsafe { std::slice::from_raw_parts(ring.slot_ptr(i), slot) };
            assert!(
                bytes.iter().all(|&b| b == 0xAB),
                "slot {i} was written over"
            );
            // SAFETY: as above.
            assert_eq!(unsafe { ring.stamp_ptr(i).read() }, 100 + i);
        }
        for (k, w) in words.iter().enumerate() {
            assert_eq!(w.load(Ordering::Relaxed), k as u64 + 1, "record word {k}");
        }
        assert_eq!(ring.counter(0).load(Ordering::Relaxed), 0, "head");
        assert_eq!(ring.counter(1).load(Ordering::Relaxed), 0, "tail");
        let end = ring.stamp_ptr(cap - 1) as usize + 8 - ring.file.base().as_ptr() as usize;
        assert_eq!(end, ring.file.len());
        let path = BareRing::path(&name);
        drop(ring);
        assert!(!path.exists(), "the creator removes the file");
    }

    /// What one producer leaves in its ring after `cap` packets (no consumer needed: they
    /// fit): the stamps, then the heartbeat, commits and `reserved` words.
    fn after_one_lap(ring: Ring, name: &str) -> (Vec<u64>, [u64; 3]) {
        let (slot, cap) = (64usize, 16u64);
        let made = BareRing::create(name, slot, cap).unwrap();
        let pair = PairConfig {
            ring,
            name: name.into(),
            packet_bytes: slot as u64,
            capacity: cap,
            packets: cap,
            copy_out: false,
        };
        match ring {
            Ring::Bare => bare_produce::<false, false>(&pair),
            Ring::BareStamped => bare_produce::<true, false>(&pair),
            Ring::BareRecords => bare_produce::<true, true>(&pair),
            Ring::Stream => unreachable!("a bare ring"),
        }
        .unwrap();
        assert_eq!(made.counter(0).load(Ordering::Relaxed), cap, "head");
        // SAFETY: the stamps of a ring no other process maps; the producer has returned.
        let stamps = (0..cap)
            .map(|i| unsafe { made.stamp_ptr(i).read() })
            .collect();
        let rec = made.records();
        let words =
            [&rec.heartbeat, &rec.commits, &rec.reserved].map(|w| w.load(Ordering::Relaxed));
        (stamps, words)
    }

    #[test]
    fn each_reference_ring_keeps_what_it_says_and_nothing_more() {
        let name = |r: &str| format!("refs-{r}-{}", sys::pid());
        // the bare ring: no stamp, no record
        let (stamps, words) = after_one_lap(Ring::Bare, &name("bare"));
        assert!(stamps.iter().all(|&s| s == 0), "{stamps:?}");
        assert_eq!(words, [0, 0, 0]);
        // the stamped ring: every packet stamped from the clock, in order, and nothing else
        let before = sys::monotonic_ns();
        let (stamps, words) = after_one_lap(Ring::BareStamped, &name("stamped"));
        let after = sys::monotonic_ns();
        assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
        // the writer's clock extrapolates CLOCK_MONOTONIC: allow it a millisecond's slack
        assert!(stamps[0] + 1_000_000 >= before && stamps[15] <= after + 1_000_000);
        assert_eq!(words, [0, 0, 0], "the stamped ring keeps no other record");
        // the ring with records: the stamps too, and the last packet's heartbeat, count and
        // overwrite marker
        let (stamps, words) = after_one_lap(Ring::BareRecords, &name("records"));
        assert!(stamps.iter().all(|&s| s > 0) && stamps.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(words, [stamps[15], 16, 16]);
    }

    #[test]
    fn first_words_of_neighbouring_packets_differ() {
        let w: Vec<u64> = (0..1000).map(first_word).collect();
        let mut sorted = w.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), w.len());
    }
}
