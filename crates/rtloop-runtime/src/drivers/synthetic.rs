//! Synthetic source (placeholder).
use super::{DriverCtx, DriverError, Source};
use crate::model::Signal;

/// Validate `synthetic` options.
pub fn check(_options: &serde_json::Value, _signals: &[&Signal]) -> Result<(), String> {
    Ok(())
}
/// Open `synthetic`.
pub fn open(
    _o: &serde_json::Value,
    _s: &[Signal],
    _c: &DriverCtx,
) -> Result<Box<dyn Source>, DriverError> {
    Err(DriverError::new("synthetic is not built yet"))
}
