//! Modules written in Rust (`language: rust`, `code: detect.rs`): the user's plain `.rs`
//! file is compiled with `rustc -O` into a shared library when the model starts (before
//! anything runs; rustc's diagnostics point into the user's file) and loaded with
//! `libloading` in the module's process. The user writes `pub fn step(t: &mut Tick)`
//! against a small prelude (docs/runtime-rust-modules.md); inputs and outputs are slices of
//! the streams' memory, no copies.

use std::ffi::c_void;
use std::path::{Path, PathBuf};

use crate::drivers::{InView, OutBuf};

/// Version of the C ABI between the runtime and a compiled module.
pub const ABI_VERSION: u32 = 1;

/// The API a module file is compiled against (placed before the user's file).
pub const PRELUDE: &str = r#####"
#![allow(dead_code, unused_imports, clippy::all)]
use std::any::Any;
use std::cell::RefCell;

#[repr(C)]
pub struct RtSig {
    pub ptr: *mut u8,
    pub len_bytes: usize,
    pub rows: usize,
    pub row_len: usize,
    pub dtype: u32,
    pub name_ptr: *const u8,
    pub name_len: usize,
}

#[repr(C)]
pub struct RtTick {
    pub tick: u64,
    pub inputs: *const RtSig,
    pub n_inputs: usize,
    pub outputs: *mut RtSig,
    pub n_outputs: usize,
}

/// A value type a signal can hold (the code is rtloop's dtype code).
pub trait Value: Copy + 'static {
    const CODE: u32;
}
impl Value for u8 { const CODE: u32 = 1; }
impl Value for u16 { const CODE: u32 = 2; }
impl Value for u32 { const CODE: u32 = 3; }
impl Value for u64 { const CODE: u32 = 4; }
impl Value for i8 { const CODE: u32 = 5; }
impl Value for i16 { const CODE: u32 = 6; }
impl Value for i32 { const CODE: u32 = 7; }
impl Value for i64 { const CODE: u32 = 8; }
impl Value for f32 { const CODE: u32 = 9; }
impl Value for f64 { const CODE: u32 = 10; }

fn dtype_name(code: u32) -> &'static str {
    ["?", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float32", "float64"]
        .get(code as usize)
        .copied()
        .unwrap_or("?")
}

fn rust_name<T: Value>() -> &'static str {
    ["?", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "f32", "f64"][T::CODE as usize]
}

/// One tick of this module: its inputs (with history, oldest first, row-major) and outputs
/// (this tick's rows), and state kept across ticks.
pub struct Tick<'a> {
    raw: &'a mut RtTick,
    state: &'a mut Option<Box<dyn Any>>,
    taken: u64,
    state_taken: bool,
}

impl<'a> Tick<'a> {
    fn sig_in(&self, i: usize) -> &'a RtSig {
        assert!(i < self.raw.n_inputs, "input {i} does not exist: the module has {} inputs", self.raw.n_inputs);
        // the runtime passes n_inputs valid RtSigs that live for the whole step
        unsafe { &*self.raw.inputs.add(i) }
    }
    fn sig_out(&self, i: usize) -> &'a mut RtSig {
        assert!(i < self.raw.n_outputs, "output {i} does not exist: the module has {} outputs", self.raw.n_outputs);
        unsafe { &mut *self.raw.outputs.add(i) }
    }
    fn name(s: &RtSig) -> &'a str {
        unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(s.name_ptr, s.name_len)) }
    }
    fn check<T: Value>(s: &RtSig, what: &str, i: usize) {
        if s.dtype != T::CODE {
            panic!("{what} {i} ('{}') is {}, not {}", Self::name(s), dtype_name(s.dtype), rust_name::<T>());
        }
    }
    /// The tick number (0-based).
    pub fn tick(&self) -> u64 {
        self.raw.tick
    }
    /// Input `i` (order of the model's `in:`): every row of its history, row-major.
    pub fn input<T: Value>(&self, i: usize) -> &'a [T] {
        let s = self.sig_in(i);
        Self::check::<T>(s, "input", i);
        unsafe { std::slice::from_raw_parts(s.ptr as *const T, s.len_bytes / std::mem::size_of::<T>()) }
    }
    /// Input by signal name.
    pub fn input_named<T: Value>(&self, name: &str) -> &'a [T] {
        self.input(self.index_in(name))
    }
    /// Rows of input `i` (history ticks x rows per tick, or this tick's rows if variable).
    pub fn input_rows(&self, i: usize) -> usize {
        self.sig_in(i).rows
    }
    /// Values per row of input `i`.
    pub fn row_len_in(&self, i: usize) -> usize {
        self.sig_in(i).row_len
    }
    fn index_in(&self, name: &str) -> usize {
        (0..self.raw.n_inputs).find(|&i| Self::name(self.sig_in(i)) == name).unwrap_or_else(|| {
            let names: Vec<&str> = (0..self.raw.n_inputs).map(|i| Self::name(self.sig_in(i))).collect();
            panic!("no input '{name}'; inputs: {}", names.join(", "))
        })
    }
    fn index_out(&self, name: &str) -> usize {
        (0..self.raw.n_outputs).find(|&i| Self::name(self.sig_out(i)) == name).unwrap_or_else(|| {
            let names: Vec<&str> = (0..self.raw.n_outputs).map(|i| Self::name(self.sig_out(i))).collect();
            panic!("no output '{name}'; outputs: {}", names.join(", "))
        })
    }
    /// Output `i` (order of the model's `out:`): this tick's rows, row-major. Each output
    /// can be taken once per tick (keep the slice).
    pub fn output<T: Value>(&mut self, i: usize) -> &'a mut [T] {
        let s = self.sig_out(i);
        Self::check::<T>(s, "output", i);
        assert!(self.taken & (1 << i) == 0, "output {i} ('{}') taken twice in one tick: keep the slice", Self::name(s));
        self.taken |= 1 << i;
        unsafe { std::slice::from_raw_parts_mut(s.ptr as *mut T, s.len_bytes / std::mem::size_of::<T>()) }
    }
    /// Output by signal name.
    pub fn output_named<T: Value>(&mut self, name: &str) -> &'a mut [T] {
        let i = self.index_out(name);
        self.output(i)
    }
    /// Values per row of output `i`.
    pub fn row_len_out(&self, i: usize) -> usize {
        self.sig_out(i).row_len
    }
    /// Rows output `i` can take this tick.
    pub fn output_rows(&self, i: usize) -> usize {
        self.sig_out(i).rows
    }
    /// For a variable output: how many rows this tick carries (at most `output_rows`).
    pub fn set_output_rows(&mut self, i: usize, n: usize) {
        let s = self.sig_out(i);
        let max = s.len_bytes / (s.row_len * dtype_size(s.dtype)).max(1);
        assert!(n <= max, "output {i} ('{}') holds at most {max} rows, not {n}", Self::name(s));
        s.rows = n;
    }
    /// State kept across ticks (created with `Default` on first use). Take it once per tick.
    pub fn state<S: Default + 'static>(&mut self) -> &'a mut S {
        assert!(!self.state_taken, "state taken twice in one tick: keep the reference");
        self.state_taken = true;
        let slot: &'a mut Option<Box<dyn Any>> = unsafe { &mut *(self.state as *mut Option<Box<dyn Any>>) };
        if slot.as_ref().map_or(true, |b| !b.is::<S>()) {
            *slot = Some(Box::new(S::default()));
        }
        slot.as_mut().and_then(|b| b.downcast_mut::<S>()).expect("just set")
    }
}

fn dtype_size(code: u32) -> usize {
    match code { 1 | 5 => 1, 2 | 6 => 2, 3 | 7 | 9 => 4, _ => 8 }
}

thread_local! {
    static PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

pub struct Holder {
    state: Option<Box<dyn Any>>,
}

#[no_mangle]
pub extern "C" fn rtloop_module_abi_version() -> u32 {
    __ABI__
}

#[no_mangle]
pub extern "C" fn rtloop_module_new() -> *mut std::ffi::c_void {
    // keep the panic message (and where) for the runtime instead of printing it
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_string());
        let at = info.location().map(|l| format!(" (at {}:{})", l.file(), l.line())).unwrap_or_default();
        PANIC.with(|p| *p.borrow_mut() = format!("{msg}{at}"));
    }));
    Box::into_raw(Box::new(Holder { state: None })) as *mut std::ffi::c_void
}

#[no_mangle]
pub unsafe extern "C" fn rtloop_module_step(
    holder: *mut std::ffi::c_void,
    raw: *mut RtTick,
    err: *mut u8,
    err_cap: usize,
    err_len: *mut usize,
) -> i32 {
    let holder = unsafe { &mut *(holder as *mut Holder) };
    let raw = unsafe { &mut *raw };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut t = Tick { raw, state: &mut holder.state, taken: 0, state_taken: false };
        user::step(&mut t);
    }));
    match r {
        Ok(()) => 0,
        Err(_) => {
            let msg = PANIC.with(|p| std::mem::take(&mut *p.borrow_mut()));
            let n = msg.len().min(err_cap);
            unsafe {
                std::ptr::copy_nonoverlapping(msg.as_ptr(), err, n);
                *err_len = n;
            }
            1
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn rtloop_module_free(holder: *mut std::ffi::c_void) {
    drop(unsafe { Box::from_raw(holder as *mut Holder) });
}
"#####;

/// Where compiled modules are kept: `$RTLOOP_CACHE_DIR`, else `$XDG_CACHE_HOME/rtloop/modules`,
/// else `~/.cache/rtloop/modules`, else the temp dir.
#[must_use]
pub fn default_cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("RTLOOP_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("rtloop/modules");
    }
    if let Some(h) = std::env::var_os("HOME") {
        return PathBuf::from(h).join(".cache/rtloop/modules");
    }
    std::env::temp_dir().join("rtloop-modules")
}

fn rustc() -> String {
    std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into())
}

/// Compile `code` (a module file) into a shared library in `cache_dir`, or reuse the one
/// compiled from the same text with the same rustc. Returns the library's path; on a
/// compile error, rustc's diagnostics (they name the user's file and line).
pub fn compile(code: &Path, cache_dir: &Path) -> Result<PathBuf, String> {
    let code = code
        .canonicalize()
        .map_err(|e| format!("cannot read module file {}: {e}", code.display()))?;
    let source = std::fs::read_to_string(&code)
        .map_err(|e| format!("cannot read module file {}: {e}", code.display()))?;
    let version = std::process::Command::new(rustc())
        .arg("-V")
        .output()
        .map_err(|e| {
            format!(
                "cannot run {:?} to compile {} ({e}); a Rust module needs a Rust toolchain \
                 (https://rustup.rs, or set RUSTC)",
                rustc(),
                code.display()
            )
        })?;
    let prelude = PRELUDE.replace("__ABI__", &ABI_VERSION.to_string());
    let key = crate::process::model_hash(&format!(
        "{prelude}\u{0}{source}\u{0}{}\u{0}{}",
        String::from_utf8_lossy(&version.stdout),
        code.display()
    ));
    std::fs::create_dir_all(cache_dir)
        .map_err(|e| format!("cannot create {}: {e}", cache_dir.display()))?;
    let so = cache_dir.join(format!("module-{key:016x}.so"));
    if so.exists() {
        return Ok(so);
    }
    let wrapper = cache_dir.join(format!("module-{key:016x}.rs"));
    let code_lit = format!("{:?}", code.display().to_string());
    std::fs::write(
        &wrapper,
        format!("{prelude}\nmod user {{\n    #[allow(unused_imports)]\n    use super::*;\n    include!({code_lit});\n}}\n"),
    )
    .map_err(|e| format!("cannot write {}: {e}", wrapper.display()))?;
    // compile to a private name, then rename: two models compiling at once stay safe
    let tmp = cache_dir.join(format!("module-{key:016x}.{}.tmp", std::process::id()));
    let out = std::process::Command::new(rustc())
        .args([
            "--edition",
            "2021",
            "--crate-type",
            "cdylib",
            "-C",
            "opt-level=3",
        ])
        .args(["-C", "panic=unwind", "--crate-name"])
        .arg(format!("rtloop_module_{key:016x}"))
        .arg("-o")
        .arg(&tmp)
        .arg(&wrapper)
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", rustc()))?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "rustc could not compile module file {}:\n{}",
            code.display(),
            String::from_utf8_lossy(&out.stderr).trim_end()
        ));
    }
    std::fs::rename(&tmp, &so).map_err(|e| format!("cannot store {}: {e}", so.display()))?;
    Ok(so)
}

#[repr(C)]
struct RtSig {
    ptr: *mut u8,
    len_bytes: usize,
    rows: usize,
    row_len: usize,
    dtype: u32,
    name_ptr: *const u8,
    name_len: usize,
}

#[repr(C)]
struct RtTick {
    tick: u64,
    inputs: *const RtSig,
    n_inputs: usize,
    outputs: *mut RtSig,
    n_outputs: usize,
}

type StepFn = unsafe extern "C" fn(*mut c_void, *mut RtTick, *mut u8, usize, *mut usize) -> i32;
type FreeFn = unsafe extern "C" fn(*mut c_void);

/// A loaded Rust module.
pub struct RustModule {
    step: StepFn,
    free: FreeFn,
    holder: *mut c_void,
    ins: Vec<RtSig>,
    outs: Vec<RtSig>,
    err: Vec<u8>,
    // dropped last: the functions above live in it
    _lib: libloading::Library,
}

impl RustModule {
    /// Load a library made by [`compile`].
    pub fn load(so: &Path) -> Result<RustModule, String> {
        // SAFETY: the library was produced by `compile` from the prelude above; its
        // initialisers are Rust's std ones (no user code runs at load).
        let lib = unsafe { libloading::Library::new(so) }
            .map_err(|e| format!("cannot load {}: {e}", so.display()))?;
        // SAFETY: symbol types match the prelude's `extern "C"` definitions, and the
        // version is checked before anything else is called.
        unsafe {
            let version: libloading::Symbol<'_, extern "C" fn() -> u32> = lib
                .get(b"rtloop_module_abi_version")
                .map_err(|e| format!("{} is not an rtloop module: {e}", so.display()))?;
            if version() != ABI_VERSION {
                return Err(format!(
                    "{} was built for module ABI {}, this rtloop uses {ABI_VERSION}; remove it to recompile",
                    so.display(),
                    version()
                ));
            }
            let new: libloading::Symbol<'_, extern "C" fn() -> *mut c_void> =
                lib.get(b"rtloop_module_new").map_err(|e| e.to_string())?;
            let step: StepFn = *lib
                .get::<StepFn>(b"rtloop_module_step")
                .map_err(|e| e.to_string())?;
            let free: FreeFn = *lib
                .get::<FreeFn>(b"rtloop_module_free")
                .map_err(|e| e.to_string())?;
            let holder = new();
            Ok(RustModule {
                step,
                free,
                holder,
                ins: Vec::new(),
                outs: Vec::new(),
                err: vec![0; 4096],
                _lib: lib,
            })
        }
    }

    /// Run the module's `step` for one tick. A panic in it comes back as the error (with
    /// its message and location); `outputs[i].rows` is what the module set.
    pub fn step(
        &mut self,
        tick: u64,
        inputs: &[InView<'_>],
        outputs: &mut [OutBuf<'_>],
    ) -> Result<(), String> {
        let sig = |ptr: *mut u8, len: usize, rows: usize, s: &crate::model::Signal| RtSig {
            ptr,
            len_bytes: len,
            rows,
            row_len: s.row_len(),
            dtype: s.dtype.code(),
            name_ptr: s.name.as_ptr(),
            name_len: s.name.len(),
        };
        self.ins.clear();
        self.ins.extend(
            inputs
                .iter()
                .map(|i| sig(i.bytes.as_ptr().cast_mut(), i.bytes.len(), i.rows, i.signal)),
        );
        self.outs.clear();
        for o in outputs.iter_mut() {
            let (p, n) = (o.bytes.as_mut_ptr(), o.bytes.len());
            self.outs.push(sig(p, n, o.rows, o.signal));
        }
        let mut raw = RtTick {
            tick,
            inputs: self.ins.as_ptr(),
            n_inputs: self.ins.len(),
            outputs: self.outs.as_mut_ptr(),
            n_outputs: self.outs.len(),
        };
        let mut err_len = 0usize;
        // SAFETY: `holder` came from the module's `new`; `raw` points at RtSigs describing
        // the inputs' and outputs' memory, valid (and the outputs exclusively ours) for the
        // whole call; the error buffer holds `err.len()` bytes. Inputs are only read by the
        // module (the prelude hands them out as shared slices).
        let rc = unsafe {
            (self.step)(
                self.holder,
                &mut raw,
                self.err.as_mut_ptr(),
                self.err.len(),
                &mut err_len,
            )
        };
        for (o, s) in outputs.iter_mut().zip(&self.outs) {
            o.rows = s.rows.min(o.rows);
        }
        if rc == 0 {
            Ok(())
        } else {
            Err(format!(
                "panicked: {}",
                String::from_utf8_lossy(&self.err[..err_len.min(self.err.len())])
            ))
        }
    }
}

impl Drop for RustModule {
    fn drop(&mut self) {
        // SAFETY: `holder` came from this library's `new` and is freed once; the library
        // is still loaded (`_lib` drops after this).
        unsafe { (self.free)(self.holder) };
    }
}
