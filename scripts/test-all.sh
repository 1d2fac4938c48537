#!/usr/bin/env bash
# README command 2 and what CI runs (.ci/run): every test of rtloop, stage by stage.
#   RTLOOP_SOAK=1     also run the long stages (verify 10^8 packets, 10^8 light-barrier
#                     hand-offs, fuzzing)
#   RTLOOP_SKIP=...   space-separated stage names to skip (for local iteration only): versions
#                     packages models lint wheel rust miri python verify
# Two vCPUs: a stage that mostly waits (pip, the test runs) has a CPU-bound one beside it.
source "$(dirname "$0")/lib.sh"
ensure_cargo
ensure_libclang
ensure_fonts
ensure_chromium

declare -a TIMES=()
# busy jiffies of all CPUs so far (/proc/stat: user nice system irq softirq steal)
busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }
hz=$(getconf CLK_TCK)
skipped() { [[ " ${RTLOOP_SKIP:-} " == *" $1 "* ]]; }
# a stage in the foreground: its wall time, and the machine's CPU seconds meanwhile (of both
# vCPUs, so up to twice the wall time; a stage running beside it is counted here too)
stage() {
    local name="$1"; shift
    if skipped "$name"; then say "skip $name (RTLOOP_SKIP)"; return; fi
    say "stage: $name"
    local t0=$SECONDS c0
    c0=$(busy_jiffies)
    "$@"
    TIMES+=("$(printf '%-10s %4ds  CPU %5ds' "$name" $((SECONDS - t0)) $((($(busy_jiffies) - c0) / hz)))")
}
# A stage beside the foreground ones, where they leave a core idle (waiting on pip's
# downloads, on processes, sockets and timers): its output goes to a log that `join` prints
# when it ends, so the logs do not interleave.
declare -A BG_PID=() BG_T0=()
LOGS="$(mktemp -d -t rtloop-ci-logs.XXXXXX)"
trap 'rm -rf "$LOGS"' EXIT
beside() {
    local name="$1"; shift
    if skipped "$name"; then say "skip $name (RTLOOP_SKIP)"; return; fi
    say "stage: $name (beside the next stages; its output follows when it ends)"
    BG_T0[$name]=$SECONDS
    ("$@") >"$LOGS/$name.log" 2>&1 &
    BG_PID[$name]=$!
}
join() {
    local name="$1" rc=0
    [ -n "${BG_PID[$name]:-}" ] || return 0
    wait "${BG_PID[$name]}" || rc=$?
    say "output of $name (exit $rc)"
    cat "$LOGS/$name.log"
    TIMES+=("$(printf '%-10s %4ds  (beside)' "$name" $((SECONDS - BG_T0[$name])))")
    unset "BG_PID[$name]"
    [ "$rc" = 0 ] || { echo "stage $name failed (exit $rc)" >&2; exit "$rc"; }
}

versions() {
    cargo --version; rustc --version; python3 --version
    uname -srm; nproc
}

# the workspace's clippy lints run while the rust stage builds the tests (below)
rust_lint() {
    cargo fmt --all --check
    # the realtime runtime without its heavy drivers and plotting still builds, lint-clean
    cargo clippy -p rtloop-runtime --no-default-features --all-targets --locked -- -D warnings
}

# every test binary of the workspace (the runtime also without its default drivers, and the
# benches as tests: criterion checks each once), built with clippy's lints on, every warning
# an error (`--lint`: what `cargo clippy --workspace --all-targets -- -D warnings` checks,
# without compiling the dependencies a second time), then run two at a time
# (scripts/run-test-binaries.py)
rust_test() {
    python3 scripts/run-test-binaries.py --jobs 2 --lint \
        "--workspace --locked" \
        "-p rtloop-runtime --no-default-features --lib --locked" \
        "--workspace --benches --locked"
    # the same compiler wrapper, or cargo would build the libraries again for the doc tests
    RUSTC_WORKSPACE_WRAPPER="$ROOT/scripts/clippy-rustc.sh" cargo test --workspace --doc --locked
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
    python -m pytest -q -n 2 --dist worksteal --basetemp "$base" || rc=$?
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
# by python-dev.sh, so a missing one fails the run instead of skipping its tests. pip waits
# on downloads and disk while the lint compiles.
beside packages bash scripts/python-dev.sh packages
# the optimised builds and runs of the model checks and of the hand-off test, beside the
# lint's and the wheel's builds: no test that times anything runs meanwhile (loom's and the
# hand-off's threads spin; beside the Python tests, even at nice 19, they starved the
# closed-loop examples, whose quality asserts need their replay kept up)
models() { bash scripts/loom.sh && handoff_test; }
beside models models
export RTLOOP_REQUIRE_PEERS=1 RTLOOP_PYTHON="$VENV/bin/python" PATH="$VENV/bin:$PATH"
stage lint rust_lint
join packages
stage wheel bash scripts/python-dev.sh wheel
join models
stage rust rust_test
# miri interprets on one core, beside the Python tests, which mostly wait on processes,
# sockets and timers
beside miri bash scripts/miri.sh
stage python python_test
join miri
stage verify verify_run
if [ "${RTLOOP_SOAK:-0}" = 1 ]; then
    stage fuzz bash scripts/fuzz.sh
fi

say "stage times (wall; CPU seconds of both vCPUs)"
printf '  %s\n' "${TIMES[@]}"
say "all stages passed"
