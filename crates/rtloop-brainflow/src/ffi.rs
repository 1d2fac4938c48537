//! BrainFlow's C API of BoardController (board_controller.h), loaded at run time. Only the
//! calls rtloop uses; each is looked up once when the library is loaded. Every session call
//! names its board by id and by its input parameters as a JSON string (all keys present).

use std::ffi::c_char;

rtloop_native::native_api! { "libBoardController", pub struct Api {
    prepare_session: fn(i32, *const c_char) -> i32;
    start_stream: fn(i32, *const c_char, i32, *const c_char) -> i32;
    stop_stream: fn(i32, *const c_char) -> i32;
    release_session: fn(i32, *const c_char) -> i32;
    get_board_data_count: fn(i32, *mut i32, i32, *const c_char) -> i32;
    get_board_data: fn(i32, i32, *mut f64, i32, *const c_char) -> i32;
    get_current_board_data: fn(i32, i32, *mut f64, *mut i32, i32, *const c_char) -> i32;
    insert_marker: fn(f64, i32, i32, *const c_char) -> i32;
    config_board: fn(*const c_char, *mut c_char, *mut i32, i32, i32, *const c_char) -> i32;
    get_board_descr: fn(i32, i32, *mut c_char, *mut i32, i32) -> i32;
    get_board_presets: fn(i32, *mut i32, *mut i32) -> i32;
    get_eeg_names: fn(i32, i32, *mut c_char, *mut i32, i32) -> i32;
    get_version_board_controller: fn(*mut c_char, *mut i32, i32) -> i32;
    set_log_level_board_controller: fn(i32) -> i32;
} }

/// BrainFlow's exit codes (`BrainFlowExitCodes`), by value.
pub const EXIT_CODES: &[&str] = &[
    "STATUS_OK",
    "PORT_ALREADY_OPEN_ERROR",
    "UNABLE_TO_OPEN_PORT_ERROR",
    "SER_PORT_ERROR",
    "BOARD_WRITE_ERROR",
    "INCOMMING_MSG_ERROR",
    "INITIAL_MSG_ERROR",
    "BOARD_NOT_READY_ERROR",
    "STREAM_ALREADY_RUN_ERROR",
    "INVALID_BUFFER_SIZE_ERROR",
    "STREAM_THREAD_ERROR",
    "STREAM_THREAD_IS_NOT_RUNNING",
    "EMPTY_BUFFER_ERROR",
    "INVALID_ARGUMENTS_ERROR",
    "UNSUPPORTED_BOARD_ERROR",
    "BOARD_NOT_CREATED_ERROR",
    "ANOTHER_BOARD_IS_CREATED_ERROR",
    "GENERAL_ERROR",
    "SYNC_TIMEOUT_ERROR",
    "JSON_NOT_FOUND_ERROR",
    "NO_SUCH_DATA_IN_JSON_ERROR",
];

/// The name of an exit code.
#[must_use]
pub fn exit_code_name(code: i32) -> &'static str {
    usize::try_from(code)
        .ok()
        .and_then(|c| EXIT_CODES.get(c))
        .copied()
        .unwrap_or("UNKNOWN_ERROR")
}

/// `BrainFlowPresets`: the three buffers a board may fill, each with its own rate.
pub mod preset {
    /// `DEFAULT_PRESET`
    pub const DEFAULT: i32 = 0;
    /// `AUXILIARY_PRESET`
    pub const AUXILIARY: i32 = 1;
    /// `ANCILLARY_PRESET`
    pub const ANCILLARY: i32 = 2;
}
