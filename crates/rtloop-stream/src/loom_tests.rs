//! loom models of the ring protocol in `ring.rs` (run with `scripts/loom.sh`).
