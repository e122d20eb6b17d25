//! Every XML body the gateway parses (CompleteMultipartUpload,
//! DeleteObjects, CreateBucket, any document): parsed or refused with
//! MalformedXML, never a panic, within the element limits.
#![no_main]

use gateway::xml::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse::parse_document(data);
    let _ = parse::parse_complete_upload(data);
    let _ = parse::parse_delete_objects(data);
    let _ = parse::parse_create_bucket(data);
});
