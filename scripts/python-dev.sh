#!/usr/bin/env bash
# Create or refresh the Python environment (.venv, or $RTLOOP_VENV) and build rtloop into it
# (release, editable: python/rtloop/ is used in place, the native module is rebuilt here).
# Idempotent and quiet: run it again after changing Rust or Python code.
source "$(dirname "$0")/lib.sh"
ensure_cargo
ensure_libclang

if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"

# the build and test tools; pip skips what is already installed
"$PY" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
"$PY" -m pip install -q --disable-pip-version-check \
    "maturin>=1.9,<2" "numpy>=1.22" pytest pytest-timeout mypy
# a real FieldTrip peer for the server's tests: FieldTrip.py ships in the eegsynth wheel (as
# `lib.FieldTrip`); only it is used, so none of eegsynth's own dependencies are installed
"$PY" -m pip install -q --disable-pip-version-check --no-deps "eegsynth==0.8.1"
# the readers that recording exports are tested with
"$PY" -m pip install -q --disable-pip-version-check pyxdf "pynwb>=3"
# the runtime's example modules: scipy's sosfilt for the spike detector's band-pass, numba
# for `numba: true` modules
"$PY" -m pip install -q --disable-pip-version-check scipy numba
# the LSL peer (pylsl bundles liblsl 1.18, which `rtloop bridge` loads; docs/lsl.md)
"$PY" -m pip install -q --disable-pip-version-check "pylsl>=1.16"
# the ZeroMQ peer of `rtloop bench peers` (pyzmq bundles libzmq, which the benchmark loads)
"$PY" -m pip install -q --disable-pip-version-check "pyzmq>=25"

# maturin develop installs into the active virtual environment; its output (and pip's) is
# shown only when the build fails
say "building rtloop into $VENV (maturin develop --release)"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" \
        "$VENV/bin/maturin" develop --release --locked >"$log" 2>&1; then
    cat "$log" >&2
    echo "maturin develop failed" >&2
    exit 1
fi
# fail loudly if the build did not produce an importable package
"$PY" -c "import rtloop, rtloop._rtloop" || { echo "rtloop did not import after the build" >&2; exit 1; }
