//! SQLite logger sink. (Being written: placeholder so the crate builds.)
use super::{DriverCtx, DriverError, Sink};
use crate::model::Signal;

/// Validate `logger` options.
pub fn check(_options: &serde_json::Value, _signals: &[&Signal]) -> Result<(), String> {
    Err("logger is not built yet".into())
}
/// Open `logger`.
pub fn open(
    _o: &serde_json::Value,
    _s: &[Signal],
    _c: &DriverCtx,
) -> Result<Box<dyn Sink>, DriverError> {
    Err(DriverError::new("logger is not built yet"))
}
