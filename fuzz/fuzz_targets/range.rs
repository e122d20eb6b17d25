//! Range headers: parsed or ignored, and a parsed range resolves against any
//! object size to bytes inside the object or to 416, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let size = u64::from_be_bytes(data[..8].try_into().unwrap());
    let Ok(value) = std::str::from_utf8(&data[8..]) else {
        return;
    };
    if let Some(spec) = gateway::range::parse(value) {
        if let Ok(range) = spec.resolve(size) {
            assert!(
                range.start <= range.end && range.end <= size,
                "{range:?} of {size}"
            );
        }
    }
});
