//! The `rtloop` binary: all logic lives in the library so the Python package can expose the
//! very same command. A child another rtloop process started (`rtloop child NAME JSON`) goes
//! through the same path, so its logging is set up like any command's before it plays.
fn main() -> std::process::ExitCode {
    rtloop_cli::run(std::env::args_os())
}
