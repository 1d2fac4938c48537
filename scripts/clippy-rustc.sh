#!/usr/bin/env bash
# The Rust test build's compiler wrapper (RUSTC_WORKSPACE_WRAPPER; scripts/run-test-binaries.py
# --lint): cargo runs it as `THIS RUSTC ARGS...` for the workspace's own crates only, and
# clippy-driver compiles them as rustc does while linting them, every warning an error, as
# `cargo clippy -- -D warnings` would. The dependencies are then compiled once, for the tests,
# where a separate `cargo clippy` compiled them a second time (as metadata only).
exec clippy-driver "$@" -D warnings
