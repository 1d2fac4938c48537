#!/usr/bin/env bash
# README command 1: install everything on a fresh machine, then run `rtloop demo`
# (a 384-channel int16 30 kHz synthetic writer and a reader in another process).
source "$(dirname "$0")/lib.sh"
ensure_cargo
ensure_libclang
ensure_fonts
say "building rtloop (Rust core, command line and Python package) into $VENV"
ensure_python
say "rtloop demo (the command is now $VENV/bin/rtloop; 'source .venv/bin/activate' to use it)"
exec "$VENV/bin/rtloop" demo "$@"
