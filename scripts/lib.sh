# Shared helpers for rtloop's scripts (sourced, not run).
# Every script works from the repository root and keeps the Python environment in .venv.

set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${RTLOOP_VENV:-$ROOT/.venv}"

# bold only on a terminal: redirected output (CI logs, files) carries no escape codes
# (with the time of day, so a CI log shows where the minutes went)
say() {
    local now
    now="$(date +%T)"
    if [ -t 2 ]; then printf '\033[1m==> %s %s\033[0m\n' "$now" "$*" >&2; else printf '==> %s %s\n' "$now" "$*" >&2; fi
}

# Rust: the machine's rustup toolchain; Debian's cargo as a last resort.
ensure_cargo() {
    if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        say "cargo not found: installing Debian's cargo (needs root)"
        apt-get update -qq && apt-get install -y -qq cargo rustc >/dev/null
    fi
    command -v cargo >/dev/null || { echo "rtloop needs cargo (Rust >= 1.85); install rustup first" >&2; exit 1; }
}

# libclang: iceoryx2 (the peer column of `rtloop bench stream`) generates its POSIX
# bindings with bindgen at build time. Debian's libclang-dev.
ensure_libclang() {
    # libclang itself (libclang.so / libclang-NN.so), not libclang-cpp, which a machine
    # with LLVM but without libclang-dev also has
    if ! ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-[0-9]*.so* >/dev/null 2>&1 \
        && [ -z "${LIBCLANG_PATH:-}" ]; then
        if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
            say "installing libclang-dev (bindgen, for the iceoryx2 peer benchmark)"
            apt-get update -qq && apt-get install -y -qq libclang-dev >/dev/null
        else
            echo "rtloop needs libclang to build (Debian: apt-get install libclang-dev)" >&2
            exit 1
        fi
    fi
}

# Fonts for the PNG plots (Debian's DejaVu); optional, plots fall back to no text.
ensure_fonts() {
    if [ ! -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        say "installing fonts-dejavu-core for plot labels"
        (apt-get update -qq && apt-get install -y -qq fonts-dejavu-core >/dev/null) || echo "warning: no fonts; plots will have no text" >&2
    fi
}

# Chromium (Debian's package) for `rtloop view`'s browser tests and bench/view.py; the page
# itself needs only a browser, any one.
ensure_chromium() {
    if ! command -v chromium >/dev/null; then
        if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
            say "installing chromium for the viewer's browser tests"
            apt-get update -qq && apt-get install -y -qq chromium >/dev/null
        else
            echo "the viewer's browser tests need Chromium (Debian: apt-get install chromium)" >&2
            return 1
        fi
    fi
}

# Python: a venv with the build and test tools, and rtloop built into it (release).
ensure_python() {
    bash "$ROOT/scripts/python-dev.sh"
    export PATH="$VENV/bin:$PATH"
}
