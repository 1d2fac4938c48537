#!/usr/bin/env bash
# loom models of the shipped writer, readers and claims over heap storage
# (crates/rtloop-stream/src/loom_tests.rs).
#   scripts/loom.sh                      every model at LOOM_MAX_PREEMPTIONS=2 (default)
#   scripts/loom.sh [filter] [-- args...] run the models whose name contains `filter`
#                                        (default `loom_`); args go to the test binary
# Every model runs in every stage (none is slow enough to keep for the soak stage). Builds
# into target/loom (profile `loom`, opt-level 3) so it does not disturb the normal debug
# build. One model on its own, with another bound:
#   LOOM_MAX_PREEMPTIONS=3 scripts/loom.sh loom_lossless_writer_waits_for_the_slowest_of_two_readers
set -euo pipefail
cd "$(dirname "$0")/.."

export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
export RUSTFLAGS="${RUSTFLAGS:-} --cfg loom"
echo "loom: LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS RUSTFLAGS='$RUSTFLAGS'" >&2
t0=$SECONDS
filter=loom_
if [ $# -gt 0 ] && [ "$1" != "--" ]; then filter="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
cargo test --profile loom -p rtloop-stream --lib "$filter" -- "$@"
echo "loom: done in $((SECONDS - t0)) s" >&2
