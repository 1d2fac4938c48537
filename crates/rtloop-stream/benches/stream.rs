//! Micro-benchmarks of the stream core, each group with its reference measured in the same
//! run (conventions §4.6): commit + read of 8 KiB packets against memcpy of the same bytes
//! (hot, and in and out of a buffer the size of the ring),
//! small messages, and the cross-thread hand-off against a bare cache-line ping-pong.
//! Every benchmark checks its data before timing. `cargo test --benches` runs each once.

// the reference ping-pong is deliberately bare std atomics, outside the loom facade
#![allow(clippy::disallowed_types)]

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rtloop_stream::{DType, ReaderMode, Stream, StreamConfig};

fn name(tag: &str) -> String {
    format!("bench-{tag}-{}", std::process::id())
}

struct Removed(String);
impl Drop for Removed {
    fn drop(&mut self) {
        let _ = Stream::remove(&self.0);
    }
}

/// Messages a commit/read ring keeps (32 MiB at 8 KiB).
const CAPACITY: usize = 4096;

/// Same-thread commit then read back of `bytes`-sized messages, against memcpy.
fn commit_and_read(c: &mut Criterion) {
    let mut g = c.benchmark_group("commit_read");
    for bytes in [64usize, 1024, 8192] {
        g.throughput(Throughput::Bytes(bytes as u64));
        let src = vec![0x5au8; bytes];
        let mut dst = vec![0u8; bytes];
        g.bench_with_input(
            BenchmarkId::new("memcpy (reference)", bytes),
            &bytes,
            |b, _| {
                b.iter(|| {
                    dst.copy_from_slice(black_box(&src));
                    black_box(&mut dst);
                });
            },
        );
        // the stream's own data movement without its protocol: copy into slot i of a
        // ring-sized buffer, then out of it (the same footprint, so the same cache level)
        let mut ring = vec![0u8; bytes * CAPACITY];
        let mut slot = 0usize;
        // correctness first (here, not after the run: a filter may skip the run)
        ring[..bytes].copy_from_slice(&src);
        dst.copy_from_slice(&ring[..bytes]);
        assert_eq!(dst, src);
        g.bench_with_input(
            BenchmarkId::new("memcpy in+out of a ring-sized buffer (reference)", bytes),
            &bytes,
            |b, _| {
                b.iter(|| {
                    let cell = &mut ring[slot * bytes..(slot + 1) * bytes];
                    cell.copy_from_slice(black_box(&src));
                    dst.copy_from_slice(cell);
                    black_box(&mut dst);
                    slot = (slot + 1) % CAPACITY;
                });
            },
        );
        let n = name(&format!("cr{bytes}"));
        let _guard = Removed(n.clone());
        let s = Stream::create(
            &n,
            &StreamConfig::new(DType::U8, bytes, 0.0, CAPACITY as u64),
        )
        .unwrap();
        let mut w = s.writer().unwrap();
        let mut r = s.reader(ReaderMode::Latest).unwrap();
        let mut out = vec![0u8; bytes];
        // correctness first
        w.write(&src).unwrap();
        assert_eq!(r.pull_into(&mut out, None, 1).unwrap().n, 1);
        assert_eq!(out, src);
        g.bench_with_input(
            BenchmarkId::new("stream write+pull", bytes),
            &bytes,
            |b, _| {
                b.iter(|| {
                    let mut guard = w.reserve(1).unwrap();
                    guard.bytes_mut().copy_from_slice(black_box(&src));
                    guard.commit();
                    r.pull_into(&mut out, None, 1).unwrap();
                    black_box(&out);
                });
            },
        );
    }
    g.finish();
}

/// One-way hand-off between two threads (RTT/2): a stream echo against two bare atomics.
fn handoff(c: &mut Criterion) {
    let mut g = c.benchmark_group("handoff_rtt");
    g.measurement_time(Duration::from_secs(3));
    {
        let ping = Arc::new(AtomicU64::new(0));
        let pong = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let echo = {
            let (ping, pong, stop) = (ping.clone(), pong.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut last = 0;
                while !stop.load(Ordering::Relaxed) {
                    let v = ping.load(Ordering::Acquire);
                    if v != last {
                        last = v;
                        pong.store(v, Ordering::Release);
                    }
                    std::hint::spin_loop();
                }
            })
        };
        let mut i = 0u64;
        g.bench_function("cache-line ping-pong (reference)", |b| {
            b.iter(|| {
                i += 1;
                ping.store(i, Ordering::Release);
                while pong.load(Ordering::Acquire) != i {
                    std::hint::spin_loop();
                }
            });
        });
        stop.store(true, Ordering::Relaxed);
        echo.join().unwrap();
    }
    {
        let (na, nb) = (name("ha"), name("hb"));
        let _guards = (Removed(na.clone()), Removed(nb.clone()));
        let cfg = StreamConfig::new(DType::U64, 1, 0.0, 512);
        let (sa, sb) = (
            Stream::create(&na, &cfg).unwrap(),
            Stream::create(&nb, &cfg).unwrap(),
        );
        let mut wa = sa.writer().unwrap();
        let mut rb = sb.reader(ReaderMode::Latest).unwrap();
        rb.set_spin(Duration::from_secs(5));
        let echo = {
            let (mut ra, mut wb) = (sa.reader(ReaderMode::Latest).unwrap(), sb.writer().unwrap());
            ra.set_spin(Duration::from_secs(5));
            std::thread::spawn(move || {
                let mut buf = [0u8; 8];
                loop {
                    ra.wait_available(1, None).unwrap();
                    ra.pull_into(&mut buf, None, 1).unwrap();
                    let v = u64::from_ne_bytes(buf);
                    if v == u64::MAX {
                        return;
                    }
                    wb.write(&[v]).unwrap();
                }
            })
        };
        let mut buf = [0u8; 8];
        let mut i = 0u64;
        g.bench_function("stream echo, spin", |b| {
            b.iter(|| {
                i += 1;
                wa.write(&[i]).unwrap();
                rb.wait_available(1, None).unwrap();
                rb.pull_into(&mut buf, None, 1).unwrap();
                assert_eq!(u64::from_ne_bytes(buf), i);
            });
        });
        wa.write(&[u64::MAX]).unwrap();
        echo.join().unwrap();
    }
    g.finish();
}

criterion_group!(benches, commit_and_read, handoff);
criterion_main!(benches);
