#!/usr/bin/env bash
# The release command: build rtloop's Python wheel (one abi3 wheel for Python >= 3.9) into
# dist/. The wheel holds the native module `rtloop._rtloop` and the `rtloop` executable
# (rtloop/_bin/rtloop, which the console script and `python -m rtloop` run), both built with
# the `wheel` profile (release, stripped). The executable leaves out the peer benchmarks'
# iceoryx2 (`--no-default-features`).
#
#   scripts/wheel.sh            the release wheel, manylinux_2_28: built with zig for glibc
#                               2.28 (installs the `ziglang` package into the venv and
#                               cargo-zigbuild with cargo if they are missing)
#   scripts/wheel.sh --host     a wheel for this machine's glibc only, without zig (what
#                               scripts/python-dev.sh installs for the tests)
#   --out DIR                   where the wheel goes (default dist/); the path of the wheel
#                               is the last line printed
source "$(dirname "$0")/lib.sh"
ensure_cargo

host=0
out="$ROOT/dist"
while [ $# -gt 0 ]; do
    case "$1" in
        --host) host=1 ;;
        --out) out="$(realpath -m "$2")"; shift ;;
        *) echo "scripts/wheel.sh: unknown option $1 (allowed: --host, --out DIR)" >&2; exit 2 ;;
    esac
    shift
done

# maturin (and zig) from the project's venv (scripts/python-dev.sh), else from PATH
if [ -x "$VENV/bin/maturin" ]; then
    PY="$VENV/bin/python"
    MATURIN="$VENV/bin/maturin"
elif command -v maturin >/dev/null; then
    PY="$(command -v python3)"
    MATURIN="$(command -v maturin)"
else
    echo "scripts/wheel.sh needs maturin: pip install 'maturin>=1.9,<2' (or run scripts/python-dev.sh)" >&2
    exit 1
fi
# zig is found as `python -m ziglang` through the python on PATH
export PATH="$(dirname "$PY"):$PATH"

bin_dir="$ROOT/python/rtloop/_bin"
target_dir="${CARGO_TARGET_DIR:-$ROOT/target}"
mkdir -p "$bin_dir" "$out"
# the new wheel is the only one in $out, so the caller knows which file it is
rm -f "$out"/rtloop-*.whl

if [ "$host" = 1 ]; then
    say "building the rtloop executable (cargo build --profile wheel --no-default-features)"
    cargo build --locked --profile wheel -p rtloop-cli --bin rtloop --no-default-features
    install -m 755 "$target_dir/wheel/rtloop" "$bin_dir/rtloop"
    say "building the wheel (maturin build, profile wheel)"
    "$MATURIN" build --locked --out "$out"
else
    # zig links against glibc 2.28's symbols, so the wheel runs on any Linux with glibc >= 2.28
    "$PY" -c "import ziglang" 2>/dev/null || {
        say "installing ziglang (zig, the linker for glibc 2.28) into $VENV"
        "$PY" -m pip install --disable-pip-version-check -q ziglang
    }
    command -v cargo-zigbuild >/dev/null || {
        say "installing cargo-zigbuild (cargo install --locked)"
        cargo install --locked -q cargo-zigbuild
    }
    say "building the rtloop executable for glibc 2.28 (cargo zigbuild --profile wheel --no-default-features)"
    cargo zigbuild --locked --profile wheel -p rtloop-cli --bin rtloop --no-default-features \
        --target x86_64-unknown-linux-gnu.2.28
    install -m 755 "$target_dir/x86_64-unknown-linux-gnu/wheel/rtloop" "$bin_dir/rtloop"
    say "building the wheel for manylinux_2_28 (maturin build --zig, profile wheel)"
    "$MATURIN" build --locked --zig --compatibility manylinux_2_28 --target x86_64-unknown-linux-gnu --out "$out"
fi
ls "$out"/rtloop-*.whl
