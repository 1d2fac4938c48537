#!/usr/bin/env bash
# Time-boxed fuzzing of every parser (cargo-fuzz, nightly). RTLOOP_FUZZ_SECONDS per target
# (default 60). Installs cargo-fuzz from crates.io if missing. Skips visibly without nightly.
source "$(dirname "$0")/lib.sh"
ensure_cargo
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: SKIPPED (no nightly toolchain; rustup toolchain install nightly)" >&2
    exit 0
fi
command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
secs="${RTLOOP_FUZZ_SECONDS:-60}"
cd fuzz
for target in $(cargo +nightly fuzz list); do
    say "fuzz $target for ${secs}s"
    cargo +nightly fuzz run "$target" -- -max_total_time="$secs" -rss_limit_mb=2048
done
