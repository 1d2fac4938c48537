//! The limits of a server's and a buffer's settings, checked here once for every front end
//! (`rtloop serve`, Python's `rtloop.fieldtrip.Server`, the benchmarks).

use crate::buffer::BufferConfig;
use crate::server::ServerConfig;

/// Largest request payload a server may be told to accept: the protocol's size field is 32
/// bits.
pub const MAX_MESSAGE: std::ops::RangeInclusive<u64> = 64..=u32::MAX as u64;
/// Connections a server may be told to serve at once.
pub const MAX_CLIENTS: std::ops::RangeInclusive<u64> = 1..=65_536;
/// Bytes the messages being received may hold together: 1 MiB to 1 TiB.
pub const MEMORY_BUDGET: std::ops::RangeInclusive<u64> = 1 << 20..=1 << 40;
/// Events a buffer may keep.
pub const EVENTS: std::ops::RangeInclusive<u64> = 1..=1_000_000;

/// A setting of a [`ServerConfig`] or [`BufferConfig`] that is out of its range: which, the
/// value given and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A whole-number setting outside its range.
    #[error("{setting}={given}: allowed {min} to {max}")]
    OutOfRange {
        /// The setting (the field's name).
        setting: &'static str,
        /// The value given.
        given: u64,
        /// The least allowed.
        min: u64,
        /// The most allowed.
        max: u64,
    },
    /// The memory budget outside its range (said in MiB, the unit `rtloop serve` takes).
    #[error(
        "memory_budget={given} bytes ({} MiB): allowed {} to {} MiB",
        given >> 20,
        MEMORY_BUDGET.start() >> 20,
        MEMORY_BUDGET.end() >> 20
    )]
    MemoryBudget {
        /// The budget given, in bytes.
        given: u64,
    },
    /// A message timeout of zero: every message would be too slow.
    #[error("message_timeout=0: allowed a time > 0")]
    ZeroTimeout,
    /// Neither a TCP address nor a UNIX socket path.
    #[error("no TCP address and no UNIX socket path: the server must listen somewhere")]
    NoListener,
}

impl ConfigError {
    /// The setting that is wrong, as its field is named (`tcp` when there is no listener).
    #[must_use]
    pub fn setting(&self) -> &'static str {
        match self {
            ConfigError::OutOfRange { setting, .. } => setting,
            ConfigError::MemoryBudget { .. } => "memory_budget",
            ConfigError::ZeroTimeout => "message_timeout",
            ConfigError::NoListener => "tcp",
        }
    }
}

fn within(
    setting: &'static str,
    given: u64,
    range: &std::ops::RangeInclusive<u64>,
) -> Result<(), ConfigError> {
    if range.contains(&given) {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange {
            setting,
            given,
            min: *range.start(),
            max: *range.end(),
        })
    }
}

impl ServerConfig {
    /// Check every setting against its limit: the first one out of range, saying what is
    /// allowed. [`crate::Server::start`] refuses a config that fails this.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.tcp.is_none() && self.unix.is_none() {
            return Err(ConfigError::NoListener);
        }
        within("max_message", self.max_message as u64, &MAX_MESSAGE)?;
        within("max_clients", self.max_clients as u64, &MAX_CLIENTS)?;
        if self.message_timeout.is_zero() {
            return Err(ConfigError::ZeroTimeout);
        }
        if !MEMORY_BUDGET.contains(&(self.memory_budget as u64)) {
            return Err(ConfigError::MemoryBudget {
                given: self.memory_budget as u64,
            });
        }
        Ok(())
    }
}

impl BufferConfig {
    /// Check the sizes: at least one sample, one byte and one event, at most
    /// [`EVENTS`]`.end()` events.
    pub fn validate(&self) -> Result<(), ConfigError> {
        within("capacity", self.capacity, &(1..=u64::MAX))?;
        within("max_bytes", self.max_bytes, &(1..=u64::MAX))?;
        within("events", self.events, &EVENTS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn says(e: ConfigError, setting: &str, text: &str) {
        assert_eq!(e.setting(), setting, "{e}");
        assert_eq!(e.to_string(), text);
    }

    #[test]
    fn the_defaults_are_valid() {
        ServerConfig::default().validate().unwrap();
        BufferConfig::new("x").validate().unwrap();
    }

    #[test]
    fn each_bad_server_setting_is_named_with_what_is_allowed() {
        let bad = |f: fn(&mut ServerConfig)| {
            let mut c = ServerConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        says(
            bad(|c| c.tcp = None),
            "tcp",
            "no TCP address and no UNIX socket path: the server must listen somewhere",
        );
        says(
            bad(|c| c.max_message = 63),
            "max_message",
            "max_message=63: allowed 64 to 4294967295",
        );
        says(
            bad(|c| c.max_message = 1 << 32),
            "max_message",
            "max_message=4294967296: allowed 64 to 4294967295",
        );
        says(
            bad(|c| c.max_clients = 0),
            "max_clients",
            "max_clients=0: allowed 1 to 65536",
        );
        says(
            bad(|c| c.max_clients = 65_537),
            "max_clients",
            "max_clients=65537: allowed 1 to 65536",
        );
        says(
            bad(|c| c.message_timeout = Duration::ZERO),
            "message_timeout",
            "message_timeout=0: allowed a time > 0",
        );
        says(
            bad(|c| c.memory_budget = 0),
            "memory_budget",
            "memory_budget=0 bytes (0 MiB): allowed 1 to 1048576 MiB",
        );
        says(
            bad(|c| c.memory_budget = (1 << 40) + (1 << 20)),
            "memory_budget",
            "memory_budget=1099512676352 bytes (1048577 MiB): allowed 1 to 1048576 MiB",
        );
        // the edges themselves are allowed, and a UNIX socket alone is somewhere to listen
        let mut c = ServerConfig {
            tcp: None,
            unix: Some("/nonexistent/x.sock".into()),
            max_message: 64,
            max_clients: 65_536,
            message_timeout: Duration::from_nanos(1),
            memory_budget: 1 << 40,
            ..ServerConfig::default()
        };
        c.validate().unwrap();
        c.memory_budget = 1 << 20;
        c.max_clients = 1;
        c.max_message = u32::MAX as usize;
        c.validate().unwrap();
    }

    #[test]
    fn each_bad_buffer_size_is_named_with_what_is_allowed() {
        let bad = |f: fn(&mut BufferConfig)| {
            let mut c = BufferConfig::new("x");
            f(&mut c);
            c.validate().unwrap_err()
        };
        says(
            bad(|c| c.capacity = 0),
            "capacity",
            "capacity=0: allowed 1 to 18446744073709551615",
        );
        says(
            bad(|c| c.max_bytes = 0),
            "max_bytes",
            "max_bytes=0: allowed 1 to 18446744073709551615",
        );
        says(
            bad(|c| c.events = 0),
            "events",
            "events=0: allowed 1 to 1000000",
        );
        says(
            bad(|c| c.events = 1_000_001),
            "events",
            "events=1000001: allowed 1 to 1000000",
        );
    }
}
