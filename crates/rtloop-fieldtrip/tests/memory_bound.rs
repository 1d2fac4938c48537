//! Arbitrary bytes fed to the server's request loop never panic and never make it allocate
//! much beyond its message limit (a counting global allocator measures the peak).

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use rtloop_fieldtrip::server::serve;
use rtloop_fieldtrip::{Buffer, BufferConfig};
use rtloop_testkit::{unique_name, StreamGuard};

struct Counting;
// Ordering: plain counters read by the one test thread; Relaxed.
static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let n = NOW.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(n, Ordering::Relaxed);
        // SAFETY: the caller's layout is passed through.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        NOW.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: `p` came from `alloc` with this layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let n = NOW.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(n, Ordering::Relaxed);
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new > l.size() {
            let n = NOW.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
            PEAK.fetch_max(n, Ordering::Relaxed);
        } else {
            NOW.fetch_sub(l.size() - new, Ordering::Relaxed);
        }
        // SAFETY: `p` came from this allocator with layout `l`.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Input bytes in, replies discarded.
struct Wire<'a>(&'a [u8]);
impl Read for Wire<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}
impl Write for Wire<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

const LIMIT: usize = 1 << 20;

/// The counters are process-wide: the tests of this file take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn message() -> impl Strategy<Value = Vec<u8>> {
    let command = prop_oneof![
        0x0101u16..=0x0103,
        0x0201u16..=0x0203,
        0x0301u16..=0x0303,
        Just(0x0402u16),
        0x0501u16..=0x0503,
        any::<u16>()
    ];
    let bufsize = prop_oneof![0u32..64, 0u32..4096, Just(u32::MAX), any::<u32>()];
    (
        any::<bool>(),
        command,
        bufsize,
        proptest::collection::vec(any::<u8>(), 0..512),
    )
        .prop_map(|(big, c, n, body)| {
            let mut m = Vec::new();
            if big {
                m.extend_from_slice(&1u16.to_be_bytes());
                m.extend_from_slice(&c.to_be_bytes());
                m.extend_from_slice(&n.to_be_bytes());
            } else {
                m.extend_from_slice(&1u16.to_le_bytes());
                m.extend_from_slice(&c.to_le_bytes());
                m.extend_from_slice(&n.to_le_bytes());
            }
            m.extend_from_slice(&body);
            m
        })
}

/// A valid header first, so data and event requests reach the stream.
fn header() -> Vec<u8> {
    let mut m = vec![1u8, 0, 1, 1, 24, 0, 0, 0];
    for v in [4u32, 0, 0, 1000f32.to_bits(), 9, 0] {
        m.extend_from_slice(&v.to_le_bytes());
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn arbitrary_bytes_never_panic_and_stay_within_the_limit(
        msgs in proptest::collection::vec(message(), 1..6),
        noise in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        let name = unique_name("ftmem");
        let _g = StreamGuard::new(&name);
        let mut cfg = BufferConfig::new(&name);
        cfg.capacity = 1000;
        cfg.max_bytes = LIMIT as u64;
        cfg.events = 8;
        // a generated WAIT_DAT may ask for days; the bytes in are all there is
        cfg.max_wait = std::time::Duration::ZERO;
        let buffer = Buffer::new(cfg);
        let mut input = header();
        for m in &msgs {
            input.extend_from_slice(m);
        }
        input.extend_from_slice(&noise);
        let base = NOW.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        serve(&buffer, &mut Wire(&input), "proptest", LIMIT);
        let peak = PEAK.load(Ordering::Relaxed) - base;
        // reader buffer + reply + one converted copy of a message, with slack
        prop_assert!(peak <= 4 * LIMIT + (256 << 10), "peak {} bytes", peak);
        buffer.close();
    }
}

#[test]
fn an_announced_4_gib_message_allocates_nothing_for_it() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let name = unique_name("ftmem");
    let _g = StreamGuard::new(&name);
    let buffer = Buffer::new(BufferConfig::new(&name));
    let msg = [1u8, 0, 2, 1, 0xff, 0xff, 0xff, 0xff, 0, 0];
    let base = NOW.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    serve(&buffer, &mut Wire(&msg), "test", LIMIT);
    assert!(PEAK.load(Ordering::Relaxed) - base < 256 << 10);
}
