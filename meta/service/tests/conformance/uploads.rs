//! Multipart tests through the service: completion, the part checks, part
//! replacement, abort, listings.

use md5::{Digest, Md5};
use meta_api::*;
use proto::BlockKey;
use std::collections::BTreeMap;
use test_support::data::md5_hex;
use test_support::meta::*;

const MIB: u64 = 1024 * 1024;
const UPLOAD: &str = "upload-1";

async fn start(meta: &MetaUnderTest) {
    meta.register(3).await;
    meta.create_bucket("bk1", "root").await;
    let record = UploadRecord {
        content_type: Some("video/mp4".into()),
        headers: BTreeMap::from([("cache-control".to_string(), "no-cache".to_string())]),
        user_metadata: BTreeMap::from([("origin".to_string(), "test".to_string())]),
        ..upload("bk1", "big/file", UPLOAD)
    };
    let created = meta.call(CreateUpload { record }).await;
    assert!(matches!(created, Ok(())), "{created:?}");
}

/// Part `number` of `size` bytes whose content hashes like `seed`, on block `block` of dn0.
async fn put_part(meta: &MetaUnderTest, number: u32, size: u64, seed: &str, block: u64) -> String {
    let etag = md5_hex(seed.as_bytes());
    let part = PartRecord {
        upload_id: UPLOAD.into(),
        number,
        size,
        etag: etag.clone(),
        created: T0,
        groups: vec![group(block, &["dn0"])],
        checksum: None,
        key_salt: None,
    };
    let result = meta.call(CommitPart { part }).await;
    assert!(matches!(result, Ok(())), "{result:?}");
    etag
}

fn complete_request(parts: &[(u32, &str)]) -> CompleteUpload {
    CompleteUpload {
        bucket: "bk1".into(),
        key: "big/file".into(),
        upload_id: UPLOAD.into(),
        parts: parts
            .iter()
            .map(|(number, etag)| CompletedPart::new(*number, *etag))
            .collect(),
        condition: None,
    }
}

async fn list_parts(
    meta: &MetaUnderTest,
    after: u32,
    max: u32,
) -> Result<(Vec<u32>, bool), MetaError> {
    let request = ListParts {
        upload_id: UPLOAD.into(),
        after_part: after,
        max_parts: max,
    };
    let page = meta.call(request).await?;
    Ok((
        page.parts.iter().map(|p| p.number).collect(),
        page.is_truncated,
    ))
}

async fn complete_splices_parts_into_one_object(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    start(&meta).await;
    meta.commit(object("bk1", "big/file", vec![group(90, &["dn2"])]))
        .await;
    let e1 = put_part(&meta, 1, 5 * MIB, "one", 11).await;
    let e2 = put_part(&meta, 2, 6 * MIB, "two", 12).await;
    put_part(&meta, 3, 5 * MIB, "unused", 13).await;
    let e4 = put_part(&meta, 4, 10, "four", 14).await;

    let quoted = format!("\"{}\"", e2.to_uppercase());
    let response = meta
        .call(complete_request(&[(1, &e1), (2, &quoted), (4, &e4)]))
        .await
        .unwrap();
    let mut record = response;
    for group in &mut record.groups {
        take_token(group, proto::token::Modes::READ);
    }

    let mut digests = Vec::new();
    for seed in ["one", "two", "four"] {
        digests.extend_from_slice(&Md5::digest(seed.as_bytes()));
    }
    assert_eq!(record.etag, format!("{}-3", md5_hex(&digests)));
    assert_eq!(record.size, 11 * MIB + 10);
    let blocks: Vec<u64> = record.groups.iter().map(|g| g.block.0).collect();
    assert_eq!(blocks, [11, 12, 14]);
    let summary: Vec<(u32, u64)> = record.parts.iter().map(|p| (p.number, p.size)).collect();
    assert_eq!(summary, [(1, 5 * MIB), (2, 6 * MIB), (4, 10)]);
    assert_eq!(record.parts[1].etag, e2);
    assert_eq!(record.content_type.as_deref(), Some("video/mp4"));
    assert_eq!(record.user_metadata["origin"], "test");
    assert_eq!(record.headers["cache-control"], "no-cache");
    assert_eq!(meta.get("bk1", "big/file").await, Some(record.clone()));

    // The unnamed part and the replaced object are freed; the upload is gone.
    assert_eq!(meta.queued_for("dn0").await, vec![key(13)]);
    assert_eq!(meta.queued_for("dn2").await, vec![key(90)]);
    assert_eq!(
        list_parts(&meta, 0, 100).await.unwrap_err(),
        MetaError::NoSuchUpload(UPLOAD.into())
    );
    // A retried completion (its answer lost) is answered with the object it
    // made, and changes nothing; other parts name no upload.
    let mut retried = meta
        .call(complete_request(&[(1, &e1), (2, &quoted), (4, &e4)]))
        .await
        .unwrap();
    for group in &mut retried.groups {
        take_token(group, proto::token::Modes::READ);
    }
    assert_eq!(retried, record);
    assert_eq!(meta.queued_for("dn0").await, vec![key(13)]);
    let again = meta.call(complete_request(&[(1, &e1)])).await;
    assert_eq!(again.unwrap_err(), MetaError::NoSuchUpload(UPLOAD.into()));
    let mut other = complete_request(&[(1, &e1), (2, &quoted), (4, &e4)]);
    other.key = "other".into();
    let elsewhere = meta.call(other).await;
    assert_eq!(
        elsewhere.unwrap_err(),
        MetaError::NoSuchUpload(UPLOAD.into())
    );
    // A part of the same number with another ETag is another completion.
    let mismatched = meta
        .call(complete_request(&[(1, &e1), (2, &e1), (4, &e4)]))
        .await;
    assert_eq!(
        mismatched.unwrap_err(),
        MetaError::NoSuchUpload(UPLOAD.into())
    );
    // The same parts under another upload id name no upload either.
    let mut stranger = complete_request(&[(1, &e1), (2, &quoted), (4, &e4)]);
    stranger.upload_id = "another-upload".into();
    assert_eq!(
        meta.call(stranger).await.unwrap_err(),
        MetaError::NoSuchUpload("another-upload".into())
    );
    // Once the key holds another object, the upload is gone for good.
    meta.commit(object("bk1", "big/file", vec![group(91, &["dn2"])]))
        .await;
    let late = meta
        .call(complete_request(&[(1, &e1), (2, &quoted), (4, &e4)]))
        .await;
    assert_eq!(late.unwrap_err(), MetaError::NoSuchUpload(UPLOAD.into()));
    let delete = meta.call(DeleteBucket { name: "bk1".into() }).await;
    assert_eq!(delete.unwrap_err(), MetaError::BucketNotEmpty("bk1".into()));
}

async fn complete_checks_the_named_parts(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    start(&meta).await;
    let e1 = put_part(&meta, 1, 5 * MIB, "one", 11).await;
    let e2 = put_part(&meta, 2, MIB, "two", 12).await;
    let e3 = put_part(&meta, 3, 10, "three", 13).await;

    let check = |parts: Vec<(u32, String)>| {
        let meta = &meta;
        async move {
            let parts: Vec<(u32, &str)> = parts.iter().map(|(n, e)| (*n, e.as_str())).collect();
            meta.call(complete_request(&parts)).await.unwrap_err()
        }
    };
    assert_eq!(
        check(vec![(2, e2.clone()), (1, e1.clone())]).await,
        MetaError::InvalidPartOrder
    );
    assert_eq!(
        check(vec![(1, e1.clone()), (1, e1.clone())]).await,
        MetaError::InvalidPartOrder
    );
    assert_eq!(
        check(vec![(1, e1.clone()), (3, e2.clone())]).await,
        MetaError::InvalidPart(3)
    );
    assert_eq!(
        check(vec![(1, e1.clone()), (5, e3.clone())]).await,
        MetaError::InvalidPart(5)
    );
    assert_eq!(
        check(vec![(1, e1.clone()), (2, e2.clone()), (3, e3.clone())]).await,
        MetaError::EntityTooSmall(2)
    );
    assert!(matches!(check(vec![]).await, MetaError::InvalidRequest(_)));
    // Failed completions change nothing; a valid one still succeeds.
    assert_eq!(
        list_parts(&meta, 0, 100).await.unwrap(),
        (vec![1, 2, 3], false)
    );
    let done = meta.call(complete_request(&[(1, &e1), (3, &e3)])).await;
    assert!(matches!(done, Ok(r) if r.size == 5 * MIB + 10));
    assert_eq!(meta.queued_for("dn0").await, vec![key(12)]);
}

async fn a_reuploaded_part_replaces_the_old_one(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    start(&meta).await;
    put_part(&meta, 1, 5 * MIB, "first try", 21).await;
    let e1 = put_part(&meta, 1, 5 * MIB, "second try", 22).await;
    assert_eq!(meta.queued_for("dn0").await, vec![key(21)]);
    assert_eq!(list_parts(&meta, 0, 100).await.unwrap(), (vec![1], false));
    let record = meta.call(complete_request(&[(1, &e1)])).await.unwrap();
    assert_eq!(record.groups[0].block.0, 22);
}

async fn abort_frees_every_part(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    start(&meta).await;
    put_part(&meta, 1, 5 * MIB, "a", 31).await;
    put_part(&meta, 2, 5, "b", 32).await;
    let abort = || AbortUpload {
        bucket: "bk1".into(),
        key: "big/file".into(),
        upload_id: UPLOAD.into(),
    };
    assert!(matches!(meta.call(abort()).await, Ok(())));
    let mut queued: Vec<BlockKey> = meta.queued_for("dn0").await;
    queued.sort();
    assert_eq!(queued, vec![key(31), key(32)]);
    assert_eq!(
        meta.call(abort()).await.unwrap_err(),
        MetaError::NoSuchUpload(UPLOAD.into())
    );
    let late = PartRecord {
        upload_id: UPLOAD.into(),
        number: 3,
        size: 1,
        etag: md5_hex(b"c"),
        created: T0,
        groups: vec![],
        checksum: None,
        key_salt: None,
    };
    let refused = meta.call(CommitPart { part: late }).await;
    assert_eq!(refused.unwrap_err(), MetaError::NoSuchUpload(UPLOAD.into()));
    // With the upload gone the bucket is empty again.
    let delete = meta.call(DeleteBucket { name: "bk1".into() }).await;
    assert!(delete.is_ok(), "{delete:?}");
}

/// An upload in progress does not keep a bucket: deleting the bucket aborts
/// it and frees its parts, as S3 does.
async fn deleting_a_bucket_aborts_its_uploads(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    start(&meta).await;
    put_part(&meta, 1, 5 * MIB, "a", 41).await;
    put_part(&meta, 2, 5, "b", 42).await;
    let delete = meta.call(DeleteBucket { name: "bk1".into() }).await;
    assert!(delete.is_ok(), "{delete:?}");
    let mut queued: Vec<BlockKey> = meta.queued_for("dn0").await;
    queued.sort();
    assert_eq!(queued, vec![key(41), key(42)]);
    let abort = AbortUpload {
        bucket: "bk1".into(),
        key: "big/file".into(),
        upload_id: UPLOAD.into(),
    };
    assert!(
        meta.call(abort).await.is_err(),
        "the upload went with its bucket"
    );
}

async fn uploads_and_parts_are_listed(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    start(&meta).await;
    for n in [3, 1, 2, 5] {
        put_part(&meta, n, 5 * MIB, "p", 40 + n as u64).await;
    }
    assert_eq!(list_parts(&meta, 0, 2).await.unwrap(), (vec![1, 2], true));
    assert_eq!(list_parts(&meta, 2, 2).await.unwrap(), (vec![3, 5], false));
    assert_eq!(list_parts(&meta, 5, 2).await.unwrap(), (vec![], false));
    assert_eq!(
        list_parts(&meta, u32::MAX, 2).await.unwrap(),
        (vec![], false)
    );

    let get_upload = |bucket: &str, key: &str| GetUpload {
        bucket: bucket.into(),
        key: key.into(),
        upload_id: UPLOAD.into(),
    };
    let found = meta.call(get_upload("bk1", "big/file")).await;
    assert!(matches!(found, Ok(Some(u)) if u.owner == "root"));
    let other_key = meta.call(get_upload("bk1", "other")).await;
    assert!(matches!(other_key, Ok(None)));

    let mut second = upload("bk1", "a-first", "upload-0");
    meta.call(CreateUpload {
        record: second.clone(),
    })
    .await
    .unwrap();
    let dup = meta
        .call(CreateUpload {
            record: second.clone(),
        })
        .await;
    assert!(matches!(dup, Err(MetaError::InvalidRequest(_))));
    second.upload_id = "upload-x".into();
    second.bucket = "missing".into();
    let missing = meta.call(CreateUpload { record: second }).await;
    assert_eq!(
        missing.unwrap_err(),
        MetaError::NoSuchBucket("missing".into())
    );

    let Ok(uploads) = meta
        .call(ListUploads {
            bucket: "bk1".into(),
            query: UploadQuery {
                max_uploads: 1000,
                ..Default::default()
            },
        })
        .await
    else {
        panic!()
    };
    let keys: Vec<&str> = uploads.uploads.iter().map(|u| u.key.as_str()).collect();
    assert_eq!(keys, ["a-first", "big/file"]);
}

async fn complete_checks_the_named_part_checksums(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    start(&meta).await;
    let crc = |value: &str| StoredChecksum {
        algorithm: "CRC32".into(),
        value: value.into(),
    };
    let part = PartRecord {
        upload_id: UPLOAD.into(),
        number: 1,
        size: 10,
        etag: md5_hex(b"one"),
        created: T0,
        groups: vec![group(21, &["dn0"])],
        checksum: Some(crc("AAAAAQ==")),
        key_salt: None,
    };
    meta.call(CommitPart { part }).await.unwrap();
    let complete = |checksums: Vec<StoredChecksum>| {
        let mut request = complete_request(&[(1, &md5_hex(b"one"))]);
        request.parts[0].checksums = checksums;
        request
    };
    for wrong in [
        vec![crc("AAAAAg==")],
        vec![StoredChecksum {
            algorithm: "SHA256".into(),
            value: "AAAAAQ==".into(),
        }],
    ] {
        assert_eq!(
            meta.call(complete(wrong)).await.unwrap_err(),
            MetaError::InvalidPart(1)
        );
    }
    let done = meta.call(complete(vec![crc("AAAAAQ==")])).await;
    assert!(matches!(&done, Ok(r) if r.size == 10), "{done:?}");
}

/// Upload ids of 1 to 256 bytes are taken; an empty or longer one is not.
async fn upload_ids_are_1_to_256_bytes(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.create_bucket("bk1", "root").await;
    let create = |upload_id: String| CreateUpload {
        record: upload("bk1", "k", &upload_id),
    };
    meta.call(create("u".into())).await.unwrap();
    meta.call(create("x".repeat(256))).await.unwrap();
    for bad in [String::new(), "y".repeat(257)] {
        let refused = meta.call(create(bad.clone())).await;
        assert!(
            matches!(refused, Err(MetaError::InvalidRequest(_))),
            "{} bytes: {refused:?}",
            bad.len()
        );
    }
}

/// The whole-object checksum of an upload's attributes (what a single PUT
/// would carry) is not the completed object's: a multipart object has only
/// its parts' checksums.
async fn a_completed_object_has_no_whole_object_checksum(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.register(3).await;
    meta.create_bucket("bk1", "root").await;
    let attributes = ObjectAttributes {
        checksum: Some(StoredChecksum {
            algorithm: "CRC32".into(),
            value: "AAAAAQ==".into(),
        }),
        checksum_algorithm: Some("CRC32".into()),
        ..Default::default()
    };
    let record = UploadRecord {
        attributes,
        ..upload("bk1", "big/file", UPLOAD)
    };
    meta.call(CreateUpload { record }).await.unwrap();
    let e1 = put_part(&meta, 1, 10, "one", 31).await;
    let done = meta.call(complete_request(&[(1, &e1)])).await.unwrap();
    assert_eq!(done.attributes.checksum, None);
    assert_eq!(done.attributes.checksum_algorithm.as_deref(), Some("CRC32"));
}

test_support::conformance!(
    complete_splices_parts_into_one_object,
    complete_checks_the_named_parts,
    complete_checks_the_named_part_checksums,
    a_reuploaded_part_replaces_the_old_one,
    abort_frees_every_part,
    deleting_a_bucket_aborts_its_uploads,
    uploads_and_parts_are_listed,
    upload_ids_are_1_to_256_bytes,
    a_completed_object_has_no_whole_object_checksum,
);
