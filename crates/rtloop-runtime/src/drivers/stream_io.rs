//! Stream in / out (placeholder).
use super::{DriverCtx, DriverError, Sink, Source};
use crate::model::Signal;

/// Validate `stream_in` options.
pub fn check_in(_options: &serde_json::Value, _signals: &[&Signal]) -> Result<(), String> {
    Ok(())
}
/// Validate `stream_out` options.
pub fn check_out(_options: &serde_json::Value, _signals: &[&Signal]) -> Result<(), String> {
    Ok(())
}
/// Open `stream_in`.
pub fn open_in(
    _o: &serde_json::Value,
    _s: &[Signal],
    _c: &DriverCtx,
) -> Result<Box<dyn Source>, DriverError> {
    Err(DriverError::new("stream_in is not built yet"))
}
/// Open `stream_out`.
pub fn open_out(
    _o: &serde_json::Value,
    _s: &[Signal],
    _c: &DriverCtx,
) -> Result<Box<dyn Sink>, DriverError> {
    Err(DriverError::new("stream_out is not built yet"))
}
