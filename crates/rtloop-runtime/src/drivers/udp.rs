//! UDP in (source) and UDP out (sink). (Being written: placeholder so the crate builds.)
use super::{DriverCtx, DriverError, Sink, Source};
use crate::model::Signal;

/// Validate `udp_in` options.
pub fn check_in(_options: &serde_json::Value, _signals: &[&Signal]) -> Result<(), String> {
    Err("udp_in is not built yet".into())
}
/// Validate `udp_out` options.
pub fn check_out(_options: &serde_json::Value, _signals: &[&Signal]) -> Result<(), String> {
    Err("udp_out is not built yet".into())
}
/// Open `udp_in`.
pub fn open_in(
    _o: &serde_json::Value,
    _s: &[Signal],
    _c: &DriverCtx,
) -> Result<Box<dyn Source>, DriverError> {
    Err(DriverError::new("udp_in is not built yet"))
}
/// Open `udp_out`.
pub fn open_out(
    _o: &serde_json::Value,
    _s: &[Signal],
    _c: &DriverCtx,
) -> Result<Box<dyn Sink>, DriverError> {
    Err(DriverError::new("udp_out is not built yet"))
}
