//! What every command-line test needs: the `rtloop` binary cargo built for this package, run
//! to completion, and its output as text.
#![allow(dead_code)] // each test file uses part of it

use std::process::{Command, Output};

/// The `rtloop` binary of this build, ready for arguments.
pub fn rtloop_cmd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rtloop"))
}

/// Run `rtloop ARGS` to the end.
pub fn rtloop(args: &[&str]) -> Output {
    rtloop_with(args, &[])
}

/// Run `rtloop ARGS` to the end with extra environment variables.
pub fn rtloop_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    rtloop_cmd()
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("rtloop runs")
}

/// stdout then stderr, as one text.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
