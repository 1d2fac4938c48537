// The prelude of a Rust module (docs/runtime-rust-modules.md). This file is not part of
// rtloop-runtime: `rust_module::compile` pastes it (include_str!) at the top of the crate it
// generates for a module file, followed by
//
//     pub const RTLOOP_ABI_VERSION: u32 = <rust_module::ABI_VERSION>;
//     mod user { #[allow(unused_imports)] use super::*; include!("/abs/path/of/the/module.rs"); }
//
// It defines what the user's file sees (`Tick`, `Value`) and the C ABI the runtime calls
// (`RtTick`, `RtSig`, `RtOption` and the six `rtloop_module_*` functions). Changing it changes the cache
// key, so every module is recompiled; changing the ABI also needs `ABI_VERSION` bumped.
#![allow(dead_code, unused_imports, unused_unsafe, clippy::all)]

use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;

/// One signal as the runtime passes it (C ABI).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RtSig {
    /// First byte of the rows (inputs: read only).
    pub ptr: *mut u8,
    /// Bytes at `ptr`.
    pub len_bytes: usize,
    /// Rows at `ptr` (an output: rows this tick carries; the module may lower it).
    pub rows: usize,
    /// Values per row.
    pub row_len: usize,
    /// rtloop (FieldTrip) dtype code.
    pub dtype_code: u32,
    /// The signal's name (UTF-8, not NUL-terminated).
    pub name_ptr: *const u8,
    pub name_len: usize,
}

/// One tick as the runtime passes it (C ABI).
#[repr(C)]
pub struct RtTick {
    pub tick: u64,
    pub inputs: *const RtSig,
    pub n_inputs: usize,
    pub outputs: *mut RtSig,
    pub n_outputs: usize,
    pub options: *const RtOption,
    pub n_options: usize,
}

/// One of the module's options (C ABI): the model's `options:` entry, a number (true/false
/// as 1/0).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RtOption {
    pub name_ptr: *const u8,
    pub name_len: usize,
    pub value: f64,
}

/// A value type a signal can hold. `CODE` is rtloop's dtype code (FieldTrip's).
///
/// # Safety
///
/// Implemented for the ten numeric types; every bit pattern of `size_of::<Self>()` bytes
/// must be a valid `Self` and `CODE` must be the dtype whose values have exactly this
/// layout. Do not implement it for other types.
pub unsafe trait Value: Copy + 'static {
    /// The rtloop dtype code.
    const CODE: u32;
    /// The rtloop dtype name (`"float32"`).
    const NAME: &'static str;
}
// SAFETY (all ten): plain numbers, any bit pattern is valid, codes are rtloop's.
unsafe impl Value for u8 { const CODE: u32 = 1; const NAME: &'static str = "uint8"; }
unsafe impl Value for u16 { const CODE: u32 = 2; const NAME: &'static str = "uint16"; }
unsafe impl Value for u32 { const CODE: u32 = 3; const NAME: &'static str = "uint32"; }
unsafe impl Value for u64 { const CODE: u32 = 4; const NAME: &'static str = "uint64"; }
unsafe impl Value for i8 { const CODE: u32 = 5; const NAME: &'static str = "int8"; }
unsafe impl Value for i16 { const CODE: u32 = 6; const NAME: &'static str = "int16"; }
unsafe impl Value for i32 { const CODE: u32 = 7; const NAME: &'static str = "int32"; }
unsafe impl Value for i64 { const CODE: u32 = 8; const NAME: &'static str = "int64"; }
unsafe impl Value for f32 { const CODE: u32 = 9; const NAME: &'static str = "float32"; }
unsafe impl Value for f64 { const CODE: u32 = 10; const NAME: &'static str = "float64"; }

const DTYPE_NAMES: [&str; 11] = [
    "?", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float32",
    "float64",
];
const RUST_NAMES: [&str; 11] = ["?", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "f32", "f64"];

fn dtype_name(code: u32) -> &'static str {
    DTYPE_NAMES.get(code as usize).copied().unwrap_or("an unknown dtype")
}

fn rust_name(code: u32) -> &'static str {
    RUST_NAMES.get(code as usize).copied().unwrap_or("?")
}

fn dtype_size(code: u32) -> usize {
    match code {
        1 | 5 => 1,
        2 | 6 => 2,
        3 | 7 | 9 => 4,
        _ => 8,
    }
}

/// One tick of this module: its inputs (every row of their history, oldest first,
/// row-major), its outputs (this tick's rows) and its state kept across ticks.
///
/// The slices it hands out are the streams' memory itself, valid for this call of `step`:
/// they borrow the `Tick` for `'a` only, not for the call that returned them, so several
/// inputs, outputs and the state can be held at once. Each output and the state can be
/// taken once per tick (a second `&mut` to the same memory would be undefined behaviour,
/// so it panics).
pub struct Tick<'a> {
    tick: u64,
    inputs: *const RtSig,
    n_inputs: usize,
    outputs: *mut RtSig,
    n_outputs: usize,
    options: *const RtOption,
    n_options: usize,
    /// "step", "init" or "finish": signals carry data only in step.
    phase: &'static str,
    taken: &'a mut [bool],
    state: Option<&'a mut RtState>,
    _life: PhantomData<&'a mut RtTick>,
}

/// The module's state: the value and its type name (for the message when another type is
/// asked for).
type RtState = Option<(Box<dyn Any>, &'static str)>;

impl<'a> Tick<'a> {
    #[track_caller]
    fn sig_in(&self, i: usize) -> RtSig {
        assert!(
            i < self.n_inputs,
            "input {i} does not exist: this module has {} input(s){}",
            self.n_inputs,
            self.list(self.inputs, self.n_inputs)
        );
        // SAFETY: the runtime passes `n_inputs` RtSigs at `inputs`, valid for the step.
        unsafe { *self.inputs.add(i) }
    }

    #[track_caller]
    fn sig_out(&self, i: usize) -> RtSig {
        assert!(
            i < self.n_outputs,
            "output {i} does not exist: this module has {} output(s){}",
            self.n_outputs,
            self.list(self.outputs, self.n_outputs)
        );
        // SAFETY: the runtime passes `n_outputs` RtSigs at `outputs`, valid for the step;
        // this copies it (no reference to it is kept).
        unsafe { *self.outputs.add(i) }
    }

    fn name_of(s: &RtSig) -> &'a str {
        if s.name_len == 0 {
            return "";
        }
        // SAFETY: the name is the model's signal name (a Rust String in the runtime, so
        // UTF-8), `name_len` bytes at `name_ptr`, alive for the whole step.
        unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(s.name_ptr, s.name_len)) }
    }

    fn list(&self, sigs: *const RtSig, n: usize) -> String {
        let names: Vec<String> = (0..n)
            // SAFETY: as in sig_in / sig_out: `n` valid RtSigs at `sigs`.
            .map(|i| format!("{i} '{}'", Self::name_of(unsafe { &*sigs.add(i) })))
            .collect();
        if names.is_empty() {
            String::new()
        } else {
            format!(": {}", names.join(", "))
        }
    }

    #[track_caller]
    fn check<T: Value>(s: &RtSig, what: &str, i: usize) {
        if s.dtype_code != T::CODE {
            panic!(
                "{what} {i} ('{}') is {}, not {}: use t.{what}::<{}>({i})",
                Self::name_of(s),
                dtype_name(s.dtype_code),
                T::NAME,
                rust_name(s.dtype_code)
            );
        }
        assert!(
            s.len_bytes == 0 || s.ptr as usize % std::mem::align_of::<T>() == 0,
            "{what} {i} ('{}') is not aligned for {} (a bug in rtloop)",
            Self::name_of(s),
            T::NAME
        );
    }

    /// The tick number (0-based).
    pub fn tick(&self) -> u64 {
        self.tick
    }

    #[track_caller]
    fn need_data(&self, what: &str, i: usize) {
        if self.phase != "step" {
            panic!(
                "t.{what}({i}) in {}: signals carry data only in step; {} sees their shapes \
                 (t.row_len_in, t.input_rows, t.row_len_out, t.output_rows), options and state",
                self.phase, self.phase
            );
        }
    }

    /// The module's option `name` from the model's `options:` (true/false read as 1/0), or
    /// `None` if the model does not give it: `t.option("threshold").unwrap_or(-100.0)`.
    pub fn option(&self, name: &str) -> Option<f64> {
        (0..self.n_options).find_map(|i| {
            // SAFETY: the runtime passes `n_options` RtOptions at `options`, each naming
            // `name_len` UTF-8 bytes at `name_ptr`, valid for the step.
            let o = unsafe { *self.options.add(i) };
            // SAFETY: as above.
            let n = unsafe { std::slice::from_raw_parts(o.name_ptr, o.name_len) };
            (n == name.as_bytes()).then_some(o.value)
        })
    }

    /// How many inputs (the model's `in:`) this module has.
    pub fn n_inputs(&self) -> usize {
        self.n_inputs
    }

    /// How many outputs (the model's `out:`) this module has.
    pub fn n_outputs(&self) -> usize {
        self.n_outputs
    }

    /// The signal name of input `i`.
    #[track_caller]
    pub fn input_name(&self, i: usize) -> &'a str {
        Self::name_of(&self.sig_in(i))
    }

    /// The signal name of output `i`.
    #[track_caller]
    pub fn output_name(&self, i: usize) -> &'a str {
        Self::name_of(&self.sig_out(i))
    }

    /// Input `i` (order of the model's `in:`): every row of its history (history x rows per
    /// tick, oldest first; this tick's rows last), row-major. Panics if `T` is not the
    /// signal's dtype.
    #[track_caller]
    pub fn input<T: Value>(&self, i: usize) -> &'a [T] {
        self.need_data("input", i);
        let s = self.sig_in(i);
        Self::check::<T>(&s, "input", i);
        let n = s.len_bytes / std::mem::size_of::<T>();
        if n == 0 {
            return &[];
        }
        // SAFETY: `ptr` is `len_bytes` bytes of the input's rows, readable and not written
        // by anyone during the step; the dtype is T's (checked above, and every bit pattern
        // is a valid T by Value's contract); the alignment is checked above; the memory
        // outlives 'a (the step).
        unsafe { std::slice::from_raw_parts(s.ptr as *const T, n) }
    }

    /// Input by signal name.
    #[track_caller]
    pub fn input_named<T: Value>(&self, name: &str) -> &'a [T] {
        self.input(self.index_in(name))
    }

    /// Rows of input `i` (history ticks x rows per tick; for a variable signal, the rows its
    /// ticks carried).
    #[track_caller]
    pub fn input_rows(&self, i: usize) -> usize {
        self.sig_in(i).rows
    }

    /// Values per row of input `i`.
    #[track_caller]
    pub fn row_len_in(&self, i: usize) -> usize {
        self.sig_in(i).row_len
    }

    #[track_caller]
    fn index_in(&self, name: &str) -> usize {
        match (0..self.n_inputs).find(|&i| Self::name_of(&self.sig_in(i)) == name) {
            Some(i) => i,
            None => {
                let l = self.list(self.inputs, self.n_inputs);
                panic!("no input named '{name}'; inputs{}", if l.is_empty() { ": none" } else { &l })
            }
        }
    }

    #[track_caller]
    fn index_out(&self, name: &str) -> usize {
        match (0..self.n_outputs).find(|&i| Self::name_of(&self.sig_out(i)) == name) {
            Some(i) => i,
            None => {
                let l = self.list(self.outputs, self.n_outputs);
                panic!("no output named '{name}'; outputs{}", if l.is_empty() { ": none" } else { &l })
            }
        }
    }

    /// Output `i` (order of the model's `out:`): this tick's rows, row-major, written
    /// straight into the output's stream. Take each output once per tick and keep the slice.
    /// Panics if `T` is not the signal's dtype.
    #[track_caller]
    pub fn output<T: Value>(&mut self, i: usize) -> &'a mut [T] {
        self.need_data("output", i);
        let s = self.sig_out(i);
        Self::check::<T>(&s, "output", i);
        assert!(
            !self.taken[i],
            "output {i} ('{}') taken twice in one tick: keep the slice the first call gave",
            Self::name_of(&s)
        );
        self.taken[i] = true;
        let n = s.len_bytes / std::mem::size_of::<T>();
        if n == 0 {
            return &mut [];
        }
        // SAFETY: `ptr` is `len_bytes` writable bytes of this tick's rows of the output,
        // which nobody else touches during the step; it is handed out once per step (the
        // `taken` flag), so this is the only reference; dtype and alignment are checked
        // above and any bit pattern is a valid T; the memory outlives 'a.
        unsafe { std::slice::from_raw_parts_mut(s.ptr as *mut T, n) }
    }

    /// Output by signal name.
    #[track_caller]
    pub fn output_named<T: Value>(&mut self, name: &str) -> &'a mut [T] {
        let i = self.index_out(name);
        self.output(i)
    }

    /// Values per row of output `i`.
    #[track_caller]
    pub fn row_len_out(&self, i: usize) -> usize {
        self.sig_out(i).row_len
    }

    /// Rows output `i` holds this tick (its rows per tick).
    #[track_caller]
    pub fn output_rows(&self, i: usize) -> usize {
        self.sig_out(i).rows
    }

    /// For a `variable` output: how many rows (the first `n` of the slice) this tick
    /// carries, at most `output_rows(i)`. Without a call, every row is sent. Ignored by the
    /// runtime for a fixed-size output.
    #[track_caller]
    pub fn set_output_rows(&mut self, i: usize, n: usize) {
        let s = self.sig_out(i);
        let row_bytes = s.row_len * dtype_size(s.dtype_code);
        let max = if row_bytes == 0 { s.rows } else { s.len_bytes / row_bytes };
        assert!(
            n <= max,
            "output {i} ('{}') holds at most {max} rows per tick, not {n}",
            Self::name_of(&s)
        );
        // SAFETY: `outputs.add(i)` is a valid RtSig (i checked in sig_out) that the runtime
        // reads back after the step; no reference to it exists (sig_out copies).
        unsafe { std::ptr::addr_of_mut!((*self.outputs.add(i)).rows).write(n) };
    }

    /// State kept across ticks, created with `Default` on the first call. Take it once per
    /// tick and keep the reference; a module has one state type (use a struct).
    #[track_caller]
    pub fn state<S: Default + 'static>(&mut self) -> &'a mut S {
        let slot: &'a mut RtState = self
            .state
            .take()
            .expect("state taken twice in one tick: keep the reference the first call gave");
        let (b, name) =
            slot.get_or_insert_with(|| (Box::new(S::default()), std::any::type_name::<S>()));
        let name: &'static str = *name;
        match (**b).downcast_mut::<S>() {
            Some(s) => s,
            None => panic!(
                "the state is a {name}, not a {}: a module keeps one state type (put everything in one struct)",
                std::any::type_name::<S>()
            ),
        }
    }
}

thread_local! {
    /// The last panic's message and place, kept by the hook for `rtloop_module_step`.
    static PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// What `rtloop_module_new` allocates: the module's state and per-tick scratch.
pub struct RtHolder {
    state: RtState,
    taken: Vec<bool>,
}

/// What a module file that defines no `init` / `finish` gets: the wrapper puts these in
/// scope of the module file with a glob import, which a module's own `pub fn init` or
/// `pub fn finish` shadows.
pub mod rtloop_default_hooks {
    use super::Tick;
    /// Runs once before tick 0 (no default work).
    pub fn init(_t: &mut Tick) {}
    /// Runs once after the last tick; its text goes into the report (none by default).
    pub fn finish(_t: &mut Tick) -> String {
        String::new()
    }
}

#[no_mangle]
pub extern "C" fn rtloop_module_abi_version() -> u32 {
    RTLOOP_ABI_VERSION
}

#[no_mangle]
pub extern "C" fn rtloop_module_new() -> *mut std::ffi::c_void {
    // the panic's message (and place) goes back to the runtime, which prints it with the
    // module's name; nothing is printed here. This library has its own std, so the hook is
    // the module's alone.
    std::panic::set_hook(Box::new(|info| {
        let p = info.payload();
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic with a non-string payload".to_string());
        let at = info
            .location()
            .map(|l| format!(" (at {}:{}:{})", l.file(), l.line(), l.column()))
            .unwrap_or_default();
        PANIC.with(|m| *m.borrow_mut() = format!("{msg}{at}"));
    }));
    Box::into_raw(Box::new(RtHolder { state: None, taken: Vec::new() })) as *mut std::ffi::c_void
}

/// # Safety
///
/// `holder` comes from `rtloop_module_new` (not freed); `raw` points at an RtTick whose
/// arrays and the memory they describe stay valid for the call; `err` has `err_cap`
/// writable bytes; `err_len` is writable.
#[no_mangle]
pub unsafe extern "C" fn rtloop_module_step(
    holder: *mut std::ffi::c_void,
    raw: *mut RtTick,
    err: *mut u8,
    err_cap: usize,
    err_len: *mut usize,
) -> i32 {
    // SAFETY: the caller's contract above.
    unsafe {
        call(holder, raw, "step", err, err_cap, err_len, |t| {
            user::step(t); // a module file defines `pub fn step(t: &mut Tick)`
            String::new()
        })
    }
}

/// Run `f` on a `Tick` made of `raw` in `phase`, catching a panic: 0 and `f`'s text in
/// `buf`, or 1 and the panic's message in `buf`.
///
/// # Safety
///
/// As for `rtloop_module_step`, with `buf`/`cap`/`len` for `err`/`err_cap`/`err_len`.
unsafe fn call(
    holder: *mut std::ffi::c_void,
    raw: *mut RtTick,
    phase: &'static str,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
    f: impl FnOnce(&mut Tick) -> String,
) -> i32 {
    // SAFETY: the caller's contract above.
    let holder = unsafe { &mut *(holder as *mut RtHolder) };
    // SAFETY: the caller's contract above.
    let raw = unsafe { &*raw };
    PANIC.with(|m| m.borrow_mut().clear());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        holder.taken.clear();
        holder.taken.resize(raw.n_outputs, false);
        let mut t = Tick {
            tick: raw.tick,
            inputs: raw.inputs,
            n_inputs: raw.n_inputs,
            outputs: raw.outputs,
            n_outputs: raw.n_outputs,
            options: raw.options,
            n_options: raw.n_options,
            phase,
            taken: &mut holder.taken,
            state: Some(&mut holder.state),
            _life: PhantomData,
        };
        f(&mut t)
    }));
    let (rc, mut msg) = match r {
        Ok(text) => (0, text),
        Err(_) => {
            let msg = PANIC.with(|m| std::mem::take(&mut *m.borrow_mut()));
            (1, if msg.is_empty() { "panicked".to_string() } else { msg })
        }
    };
    let mut n = msg.len().min(cap);
    while !msg.is_char_boundary(n) {
        n -= 1;
    }
    msg.truncate(n);
    // SAFETY: the caller's contract: `buf` has `cap` >= n bytes, `len` is writable; `msg`
    // is ours, so they do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(msg.as_ptr(), buf, n);
        *len = n;
    }
    rc
}

/// Once before tick 0: the module's `pub fn init(t: &mut Tick)` if it has one (the signals
/// carry shapes, no data).
///
/// # Safety
///
/// As for `rtloop_module_step`.
#[no_mangle]
pub unsafe extern "C" fn rtloop_module_init(
    holder: *mut std::ffi::c_void,
    raw: *mut RtTick,
    err: *mut u8,
    err_cap: usize,
    err_len: *mut usize,
) -> i32 {
    // SAFETY: the caller's contract above.
    unsafe {
        call(holder, raw, "init", err, err_cap, err_len, |t| {
            user::init(t);
            String::new()
        })
    }
}

/// Once after the last tick: the module's `pub fn finish(t: &mut Tick) -> String` if it
/// has one; its text (or a panic's message) in `out`.
///
/// # Safety
///
/// As for `rtloop_module_step`, with `out`/`out_cap`/`out_len` for `err`/`err_cap`/`err_len`.
#[no_mangle]
pub unsafe extern "C" fn rtloop_module_finish(
    holder: *mut std::ffi::c_void,
    raw: *mut RtTick,
    out: *mut u8,
    out_cap: usize,
    out_len: *mut usize,
) -> i32 {
    // SAFETY: the caller's contract above.
    unsafe { call(holder, raw, "finish", out, out_cap, out_len, |t| user::finish(t)) }
}

/// # Safety
///
/// `holder` comes from `rtloop_module_new` and is freed once.
#[no_mangle]
pub unsafe extern "C" fn rtloop_module_free(holder: *mut std::ffi::c_void) {
    if holder.is_null() {
        return;
    }
    // SAFETY: the caller's contract above; dropping the state runs the user's Drop, so a
    // panic there is caught (and dropped) rather than unwinding into the runtime.
    let b = unsafe { Box::from_raw(holder as *mut RtHolder) };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(b)));
}
