#!/usr/bin/env bash
# README command 2 and what CI runs (.ci/run): every test of rtloop, stage by stage.
#   RTLOOP_SOAK=1     also run the long stages (verify 10^8 packets, 10^8 light-barrier
#                     hand-offs, fuzzing)
#   RTLOOP_SKIP=...   space-separated stage names to skip (for local iteration only)
source "$(dirname "$0")/lib.sh"
ensure_cargo
ensure_libclang
ensure_fonts
ensure_chromium

declare -a TIMES=()
stage() {
    local name="$1"; shift
    if [[ " ${RTLOOP_SKIP:-} " == *" $name "* ]]; then say "skip $name (RTLOOP_SKIP)"; return; fi
    say "stage: $name"
    local t0=$SECONDS
    "$@"
    TIMES+=("$(printf '%-10s %4ds' "$name" $((SECONDS - t0)))")
}

versions() {
    cargo --version; rustc --version; python3 --version
    uname -srm; nproc
}

rust_lint() {
    cargo fmt --all --check
    cargo clippy --workspace --all-targets --locked -- -D warnings
    # the realtime runtime without its heavy drivers and plotting still builds, lint-clean
    cargo clippy -p rtloop-runtime --no-default-features --all-targets --locked -- -D warnings
}

rust_test() {
    cargo test --workspace --locked
    cargo test -p rtloop-runtime --no-default-features --lib --locked
    # benches must still build and pass their correctness checks (criterion in test mode)
    cargo test --workspace --benches --locked
}

python_test() {
    rtloop sys-info
    # pytest exits 5 when it collected nothing: that is a failure here, not a pass
    local rc=0
    # a private base directory for tmp_path: another pytest run of the same user (pytest
    # numbers /tmp/pytest-of-USER/pytest-N and prunes old ones) cannot touch this one's
    local base
    base="$(mktemp -d -t rtloop-pytest.XXXXXX)"
    # two workers (pytest-xdist): most tests wait on processes, sockets and timers, so two at
    # a time use the two cores the one-at-a-time run left mostly idle
    python -m pytest -q -n 2 --basetemp "$base" || rc=$?
    rm -rf "$base"
    if [ "$rc" = 5 ]; then echo "pytest collected no tests: failing" >&2; return 1; fi
    [ "$rc" = 0 ] || return "$rc"
    # the typed stubs must match the native module, and the package must type-check
    python -m mypy.stubtest rtloop._rtloop
    python -m mypy python/rtloop
}

# the light barrier's hand-offs (crates/rtloop-stream/src/hand_off_tests.rs) in an optimised
# build, the one fast enough to show what a missing membarrier loses; 10^8 hand-offs with
# RTLOOP_SOAK=1 (about 1.5 hours on a loaded 2-vCPU VM: 4*10^6 took 4 minutes). One test
# at a time: each pins two threads.
# The negative control (the same without the sleeper's membarrier must lose wake-ups) looks
# for a hardware reordering, rarer on a loaded machine: the soak stage alone runs it.
handoff_test() {
    local extra=()
    [ "${RTLOOP_SOAK:-0}" = 1 ] && extra=(--include-ignored)
    cargo test --release --locked -p rtloop-stream --lib hand_off_tests -- --test-threads 1 --nocapture "${extra[@]}"
}

verify_run() {
    local packets=1000000
    [ "${RTLOOP_SOAK:-0}" = 1 ] && packets=100000000
    rtloop verify --packets "$packets"
}

stage versions versions
# the Python environment first: it holds the peers the Rust tests use too (liblsl from
# pylsl). Every optional peer (pylsl, pynwb, pyxdf, numba, scipy, FieldTrip.py) is installed
# by python-dev.sh, so a missing one fails the run instead of skipping its tests.
stage pyenv ensure_python
export RTLOOP_REQUIRE_PEERS=1 RTLOOP_PYTHON="$VENV/bin/python"
stage lint rust_lint
stage rust rust_test
stage handoff handoff_test
stage loom bash scripts/loom.sh
stage miri bash scripts/miri.sh
stage python python_test
stage verify verify_run
if [ "${RTLOOP_SOAK:-0}" = 1 ]; then
    stage fuzz bash scripts/fuzz.sh
fi

say "stage times"
printf '  %s\n' "${TIMES[@]}"
say "all stages passed"
