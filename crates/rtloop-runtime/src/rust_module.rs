//! Modules written in Rust (`language: rust`, `code: detect.rs`): the user's plain `.rs`
//! file is compiled by [`compile`] with `rustc -C opt-level=3` into a cdylib when the model
//! starts (before anything runs; rustc's diagnostics point into the user's file, which is
//! `include!`d) and loaded by [`RustModule::load`] with `libloading` in the module's
//! process. The user writes `pub fn step(t: &mut Tick)` against a small prelude
//! ([`PRELUDE`], docs/runtime-rust-modules.md); inputs and outputs are slices of the
//! streams' memory, no copies.
//!
//! The C ABI (version [`ABI_VERSION`]): `rtloop_module_abi_version() -> u32`,
//! `rtloop_module_new() -> *mut c_void`, `rtloop_module_step(state, *mut RtTick, err,
//! err_cap, *mut err_len) -> i32` (0 ok, 1 panicked: the message is in `err`),
//! `rtloop_module_init` and `rtloop_module_finish` (the same arguments; run the module's
//! optional `pub fn init(t: &mut Tick)` before tick 0 and `pub fn finish(t: &mut Tick) ->
//! String` after the last, with signals that carry shapes and no data; finish's text comes
//! back in the buffer) and `rtloop_module_free(state)`. `RtTick` is `{tick, inputs, n_inputs, outputs, n_outputs,
//! options, n_options}`, each signal an `RtSig {ptr, len_bytes, rows, row_len, dtype_code,
//! name_ptr, name_len}`, each option (the model's `options:`) an `RtOption {name_ptr,
//! name_len, value: f64}`; the module writes back `rows` of its outputs (used for
//! `variable` ones).

use std::ffi::c_void;
use std::path::{Path, PathBuf};

use crate::drivers::{InView, OutBuf};
use crate::model::Signal;

/// Why a Rust module could not be compiled, loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    /// A file of the module or of its cache could not be read or written.
    #[error("{what} {}: {source}", .path.display())]
    Io {
        /// What was being done ("cannot read module file", "cannot store", ...).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The module file's path is not UTF-8 (rustc's `include!` needs UTF-8).
    #[error("module file {} has a path that is not UTF-8; rustc's include! needs UTF-8", .0.display())]
    NotUtf8(PathBuf),
    /// The Rust compiler is missing or does not run (the message says how to get one).
    #[error("{0}")]
    Rustc(String),
    /// rustc refused the module file: its diagnostics, which point into the file.
    #[error("rustc could not compile module file {}:\n{diagnostics}", .code.display())]
    Compile {
        /// The module file.
        code: PathBuf,
        /// rustc's diagnostics.
        diagnostics: String,
    },
    /// The file kept changing while it was compiled.
    #[error("module file {} kept changing while it was compiled; try again", .0.display())]
    KeptChanging(PathBuf),
    /// The library could not be loaded.
    #[error("cannot load Rust module {}: {source}", .path.display())]
    Load {
        /// The library.
        path: PathBuf,
        /// The loader's error.
        source: libloading::Error,
    },
    /// The library is not one rtloop's module compiler made.
    #[error("{} is not an rtloop Rust module (made by rtloop's module compiler): {source}", .path.display())]
    NotAModule {
        /// The library.
        path: PathBuf,
        /// The missing symbol.
        source: libloading::Error,
    },
    /// The library was built for another module ABI.
    #[error("{} was built for Rust module ABI {found}, this rtloop uses {ABI_VERSION}; remove it and it is recompiled", .path.display())]
    Abi {
        /// The library.
        path: PathBuf,
        /// Its ABI version.
        found: u32,
    },
    /// The library could not make the module's state holder.
    #[error("{}: rtloop_module_new returned null", .0.display())]
    NullHolder(PathBuf),
    /// An option a Rust module cannot read (only numbers and true/false).
    #[error("option {name:?} is {value}; a Rust module's options are numbers or true/false")]
    Option {
        /// The option.
        name: String,
        /// Its value.
        value: serde_json::Value,
    },
    /// The module panicked in `step` (no phase), `init` or `finish`.
    #[error("{}panicked: {message}", .phase.map_or(String::new(), |p| format!("{p} ")))]
    Panicked {
        /// `Some("init")`, `Some("finish")`, or `None` for a tick's step.
        phase: Option<&'static str>,
        /// The panic's message and place.
        message: String,
    },
}

fn io_error<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> ModuleError + 'a {
    move |source| ModuleError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Version of the C ABI between the runtime and a compiled module.
pub const ABI_VERSION: u32 = 2;

/// The prelude a module file is compiled against: the user-facing API (`Tick`, `Value`),
/// the `#[repr(C)]` ABI structs and the exported `rtloop_module_*` functions. The generated
/// crate is this, then `pub const RTLOOP_ABI_VERSION: u32 = ABI_VERSION;`, then the user's
/// file `include!`d in `mod user`.
pub const PRELUDE: &str = include_str!("rust_module_prelude.rs");

/// Where compiled modules are kept: `$RTLOOP_CACHE_DIR`, else `$XDG_CACHE_HOME/rtloop/modules`,
/// else `~/.cache/rtloop/modules`, else the temp dir.
#[must_use]
pub fn default_cache_dir() -> PathBuf {
    // an empty variable counts as unset
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = var("RTLOOP_CACHE_DIR") {
        return d;
    }
    if let Some(d) = var("XDG_CACHE_HOME") {
        return d.join("rtloop/modules");
    }
    if let Some(h) = var("HOME") {
        return h.join(".cache/rtloop/modules");
    }
    std::env::temp_dir().join("rtloop-modules")
}

fn rustc() -> std::ffi::OsString {
    std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into())
}

/// The generated crate for the module file at `code` (absolute, UTF-8).
fn wrapper_source(code: &str) -> String {
    format!(
        "{PRELUDE}\npub const RTLOOP_ABI_VERSION: u32 = {ABI_VERSION};\n\n\
         mod user {{\n    #[allow(unused_imports)]\n    use super::*;\n    \
         #[allow(unused_imports)]\n    pub use super::rtloop_default_hooks::*;\n    \
         include!({code:?});\n}}\n"
    )
}

/// Write `text` to `path` through a private temporary name and a rename, so a reader (or a
/// second writer) never sees half a file.
fn write_atomic(path: &Path, tmp: &Path, text: &str) -> Result<(), ModuleError> {
    std::fs::write(tmp, text).map_err(io_error("cannot write", tmp))?;
    std::fs::rename(tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(tmp);
        io_error("cannot write", path)(e)
    })
}

/// Compile `code` (a module file) into a shared library in `cache_dir`, or reuse the one
/// already compiled from the same prelude, file text, file path and `rustc -V`. Returns the
/// library's path. On a compile error the message is a header line and rustc's diagnostics,
/// which name the user's file and line. `$RUSTC` chooses the compiler (default `rustc`).
///
/// Safe to call from several processes (or threads) at once: each compiles in a private
/// directory and renames the library into place.
pub fn compile(code: &Path, cache_dir: &Path) -> Result<PathBuf, ModuleError> {
    let code = code
        .canonicalize()
        .map_err(io_error("cannot read module file", code))?;
    let code_str = code
        .to_str()
        .ok_or_else(|| ModuleError::NotUtf8(code.clone()))?;
    let version = std::process::Command::new(rustc())
        .arg("-V")
        .output()
        .map_err(|e| rustc_missing(&code, &e))?;
    if !version.status.success() {
        return Err(ModuleError::Rustc(format!(
            "{:?} -V failed ({}), so module file {} cannot be compiled:\n{}",
            rustc(),
            version.status,
            code.display(),
            String::from_utf8_lossy(&version.stderr).trim_end()
        )));
    }
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let wrapper_text = wrapper_source(code_str);
    std::fs::create_dir_all(cache_dir)
        .map_err(io_error("cannot create the module cache", cache_dir))?;
    // the file could be edited while it compiles: the library is only stored under the key
    // of the text it was compiled from (checked after), else compiled again
    for _ in 0..3 {
        let source =
            std::fs::read_to_string(&code).map_err(io_error("cannot read module file", &code))?;
        let key = crate::process::model_hash(&format!(
            "{wrapper_text}\u{0}{source}\u{0}{version}\u{0}{code_str}"
        ));
        let stem = format!("{key:016x}");
        let so = cache_dir.join(format!("{stem}.so"));
        if so.is_file() {
            return Ok(so);
        }
        let unique = format!(
            "{}-{}",
            std::process::id(),
            UNIQUE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        // the generated crate stays in the cache (diagnostics about it point there)
        let wrapper = cache_dir.join(format!("{stem}.rs"));
        write_atomic(
            &wrapper,
            &cache_dir.join(format!(".{stem}.rs.{unique}.tmp")),
            &wrapper_text,
        )?;
        // rustc writes its intermediate files next to the output: a private directory
        let build = cache_dir.join(format!(".build-{stem}-{unique}"));
        std::fs::create_dir_all(&build).map_err(io_error("cannot create", &build))?;
        let mut compile = std::process::Command::new(rustc());
        // a compile outlives no killed `rtloop run`
        rtloop_sys::end_with_parent(&mut compile);
        let out = compile
            .args(["--edition", "2021", "--crate-type", "cdylib"])
            .args(["-C", "opt-level=3", "-C", "panic=unwind", "--crate-name"])
            .arg(format!("rtloop_module_{stem}"))
            .arg("-o")
            .arg(build.join(format!("{stem}.so")))
            .arg(&wrapper)
            .output();
        let result = match out {
            Err(e) => Err(rustc_missing(&code, &e)),
            Ok(out) if !out.status.success() => Err(ModuleError::Compile {
                code: code.clone(),
                diagnostics: String::from_utf8_lossy(&out.stderr).trim_end().to_owned(),
            }),
            Ok(_) => std::fs::rename(build.join(format!("{stem}.so")), &so)
                .map_err(io_error("cannot store", &so)),
        };
        let _ = std::fs::remove_dir_all(&build);
        result?;
        match std::fs::read_to_string(&code) {
            Ok(now) if now != source => {
                // compiled from a text that is no longer the file's: not that text's key
                let _ = std::fs::remove_file(&so);
            }
            _ => return Ok(so),
        }
    }
    Err(ModuleError::KeptChanging(code))
}

/// Distinguishes compiles of one process (threads may compile at once).
static UNIQUE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn rustc_missing(code: &Path, e: &std::io::Error) -> ModuleError {
    let rustc = rustc();
    ModuleError::Rustc(if e.kind() == std::io::ErrorKind::NotFound {
        format!(
            "module file {} is Rust, but the Rust compiler {rustc:?} was not found: install a \
             Rust toolchain (https://rustup.rs: `curl --proto '=https' --tlsv1.2 -sSf \
             https://sh.rustup.rs | sh`, or your distribution's `rustc` package), or set \
             $RUSTC to the rustc to use",
            code.display()
        )
    } else {
        format!(
            "cannot run the Rust compiler {rustc:?} to compile module file {}: {e}",
            code.display()
        )
    })
}

/// One signal as passed to the module (the prelude's `RtSig`).
#[repr(C)]
struct RtSig {
    ptr: *mut u8,
    len_bytes: usize,
    rows: usize,
    row_len: usize,
    dtype_code: u32,
    name_ptr: *const u8,
    name_len: usize,
}

/// One tick as passed to the module (the prelude's `RtTick`).
#[repr(C)]
struct RtTick {
    tick: u64,
    inputs: *const RtSig,
    n_inputs: usize,
    outputs: *mut RtSig,
    n_outputs: usize,
    options: *const RtOption,
    n_options: usize,
}

/// One of the module's options (the prelude's `RtOption`): a number (true/false as 1/0).
#[repr(C)]
struct RtOption {
    name_ptr: *const u8,
    name_len: usize,
    value: f64,
}

type StepFn = unsafe extern "C" fn(*mut c_void, *mut RtTick, *mut u8, usize, *mut usize) -> i32;
type FreeFn = unsafe extern "C" fn(*mut c_void);

/// A loaded Rust module: the library, its state holder and per-tick scratch. It holds raw
/// pointers into the library, so it stays on the thread (process) that loaded it.
pub struct RustModule {
    step: StepFn,
    init: StepFn,
    finish: StepFn,
    free: FreeFn,
    holder: *mut c_void,
    ins: Vec<RtSig>,
    outs: Vec<RtSig>,
    err: Vec<u8>,
    // the options' names (the RtOptions point into them; never changed after set_options)
    option_names: Vec<String>,
    options: Vec<RtOption>,
    // dropped last (fields drop in order; `Drop::drop` runs first): the functions above
    // live in it
    _lib: libloading::Library,
}

impl RustModule {
    /// Load a library made by [`compile`], check its ABI version and create the module's
    /// state holder.
    pub fn load(so: &Path) -> Result<RustModule, ModuleError> {
        // SAFETY: loading runs the library's initialisers; a library made by `compile` has
        // only Rust std's (the prelude and a module file define no load-time code).
        let lib = unsafe { libloading::Library::new(so) }.map_err(|source| ModuleError::Load {
            path: so.to_path_buf(),
            source,
        })?;
        let not_module = |source: libloading::Error| ModuleError::NotAModule {
            path: so.to_path_buf(),
            source,
        };
        // SAFETY: the symbol is the prelude's `extern "C" fn() -> u32`, and calling it has
        // no preconditions.
        let version = unsafe {
            let f = lib
                .get::<extern "C" fn() -> u32>(b"rtloop_module_abi_version")
                .map_err(not_module)?;
            f()
        };
        if version != ABI_VERSION {
            return Err(ModuleError::Abi {
                path: so.to_path_buf(),
                found: version,
            });
        }
        // SAFETY: the ABI version matches, so these symbols have the prelude's signatures
        // (the types below); the fn pointers are only used while `lib` is loaded (it is
        // stored with them and dropped last).
        let (new, step, init, finish, free) = unsafe {
            let new = *lib
                .get::<extern "C" fn() -> *mut c_void>(b"rtloop_module_new")
                .map_err(not_module)?;
            let step = *lib
                .get::<StepFn>(b"rtloop_module_step")
                .map_err(not_module)?;
            let free = *lib
                .get::<FreeFn>(b"rtloop_module_free")
                .map_err(not_module)?;
            let init = *lib
                .get::<StepFn>(b"rtloop_module_init")
                .map_err(not_module)?;
            let finish = *lib
                .get::<StepFn>(b"rtloop_module_finish")
                .map_err(not_module)?;
            (new, step, init, finish, free)
        };
        let holder = new();
        if holder.is_null() {
            return Err(ModuleError::NullHolder(so.to_path_buf()));
        }
        Ok(RustModule {
            step,
            init,
            finish,
            free,
            holder,
            ins: Vec::new(),
            outs: Vec::new(),
            err: vec![0; 4096],
            option_names: Vec::new(),
            options: Vec::new(),
            _lib: lib,
        })
    }

    /// Give the module its `options:` (a JSON object): numbers, and true/false as 1/0, are
    /// read with `t.option(name)`; anything else is refused (the model check refuses it
    /// first).
    pub fn set_options(&mut self, options: &serde_json::Value) -> Result<(), ModuleError> {
        let mut names = Vec::new();
        let mut values = Vec::new();
        if let Some(map) = options.as_object() {
            for (k, v) in map {
                let x = match v {
                    serde_json::Value::Bool(b) => f64::from(u8::from(*b)),
                    serde_json::Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
                    other => {
                        return Err(ModuleError::Option {
                            name: k.clone(),
                            value: other.clone(),
                        })
                    }
                };
                names.push(k.clone());
                values.push(x);
            }
        }
        self.option_names = names;
        self.options = self
            .option_names
            .iter()
            .zip(values)
            .map(|(n, value)| RtOption {
                name_ptr: n.as_ptr(),
                name_len: n.len(),
                value,
            })
            .collect();
        Ok(())
    }

    /// Run the module's `init` (if it defines one) once before tick 0: it sees its
    /// signals' shapes (rows as `step` will get them, values per row, dtype, name), its
    /// options and its state, no data. A panic comes back as `Err("init panicked: ...")`.
    pub fn init(&mut self, inputs: &[Signal], outputs: &[Signal]) -> Result<(), ModuleError> {
        let null = std::ptr::null_mut();
        self.ins.clear();
        self.ins.extend(inputs.iter().map(|s| {
            let rows = if s.variable {
                s.rows_per_tick()
            } else {
                s.history as usize * s.rows_per_tick()
            };
            rt_sig(s, null, 0, rows)
        }));
        self.outs.clear();
        self.outs.extend(
            outputs
                .iter()
                .map(|s| rt_sig(s, null, 0, s.rows_per_tick())),
        );
        self.call(self.init, 0, Some("init")).map(drop)
    }

    /// Run the module's `finish` (if it defines one) after the last tick: its text for the
    /// report, or `Err("finish panicked: ...")`.
    pub fn finish(&mut self) -> Result<String, ModuleError> {
        self.ins.clear();
        self.outs.clear();
        self.call(self.finish, u64::MAX, Some("finish"))
    }

    /// Call one of the module's functions (step, init, finish: the same C signature) with
    /// `self.ins`/`self.outs` and the options: the text it wrote back (finish's summary;
    /// empty otherwise), or its panic as [`ModuleError::Panicked`] in `phase`.
    fn call(
        &mut self,
        f: StepFn,
        tick: u64,
        phase: Option<&'static str>,
    ) -> Result<String, ModuleError> {
        let mut raw = RtTick {
            tick,
            inputs: self.ins.as_ptr(),
            n_inputs: self.ins.len(),
            outputs: self.outs.as_mut_ptr(),
            n_outputs: self.outs.len(),
            options: self.options.as_ptr(),
            n_options: self.options.len(),
        };
        let mut len = 0usize;
        // SAFETY: `holder` came from the module's `new`; `raw` points at RtSigs that either
        // describe the inputs' and outputs' memory, valid (and the outputs exclusively ours)
        // for the whole call, or carry no data (null, 0 bytes: the prelude hands out no
        // slice outside `step`), and at the RtOptions, whose names live in `option_names`;
        // the buffer holds `err.len()` bytes. Inputs are only read by the module (the
        // prelude hands them out as shared slices).
        let rc = unsafe {
            f(
                self.holder,
                &mut raw,
                self.err.as_mut_ptr(),
                self.err.len(),
                &mut len,
            )
        };
        // nothing written back (every step that did not panic): no allocation
        let text = String::from_utf8_lossy(&self.err[..len.min(self.err.len())]).into_owned();
        if rc == 0 {
            Ok(text)
        } else {
            Err(ModuleError::Panicked {
                phase,
                message: text,
            })
        }
    }

    /// Run the module's `step` for one tick: `inputs` are its inputs' rows (history
    /// included), `outputs` this tick's rows of its outputs. A panic in the module (its own,
    /// or the prelude's for a wrong dtype, name or index) comes back as
    /// `Err("panicked: MESSAGE (at FILE:LINE:COL)")`; nothing is printed. For a `variable`
    /// output, `outputs[i].rows` becomes what the module set with `set_output_rows`.
    pub fn step(
        &mut self,
        tick: u64,
        inputs: &[InView<'_>],
        outputs: &mut [OutBuf<'_>],
    ) -> Result<(), ModuleError> {
        self.ins.clear();
        self.ins.extend(
            inputs
                .iter()
                .map(|i| rt_sig(i.signal, i.bytes.as_ptr().cast_mut(), i.bytes.len(), i.rows)),
        );
        self.outs.clear();
        for o in outputs.iter_mut() {
            let (p, n) = (o.bytes.as_mut_ptr(), o.bytes.len());
            self.outs.push(rt_sig(o.signal, p, n, o.rows));
        }
        let result = self.call(self.step, tick, None);
        // a variable output carries the rows the module set (at most what fits); a fixed
        // one always carries all of its rows
        for (o, s) in outputs.iter_mut().zip(&self.outs) {
            if o.signal.variable {
                let fit = o.bytes.len() / o.signal.row_bytes().max(1);
                o.rows = s.rows.min(fit);
            }
        }
        result.map(drop)
    }
}

/// One signal as the module sees it: `len` bytes at `ptr` (null and 0 outside `step`),
/// `rows` rows.
fn rt_sig(s: &Signal, ptr: *mut u8, len: usize, rows: usize) -> RtSig {
    RtSig {
        ptr,
        len_bytes: len,
        rows,
        row_len: s.row_len(),
        dtype_code: s.dtype.code(),
        name_ptr: s.name.as_ptr(),
        name_len: s.name.len(),
    }
}

impl Drop for RustModule {
    fn drop(&mut self) {
        // SAFETY: `holder` came from this library's `new` and is freed once; the library
        // is still loaded (`_lib` drops after this).
        unsafe { (self.free)(self.holder) };
    }
}
