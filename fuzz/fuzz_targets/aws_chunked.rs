//! aws-chunked bodies, signed and unsigned, arriving in frames of any size:
//! data or an error, never a panic, and no data after an error.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&shape, body)) = data.split_first() else {
        return;
    };
    let frame = usize::from(shape & 0x7f) + 1;
    gateway::auth::fuzzing::aws_chunked(body, frame, shape & 0x80 != 0);
});
