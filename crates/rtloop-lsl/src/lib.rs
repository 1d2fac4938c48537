//! # rtloop-lsl
//!
//! Lab Streaming Layer in and out of rtloop streams. liblsl is loaded at run time
//! (`rtloop-native`) from, in order: `$RTLOOP_LIBLSL`, the pylsl wheel of the Python that
//! runs rtloop (`$RTLOOP_PYTHON`, else `python3`; pylsl bundles liblsl 1.18), or the system's
//! `liblsl.so`. So nothing is compiled from C++ and both README commands keep working: the
//! Python package's install brings pylsl, and rtloop without LSL still builds and runs.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod bridge;
pub mod ffi;
pub mod io;

use std::ffi::{CStr, CString};
use std::path::PathBuf;

/// Why LSL could not be used.
#[derive(Debug, thiserror::Error)]
pub enum LslError {
    /// liblsl was not found or could not be loaded.
    #[error(transparent)]
    NotFound(#[from] rtloop_native::NotFound),
    /// No outlet matched.
    #[error("no LSL outlet with {prop} {value:?} within {timeout} s; outlets found: {found}")]
    NoOutlet {
        /// `name` or `type`.
        prop: String,
        /// The query.
        value: String,
        /// Seconds waited.
        timeout: f64,
        /// What resolve_all saw.
        found: String,
    },
    /// A type or shape LSL cannot carry, or an LSL stream rtloop cannot map.
    #[error("{0}")]
    Unmappable(String),
    /// A liblsl call returned an error code.
    #[error("liblsl {call}: error {code} ({})", code_meaning(*.code))]
    Liblsl {
        /// The call.
        call: &'static str,
        /// liblsl's error code (-1 timeout, -2 stream lost, -3 invalid argument, -4 internal).
        code: i32,
    },
    /// liblsl returned no object (an inlet, an outlet, a stream info).
    #[error("liblsl could not create {0}")]
    NotCreated(&'static str),
    /// A stream the bridge creates, reads or writes.
    #[error("{what}: {source}")]
    Stream {
        /// What the bridge was doing, naming the stream.
        what: String,
        /// The stream's error.
        source: Box<rtloop_stream::Error>,
    },
}

impl LslError {
    /// A stream error with what the bridge was doing.
    pub fn stream(what: impl Into<String>, source: impl Into<rtloop_stream::Error>) -> Self {
        LslError::Stream {
            what: what.into(),
            source: Box::new(source.into()),
        }
    }
}

fn code_meaning(code: i32) -> &'static str {
    match code {
        -1 => "timeout",
        -2 => "stream lost",
        -3 => "invalid argument",
        -4 => "internal error",
        _ => "unknown",
    }
}

/// liblsl, loaded.
pub struct Lsl {
    api: ffi::Api,
    /// Where it was loaded from.
    pub path: PathBuf,
}

/// Where liblsl is found: `$RTLOOP_LIBLSL`, the pylsl wheel, the system's liblsl.
pub const LIBLSL: rtloop_native::Library = rtloop_native::Library {
    name: "liblsl",
    env: "RTLOOP_LIBLSL",
    wheel: "pylsl",
    locate: "import os, pylsl.lib; print(os.path.join(os.path.dirname(pylsl.lib.__file__), 'liblsl.so'))",
    system: &["liblsl.so", "liblsl.so.2"],
    install: "pylsl (`pip install pylsl`, which bundles liblsl 1.18)",
};

impl Lsl {
    /// Find and load liblsl.
    pub fn load() -> Result<Lsl, LslError> {
        // SAFETY: liblsl's initialisers only set up its own state, and `ffi::Api` is
        // declared from lsl_c.h.
        let (api, path) = unsafe { LIBLSL.load(ffi::Api::load) }?;
        Ok(Lsl { api, path })
    }

    /// liblsl's version (e.g. 118).
    #[must_use]
    pub fn version(&self) -> i32 {
        // SAFETY: no arguments.
        unsafe { (self.api.lsl_library_version)() }
    }

    /// Replace liblsl's configuration (what `lsl_api.cfg` would hold) with `content`. Takes
    /// effect only before liblsl's first outlet, inlet or resolve in this process, and
    /// replaces the user's `lsl_api.cfg` for the process: for tools on localhost only.
    pub fn set_config_content(&self, content: &str) {
        let c = cstr(content);
        // SAFETY: a NUL-terminated string that liblsl copies.
        unsafe { (self.api.lsl_set_config_content)(c.as_ptr()) };
    }

    /// LSL's clock in seconds (CLOCK_MONOTONIC on Linux: liblsl uses steady_clock).
    #[must_use]
    pub fn local_clock(&self) -> f64 {
        // SAFETY: no arguments.
        unsafe { (self.api.lsl_local_clock)() }
    }

    pub(crate) fn api(&self) -> &ffi::Api {
        &self.api
    }

    /// Every outlet visible within `wait` seconds.
    #[must_use]
    pub fn resolve_all(&self, wait: f64) -> Vec<Meta> {
        let mut buf = vec![std::ptr::null_mut(); 256];
        // SAFETY: `buf` holds 256 slots for infos, which liblsl fills and we own.
        let n = unsafe { (self.api.lsl_resolve_all)(buf.as_mut_ptr(), 256, wait) };
        let mut out = Vec::new();
        for &info in &buf[..n.max(0) as usize] {
            out.push(self.meta(info));
            // SAFETY: each info returned by resolve is ours to destroy, once.
            unsafe { (self.api.lsl_destroy_streaminfo)(info) };
        }
        out
    }

    /// Resolve outlets whose `prop` (`name`, `type`, `source_id`) is `value`. Returns the
    /// first info (owned; destroy with [`Lsl::destroy_info`]) and its metadata.
    pub(crate) fn resolve_one(&self, prop: &str, value: &str, timeout: f64) -> Option<ffi::Info> {
        let (p, v) = (cstr(prop), cstr(value));
        let mut buf = vec![std::ptr::null_mut(); 16];
        // SAFETY: `buf` holds 16 slots; the strings are NUL-terminated and live for the call.
        let n = unsafe {
            (self.api.lsl_resolve_byprop)(buf.as_mut_ptr(), 16, p.as_ptr(), v.as_ptr(), 1, timeout)
        };
        let n = n.max(0) as usize;
        for &extra in buf.iter().take(n).skip(1) {
            self.destroy_info(extra);
        }
        (n > 0).then_some(buf[0])
    }

    pub(crate) fn destroy_info(&self, info: ffi::Info) {
        // SAFETY: an info we own, destroyed once.
        unsafe { (self.api.lsl_destroy_streaminfo)(info) };
    }

    /// The metadata of an info (name, type, source id, channels, rate, format, labels,
    /// units from `desc/channels/channel`).
    pub(crate) fn meta(&self, info: ffi::Info) -> Meta {
        let a = &self.api;
        let s = |p: *const std::ffi::c_char| {
            if p.is_null() {
                String::new()
            } else {
                // SAFETY: liblsl returns NUL-terminated strings owned by the info, valid
                // while it lives; we copy them at once.
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        };
        // SAFETY: `info` is a live streaminfo; the getters only read it.
        let (name, kind, source_id, channels, rate, format) = unsafe {
            (
                s((a.lsl_get_name)(info)),
                s((a.lsl_get_type)(info)),
                s((a.lsl_get_source_id)(info)),
                (a.lsl_get_channel_count)(info),
                (a.lsl_get_nominal_srate)(info),
                (a.lsl_get_channel_format)(info),
            )
        };
        let (mut labels, mut units) = (Vec::new(), Vec::new());
        let (c_channels, c_channel, c_label, c_unit) = (
            cstr("channels"),
            cstr("channel"),
            cstr("label"),
            cstr("unit"),
        );
        // SAFETY: walking the info's XML description with liblsl's own accessors; every
        // node pointer comes from them and is checked with lsl_empty before use.
        unsafe {
            let desc = (a.lsl_get_desc)(info);
            let chans = (a.lsl_child)(desc, c_channels.as_ptr());
            if (a.lsl_empty)(chans) == 0 {
                let mut ch = (a.lsl_child)(chans, c_channel.as_ptr());
                while (a.lsl_empty)(ch) == 0 {
                    labels.push(s((a.lsl_child_value_n)(ch, c_label.as_ptr())));
                    units.push(s((a.lsl_child_value_n)(ch, c_unit.as_ptr())));
                    ch = (a.lsl_next_sibling_n)(ch, c_channel.as_ptr());
                }
            }
        }
        Meta {
            name,
            kind,
            source_id,
            channels: channels.max(0) as usize,
            rate,
            format,
            labels,
            units,
        }
    }
}

/// An LSL stream's description.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    /// Name.
    pub name: String,
    /// Content type (`EEG`, `Markers`, ...).
    pub kind: String,
    /// Source id (identifies the device across restarts; LSL recovery uses it).
    pub source_id: String,
    /// Channels.
    pub channels: usize,
    /// Nominal rate in Hz (0 = irregular).
    pub rate: f64,
    /// `lsl_channel_format_t`.
    pub format: i32,
    /// Channel labels (`desc/channels/channel/label`), may be empty.
    pub labels: Vec<String>,
    /// Channel units.
    pub units: Vec<String>,
}

impl std::fmt::Display for Meta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} (type {:?}, {} ch, {} Hz, source {:?})",
            self.name, self.kind, self.channels, self.rate, self.source_id
        )
    }
}

pub(crate) fn cstr(s: &str) -> CString {
    CString::new(s.replace('\0', "")).expect("no NUL after replace")
}
