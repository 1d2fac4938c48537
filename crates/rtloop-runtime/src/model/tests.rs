//! Unit tests of the model parser: a valid model with every default, one test per error
//! kind (message and line), several problems at once, and garbage that must not panic.

use std::path::Path;
use std::time::Duration;

use super::*;

/// A fresh directory under the system temp dir, removed when the test ends.
fn tmpdir() -> rtloop_testkit::TempDir {
    rtloop_testkit::TempDir::new("model")
}

/// The driver names and sections of `crate::drivers::check`, with any options accepted
/// (the drivers' own option checks are theirs to test).
fn any_options(
    driver: &str,
    kind: Kind,
    options: &serde_json::Value,
    signals: &[&Signal],
) -> Result<(), String> {
    match crate::drivers::find(driver) {
        Some(d) if d.kind() == kind => Ok(()),
        _ => crate::drivers::check(driver, kind, options, signals),
    }
}

/// [`parse_str`] with [`any_options`].
fn parse(text: &str, path: &Path) -> Result<Model, ModelErrors> {
    parse_checked(text, path, &any_options)
}

/// Parse `text` as `<fresh dir>/m.yaml`, with the given code files created there.
fn parse_with(text: &str, files: &[&str]) -> (Result<Model, ModelErrors>, rtloop_testkit::TempDir) {
    let dir = tmpdir();
    for f in files {
        std::fs::write(dir.join(f), "# code\n").unwrap();
    }
    (parse(text, &dir.join("m.yaml")), dir)
}

fn errors(text: &str, files: &[&str]) -> Vec<ModelError> {
    match parse_with(text, files).0 {
        Ok(_) => panic!("expected errors for:\n{text}"),
        Err(e) => {
            assert!(!e.errors.is_empty());
            e.errors
        }
    }
}

/// Exactly one error, at `line`, containing every `needles`.
#[track_caller]
fn one(text: &str, files: &[&str], line: usize, needles: &[&str]) {
    let errs = errors(text, files);
    assert_eq!(errs.len(), 1, "expected one error, got {errs:#?}");
    has(&errs, line, needles);
}

/// Some error at `line` contains every `needles`.
#[track_caller]
fn has(errs: &[ModelError], line: usize, needles: &[&str]) {
    assert!(
        errs.iter()
            .any(|e| e.line == line && needles.iter().all(|n| e.message.contains(n))),
        "no error at line {line} with {needles:?} in {errs:#?}"
    );
}

const SIGNALS: &str = "signals:\n  raw: {shape: 4, dtype: float32}\n";

#[test]
fn minimal_model_takes_every_default() {
    let (m, dir) = parse_with("signals:\n  raw: {shape: 4, dtype: float32}\n", &[]);
    let m = m.unwrap();
    assert_eq!(m.name, "m");
    assert_eq!(m.path, dir.join("m.yaml"));
    let c = &m.config;
    assert_eq!(c.tick, Duration::from_micros(1000));
    assert_eq!(c.num_ticks, None);
    assert_eq!(c.busy_wait, Duration::from_micros(50));
    assert_eq!(c.spin, Duration::from_micros(10));
    assert!(c.realtime);
    assert_eq!(c.priority, 80);
    assert!(c.mlockall);
    assert_eq!(c.cores, None);
    assert_eq!(c.timer_core, None);
    assert_eq!(c.on_miss, MissPolicy::Continue);
    assert_eq!(c.python, None);
    assert_eq!(m.signals.len(), 1);
    let s = &m.signals[0];
    assert_eq!((s.name.as_str(), s.shape.as_slice()), ("raw", &[4][..]));
    assert_eq!(
        (s.dtype, s.history, s.variable, s.line),
        (DType::F32, 1, false, 2)
    );
    assert!(m.processes.is_empty());
}

const FULL: &str = "\
config:
  name: demo
  tick_us: 500
  num_ticks: 1000
  busy_wait_us: 20
  spin_us: 5
  realtime: false
  priority: 90
  mlockall: false
  cores: [0]
  timer_core: 0
  on_miss: stop
  python: /usr/bin/python3
signals:
  raw: {shape: [30, 32], dtype: float32, history: 100}
  events: {shape: [8, 4], dtype: int16, variable: true}
  filtered: {shape: 32, dtype: f8}
  count: {shape: [1], dtype: uint8}
sinks:
  out: {driver: stream_out, in: [filtered, {signal: count, shape: 1, dtype: uint8}], core: 0}
modules:
  filt:
    language: python
    code: filt.py
    numba: true
    in: [raw, events]
    out: filtered
  counter:
    language: rust
    code: counter.rs
    in: {signal: filtered, shape: [32], dtype: float64}
    out: [count]
  idle: {language: python, code: idle.py}
sources:
  gen: {driver: synthetic, out: [raw], options: {waveform: sine, freq: 10.5, amps: [1, 2], on: true, none: null, nested: {a: 1}}}
  ev:
    driver: stream_in
    out: events
";

#[test]
fn full_model_round_trips() {
    let (m, dir) = parse_with(FULL, &["filt.py", "counter.rs", "idle.py"]);
    let m = m.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.name, "demo");
    let c = &m.config;
    assert_eq!(c.tick, Duration::from_micros(500));
    assert_eq!(c.num_ticks, Some(1000));
    assert_eq!(c.busy_wait, Duration::from_micros(20));
    assert_eq!(c.spin, Duration::from_micros(5));
    assert!(!c.realtime);
    assert_eq!(c.priority, 90);
    assert!(!c.mlockall);
    assert_eq!(c.cores, Some(vec![0]));
    assert_eq!(c.timer_core, Some(0));
    assert_eq!(c.on_miss, MissPolicy::Stop);
    assert_eq!(c.python.as_deref(), Some("/usr/bin/python3"));

    let names: Vec<_> = m.signals.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["raw", "events", "filtered", "count"]);
    let raw = &m.signals[0];
    assert_eq!(
        (raw.shape.as_slice(), raw.history, raw.line),
        (&[30, 32][..], 100, 15)
    );
    assert_eq!(
        (raw.rows_per_tick(), raw.row_len(), raw.row_bytes()),
        (30, 32, 128)
    );
    assert!(m.signals[1].variable);
    assert_eq!(m.signals[2].dtype, DType::F64);

    // sources, then modules, then sinks, each in file order
    let order: Vec<_> = m
        .processes
        .iter()
        .map(|p| (p.name.as_str(), p.kind))
        .collect();
    assert_eq!(
        order,
        [
            ("gen", Kind::Source),
            ("ev", Kind::Source),
            ("filt", Kind::Module),
            ("counter", Kind::Module),
            ("idle", Kind::Module),
            ("out", Kind::Sink),
        ]
    );
    let p = |n: &str| m.processes.iter().find(|p| p.name == n).unwrap();
    let gen = p("gen");
    assert_eq!(gen.outputs, ["raw"]);
    assert!(gen.inputs.is_empty());
    assert_eq!(gen.line, 35);
    match &gen.body {
        Body::Driver { driver, options } => {
            assert_eq!(driver, "synthetic");
            assert_eq!(
                *options,
                serde_json::json!({"waveform": "sine", "freq": 10.5, "amps": [1, 2], "on": true,
                    "none": null, "nested": {"a": 1}})
            );
        }
        b => panic!("{b:?}"),
    }
    match &p("ev").body {
        Body::Driver { options, .. } => assert_eq!(*options, serde_json::json!({})),
        b => panic!("{b:?}"),
    }
    assert_eq!(p("ev").outputs, ["events"]);
    let canon = |f: &str| std::fs::canonicalize(dir.join(f)).unwrap();
    let filt = p("filt");
    assert_eq!(filt.inputs, ["raw", "events"]);
    assert_eq!(filt.outputs, ["filtered"]);
    assert_eq!(filt.core, None);
    match &filt.body {
        Body::Python { code, numba } => {
            assert_eq!(*code, canon("filt.py"));
            assert!(code.is_absolute());
            assert!(*numba);
        }
        b => panic!("{b:?}"),
    }
    match &p("counter").body {
        Body::Rust { code } => assert_eq!(*code, canon("counter.rs")),
        b => panic!("{b:?}"),
    }
    assert_eq!(p("counter").inputs, ["filtered"]);
    match &p("idle").body {
        Body::Python { numba, .. } => assert!(!*numba),
        b => panic!("{b:?}"),
    }
    assert!(p("idle").inputs.is_empty() && p("idle").outputs.is_empty());
    let out = p("out");
    assert_eq!(out.inputs, ["filtered", "count"]);
    assert_eq!((out.core, out.line), (Some(0), 20));
}

#[test]
fn busy_wait_default_is_clamped_to_half_a_short_tick() {
    let m = parse_with(&format!("config: {{tick_us: 40}}\n{SIGNALS}"), &[])
        .0
        .unwrap();
    assert_eq!(m.config.busy_wait, Duration::from_micros(20));
    let m = parse_with(&format!("config: {{tick_us: 51}}\n{SIGNALS}"), &[])
        .0
        .unwrap();
    assert_eq!(m.config.busy_wait, Duration::from_micros(50));
    let m = parse_with(&format!("config: {{tick_us: 50}}\n{SIGNALS}"), &[])
        .0
        .unwrap();
    assert_eq!(m.config.busy_wait, Duration::from_micros(25));
}

#[test]
fn code_paths_are_relative_to_the_model_file() {
    let dir = tmpdir();
    std::fs::create_dir_all(dir.join("sub/py")).unwrap();
    std::fs::write(dir.join("sub/py/f.py"), "").unwrap();
    let text = format!("{SIGNALS}modules:\n  f: {{language: python, code: py/f.py}}\n");
    let m = parse_str(&text, &dir.join("sub/model.yaml")).unwrap();
    match &m.processes[0].body {
        Body::Python { code, .. } => {
            assert_eq!(
                *code,
                std::fs::canonicalize(dir.join("sub/py/f.py")).unwrap()
            );
        }
        b => panic!("{b:?}"),
    }
    assert_eq!(m.name, "model");
}

#[test]
fn load_reads_the_file_and_reports_an_unreadable_one() {
    let dir = tmpdir();
    let path = dir.join("x.yaml");
    std::fs::write(&path, SIGNALS).unwrap();
    assert_eq!(load(&path).unwrap().name, "x");
    let e = load(&dir.join("missing.yaml")).unwrap_err();
    assert_eq!(e.errors.len(), 1);
    assert_eq!(e.errors[0].line, 0);
    assert!(
        e.errors[0].message.contains("cannot read the model file"),
        "{e}"
    );
}

#[test]
fn display_lists_every_problem() {
    let text = "signals:\n  raw: {shap: 4, dtype: float32}\n";
    let e = parse_str(text, Path::new("model.yaml")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "model.yaml: 2 problems\n  line 2: signal 'raw': unknown key 'shap'; allowed: shape, \
         dtype, history, variable, channels, units\n  line 2: signal 'raw': missing required key 'shape' (e.g. \
         shape: [channels])"
    );
    let e = parse_str("", Path::new("model.yaml")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "model.yaml: 1 problem\n  the file is empty; a model needs at least 'signals:'"
    );
    let _: &dyn std::error::Error = &e;
}

// ---- one test per error kind -------------------------------------------------------------

#[test]
fn yaml_syntax_error_has_the_parsers_line() {
    one(
        "signals:\n  raw: {shape: 4, dtype: float32\nsinks: {}\n",
        &[],
        3,
        &["YAML syntax error"],
    );
    one(
        "signals:\n\traw: {shape: 4}\n",
        &[],
        2,
        &["YAML syntax error", "tabs"],
    );
}

#[test]
fn duplicate_key_in_a_mapping() {
    one(
        "signals:\n  raw: {shape: 4, dtype: float32}\n  raw: {shape: 4, dtype: float32}\n",
        &[],
        3,
        &["duplicate key"],
    );
}

#[test]
fn unknown_top_level_key() {
    one(
        &format!("{SIGNALS}modles: {{}}\n"),
        &[],
        3,
        &["unknown key 'modles'; allowed: config, signals, sources, modules, sinks"],
    );
}

#[test]
fn top_level_must_be_a_mapping_and_signals_are_required() {
    one("- a\n- b\n", &[], 1, &["model file: expected a mapping"]);
    one("config: {}\n", &[], 0, &["missing required key 'signals'"]);
    one("# nothing\n", &[], 0, &["the file is empty"]);
}

#[test]
fn unknown_key_in_a_signal() {
    one(
        "signals:\n  raw:\n    shape: 4\n    shap: 4\n    dtype: int16\n",
        &[],
        4,
        &["signal 'raw': unknown key 'shap'; allowed: shape, dtype, history, variable"],
    );
}

#[test]
fn wrong_value_types() {
    one(
        &format!("config:\n  tick_us: fast\n{SIGNALS}"),
        &[],
        2,
        &["config: tick_us: expected a positive integer, got 'fast'"],
    );
    one(
        &format!("config: {{realtime: 1}}\n{SIGNALS}"),
        &[],
        1,
        &["realtime: expected true or false, got 1"],
    );
    one(
        &format!("config: {{num_ticks: 0}}\n{SIGNALS}"),
        &[],
        1,
        &["num_ticks: expected -1"],
    );
    one(
        &format!("config: {{tick_us: 100, busy_wait_us: 100}}\n{SIGNALS}"),
        &[],
        1,
        &["busy_wait_us: expected an integer 0..100 (less than tick_us), got 100"],
    );
    one(
        &format!("config: {{spin_us: -1}}\n{SIGNALS}"),
        &[],
        1,
        &["spin_us: expected an integer >= 0"],
    );
    one(
        &format!("config: {{priority: 99}}\n{SIGNALS}"),
        &[],
        1,
        &["priority: expected an integer 1..=98, got 99"],
    );
    one(
        &format!("config: {{on_miss: panic}}\n{SIGNALS}"),
        &[],
        1,
        &["on_miss: expected continue or stop, got 'panic'"],
    );
    one(
        &format!("config: {{python: 3}}\n{SIGNALS}"),
        &[],
        1,
        &["python: expected a non-empty string, got 3"],
    );
    one(
        &format!("config: {{cores: [0, 0]}}\n{SIGNALS}"),
        &[],
        1,
        &["cores: CPU 0 is listed twice"],
    );
    one(
        &format!("config: {{cores: [1000000]}}\n{SIGNALS}"),
        &[],
        1,
        &["cores: CPU 1000000 does not exist"],
    );
    one(
        &format!("config: {{cores: 0}}\n{SIGNALS}"),
        &[],
        1,
        &["cores: expected a list of CPU numbers, got 0"],
    );
    one(
        &format!("config: {{timer_core: 1000000}}\n{SIGNALS}"),
        &[],
        1,
        &["timer_core: CPU 1000000 does not exist"],
    );
    if rtloop_sys::online_cpus() > 1 {
        one(
            &format!("config: {{cores: [0], timer_core: 1}}\n{SIGNALS}"),
            &[],
            1,
            &["timer_core: CPU 1 is not one of cores [0]"],
        );
    }
    one(
        "signals:\n  raw: {shape: [0, 4], dtype: float32}\n",
        &[],
        2,
        &[
            "shape: expected a positive integer or a list of 1 or 2",
            "got [0, 4]",
        ],
    );
    one(
        "signals:\n  raw: {shape: [2, 2, 2], dtype: float32}\n",
        &[],
        2,
        &["shape: expected"],
    );
    one(
        "signals:\n  raw: {shape: 4, dtype: flaot32}\n",
        &[],
        2,
        &["dtype: unknown dtype \"flaot32\"; allowed: int8"],
    );
    one(
        "signals:\n  raw: {shape: 4, dtype: float32, history: 0}\n",
        &[],
        2,
        &["history: expected an integer >= 1, got 0"],
    );
    one(
        "signals:\n  raw: {shape: 4, dtype: float32, variable: true}\n",
        &[],
        2,
        &["variable: needs a 2-D shape"],
    );
    one("signals: [raw]\n", &[], 1, &["signals: expected a mapping"]);
}

#[test]
fn missing_required_keys() {
    one(
        "signals:\n  raw: {shape: 4}\n",
        &[],
        2,
        &["signal 'raw': missing required key 'dtype'"],
    );
    one(
        &format!("{SIGNALS}sources:\n  gen: {{out: raw}}\n"),
        &[],
        4,
        &["source 'gen': missing required key 'driver'; drivers: synthetic"],
    );
    one(
        &format!("{SIGNALS}sources:\n  gen: {{driver: synthetic}}\n"),
        &[],
        4,
        &["source 'gen': missing required key 'out'"],
    );
    one(
        &format!("{SIGNALS}sources:\n  gen: {{driver: synthetic, out: raw}}\nsinks:\n  s: {{driver: stream_out}}\n"),
        &[],
        6,
        &["sink 's': missing required key 'in'"],
    );
    let errs = errors(&format!("{SIGNALS}modules:\n  m:\n    in: raw\n"), &[]);
    has(&errs, 4, &["module 'm': missing required key 'language'"]);
    has(&errs, 4, &["module 'm': missing required key 'code'"]);
    one(
        &format!("{SIGNALS}sources:\n  g: {{driver: synthetic, out: raw}}\nmodules:\n  m: {{language: python, code: m.py, in: [{{shape: 4}}]}}\n"),
        &["m.py"],
        6,
        &["module 'm': in: missing required key 'signal'"],
    );
}

#[test]
fn sources_and_sinks_have_one_direction() {
    one(
        &format!("{SIGNALS}sources:\n  gen: {{driver: synthetic, in: raw, out: raw}}\n"),
        &[],
        4,
        &["source 'gen': a source has no 'in'"],
    );
    one(
        &format!("{SIGNALS}sources:\n  gen: {{driver: synthetic, out: []}}\n"),
        &[],
        4,
        &["source 'gen': out: a source writes at least one signal"],
    );
    one(
        &format!("{SIGNALS}sources:\n  g: {{driver: synthetic, out: raw}}\nsinks:\n  s: {{driver: stream_out, in: raw, out: raw}}\n"),
        &[],
        6,
        &["sink 's': a sink has no 'out'"],
    );
}

#[test]
fn unknown_signal_in_in_or_out() {
    let text = "\
signals:
  raw: {shape: 4, dtype: float32}
  filtered: {shape: 4, dtype: float32}
sources:
  gen: {driver: synthetic, out: raw}
modules:
  filt:
    language: python
    code: filt.py
    in: [rwa]
    out: [filtered, flitered]
";
    let errs = errors(text, &["filt.py"]);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    has(
        &errs,
        10,
        &["module 'filt' reads unknown signal 'rwa'; signals: raw, filtered"],
    );
    has(
        &errs,
        11,
        &["module 'filt' writes unknown signal 'flitered'"],
    );
}

#[test]
fn two_writers_of_one_signal() {
    let text = "\
signals:
  raw: {shape: 4, dtype: float32}
sources:
  a: {driver: synthetic, out: raw}
  b:
    driver: synthetic
    out: [raw]
";
    one(
        text,
        &[],
        7,
        &["signal 'raw' has two writers: source 'a' (line 4) and source 'b' (line 7)"],
    );
}

#[test]
fn signal_read_but_written_by_nobody() {
    let text = "\
signals:
  raw: {shape: 4, dtype: float32}
sinks:
  s: {driver: stream_out, in: raw}
";
    one(
        text,
        &[],
        2,
        &["signal 'raw' is read by sink 's' (line 4) but written by nobody"],
    );
}

#[test]
fn cycle_among_modules() {
    let text = "\
signals:
  a: {shape: 4, dtype: float32}
  b: {shape: 4, dtype: float32}
  c: {shape: 4, dtype: float32}
modules:
  filt: {language: python, code: m.py, in: b, out: a}
  detect: {language: python, code: m.py, in: a, out: b}
  self_loop: {language: python, code: m.py, in: c, out: c}
";
    let errs = errors(text, &["m.py"]);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    has(&errs, 6, &["cycle: filt → detect → filt"]);
    has(&errs, 8, &["cycle: self_loop → self_loop"]);
}

#[test]
fn shape_and_dtype_mismatch() {
    let text = "\
signals:
  raw: {shape: [30, 32], dtype: float32}
sources:
  gen: {driver: synthetic, out: raw}
modules:
  m:
    language: python
    code: m.py
    in:
      - {signal: raw, shape: [32, 30]}
      - signal: raw
        dtype: int16
";
    let errs = errors(text, &["m.py"]);
    has(
        &errs,
        10,
        &["shape/dtype mismatch: module 'm' expects 'raw' with shape [32, 30] but the signal (line 2) has shape [30, 32]"],
    );
    has(
        &errs,
        11,
        &["shape/dtype mismatch: module 'm' expects 'raw' with dtype int16 but the signal (line 2) has dtype float32"],
    );
    has(&errs, 11, &["in: signal 'raw' is listed twice"]);
    assert_eq!(errs.len(), 3, "{errs:#?}");
}

#[test]
fn missing_code_file_and_wrong_extension() {
    let (r, dir) = parse_with(
        &format!("{SIGNALS}modules:\n  m: {{language: python, code: nope.py}}\n"),
        &[],
    );
    let e = r.unwrap_err();
    assert_eq!(e.errors.len(), 1, "{e}");
    assert_eq!(e.errors[0].line, 4);
    let shown = std::path::absolute(dir.join("nope.py")).unwrap();
    assert_eq!(
        e.errors[0].message,
        format!("module 'm': code: file not found: {}", shown.display())
    );
    one(
        &format!("{SIGNALS}modules:\n  m: {{language: python, code: m.rs}}\n"),
        &["m.rs"],
        4,
        &["module 'm': code: 'm.rs' is not a .py file, as a python module needs"],
    );
    one(
        &format!("{SIGNALS}modules:\n  m:\n    language: rust\n    code: m.py\n"),
        &["m.py"],
        6,
        &["is not a .rs file, as a rust module needs"],
    );
    one(
        &format!("{SIGNALS}modules:\n  m: {{language: julia, code: m.jl}}\n"),
        &["m.jl"],
        4,
        &["language: expected python or rust, got 'julia'"],
    );
}

#[test]
fn numba_on_a_rust_module() {
    one(
        &format!("{SIGNALS}modules:\n  m:\n    language: rust\n    code: m.rs\n    numba: true\n"),
        &["m.rs"],
        7,
        &["module 'm': numba: applies only to python modules"],
    );
}

#[test]
fn duplicate_process_names_across_sections() {
    let text = "\
signals:
  raw: {shape: 4, dtype: float32}
sources:
  x: {driver: synthetic, out: raw}
sinks:
  x: {driver: stream_out, in: raw}
";
    one(
        text,
        &[],
        6,
        &["duplicate process name 'x': source 'x' (line 4) and sink 'x'"],
    );
}

#[test]
fn names_must_be_stream_names() {
    one(
        &format!("{SIGNALS}modules:\n  'a b': {{language: python, code: m.py}}\n"),
        &["m.py"],
        4,
        &["module 'a b': the name is not allowed: it contains a character that is not allowed"],
    );
    one(
        &format!("config: {{name: 'my model'}}\n{SIGNALS}"),
        &[],
        1,
        &["config: name: 'my model' is not allowed: it contains a character"],
    );
    let long = "x".repeat(61);
    one(
        &format!("config: {{name: {long}}}\nsignals:\n  raw: {{shape: 4, dtype: float32}}\n"),
        &[],
        3,
        &[
            "signal 'raw': stream name",
            "is not allowed: it is too long",
        ],
    );
    // from the file stem
    let dir = tmpdir();
    let e = parse_str(SIGNALS, &dir.join("my model.yaml")).unwrap_err();
    assert_eq!(e.errors[0].line, 0);
    assert!(e.errors[0].message.contains("set config.name"), "{e}");
}

#[test]
fn signal_over_one_gib() {
    one(
        "signals:\n  big: {shape: [1000, 1000], dtype: float64, history: 1000}\n",
        &[],
        2,
        &[
            "signal 'big': takes 8000000000 bytes",
            "more than the 1 GiB limit",
        ],
    );
    // exactly 1 GiB is allowed
    parse_with(
        "signals:\n  ok: {shape: [1024, 1024], dtype: uint8, history: 1024}\n",
        &[],
    )
    .0
    .unwrap();
}

#[test]
fn driver_errors_name_the_process_and_driver() {
    one(
        &format!("{SIGNALS}sources:\n  gen:\n    out: raw\n    driver: nope\n"),
        &[],
        6,
        &["source 'gen': driver 'nope': unknown driver \"nope\"; allowed for a source:"],
    );
    one(
        &format!("{SIGNALS}sources:\n  g: {{driver: synthetic, out: raw}}\nsinks:\n  s: {{driver: synthetic, in: raw}}\n"),
        &[],
        6,
        &["sink 's': driver 'synthetic': driver \"synthetic\" is a source driver"],
    );
    one(
        &format!("{SIGNALS}sources:\n  g: {{driver: synthetic, out: raw, options: [1]}}\n"),
        &[],
        4,
        &["source 'g': options: expected a mapping of driver options, got a list"],
    );
    one(
        &format!("{SIGNALS}sources:\n  g:\n    driver: synthetic\n    out: raw\n    options: {{x: .nan}}\n"),
        &[],
        7,
        &["source 'g': options.x: NaN is not a finite number"],
    );
}

#[test]
fn process_core_is_checked() {
    one(
        &format!("{SIGNALS}sources:\n  g: {{driver: synthetic, out: raw, core: 1000000}}\n"),
        &[],
        4,
        &["source 'g': core: CPU 1000000 does not exist"],
    );
    if rtloop_sys::online_cpus() > 1 {
        one(
            &format!("config: {{cores: [0]}}\n{SIGNALS}sources:\n  g: {{driver: synthetic, out: raw, core: 1}}\n"),
            &[],
            5,
            &["core: CPU 1 is not one of config.cores [0]"],
        );
    }
}

#[test]
fn a_second_document_is_refused() {
    one(
        &format!("{SIGNALS}---\n{SIGNALS}"),
        &[],
        4,
        &["a second YAML document"],
    );
}

// ---- many at once, and garbage ------------------------------------------------------------

#[test]
fn every_problem_is_reported_at_once_sorted_by_line() {
    let text = "\
config:
  tick_us: fast
  colour: blue
signals:
  raw: {shape: [30, 32], dtype: float32}
  filtered: {shape: 32, dtype: float32, histroy: 3}
  lonely: {shape: 4, dtype: int8}
sources:
  gen: {driver: synthetic, out: [raw]}
modules:
  filt: {language: python, code: missing.py, in: [rwa], out: [filtered]}
  detect: {language: rust, code: d.rs, numba: false, in: [filtered], out: [raw]}
sinks:
  log: {driver: stream_out, in: [lonely]}
extra: 1
";
    let errs = errors(text, &["d.rs"]);
    let lines: Vec<usize> = errs.iter().map(|e| e.line).collect();
    let mut sorted = lines.clone();
    sorted.sort_unstable();
    assert_eq!(lines, sorted, "sorted by line");
    has(
        &errs,
        2,
        &["tick_us: expected a positive integer, got 'fast'"],
    );
    has(&errs, 3, &["config: unknown key 'colour'"]);
    has(&errs, 6, &["signal 'filtered': unknown key 'histroy'"]);
    has(
        &errs,
        7,
        &["signal 'lonely' is read by sink 'log' (line 14) but written by nobody"],
    );
    has(&errs, 11, &["module 'filt': code: file not found"]);
    has(&errs, 11, &["module 'filt' reads unknown signal 'rwa'"]);
    has(
        &errs,
        12,
        &["module 'detect': numba: applies only to python modules"],
    );
    has(
        &errs,
        12,
        &["signal 'raw' has two writers: source 'gen' (line 9) and module 'detect' (line 12)"],
    );
    has(&errs, 15, &["unknown key 'extra'"]);
    assert_eq!(errs.len(), 9, "{errs:#?}");
}

#[test]
fn garbage_is_an_error_never_a_panic() {
    let deep_flow = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_block = format!("{}x\n", "- ".repeat(100_000));
    let deep_map: String = (0..2000)
        .map(|i| format!("{}a{i}:\n", " ".repeat(i)))
        .collect();
    let deep_tagged = format!("{}x\n", "- !t &a ".repeat(10_000));
    let bomb = "\
a: &a [x, x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]
signals: *i
";
    let cases: Vec<String> = vec![
        "\t\t\t".into(),
        "signals:\n\t- x".into(),
        ":".into(),
        "- - -".into(),
        "[[[[".into(),
        "{a: ".into(),
        "&a [*a]".into(),
        "*nope".into(),
        "signals: *nope".into(),
        "signals: &s {raw: {shape: 4, dtype: float32}}\nsources: *s".into(),
        "config: {tick_us: 99999999999999999999999999}\nsignals: {}".into(),
        "config: {tick_us: 0x7fffffffffffffff, busy_wait_us: -9223372036854775808}\nsignals: {}"
            .into(),
        "signals: {raw: {shape: [9223372036854775807, 9223372036854775807], dtype: float64, history: 9223372036854775807}}".into(),
        "signals: {raw: {shape: 4, dtype: float32}}\nmodules: {m: {language: python, code: '', in: [[raw]]}}".into(),
        "signals: {? [a, b] : {shape: 1}}".into(),
        "signals: {raw: !!int abc}".into(),
        "!!binary AAAA".into(),
        "\u{feff}\u{0}".into(),
        "%YAML 1.2\n%YAML 1.2\n---\n".into(),
        "signals:\n  raw: {shape: 4, dtype: float32}\nsinks:\n  s: {driver: '\u{1F600}', in: raw}".into(),
        deep_flow,
        deep_block,
        deep_map,
        deep_tagged,
        bomb.into(),
    ];
    for text in &cases {
        let r = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn({
                let text = text.clone();
                move || parse_str(&text, Path::new("/nonexistent/dir/g.yaml")).map(|_| ())
            })
            .unwrap()
            .join();
        match r {
            Ok(Err(e)) => assert!(!e.errors.is_empty()),
            Ok(Ok(())) => panic!("accepted garbage: {:?}", clip(text)),
            Err(_) => panic!("panicked on {:?}", clip(text)),
        }
    }
}

fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}

#[test]
fn alias_bombs_are_refused() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let p = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [{}]\n",
            vec![format!("*a{p}"); 10].join(", ")
        ));
    }
    text.push_str("signals: {}\n");
    let errs = errors(&text, &[]);
    assert!(
        errs.iter()
            .any(|e| e.message.contains("aliases expand to too many nodes")),
        "{errs:#?}"
    );
}

#[test]
fn small_aliases_work() {
    let text = "\
signals:
  raw: &sig {shape: 4, dtype: float32}
  copy: *sig
";
    let m = parse_with(text, &[]).0.unwrap();
    assert_eq!(m.signals.len(), 2);
    assert_eq!(m.signals[1].name, "copy");
}

const MODULE_MODEL: &str = "\
signals:
  raw: {shape: [30, 3], dtype: float32, channels: [Fz, Cz, Pz]}
  y: {shape: [2], dtype: float32}
sources:
  gen: {driver: synthetic, out: [raw]}
modules:
  m:
    language: python
    code: m.py
    every: 5
    options: {k: 4.5, name: fast, taps: [1, 2]}
    in: [raw]
    out: [y]
";

#[test]
fn channels_options_and_every_are_parsed() {
    let (m, _d) = parse_with(MODULE_MODEL, &["m.py"]);
    let m = m.unwrap();
    assert_eq!(m.signals[0].channels, ["Fz", "Cz", "Pz"]);
    assert!(m.signals[1].channels.is_empty());
    let p = &m.processes[1];
    assert_eq!(p.every, 5);
    assert_eq!(
        p.options,
        serde_json::json!({"k": 4.5, "name": "fast", "taps": [1, 2]})
    );
    // defaults: every tick, no options
    assert_eq!(m.processes[0].every, 1);
    let (m, _d) = parse_with(
        &MODULE_MODEL
            .replace("    every: 5\n", "")
            .replace("    options: {k: 4.5, name: fast, taps: [1, 2]}\n", ""),
        &["m.py"],
    );
    let m = m.unwrap();
    assert_eq!(m.processes[1].every, 1);
    assert_eq!(m.processes[1].options, serde_json::json!({}));
}

#[test]
fn bad_channels_are_refused_with_what_is_allowed() {
    let with = |c: &str| MODULE_MODEL.replace("channels: [Fz, Cz, Pz]", c);
    one(
        &with("channels: [Fz, Cz]"),
        &["m.py"],
        2,
        &["signal 'raw': channels: 2 names for 3 values per row (shape [30, 3]"],
    );
    one(
        &with("channels: [Fz, Fz, Pz]"),
        &["m.py"],
        2,
        &["signal 'raw': channels: 'Fz' is listed twice"],
    );
    one(
        &with("channels: Fz"),
        &["m.py"],
        2,
        &["signal 'raw': channels: expected a list of channel names, got"],
    );
    one(
        &with("channels: [Fz, 3, Pz]"),
        &["m.py"],
        2,
        &["channels: expected a channel name (a non-empty string of at most 64 bytes), got"],
    );
    one(
        &with(&format!("channels: [Fz, Cz, {}]", "x".repeat(65))),
        &["m.py"],
        2,
        &["at most 64 bytes"],
    );
}

#[test]
fn units_are_one_for_all_or_one_per_value_and_bad_ones_say_what_is_allowed() {
    let with = |u: &str| {
        MODULE_MODEL.replace(
            "channels: [Fz, Cz, Pz]",
            &format!("channels: [Fz, Cz, Pz], {u}"),
        )
    };
    let m = parse_with(&with("units: uV"), &["m.py"]).0.unwrap();
    assert_eq!(m.signals[0].units, ["uV", "uV", "uV"]);
    let m = parse_with(&with("units: [uV, '', mV]"), &["m.py"])
        .0
        .unwrap();
    assert_eq!(m.signals[0].units, ["uV", "", "mV"]);
    assert!(m.signals[1].units.is_empty(), "none given: none");
    one(
        &with("units: [uV, uV]"),
        &["m.py"],
        2,
        &["signal 'raw': units: 2 units for 3 values per row (one per channel, or one string for all)"],
    );
    one(
        &with("units: {a: 1}"),
        &["m.py"],
        2,
        &["signal 'raw': units: expected a unit for every value (units: uV) or a list of one unit per value"],
    );
    one(
        &with("units: [uV, 3, mV]"),
        &["m.py"],
        2,
        &["units: expected a unit (a string of at most 64 bytes, \"\" for none), got"],
    );
}

#[test]
fn bad_module_options_and_every_are_refused_with_what_is_allowed() {
    one(
        &MODULE_MODEL.replace("every: 5", "every: 0"),
        &["m.py"],
        10,
        &["module 'm': every: expected an integer >= 1 (ticks), got 0"],
    );
    one(
        &MODULE_MODEL.replace("every: 5", "every: fast"),
        &["m.py"],
        10,
        &["every: expected an integer >= 1 (ticks)"],
    );
    one(
        &MODULE_MODEL.replace("options: {k: 4.5, name: fast, taps: [1, 2]}", "options: [1, 2]"),
        &["m.py"],
        11,
        &["module 'm': options: expected a mapping of option name to value (passed to the module's init), got"],
    );
    // a Rust module reads numbers (and true/false) only
    let rust = MODULE_MODEL
        .replace("language: python", "language: rust")
        .replace("code: m.py", "code: m.rs");
    let errs = errors(&rust, &["m.rs"]);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    has(
        &errs,
        11,
        &["module 'm': options: 'name' is \"fast\"; a rust module's options are numbers or true/false (read with t.option(\"name\"))"],
    );
    has(&errs, 11, &["'taps' is [1,2]"]);
    let ok = rust.replace("{k: 4.5, name: fast, taps: [1, 2]}", "{k: 4.5, on: true}");
    assert!(parse_with(&ok, &["m.rs"]).0.is_ok());
}

mod blocks;
