//! The policy field of a browser POST upload: decoded (base64, then JSON)
//! or refused, and a decoded policy judged against a form, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        gateway::auth::fuzzing::post_policy(text);
    }
});
