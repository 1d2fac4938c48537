//! A block allocates nothing in a tick: every buffer it needs is made when it opens. A
//! counting global allocator counts this thread's allocations while each block steps.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rtloop_runtime::blocks::{self, Output, Ports, BLOCKS};
use rtloop_runtime::drivers::{InView, OutBuf, TickInfo};
use rtloop_runtime::model::Signal;
use rtloop_stream::DType;

struct Counting;
// Ordering: a plain counter read by the thread that counts; Relaxed.
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    // const-initialised, no destructor: reading it allocates nothing
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if COUNTING.with(Cell::get) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards every call to the system allocator unchanged and only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's layout is passed through.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `alloc` with this layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        count();
        // SAFETY: `p` came from this allocator with layout `l`.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn sig(name: &str, shape: &[usize], dtype: DType, variable: bool) -> Signal {
    Signal {
        name: name.into(),
        shape: shape.to_vec(),
        dtype,
        history: 1,
        variable,
        channels: Vec::new(),
        units: Vec::new(),
        line: 1,
    }
}

/// Options that make each block run its whole path within a few hundred ticks (short
/// noise windows and warm-ups, so detectors detect).
fn options(block: &str) -> serde_json::Value {
    match block {
        "lowpass" | "highpass" => serde_json::json!({"cutoff": 1000}),
        "bandpass" => serde_json::json!({"low": 300, "high": 3000}),
        "notch" => serde_json::json!({"freq": 50}),
        "reref" => serde_json::json!({"reference": "median"}),
        "envelope" => serde_json::json!({"window": 16}),
        "decimate" => serde_json::json!({"factor": 4}),
        "spikes" => serde_json::json!({"noise_window": 500, "k": 3}),
        "ripples" => {
            serde_json::json!({"warmup": 100, "baseline": 200, "z_start": 1, "z_end": 0.5})
        }
        "phase" => serde_json::json!({"band": [200, 400], "window": 300}),
        other => panic!("no options for block {other}"),
    }
}

#[test]
fn no_block_allocates_in_a_tick() {
    for dtype in [DType::F32, DType::F64] {
        let input = sig("raw", &[32, 4], dtype, false);
        for b in BLOCKS {
            let output = match b.output {
                Output::Same => sig("y", &[32, 4], dtype, false),
                Output::Decimated => sig("y", &[8, 4], dtype, false),
                Output::Events => sig("ev", &[64, 3], DType::F64, true),
            };
            let ports = Ports {
                input: &input,
                output: &output,
                tick: Duration::from_millis(1),
            };
            let mut step = blocks::open(b.name, &options(b.name), &ports)
                .unwrap_or_else(|e| panic!("{}: {e:?}", b.name));
            let size = dtype.itemsize();
            let mut inp = vec![0u8; 32 * 4 * size];
            let mut out = vec![0u8; output.rows_per_tick() * output.row_bytes()];
            let mut events = 0;
            ALLOCS.store(0, Ordering::Relaxed);
            for k in 0..400u64 {
                // a 300 Hz sine, louder in bursts, with a spike now and then
                for (i, c) in inp.chunks_exact_mut(size).enumerate() {
                    let t = (k * 32 + (i / 4) as u64) as f64 / 32_000.0;
                    let burst = if (k / 50) % 2 == 1 { 5.0 } else { 1.0 };
                    let mut v = burst * (std::f64::consts::TAU * 300.0 * t).sin()
                        + 0.1 * ((i * 7 + k as usize * 13) as f64).sin();
                    if k % 37 == 20 && i / 4 == 5 {
                        v -= 40.0;
                    }
                    match dtype {
                        DType::F32 => c.copy_from_slice(&(v as f32).to_ne_bytes()),
                        _ => c.copy_from_slice(&v.to_ne_bytes()),
                    }
                }
                let inputs = [InView {
                    signal: &input,
                    bytes: &inp,
                    rows: 32,
                    first: k * 32,
                }];
                let mut outputs = [OutBuf {
                    signal: &output,
                    bytes: &mut out,
                    rows: output.rows_per_tick(),
                }];
                COUNTING.with(|c| c.set(true));
                let r = step.step(&TickInfo::default(), &inputs, &mut outputs);
                COUNTING.with(|c| c.set(false));
                r.unwrap();
                if b.output == Output::Events {
                    events += outputs[0].rows;
                }
            }
            assert_eq!(
                ALLOCS.load(Ordering::Relaxed),
                0,
                "block {} ({dtype}) allocated in its ticks",
                b.name
            );
            if b.output == Output::Events {
                assert!(
                    events > 0,
                    "block {} ({dtype}) saw no event: a path untested",
                    b.name
                );
            }
        }
    }
}
