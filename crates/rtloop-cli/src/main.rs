//! The `rtloop` binary: all logic lives in the library so the Python package can expose the
//! very same command.
fn main() -> std::process::ExitCode {
    // a child another rtloop process started plays its role and ends
    if let Some(code) = rtloop_launch::play_if_child() {
        return code;
    }
    rtloop_cli::run(std::env::args_os())
}
