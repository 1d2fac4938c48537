//! The recorder's reference: its writes without the recorder, from the same place.
//!
//! `rtloop bench pipeline` divides the lossless recorder's MB/s by this. A producer thread
//! fills a ring of the stream's footprint as fast as it can with the blocks the stream's
//! writer commits, waiting for room as a lossless stream's writer does (spin 20 µs, then
//! sleep until woken); this thread writes
//! what is there straight from the ring (at most a recorder's window at a time) to
//! data.bin, 8 bytes a sample to timestamps.bin, both through 1 MiB buffers, flushes every
//! `flush_every`, and every `sync_every` fsyncs both and rewrites header.json, then does a
//! final flush and fsync: the recorder's files and cadence. Nothing else: no stream, no
//! reader slot, no stamps read, no validation, no header contents.
//!
//! Until 2026-11-25 the reference wrote one cache-hot block over and over with no producer
//! running, less work than the recorder does (it reads a ring another CPU is filling).

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::PeerError;

/// One run.
#[derive(Debug, Clone)]
pub struct RingToDisk {
    /// Bytes per sample.
    pub sample_bytes: usize,
    /// Samples the ring holds.
    pub capacity: usize,
    /// What the producer copies in each time (whole samples).
    pub block: Vec<u8>,
    /// The most samples written at once.
    pub chunk_samples: usize,
    /// Flush both files this often.
    pub flush_every: Duration,
    /// fsync both files (and rewrite header.json) this often.
    pub sync_every: Duration,
    /// How long the producer produces.
    pub seconds: Duration,
}

/// What a run wrote.
#[derive(Debug, Clone, Copy)]
pub struct Written {
    /// Sample bytes written to data.bin.
    pub bytes: u64,
    /// From the producer's start to the last fsync.
    pub elapsed: Duration,
}

/// Run into the directory `out` (which must exist).
pub fn run(out: &Path, cfg: &RingToDisk) -> Result<Written, PeerError> {
    let sb = cfg.sample_bytes;
    let n = cfg.block.len() / sb.max(1);
    if sb == 0 || n == 0 || cfg.block.len() % sb != 0 || cfg.capacity < n {
        return Err(PeerError::Config(format!(
            "the ring must hold at least one block of whole samples: sample_bytes {sb}, block {} bytes, capacity {}",
            cfg.block.len(),
            cfg.capacity
        )));
    }
    let cap = cfg.capacity;
    // touched once before the clock starts (a stream's pages are faulted in at creation)
    let mut ring = vec![1u8; cap * sb];
    let base = ring.as_mut_ptr() as usize;
    let head = Arc::new(AtomicU64::new(0)); // samples produced
    let tail = Arc::new(AtomicU64::new(0)); // samples written out
    let done = Arc::new(AtomicBool::new(false));
    let open = |f: &str| -> Result<BufWriter<std::fs::File>, PeerError> {
        Ok(BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(out.join(f))?,
        ))
    };
    let (mut data, mut stamps) = (open("data.bin")?, open("timestamps.bin")?);
    let chunk = cfg.chunk_samples.clamp(1, cap);
    let stamp_bytes = vec![0u8; chunk * 8];
    let t = Instant::now();
    let waiting = Arc::new(AtomicBool::new(false)); // the producer sleeps for room
    let producer = {
        let (head, tail, done, waiting) =
            (head.clone(), tail.clone(), done.clone(), waiting.clone());
        let (block, secs) = (cfg.block.clone(), cfg.seconds);
        std::thread::spawn(move || {
            let mut h = 0u64;
            while t.elapsed() < secs {
                // SYNC: Acquire pairs with the writing thread's Release of `tail`: the
                // samples below it are written out, their slots free.
                let room = || h + n as u64 - tail.load(Ordering::Acquire) <= cap as u64;
                // as a lossless stream's writer waits: spin 20 µs, then sleep until the
                // writing thread hands room back (it wakes us; a lost wake-up costs 1 ms)
                let spin_until = Instant::now() + Duration::from_micros(20);
                while !room() {
                    if Instant::now() < spin_until {
                        std::hint::spin_loop();
                        continue;
                    }
                    // SYNC: SeqCst store, then the room check: Dekker with the writing
                    // thread's SeqCst load after its `tail` store.
                    waiting.store(true, Ordering::SeqCst);
                    if !room() {
                        std::thread::park_timeout(Duration::from_millis(1));
                    }
                    // SYNC: Relaxed: only ends the announcement.
                    waiting.store(false, Ordering::Relaxed);
                }
                for (k, sample) in block.chunks_exact(sb).enumerate() {
                    let slot = ((h + k as u64) % cap as u64) as usize;
                    // SAFETY: sample `h + k` is not published (`>= head`) and its slot was
                    // written out (`h + k < tail + cap`), so nothing reads it now; the slot
                    // is `sb` bytes inside the ring, which outlives this thread (joined
                    // before the ring is dropped).
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            sample.as_ptr(),
                            (base as *mut u8).add(slot * sb),
                            sb,
                        );
                    }
                }
                h += n as u64;
                // SYNC: Release publishes the samples' bytes with the new head.
                head.store(h, Ordering::Release);
            }
            // SYNC: Release: stored after the last head, read before it (below).
            done.store(true, Ordering::Release);
        })
    };
    let sync = |d: &mut BufWriter<std::fs::File>,
                s: &mut BufWriter<std::fs::File>,
                samples: u64|
     -> Result<(), PeerError> {
        for w in [&mut *d, &mut *s] {
            w.flush()?;
            w.get_ref().sync_data()?;
        }
        std::fs::write(
            out.join("header.json"),
            format!("{{\"samples\": {samples}, \"complete\": false}}\n"),
        )?;
        Ok(())
    };
    let (mut last_flush, mut last_sync) = (Instant::now(), Instant::now());
    let mut written = 0u64;
    let io = (|| -> Result<(), PeerError> {
        loop {
            // SYNC: Acquire pairs with the producer's Release of `done`: its last head is
            // then seen by the load below.
            let finished = done.load(Ordering::Acquire);
            // SYNC: Acquire pairs with the producer's Release of `head`: the bytes of the
            // samples below it are complete.
            let h = head.load(Ordering::Acquire);
            if h == written {
                if finished {
                    break;
                }
                std::hint::spin_loop();
                continue;
            }
            // what is there, at most a chunk, up to the ring's end (a stream's ring is mapped
            // twice and needs no split; this one splits once a lap)
            let first = (written % cap as u64) as usize;
            let k = ((h - written) as usize).min(chunk).min(cap - first);
            // SAFETY: samples `[written, written + k)` are published (`< head`) and not
            // handed back (`>= tail`), so the producer does not store to them; they lie
            // inside the ring, which outlives this borrow.
            let window =
                unsafe { std::slice::from_raw_parts((base as *const u8).add(first * sb), k * sb) };
            data.write_all(window)?;
            stamps.write_all(&stamp_bytes[..k * 8])?;
            written += k as u64;
            // SYNC: SeqCst (a Release store too: hands the slots back after the write that
            // read them), then the SeqCst load: either the producer sees the room or we see
            // it asleep and wake it.
            tail.store(written, Ordering::SeqCst);
            if waiting.load(Ordering::SeqCst) {
                producer.thread().unpark();
            }
            if last_flush.elapsed() >= cfg.flush_every {
                last_flush = Instant::now();
                if last_sync.elapsed() >= cfg.sync_every {
                    last_sync = Instant::now();
                    sync(&mut data, &mut stamps, written)?;
                } else {
                    data.flush()?;
                    stamps.flush()?;
                }
            }
        }
        sync(&mut data, &mut stamps, written)
    })();
    if io.is_err() {
        // nothing writes out any more: let a producer waiting for room run to its end
        // SYNC: Release: as above.
        tail.store(u64::MAX / 2, Ordering::Release);
    }
    let joined = producer.join();
    drop(ring);
    joined.map_err(|_| PeerError::Config("the reference's producer panicked".into()))?;
    io?;
    Ok(Written {
        bytes: written * sb as u64,
        elapsed: t.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte the producer made reaches data.bin as whole blocks, 8 stamp bytes a sample reach
    /// timestamps.bin, and header.json says how many samples; a ring of less than one block
    /// is refused, saying what is needed.
    #[test]
    fn writes_whole_blocks_with_their_stamps_and_header_and_refuses_a_ring_smaller_than_a_block() {
        let dir = tempfile::tempdir().unwrap();
        let block: Vec<u8> = (0..4 * 16).map(|i| i as u8).collect();
        let cfg = RingToDisk {
            sample_bytes: 16,
            capacity: 12,
            block: block.clone(),
            chunk_samples: 5,
            flush_every: Duration::from_millis(1),
            sync_every: Duration::from_millis(5),
            seconds: Duration::from_millis(50),
        };
        let w = run(dir.path(), &cfg).unwrap();
        let data = std::fs::read(dir.path().join("data.bin")).unwrap();
        assert!(w.bytes > 0);
        assert_eq!(data.len() as u64, w.bytes);
        assert_eq!(data.len() % block.len(), 0, "whole blocks");
        for (k, b) in data.chunks_exact(block.len()).enumerate() {
            assert_eq!(b, &block[..], "block {k}");
        }
        let stamps = std::fs::metadata(dir.path().join("timestamps.bin")).unwrap();
        assert_eq!(stamps.len(), w.bytes / 16 * 8);
        let header = std::fs::read_to_string(dir.path().join("header.json")).unwrap();
        assert!(
            header.contains(&format!("\"samples\": {}", w.bytes / 16)),
            "{header}"
        );

        let small = RingToDisk { capacity: 3, ..cfg };
        let e = run(dir.path(), &small).unwrap_err().to_string();
        assert!(
            e.contains("at least one block") && e.contains("capacity 3"),
            "{e}"
        );
    }
}
