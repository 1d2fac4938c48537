//! No code: see this crate's Cargo.toml. It exists so that the `rtloop` executable and the
//! Python extension, built one after the other for the wheel, ask for the same features of
//! their shared dependencies and so share their compiled code.
