//! The light barrier on real threads: a writer publishing without a fence (its `written`
//! store, a compiler barrier, its `waiters` load) hands samples to a reader that goes to
//! sleep for each one, over and over, with both threads released from one spin barrier at
//! the same instant and random small gaps on both sides, pinned to the same CPU and to two
//! different CPUs. Every hand-off is counted: found by the reader before it announced
//! itself, found at its re-check after announcing (the writer's `waiters` load came first:
//! the race the sleeper's `membarrier` decides), woken by the writer, or lost (the reader's
//! re-check missed the sample, it slept and found it only when the sleep ran out,
//! `tests_knobs::SLEPT_THROUGH_A_COMMIT`, and the commit did not bump the futex word).
//!
//! On x86 the only reordering that can lose such a wake-up is the writer's `waiters` load
//! passing its own `written` store (store buffer); without the sleeper's `membarrier`
//! nothing forbids it (`hand_offs_without_the_sleepers_membarrier_lose_wake_ups`).
//!
//! `RTLOOP_SOAK=1` runs 10^8 hand-offs in an optimised build (`scripts/test-all.sh`'s
//! `handoff` stage runs these tests with `--release`); `RTLOOP_HANDOFFS=N` runs N.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backing::{Backing, HeapBacking};
use crate::sync::{tests_knobs, AtomicU64, Ordering};
use crate::{DType, ReaderMode, Stream, StreamConfig, WaitError};

/// Where the two threads run.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Placement {
    /// Both on one CPU: the writer runs only when the reader gave the CPU up (asleep, or
    /// yielding in the barrier), so every commit meets a reader at some point of its way in.
    SameCpu(usize),
    /// Writer and reader on two CPUs at once: the placement where a store buffer can hold
    /// the writer's `written` while its `waiters` load runs.
    TwoCpus { writer: usize, reader: usize },
}

/// What the sleeper leaves out on purpose.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sleeper {
    /// The shipped protocol.
    Shipped,
    /// No `membarrier` before the last check: the light writer's store→load is unordered.
    WithoutMembarrier,
}

/// The counts of a run.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    hand_offs: u64,
    /// The reader found the sample before it announced itself (the writer was first).
    before_announcing: u64,
    /// The reader announced itself, then found the sample at its re-check: the writer's
    /// `waiters` load missed the announcement, and the re-check saw its `written` store.
    at_the_recheck: u64,
    /// The writer saw the announced reader and bumped the futex word.
    woken: u64,
    /// The reader slept through the commit, which did not bump the word: lost (or late).
    lost: u64,
    elapsed: Duration,
}

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is plain bits, zeroed is the empty set; the kernel fills at most
    // `size_of::<cpu_set_t>()` bytes of it, the size passed.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// The placements this machine allows: one CPU shared, and two CPUs if there are two.
fn placements() -> Vec<Placement> {
    let cpus = allowed_cpus();
    assert!(
        !cpus.is_empty(),
        "sched_getaffinity gave no CPU: {}",
        std::io::Error::last_os_error()
    );
    let mut p = vec![Placement::SameCpu(cpus[0])];
    if cpus.len() >= 2 {
        p.push(Placement::TwoCpus {
            writer: cpus[0],
            reader: cpus[1],
        });
    } else {
        eprintln!(
            "only CPU {} is allowed here: the two-CPU placement is left out",
            cpus[0]
        );
    }
    p
}

/// One sample of `width` u64 channels per hand-off; random gaps below `writer_gap` spin-loop
/// hints before the commit and below `reader_gap` before the wait.
#[derive(Clone, Copy, Debug)]
struct Shape {
    width: usize,
    writer_gap: u32,
    reader_gap: u32,
    /// Its share of a run's hand-offs.
    weight: u64,
}

/// A small xorshift: the gaps, the same sequence on every run of a seed.
struct Gaps(u64);

impl Gaps {
    fn next(&mut self, below: u32) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % u64::from(below.max(1))) as u32
    }
}

fn spin(n: u32) {
    for _ in 0..n {
        std::hint::spin_loop();
    }
}

/// Both threads arrive, then both leave at once: arrival `k` (counted from 1) of each thread
/// returns once the other thread made its arrival `k` too. On one CPU the waiting thread
/// yields the CPU at once (the other cannot arrive while it spins).
fn meet(arrivals: &AtomicU64, k: u64, yield_at_once: bool) {
    // SYNC: AcqRel/Acquire: a meeting of this test only (it orders nothing of the stream).
    arrivals.fetch_add(1, Ordering::AcqRel);
    let mut spins = 0u32;
    while arrivals.load(Ordering::Acquire) < 2 * k {
        if yield_at_once || spins >= 20_000 {
            std::thread::yield_now();
        } else {
            spins += 1;
            std::hint::spin_loop();
        }
    }
}

/// `rounds` hand-offs of one sample each (`width` u64 channels) from a light writer to a
/// reader that sleeps for it; stops early once `stop_after` were lost (each costs a sleep
/// until the wait's slice ends).
fn hand_offs(
    placement: Placement,
    sleeper: Sleeper,
    shape: Shape,
    rounds: u64,
    stop_after: u64,
) -> Counts {
    let Shape {
        width,
        writer_gap,
        reader_gap,
        ..
    } = shape;
    registered_for_membarrier();
    let s = Stream::<HeapBacking>::in_heap(&StreamConfig::new(DType::U64, width, 0.0, 64));
    let mut w = s.writer().unwrap();
    // SYNC: Relaxed: read after the claim, on this thread.
    let word = |s: &Stream<HeapBacking>| {
        s.map
            .control()
            .owner
            .publish_barrier
            .load(Ordering::Relaxed)
    };
    assert_eq!(
        word(&s),
        crate::layout::publish_barrier::LIGHT,
        "the writer claimed with the fence, so the light path cannot be tested here"
    );
    let mut r = s.reader(ReaderMode::Latest).unwrap();
    r.set_spin(Duration::ZERO);
    let (wcpu, rcpu, same) = match placement {
        Placement::SameCpu(c) => (c, c, true),
        Placement::TwoCpus { writer, reader } => (writer, reader, false),
    };
    let arrivals = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicU64::new(u64::MAX));
    // the last hand-off whose commit has returned, and whether that commit bumped the futex
    // word (it saw the announced reader)
    let committed = Arc::new(AtomicU64::new(0));
    let bumped = Arc::new(AtomicU64::new(0));
    let writer = {
        let (arrivals, stop) = (arrivals.clone(), stop.clone());
        let (committed, bumped) = (committed.clone(), bumped.clone());
        std::thread::spawn(move || {
            rtloop_sys::pin_to_cpu(wcpu).unwrap();
            tests_knobs::WRITER_STAYS_LIGHT.set(true);
            let mut gaps = Gaps(0x9E37_79B9_7F4A_7C15);
            let mut sample = vec![0u8; width * 8];
            for i in 1..=rounds {
                meet(&arrivals, i, same);
                // SYNC: Relaxed: the reader sets it before its own arrival at this meeting.
                if stop.load(Ordering::Relaxed) < i {
                    break;
                }
                spin(gaps.next(writer_gap));
                sample[..8].copy_from_slice(&i.to_ne_bytes());
                let samples = &w.stream().map.control().samples;
                let before = samples.data_seq();
                w.write_bytes(&sample, None).unwrap();
                // only this writer changes the word
                let woke = w.stream().map.control().samples.data_seq() != before;
                // SYNC: Relaxed, then Release: the reader reads `bumped` after its Acquire
                // load of `committed` shows this hand-off.
                bumped.store(u64::from(woke), Ordering::Relaxed);
                committed.store(i, Ordering::Release);
            }
            // SYNC: Relaxed: read on this thread after its own commits.
            w.stream()
                .map
                .control()
                .owner
                .publish_barrier
                .load(Ordering::Relaxed)
        })
    };
    let reader = std::thread::spawn(move || {
        rtloop_sys::pin_to_cpu(rcpu).unwrap();
        tests_knobs::SKIP_HEAVY_BARRIER.set(sleeper == Sleeper::WithoutMembarrier);
        let mut gaps = Gaps(0xD1B5_4A32_D192_ED03);
        let mut got = vec![0u8; width * 8];
        let mut c = Counts::default();
        let (lost0, found0) = (
            tests_knobs::SLEPT_THROUGH_A_COMMIT.get(),
            tests_knobs::FOUND_AFTER_ANNOUNCING.get(),
        );
        let started = Instant::now();
        for i in 1..=rounds {
            meet(&arrivals, i, same);
            spin(gaps.next(reader_gap));
            let (lost, found) = (
                tests_knobs::SLEPT_THROUGH_A_COMMIT.get(),
                tests_knobs::FOUND_AFTER_ANNOUNCING.get(),
            );
            // a commit may take longer than a wait's timeout on a loaded machine: wait again
            loop {
                match r.wait(i, Some(Duration::from_secs(1))) {
                    Ok(_) => break,
                    Err(WaitError::Timeout { .. }) => {}
                    Err(e) => panic!("hand-off {i}: {e}"),
                }
            }
            // reading the sample puts its lines in this CPU's cache: the writer's next
            // commit must take them back, which holds its `written` store in the store
            // buffer behind them (the window a lost wake-up needs)
            r.read_into(i - 1, i, &mut got, None).unwrap();
            assert_eq!(
                got[..8],
                i.to_ne_bytes(),
                "hand-off {i} read another sample"
            );
            r.seek(i).unwrap();
            c.hand_offs = i;
            // the writer's commit may still be between its `written` store and its bump
            // (preempted there): judge once it has returned
            // SYNC: Acquire pairs with the writer's Release store of `committed`.
            while committed.load(Ordering::Acquire) < i {
                std::thread::yield_now();
            }
            // SYNC: Relaxed: ordered by the Acquire load above.
            let woke = bumped.load(Ordering::Relaxed) != 0;
            if tests_knobs::SLEPT_THROUGH_A_COMMIT.get() > lost && !woke {
                // the reader slept (its re-check after announcing missed the sample) and the
                // writer's `waiters` load missed the announcement: a lost wake-up
                c.lost += 1;
            } else if tests_knobs::FOUND_AFTER_ANNOUNCING.get() > found {
                c.at_the_recheck += 1;
            } else if woke {
                // (also a sleep that ran out its slice while the writer was preempted
                // between its store and its bump: slow, not lost)
                c.woken += 1;
            } else {
                c.before_announcing += 1;
            }
            if c.lost >= stop_after && i < rounds {
                // SYNC: Relaxed: read by the writer after its next arrival, which follows
                // this store (the meeting's AcqRel orders it).
                stop.store(i, Ordering::Relaxed);
                meet(&arrivals, i + 1, same);
                break;
            }
        }
        c.elapsed = started.elapsed();
        tests_knobs::SKIP_HEAVY_BARRIER.set(false);
        assert!(tests_knobs::SLEPT_THROUGH_A_COMMIT.get() - lost0 >= c.lost);
        assert!(tests_knobs::FOUND_AFTER_ANNOUNCING.get() - found0 >= c.at_the_recheck);
        c
    });
    let c = reader.join().unwrap();
    assert_eq!(
        writer.join().unwrap(),
        crate::layout::publish_barrier::LIGHT,
        "the writer left the light barrier"
    );
    eprintln!(
        "{placement:?}, {sleeper:?}, {shape:?}: {} hand-offs in {:.1} s: \
         {} found before announcing, {} at the re-check, {} woken, {} lost",
        c.hand_offs,
        c.elapsed.as_secs_f64(),
        c.before_announcing,
        c.at_the_recheck,
        c.woken,
        c.lost
    );
    assert_eq!(
        c.before_announcing + c.at_the_recheck + c.woken + c.lost,
        c.hand_offs
    );
    c
}

/// Wait until this process is registered for `membarrier` (the first writer claim starts it
/// on a thread of its own; until then writers fence).
fn registered_for_membarrier() {
    assert!(
        crate::prepare_light_publication(Duration::from_secs(10)),
        "this kernel did not register the process for membarrier, so the light path cannot be tested here"
    );
}

/// Whether this is the soak stage's run (`RTLOOP_SOAK=1`).
fn soak() -> bool {
    std::env::var_os("RTLOOP_SOAK").is_some_and(|v| v == "1")
}

/// The shapes the runs walk over: narrow samples (the newest rides in the publish line, so
/// `written` waits in the store buffer behind one line the reader holds) and 4 KiB ones (64
/// slot lines the reader read, ahead of `written`), with gaps from none to a few µs.
const SHAPES: [Shape; 4] = [
    Shape {
        width: 2,
        writer_gap: 16,
        reader_gap: 16,
        weight: 4,
    },
    Shape {
        width: 2,
        writer_gap: 64,
        reader_gap: 256,
        weight: 2,
    },
    Shape {
        width: 512,
        writer_gap: 16,
        reader_gap: 64,
        weight: 1,
    },
    Shape {
        width: 512,
        writer_gap: 256,
        reader_gap: 256,
        weight: 1,
    },
];

/// The shipped light writer never leaves a sleeping reader asleep through a commit, on one
/// CPU and on two, and the runs did reach the race (commits found the reader asleep, and on
/// two CPUs some hand-offs were decided at the reader's re-check).
#[test]
#[cfg_attr(miri, ignore = "miri cannot issue membarrier or pin threads")]
fn a_light_writer_never_leaves_a_sleeping_reader_asleep() {
    // per placement: 10^8 hand-offs in all in the soak stage's optimised run (about 1.5
    // hours on a loaded 2-vCPU VM); a short run otherwise (the optimised build is faster, and it
    // is the one that shows a missing barrier; an unoptimised one would take a day for 10^8)
    let asked = std::env::var("RTLOOP_HANDOFFS").ok().map(|v| {
        v.parse::<u64>()
            .unwrap_or_else(|_| panic!("RTLOOP_HANDOFFS={v}: give a whole number of hand-offs"))
    });
    let rounds = if let Some(n) = asked {
        n / placements().len() as u64
    } else if soak() && !cfg!(debug_assertions) {
        100_000_000 / placements().len() as u64
    } else if cfg!(debug_assertions) {
        4_000
    } else {
        16_000
    };
    let shapes = &SHAPES[..];
    let weights: u64 = shapes.iter().map(|s| s.weight).sum();
    for placement in placements() {
        let mut all = Counts::default();
        for &shape in shapes {
            let c = hand_offs(
                placement,
                Sleeper::Shipped,
                shape,
                rounds * shape.weight / weights,
                1,
            );
            assert_eq!(
                c.lost, 0,
                "{placement:?}: {} of {} hand-offs lost their wake-up ({shape:?})",
                c.lost, c.hand_offs
            );
            all.hand_offs += c.hand_offs;
            all.woken += c.woken;
            all.at_the_recheck += c.at_the_recheck;
        }
        assert!(
            all.woken > 0,
            "{placement:?}: no commit found the reader asleep in {} hand-offs: nothing raced",
            all.hand_offs
        );
        if matches!(placement, Placement::TwoCpus { .. }) {
            assert!(
                all.at_the_recheck > 0,
                "{placement:?}: no hand-off was decided at the reader's re-check in {}: nothing raced",
                all.hand_offs
            );
        }
    }
}

/// The same hand-offs with the sleeper's `membarrier` left out (nothing else changed) lose
/// wake-ups: the light writer's `waiters` load passes its own `written` store in the store
/// buffer. This shows the barrier is what makes the shipped protocol hold on this hardware,
/// and that the counting test above would fail without it.
///
/// Unoptimised builds are left out: their way from the announcement to the re-check is
/// slower than a store waits in the store buffer (no loss in 100,000 such hand-offs here),
/// so `scripts/test-all.sh` runs these tests with `--release` too.
///
/// It looks for a hardware reordering, which a loaded machine shows less often: the suite
/// must not depend on a quiet machine, so it runs in the soak stage only (`RTLOOP_SOAK=1`
/// passes `--include-ignored` to the hand-off stage).
#[test]
#[ignore = "a negative control that looks for a hardware reordering: the soak stage runs it (optimised build)"]
fn without_the_sleepers_membarrier_a_light_writer_loses_wake_ups() {
    let Some(&placement) = placements()
        .iter()
        .find(|p| matches!(p, Placement::TwoCpus { .. }))
    else {
        panic!("a store buffer reorders only across two CPUs, and this process may use one");
    };
    let shapes = [SHAPES[0], SHAPES[3]];
    let (mut lost, mut tried, mut took) = (0, 0, Duration::ZERO);
    for shape in shapes {
        let c = hand_offs(placement, Sleeper::WithoutMembarrier, shape, 1_000_000, 3);
        lost += c.lost;
        tried += c.hand_offs;
        took += c.elapsed;
    }
    assert!(
        lost > 0,
        "no wake-up was lost in {tried} hand-offs ({:.1} s) without the sleeper's membarrier: \
         the test cannot tell whether the barrier is needed",
        took.as_secs_f64()
    );
}
