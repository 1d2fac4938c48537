#!/usr/bin/env bash
# loom models of the shipped writer, readers and claims over heap storage
# (crates/rtloop-stream/src/loom_tests.rs).
#   scripts/loom.sh                      every model at LOOM_MAX_PREEMPTIONS=2 (default)
#   scripts/loom.sh [filter] [-- args...] run the models whose name contains `filter`
#                                        (default `loom_`); args go to the test binary
#   RTLOOP_SOAK=1 scripts/loom.sh        also the slow models (otherwise skipped via
#                                        --cfg skip_slow_models unless RTLOOP_SLOW_MODELS=1)
# Builds into target/loom (profile `loom`, opt-level 3) so it does not disturb the normal
# debug build. Slow models can be run on their own with fewer preemptions:
#   LOOM_MAX_PREEMPTIONS=1 RTLOOP_SLOW_MODELS=1 scripts/loom.sh loom_lossless
set -euo pipefail
cd "$(dirname "$0")/.."

export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
flags="--cfg loom"
if [ "${RTLOOP_SOAK:-0}" != 1 ] && [ "${RTLOOP_SLOW_MODELS:-0}" != 1 ]; then
    flags="$flags --cfg skip_slow_models"
fi
export RUSTFLAGS="${RUSTFLAGS:-} $flags"
echo "loom: LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS RUSTFLAGS='$RUSTFLAGS'" >&2
t0=$SECONDS
filter=loom_
if [ $# -gt 0 ] && [ "$1" != "--" ]; then filter="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
cargo test --profile loom -p rtloop-stream --lib "$filter" -- "$@"
echo "loom: done in $((SECONDS - t0)) s" >&2
