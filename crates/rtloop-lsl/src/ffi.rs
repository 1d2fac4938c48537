//! liblsl's C API (lsl_c.h, liblsl 1.16+), loaded at run time. Only the calls the bridge
//! uses; each is looked up once when the library is loaded.

use std::ffi::{c_char, c_double, c_ulong, c_void};

/// `lsl_streaminfo`
pub type Info = *mut c_void;
/// `lsl_outlet`
pub type Outlet = *mut c_void;
/// `lsl_inlet`
pub type Inlet = *mut c_void;
/// `lsl_xml_ptr`
pub type Xml = *mut c_void;

/// `lsl_channel_format_t`
pub mod format {
    /// float32
    pub const FLOAT32: i32 = 1;
    /// double64
    pub const DOUBLE64: i32 = 2;
    /// string
    pub const STRING: i32 = 3;
    /// int32
    pub const INT32: i32 = 4;
    /// int16
    pub const INT16: i32 = 5;
    /// int8
    pub const INT8: i32 = 6;
    /// int64
    pub const INT64: i32 = 7;
}

rtloop_native::native_api! { "liblsl", pub struct Api {
    lsl_library_version: fn() -> i32;
    lsl_local_clock: fn() -> c_double;
    lsl_set_config_content: fn(*const c_char);
    lsl_create_streaminfo: fn(*const c_char, *const c_char, i32, c_double, i32, *const c_char) -> Info;
    lsl_destroy_streaminfo: fn(Info);
    lsl_get_name: fn(Info) -> *const c_char;
    lsl_get_type: fn(Info) -> *const c_char;
    lsl_get_source_id: fn(Info) -> *const c_char;
    lsl_get_channel_count: fn(Info) -> i32;
    lsl_get_nominal_srate: fn(Info) -> c_double;
    lsl_get_channel_format: fn(Info) -> i32;
    lsl_get_desc: fn(Info) -> Xml;
    lsl_append_child: fn(Xml, *const c_char) -> Xml;
    lsl_append_child_value: fn(Xml, *const c_char, *const c_char) -> Xml;
    lsl_child: fn(Xml, *const c_char) -> Xml;
    lsl_first_child: fn(Xml) -> Xml;
    lsl_next_sibling_n: fn(Xml, *const c_char) -> Xml;
    lsl_child_value_n: fn(Xml, *const c_char) -> *const c_char;
    lsl_empty: fn(Xml) -> i32;
    lsl_create_outlet: fn(Info, i32, i32) -> Outlet;
    lsl_destroy_outlet: fn(Outlet);
    lsl_have_consumers: fn(Outlet) -> i32;
    lsl_push_chunk_ftnp: fn(Outlet, *const f32, c_ulong, *const c_double, i32) -> i32;
    lsl_push_chunk_dtnp: fn(Outlet, *const f64, c_ulong, *const c_double, i32) -> i32;
    lsl_push_chunk_itnp: fn(Outlet, *const i32, c_ulong, *const c_double, i32) -> i32;
    lsl_push_chunk_stnp: fn(Outlet, *const i16, c_ulong, *const c_double, i32) -> i32;
    lsl_push_chunk_ctnp: fn(Outlet, *const c_char, c_ulong, *const c_double, i32) -> i32;
    lsl_push_chunk_ltnp: fn(Outlet, *const i64, c_ulong, *const c_double, i32) -> i32;
    lsl_push_sample_strtp: fn(Outlet, *const *const c_char, c_double, i32) -> i32;
    lsl_resolve_byprop: fn(*mut Info, u32, *const c_char, *const c_char, i32, c_double) -> i32;
    lsl_resolve_all: fn(*mut Info, u32, c_double) -> i32;
    lsl_create_inlet: fn(Info, i32, i32, i32) -> Inlet;
    lsl_destroy_inlet: fn(Inlet);
    lsl_open_stream: fn(Inlet, c_double, *mut i32);
    lsl_get_fullinfo: fn(Inlet, c_double, *mut i32) -> Info;
    lsl_time_correction: fn(Inlet, c_double, *mut i32) -> c_double;
    lsl_pull_chunk_f: fn(Inlet, *mut f32, *mut c_double, c_ulong, c_ulong, c_double, *mut i32) -> c_ulong;
    lsl_pull_chunk_d: fn(Inlet, *mut f64, *mut c_double, c_ulong, c_ulong, c_double, *mut i32) -> c_ulong;
    lsl_pull_chunk_i: fn(Inlet, *mut i32, *mut c_double, c_ulong, c_ulong, c_double, *mut i32) -> c_ulong;
    lsl_pull_chunk_s: fn(Inlet, *mut i16, *mut c_double, c_ulong, c_ulong, c_double, *mut i32) -> c_ulong;
    lsl_pull_chunk_c: fn(Inlet, *mut c_char, *mut c_double, c_ulong, c_ulong, c_double, *mut i32) -> c_ulong;
    lsl_pull_chunk_l: fn(Inlet, *mut i64, *mut c_double, c_ulong, c_ulong, c_double, *mut i32) -> c_ulong;
    lsl_pull_sample_str: fn(Inlet, *mut *mut c_char, i32, c_double, *mut i32) -> c_double;
    lsl_destroy_string: fn(*mut c_char);
} }
