//! The `rtloop` binary: all logic lives in the library so the Python package can expose the
//! very same command.
fn main() -> std::process::ExitCode {
    rtloop_cli::run(std::env::args_os())
}
