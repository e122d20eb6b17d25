//! SigV4 as a stranger sends it: an Authorization header with an x-amz-date,
//! or a query string that may be a presigned URL. Verified or refused,
//! never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    if selector & 1 == 0 {
        let cut = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let (authorization, date) = rest.split_at(cut);
        gateway::auth::fuzzing::authorization_header(authorization, date.get(1..).unwrap_or(&[]));
    } else if let Ok(query) = std::str::from_utf8(rest) {
        gateway::auth::fuzzing::presigned_query(query);
    }
});
