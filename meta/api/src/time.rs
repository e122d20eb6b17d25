//! Time as meta records it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch; every timestamp in meta uses it.
pub type UnixMillis = i64;

/// Wall-clock milliseconds since the Unix epoch.
pub fn now_millis() -> UnixMillis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
