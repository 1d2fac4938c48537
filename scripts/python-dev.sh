#!/usr/bin/env bash
# Create or refresh the Python environment (.venv, or $RTLOOP_VENV) and install rtloop into it
# from the wheel the release command builds (scripts/wheel.sh --host: release, stripped, the
# `rtloop` executable inside). Idempotent and quiet: run it again after changing Rust or Python
# code (the installed package is a copy, not python/rtloop/ in place).
#   scripts/python-dev.sh            both parts
#   scripts/python-dev.sh packages   only the Python packages (the build and test tools, peers)
#   scripts/python-dev.sh wheel      only rtloop's wheel (needs the packages' maturin)
source "$(dirname "$0")/lib.sh"
ensure_cargo
ensure_libclang

if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"

# pip's output goes to a log shown only when an install fails: a fresh machine sees what
# happened, not pip's resolver notes (FieldTrip.py's wheel is installed without its
# dependencies on purpose, which pip reports as an "ERROR" on every later install)
pip_log="$(mktemp)"
trap 'rm -f "$pip_log"' EXIT
pip_quiet() {
    if ! "$PY" -m pip install --disable-pip-version-check --no-input "$@" >"$pip_log" 2>&1; then
        cat "$pip_log" >&2
        echo "pip install $* failed (output above)" >&2
        exit 1
    fi
}

# one pip call for every package: one resolution, where one call per group resolved eight
# times
install_packages() {
    say "installing Python packages into $VENV (numpy, maturin, pytest with pytest-xdist; test peers: pytest, pylsl, pyzmq, brainflow, pynwb, pyxdf, mne, neo, spikeinterface, scipy, numba, playwright)"
    pip_quiet --upgrade pip
    # the build and test tools (pip skips what is already installed); the readers that
    # recording exports are tested with, and MNE for `to_mne`; Playwright, which drives
    # Debian's Chromium in the viewer's browser tests (no browser download); the readers
    # replay is held against (neo's SpikeGLX and Open Ephys raw readers) and the
    # ground-truth generator its test files are made from (SpikeInterface); scipy's sosfilt
    # for the example spike detector's band-pass, numba for `numba: true` modules; the LSL
    # peer (pylsl bundles liblsl 1.18, which `rtloop bridge` loads; docs/lsl.md); the ZeroMQ
    # peer of `rtloop bench peers` (pyzmq bundles libzmq); BrainFlow (its wheel bundles
    # libBoardController, which `rtloop bridge brainflow-in` and the runtime's `brainflow`
    # driver load; docs/brainflow.md)
    pip_quiet "maturin>=1.9,<2" "numpy>=1.22" pytest pytest-timeout pytest-xdist mypy \
        pyxdf "pynwb>=3" "mne>=1.6" "playwright>=1.40" "neo>=0.14" "spikeinterface>=0.101" \
        scipy numba "pylsl>=1.16" "pyzmq>=25" "brainflow>=5.10"
    # a real FieldTrip peer for the server's tests: FieldTrip.py ships in the eegsynth wheel
    # (as `lib.FieldTrip`); only it is used, so none of eegsynth's own dependencies are
    # installed
    pip_quiet --no-deps "eegsynth==0.8.1"
}

install_wheel() {
    # the package goes in as users get it: the wheel of the release command (scripts/wheel.sh,
    # for this machine's glibc), with the `rtloop` executable in it. Its output (and pip's) is
    # shown only when the build fails.
    say "building the rtloop wheel (scripts/wheel.sh --host) and installing it into $VENV"
    # the wheel stays in target/wheels: tests/test_wheel.py installs it into a fresh venv
    log="$(mktemp)"
    wheel_dir="${CARGO_TARGET_DIR:-$ROOT/target}/wheels"
    trap 'rm -f "$log" "$pip_log"' EXIT
    if ! bash "$ROOT/scripts/wheel.sh" --host --out "$wheel_dir" >"$log" 2>&1; then
        cat "$log" >&2
        echo "scripts/wheel.sh --host failed" >&2
        exit 1
    fi
    # --force-reinstall: the version stays the same while the code changes
    pip_quiet --no-deps --force-reinstall "$wheel_dir"/rtloop-*.whl
    # fail loudly if the build did not produce an importable package
    "$PY" -c "import rtloop, rtloop._rtloop" || { echo "rtloop did not import after the build" >&2; exit 1; }
}

case "${1:-all}" in
    all) install_packages; install_wheel ;;
    packages) install_packages ;;
    wheel) install_wheel ;;
    *) echo "scripts/python-dev.sh: unknown part $1 (allowed: packages, wheel; none for both)" >&2; exit 2 ;;
esac
