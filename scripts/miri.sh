#!/usr/bin/env bash
# miri on rtloop-stream's unit tests: the ring's pure logic and the shipped Writer and
# Reader on threads over heap storage (src/ring_threads_tests.rs), checked for undefined
# behaviour and data races under miri's weak-memory emulation. CI has no miri (this then
# prints SKIPPED); loom (scripts/loom.sh) is the gate that runs there. Tests that need mmap, futex, /proc or
# processes are not unit tests of the ring (they live in tests/ and are not run here).
#   scripts/miri.sh [filter] [-- test args]
# Skips, saying so, when nightly or its miri component is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "miri: SKIPPED - no nightly toolchain (rustup toolchain install nightly --component miri)" >&2
    exit 0
fi
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    echo "miri: SKIPPED - the nightly toolchain has no miri (rustup component add --toolchain nightly miri)" >&2
    exit 0
fi
# builds miri's sysroot once (needs crates.io); quiet when it is already there
cargo +nightly miri setup >/dev/null

filter="${1:-}"
[ $# -gt 0 ] && [ "$1" != "--" ] && shift
[ "${1:-}" = "--" ] && shift
# unit tests that need what miri cannot emulate (a stream file mapped from /dev/shm,
# membarrier) carry `#[cfg_attr(miri, ignore = ...)]` and are reported as ignored here; they
# run in the normal `cargo test`
# proptest needs the file system and randomness (isolation off) and runs few cases here
export PROPTEST_CASES="${PROPTEST_CASES:-4}"
base="-Zmiri-disable-isolation"
t0=$SECONDS
echo "miri: unit tests of rtloop-stream (MIRIFLAGS=$base, PROPTEST_CASES=$PROPTEST_CASES)" >&2
MIRIFLAGS="$base ${MIRIFLAGS:-}" cargo +nightly miri test -p rtloop-stream --lib $filter -- "$@"
if [ -z "$filter" ]; then
    # the race-sensitive test again without preemption (rtrb's variant): other schedules
    echo "miri: ring_threads_tests with -Zmiri-preemption-rate=0" >&2
    MIRIFLAGS="$base -Zmiri-preemption-rate=0 ${MIRIFLAGS:-}" \
        cargo +nightly miri test -p rtloop-stream --lib ring_threads_tests -- "$@"
fi
echo "miri: done in $((SECONDS - t0)) s" >&2
