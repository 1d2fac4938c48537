//! Rust modules: compiled with rustc (needs `rustc` on PATH or `$RUSTC`), loaded, stepped.
//! Each test compiles into its own temporary cache directory.

use std::path::{Path, PathBuf};

use rtloop_runtime::drivers::{InView, OutBuf};
use rtloop_runtime::model::Signal;
use rtloop_runtime::rust_module::{compile, ModuleError, RustModule};
use rtloop_stream::DType;

/// A fresh directory for one test: its module files and its module cache.
fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "rtloop-rust-module-test-{}-{test}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(d: &Path, name: &str, text: &str) -> PathBuf {
    let p = d.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Compile `text` as module file `name` in `d` and load it.
fn module(d: &Path, name: &str, text: &str) -> RustModule {
    let code = write(d, name, text);
    let so = compile(&code, &d.join("cache")).unwrap_or_else(|e| panic!("{e}"));
    RustModule::load(&so).unwrap_or_else(|e| panic!("{e}"))
}

fn signal(name: &str, shape: &[usize], dtype: DType, history: u64, variable: bool) -> Signal {
    Signal {
        name: name.into(),
        shape: shape.to_vec(),
        dtype,
        history,
        variable,
        channels: Vec::new(),
        units: Vec::new(),
        line: 1,
    }
}

/// Memory for a signal's rows, aligned for any dtype: `Vec<u8>` promises no alignment, so
/// take an 8-aligned window of a slightly larger one.
struct Buf {
    v: Vec<u8>,
    off: usize,
    len: usize,
}

impl Buf {
    fn new(len: usize) -> Buf {
        let v = vec![0u8; len + 8];
        let off = v.as_ptr().align_offset(8);
        Buf { v, off, len }
    }
    fn bytes(&self) -> &[u8] {
        &self.v[self.off..self.off + self.len]
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.v[self.off..self.off + self.len]
    }
    fn set_f32(&mut self, vals: &[f32]) {
        for (c, v) in self.bytes_mut().chunks_exact_mut(4).zip(vals) {
            c.copy_from_slice(&v.to_ne_bytes());
        }
    }
    fn f32s(&self) -> Vec<f32> {
        self.bytes()
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }
    fn u64s(&self) -> Vec<u64> {
        self.bytes()
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }
    fn u16s(&self) -> Vec<u16> {
        self.bytes()
            .chunks_exact(2)
            .map(|c| u16::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }
}

/// One step with one input (all its history rows in `inp`) and one output; returns the
/// step's result and the output's rows.
fn step1(
    m: &mut RustModule,
    tick: u64,
    in_sig: &Signal,
    inp: &Buf,
    out_sig: &Signal,
    out: &mut Buf,
) -> (Result<(), String>, usize) {
    let inputs = [InView {
        signal: in_sig,
        bytes: inp.bytes(),
        rows: inp.len / in_sig.row_bytes(),
        first: 0,
    }];
    let mut outputs = [OutBuf {
        signal: out_sig,
        bytes: out.bytes_mut(),
        rows: out_sig.rows_per_tick(),
    }];
    let r = m
        .step(tick, &inputs, &mut outputs)
        .map_err(|e| e.to_string());
    (r, outputs[0].rows)
}

/// A module with no inputs and one output.
fn step0(
    m: &mut RustModule,
    tick: u64,
    out_sig: &Signal,
    out: &mut Buf,
) -> (Result<(), String>, usize) {
    let mut outputs = [OutBuf {
        signal: out_sig,
        bytes: out.bytes_mut(),
        rows: out_sig.rows_per_tick(),
    }];
    let r = m.step(tick, &[], &mut outputs).map_err(|e| e.to_string());
    (r, outputs[0].rows)
}

#[test]
fn a_module_writes_twice_its_input_every_tick() {
    let d = dir("double");
    // history 2 of 4 rows x 2 channels: 8 rows in, the newest 4 are this tick's
    let mut m = module(
        &d,
        "double.rs",
        "pub fn step(t: &mut Tick) {\n\
         \x20   assert_eq!((t.input_rows(0), t.row_len_in(0)), (8, 2));\n\
         \x20   assert_eq!((t.output_rows(0), t.row_len_out(0)), (4, 2));\n\
         \x20   assert_eq!((t.input_name(0), t.output_name(0)), (\"raw\", \"y\"));\n\
         \x20   let x = t.input_named::<f32>(\"raw\");\n\
         \x20   let y = t.output::<f32>(0);\n\
         \x20   let now = &x[x.len() - y.len()..];\n\
         \x20   for (y, x) in y.iter_mut().zip(now) { *y = 2.0 * x; }\n\
         }\n",
    );
    let raw = signal("raw", &[4, 2], DType::F32, 2, false);
    let y = signal("y", &[4, 2], DType::F32, 1, false);
    let mut inp = Buf::new(8 * raw.row_bytes());
    let mut out = Buf::new(y.rows_per_tick() * y.row_bytes());
    for tick in 0..5u64 {
        let vals: Vec<f32> = (0..16).map(|i| (tick * 100 + i) as f32).collect();
        inp.set_f32(&vals);
        let (r, rows) = step1(&mut m, tick, &raw, &inp, &y, &mut out);
        r.unwrap();
        assert_eq!(rows, 4);
        let want: Vec<f32> = vals[8..].iter().map(|v| 2.0 * v).collect();
        assert_eq!(out.f32s(), want, "tick {tick}");
    }
    drop(m);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn state_persists_across_ticks_is_per_instance_and_is_dropped_with_the_module() {
    let d = dir("counter");
    let mark = d.join("dropped");
    let text = format!(
        "#[derive(Default)]\n\
         struct Counter {{ n: u64 }}\n\
         impl Drop for Counter {{\n\
         \x20   fn drop(&mut self) {{ std::fs::write({:?}, self.n.to_string()).unwrap(); }}\n\
         }}\n\
         pub fn step(t: &mut Tick) {{\n\
         \x20   let c = t.state::<Counter>();\n\
         \x20   let y = t.output::<u64>(0);\n\
         \x20   c.n += 1;\n\
         \x20   y[0] = c.n;\n\
         \x20   y[1] = t.tick();\n\
         }}\n",
        mark.to_str().unwrap()
    );
    let mut a = module(&d, "counter.rs", &text);
    let y = signal("count", &[2], DType::U64, 1, false);
    let mut out = Buf::new(y.row_bytes());
    for tick in 10..15u64 {
        step0(&mut a, tick, &y, &mut out).0.unwrap();
        assert_eq!(out.u64s(), [tick - 9, tick]);
    }
    // a second instance of the same library has its own state
    let mut b = module(&d, "counter.rs", &text);
    step0(&mut b, 0, &y, &mut out).0.unwrap();
    assert_eq!(out.u64s(), [1, 0]);
    step0(&mut a, 15, &y, &mut out).0.unwrap();
    assert_eq!(out.u64s(), [6, 15]);
    assert!(!mark.exists());
    drop(a);
    assert_eq!(
        std::fs::read_to_string(&mark).unwrap(),
        "6",
        "free drops the state"
    );
    drop(b);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_panic_comes_back_as_the_error_with_its_message_and_place() {
    let d = dir("panic");
    let mut m = module(
        &d,
        "panics.rs",
        "pub fn step(t: &mut Tick) {\n\
         \x20   if t.tick() == 2 { panic!(\"sensor went away at tick {}\", t.tick()); }\n\
         \x20   t.output::<f32>(0)[0] = 1.0;\n\
         }\n",
    );
    let y = signal("y", &[1], DType::F32, 1, false);
    let mut out = Buf::new(y.row_bytes());
    step0(&mut m, 1, &y, &mut out).0.unwrap();
    let e = step0(&mut m, 2, &y, &mut out).0.unwrap_err();
    assert!(e.contains("sensor went away at tick 2"), "{e}");
    assert!(
        e.contains("panics.rs:2"),
        "the place is in the user's file: {e}"
    );
    // the module is still usable after a caught panic
    step0(&mut m, 3, &y, &mut out).0.unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn asking_for_the_wrong_dtype_or_an_unknown_name_is_an_error_naming_both() {
    let d = dir("dtype");
    let raw = signal("raw", &[3], DType::F32, 1, false);
    let y = signal("y", &[3], DType::F32, 1, false);
    let inp = Buf::new(raw.row_bytes());
    let mut out = Buf::new(y.row_bytes());

    let mut m = module(
        &d,
        "wrong.rs",
        "pub fn step(t: &mut Tick) { let _ = t.input::<i16>(0); }\n",
    );
    let e = step1(&mut m, 0, &raw, &inp, &y, &mut out).0.unwrap_err();
    assert!(e.contains("input 0 ('raw') is float32, not int16"), "{e}");
    assert!(e.contains("f32"), "says which Rust type to use: {e}");
    assert!(
        e.contains("wrong.rs:1:"),
        "the place is the user's call: {e}"
    );

    let mut m = module(
        &d,
        "wrong_out.rs",
        "pub fn step(t: &mut Tick) { t.output_named::<f64>(\"y\")[0] = 1.0; }\n",
    );
    let e = step1(&mut m, 0, &raw, &inp, &y, &mut out).0.unwrap_err();
    assert!(e.contains("output 0 ('y') is float32, not float64"), "{e}");

    let mut m = module(
        &d,
        "name.rs",
        "pub fn step(t: &mut Tick) { let _ = t.input_named::<f32>(\"nope\"); }\n",
    );
    let e = step1(&mut m, 0, &raw, &inp, &y, &mut out).0.unwrap_err();
    assert!(
        e.contains("no input named 'nope'") && e.contains("'raw'"),
        "{e}"
    );

    let mut m = module(
        &d,
        "twice.rs",
        "pub fn step(t: &mut Tick) { let _a = t.output::<f32>(0); let _b = t.output::<f32>(0); }\n",
    );
    let e = step1(&mut m, 0, &raw, &inp, &y, &mut out).0.unwrap_err();
    assert!(e.contains("taken twice"), "{e}");

    let mut m = module(
        &d,
        "index.rs",
        "pub fn step(t: &mut Tick) { let _ = t.input::<f32>(1); }\n",
    );
    let e = step1(&mut m, 0, &raw, &inp, &y, &mut out).0.unwrap_err();
    assert!(
        e.contains("input 1 does not exist") && e.contains("0 'raw'"),
        "{e}"
    );
    assert!(e.contains("index.rs:1:"), "{e}");

    let mut m = module(
        &d,
        "state.rs",
        "pub fn step(t: &mut Tick) {\n\
         \x20   if t.tick() == 0 { *t.state::<u32>() += 1; } else { *t.state::<u64>() += 1; }\n\
         }\n",
    );
    step1(&mut m, 0, &raw, &inp, &y, &mut out).0.unwrap();
    let e = step1(&mut m, 1, &raw, &inp, &y, &mut out).0.unwrap_err();
    assert!(
        e.contains("the state is a u32, not a u64") && e.contains("state.rs:2:"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_compile_error_names_the_users_file_and_line() {
    let d = dir("broken");
    let code = write(
        &d,
        "broken.rs",
        "pub fn step(t: &mut Tick) {\n    let x: u8 = \"no\";\n}\n",
    );
    let e = compile(&code, &d.join("cache")).unwrap_err();
    assert!(matches!(e, ModuleError::Compile { .. }), "{e:?}");
    let e = e.to_string();
    assert!(e.starts_with("rustc could not compile module file "), "{e}");
    assert!(
        e.contains("broken.rs:2"),
        "rustc's diagnostic points into the file: {e}"
    );
    assert!(e.contains("mismatched types"), "{e}");
    // nothing half-made is left in the cache
    let left: Vec<String> = std::fs::read_dir(d.join("cache"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".rs"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // a file without `step` says what is missing
    let code = write(&d, "nostep.rs", "pub fn stp(_t: &mut Tick) {}\n");
    let e = compile(&code, &d.join("cache")).unwrap_err().to_string();
    assert!(e.contains("step"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_compiled_library_is_reused_until_the_file_changes() {
    let d = dir("cache");
    let cache = d.join("cache");
    let code = write(
        &d,
        "m.rs",
        "pub fn step(t: &mut Tick) { let _ = t.tick(); }\n",
    );
    let a = compile(&code, &cache).unwrap();
    assert!(a.starts_with(&cache) && a.is_file());
    let mtime = std::fs::metadata(&a).unwrap().modified().unwrap();
    let b = compile(&code, &cache).unwrap();
    assert_eq!(a, b);
    assert_eq!(
        std::fs::metadata(&b).unwrap().modified().unwrap(),
        mtime,
        "not rebuilt"
    );
    // the same text through another spelling of the path is the same file
    let c = compile(&d.join(".").join("m.rs"), &cache).unwrap();
    assert_eq!(a, c);
    // an edit compiles anew
    write(
        &d,
        "m.rs",
        "pub fn step(t: &mut Tick) { let _ = t.tick() + 1; }\n",
    );
    let e = compile(&code, &cache).unwrap();
    assert_ne!(a, e);
    assert!(a.is_file() && e.is_file());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn two_threads_compiling_the_same_file_at_once_both_succeed() {
    let d = dir("race");
    let code = write(&d, "m.rs", "pub fn step(_t: &mut Tick) {}\n");
    let cache = d.join("cache");
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (code, cache) = (code.clone(), cache.clone());
            std::thread::spawn(move || compile(&code, &cache))
        })
        .collect();
    let sos: Vec<PathBuf> = handles
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect();
    assert_eq!(sos[0], sos[1]);
    RustModule::load(&sos[0]).unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_variable_output_carries_the_rows_the_module_sets() {
    let d = dir("variable");
    let mut m = module(
        &d,
        "packets.rs",
        "pub fn step(t: &mut Tick) {\n\
         \x20   let n = (t.tick() % 4) as usize;\n\
         \x20   let y = t.output::<u16>(0);\n\
         \x20   for (i, v) in y.iter_mut().take(n).enumerate() { *v = 10 * n as u16 + i as u16; }\n\
         \x20   t.set_output_rows(0, n);\n\
         \x20   if t.tick() == 9 { t.set_output_rows(0, 6); }\n\
         }\n",
    );
    let y = signal("pk", &[5, 1], DType::U16, 1, true);
    let mut out = Buf::new(y.rows_per_tick() * y.row_bytes());
    for tick in 0..8u64 {
        let (r, rows) = step0(&mut m, tick, &y, &mut out);
        r.unwrap();
        let n = (tick % 4) as usize;
        assert_eq!(rows, n, "tick {tick}");
        let want: Vec<u16> = (0..n).map(|i| 10 * n as u16 + i as u16).collect();
        assert_eq!(out.u16s()[..n], want[..]);
    }
    let e = step0(&mut m, 9, &y, &mut out).0.unwrap_err();
    assert!(
        e.contains("output 0 ('pk') holds at most 5 rows per tick, not 6"),
        "{e}"
    );

    // a fixed-size output always carries all its rows
    let fixed = signal("pk", &[5, 1], DType::U16, 1, false);
    let (r, rows) = step0(&mut m, 1, &fixed, &mut out);
    r.unwrap();
    assert_eq!(rows, 5);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn loading_something_that_is_not_a_module_says_so() {
    let d = dir("notmodule");
    let p = write(&d, "x.so", "not a library");
    let e = RustModule::load(&p).err().unwrap();
    assert!(matches!(e, ModuleError::Load { .. }), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("cannot load Rust module"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_missing_rustc_is_explained() {
    // $RUSTC is read by compile(); set it only in a child process of this test binary so
    // other tests running in parallel are not affected
    if std::env::var_os("RTLOOP_TEST_MISSING_RUSTC").is_some() {
        let d = dir("norustc");
        let code = write(&d, "m.rs", "pub fn step(_t: &mut Tick) {}\n");
        let e = compile(&code, &d.join("cache")).unwrap_err().to_string();
        let _ = std::fs::remove_dir_all(&d);
        assert!(e.contains("was not found") && e.contains("rustup"), "{e}");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let o = std::process::Command::new(exe)
        .args(["--exact", "a_missing_rustc_is_explained", "--nocapture"])
        .env("RTLOOP_TEST_MISSING_RUSTC", "1")
        .env("RUSTC", "/nonexistent/rustc-for-rtloop-test")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn the_example_spike_detector_compiles_and_runs() {
    let d = dir("example");
    let code = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/models/spike_detector/detect.rs");
    let so = compile(&code, &d.join("cache")).unwrap_or_else(|e| panic!("{e}"));
    let mut m = RustModule::load(&so).unwrap();
    let raw = signal("raw", &[30, 32], DType::F32, 1, false);
    let spikes = signal("spikes", &[32], DType::U8, 1, false);
    let trigger = signal("trigger", &[1], DType::U8, 1, false);
    let mut inp = Buf::new(30 * raw.row_bytes());
    let (mut s, mut tr) = (Buf::new(spikes.row_bytes()), Buf::new(trigger.row_bytes()));
    for tick in 0..300u64 {
        let vals: Vec<f32> = (0..30 * 32)
            .map(|i| ((tick * 960 + i) as f32 * 0.37).sin() * 0.05)
            .collect();
        inp.set_f32(&vals);
        let inputs = [InView {
            signal: &raw,
            bytes: inp.bytes(),
            rows: 30,
            first: 0,
        }];
        let mut outputs = [
            OutBuf {
                signal: &spikes,
                bytes: s.bytes_mut(),
                rows: 1,
            },
            OutBuf {
                signal: &trigger,
                bytes: tr.bytes_mut(),
                rows: 1,
            },
        ];
        m.step(tick, &inputs, &mut outputs)
            .unwrap_or_else(|e| panic!("tick {tick}: {e}"));
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_example_in_the_docs_compiles_and_runs() {
    let d = dir("docs");
    let md = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/runtime-rust-modules.md"),
    )
    .unwrap();
    let start = md.find("// thresh.rs\n").expect("the example in the docs");
    let text = &md[start..start + md[start..].find("```").unwrap()];
    let mut m = module(&d, "thresh.rs", text);
    let raw = signal("raw", &[30, 32], DType::F32, 2, false);
    let spikes = signal("spikes", &[32], DType::U8, 1, false);
    let events = signal("events", &[30, 2], DType::U16, 1, true);
    let mut inp = Buf::new(60 * raw.row_bytes());
    let mut s = Buf::new(spikes.row_bytes());
    let mut ev = Buf::new(30 * events.row_bytes());
    let mut total = 0;
    for tick in 0..400u64 {
        // noise, and after learning a deep negative spike on channel 5 every 10th tick
        let vals: Vec<f32> = (0..60 * 32)
            .map(|i| {
                let spike = tick > 250 && tick % 10 == 0 && i == 40 * 32 + 5;
                ((tick * 1920 + i) as f32 * 0.37).sin() - if spike { 50.0 } else { 0.0 }
            })
            .collect();
        inp.set_f32(&vals);
        let inputs = [InView {
            signal: &raw,
            bytes: inp.bytes(),
            rows: 60,
            first: 0,
        }];
        let mut outputs = [
            OutBuf {
                signal: &spikes,
                bytes: s.bytes_mut(),
                rows: 1,
            },
            OutBuf {
                signal: &events,
                bytes: ev.bytes_mut(),
                rows: 30,
            },
        ];
        m.step(tick, &inputs, &mut outputs)
            .unwrap_or_else(|e| panic!("tick {tick}: {e}"));
        let n = outputs[1].rows;
        if n > 0 {
            assert_eq!(
                ev.u16s()[..2],
                [10, 5],
                "tick {tick}: row 10 of this tick, channel 5"
            );
            assert_eq!(s.bytes()[5], 1);
        }
        total += n;
    }
    assert_eq!(total, 14, "one event on each 10th tick after 250");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_module_reads_its_options_and_a_missing_one_is_none() {
    let d = dir("options");
    let mut m = module(
        &d,
        "opt.rs",
        "pub fn step(t: &mut Tick) {\n\
             let g = t.option(\"gain\").unwrap_or(-1.0) as f32;\n\
             let on = t.option(\"on\").unwrap_or(-1.0) as f32;\n\
             let none = if t.option(\"absent\").is_none() { 7.0 } else { 0.0 };\n\
             let y = t.output::<f32>(0);\n\
             y[0] = g; y[1] = on; y[2] = none;\n\
         }\n",
    );
    let out_sig = signal("y", &[3], DType::F32, 1, false);
    let mut out = Buf::new(12);
    // before set_options: no options at all
    let (r, _) = step0(&mut m, 0, &out_sig, &mut out);
    r.unwrap();
    assert_eq!(out.f32s(), [-1.0, -1.0, 7.0]);
    m.set_options(&serde_json::json!({"gain": 2.5, "on": true}))
        .unwrap();
    let (r, _) = step0(&mut m, 1, &out_sig, &mut out);
    r.unwrap();
    assert_eq!(out.f32s(), [2.5, 1.0, 7.0]);
    // a string is not an option a Rust module can read: refused with what is allowed
    let e = m
        .set_options(&serde_json::json!({"mode": "fast"}))
        .unwrap_err();
    assert!(
        matches!(&e, ModuleError::Option { name, .. } if name == "mode"),
        "{e:?}"
    );
    let e = e.to_string();
    assert!(
        e.contains(
            "option \"mode\" is \"fast\"; a Rust module's options are numbers or true/false"
        ),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn init_sees_options_and_shapes_before_tick_0_and_finish_reports() {
    let d = dir("hooks");
    let mut m = module(
        &d,
        "hooks.rs",
        "#[derive(Default)]\n\
         pub struct S { gain: f32, rows: usize, len: usize, ticks: u64 }\n\
         pub fn init(t: &mut Tick) {\n\
             let (rows, len) = (t.input_rows(0), t.row_len_in(0));\n\
             let gain = t.option(\"gain\").unwrap_or(1.0) as f32;\n\
             let s = t.state::<S>();\n\
             s.gain = gain; s.rows = rows; s.len = len;\n\
         }\n\
         pub fn step(t: &mut Tick) {\n\
             let x = t.input::<f32>(0);\n\
             let y = t.output::<f32>(0);\n\
             let s = t.state::<S>();\n\
             s.ticks += 1;\n\
             y[0] = x[x.len() - 1] * s.gain;\n\
         }\n\
         pub fn finish(t: &mut Tick) -> String {\n\
             let s = t.state::<S>();\n\
             format!(\"{} ticks, gain {}, input {} rows of {}\", s.ticks, s.gain, s.rows, s.len)\n\
         }\n",
    );
    let in_sig = signal("x", &[2, 3], DType::F32, 4, false);
    let out_sig = signal("y", &[1], DType::F32, 1, false);
    m.set_options(&serde_json::json!({"gain": 3})).unwrap();
    m.init(
        std::slice::from_ref(&in_sig),
        std::slice::from_ref(&out_sig),
    )
    .unwrap();
    let mut inp = Buf::new(4 * 2 * 3 * 4);
    inp.set_f32(&(0..24).map(|v| v as f32).collect::<Vec<_>>());
    let mut out = Buf::new(4);
    for k in 0..5 {
        let (r, _) = step1(&mut m, k, &in_sig, &inp, &out_sig, &mut out);
        r.unwrap();
    }
    assert_eq!(out.f32s(), [69.0]);
    // history 4 x 2 rows per tick, 3 values per row, as step gets them
    assert_eq!(m.finish().unwrap(), "5 ticks, gain 3, input 8 rows of 3");

    // a module without hooks gets the defaults: nothing at init, no text at finish
    let mut plain = module(
        &d,
        "plain.rs",
        "pub fn step(t: &mut Tick) { t.output::<f32>(0)[0] = 1.0; }\n",
    );
    plain.init(&[], std::slice::from_ref(&out_sig)).unwrap();
    assert_eq!(plain.finish().unwrap(), "");

    // data is only there in step: init that reads an input is told so
    let mut bad = module(
        &d,
        "bad.rs",
        "pub fn init(t: &mut Tick) { let _ = t.input::<f32>(0); }\n\
         pub fn step(_t: &mut Tick) {}\n",
    );
    let e = bad.init(std::slice::from_ref(&in_sig), &[]).unwrap_err();
    assert!(
        matches!(
            e,
            ModuleError::Panicked {
                phase: Some("init"),
                ..
            }
        ),
        "{e:?}"
    );
    let e = e.to_string();
    assert!(
        e.starts_with("init panicked: t.input(0) in init: signals carry data only in step"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
