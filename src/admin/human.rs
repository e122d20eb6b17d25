//! Numbers as `tessera admin` prints them for people: sizes in binary units
//! and instants in UTC. `--json` keeps the raw bytes and Unix milliseconds
//! for programs.

use serde_json::Value;
use std::time::{Duration, UNIX_EPOCH};

/// Fields of a plain row that hold an instant in Unix milliseconds.
const INSTANTS: [&str; 4] = ["created", "last_heartbeat", "last_scan", "last_pass_end"];
/// Fields of a plain row that hold a size in bytes.
const SIZES: [&str; 8] = [
    "capacity",
    "used",
    "garbage",
    "available",
    "repaired_bytes",
    "moved_bytes",
    "listed_bytes",
    "size",
];

/// A byte count in binary units with one decimal: `0 B`, `512 B`, `1.5 KiB`,
/// `55.2 GiB`.
pub fn bytes(value: &Value) -> String {
    let Some(n) = value.as_u64() else {
        return value.to_string();
    };
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut size = n as f64 / 1024.0;
    let mut unit = 0;
    while size >= 1024.0 && unit + 1 < UNITS.len() {
        size /= 1024.0;
        unit += 1;
    }
    format!("{size:.1} {}", UNITS[unit])
}

/// An instant in Unix milliseconds as RFC 3339 in UTC, to the second;
/// `never` for 0.
pub fn instant(value: &Value) -> String {
    match value.as_u64() {
        Some(0) => "never".to_string(),
        Some(ms) => {
            humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
        }
        None => value.to_string(),
    }
}

/// A field of a plain row (`name=value`), its value in people's units
/// when the name says what it holds.
pub fn field(name: &str, value: &Value) -> String {
    let shown = if INSTANTS.contains(&name) {
        instant(value)
    } else if SIZES.contains(&name) {
        bytes(value)
    } else {
        return format!("{name}={value}");
    };
    format!("{name}={shown}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_are_in_binary_units() {
        let shown: Vec<String> = [0u64, 512, 1536, 59_266_445_312, u64::MAX]
            .iter()
            .map(|n| bytes(&json!(n)))
            .collect();
        assert_eq!(
            shown,
            ["0 B", "512 B", "1.5 KiB", "55.2 GiB", "16.0 EiB"].map(String::from)
        );
    }

    #[test]
    fn instants_are_utc_and_fields_follow_their_names() {
        assert_eq!(
            instant(&json!(1_796_685_199_446u64)),
            "2026-12-07T23:13:19Z"
        );
        assert_eq!(instant(&json!(0)), "never");
        assert_eq!(
            field("created", &json!(1_796_685_199_446u64)),
            "created=2026-12-07T23:13:19Z"
        );
        assert_eq!(field("used", &json!(2048)), "used=2.0 KiB");
        assert_eq!(field("name", &json!("alice")), "name=\"alice\"");
    }
}
