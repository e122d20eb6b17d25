//! Conditional writes checked inside the commit transaction: PutObject and
//! CompleteMultipartUpload with If-None-Match: * or If-Match, and in-place
//! metadata updates that must still find the same object; bucket tags.

use super::api::{MetaError, MetaRequest, MetaResponse};
use super::test_support::*;
use super::types::{CompletedPart, PartRecord, UploadRecord, WriteCondition};
use crate::layout::ReplicationConfig;
use std::collections::BTreeMap;

async fn commit_if(
    meta: &super::MetaService,
    record: super::types::ObjectRecord,
    condition: WriteCondition,
) -> Result<MetaResponse, MetaError> {
    call(
        meta,
        MetaRequest::CommitObject {
            record,
            condition: Some(condition),
        },
    )
    .await
}

#[tokio::test]
async fn put_conditions_hold_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let meta = open(dir.path());
    register(&meta, 1).await;
    create_bucket(&meta, "bk1", "root").await;
    let first = object("bk1", "k", vec![group(1, &["dn0"])]);
    let first_id = first.id;
    commit_if(&meta, first.clone(), WriteCondition::KeyAbsent)
        .await
        .unwrap();
    // The key is taken now: If-None-Match: * fails and nothing changes.
    let second = object("bk1", "k", vec![group(2, &["dn0"])]);
    assert_eq!(
        commit_if(&meta, second.clone(), WriteCondition::KeyAbsent)
            .await
            .unwrap_err(),
        MetaError::PreconditionFailed
    );
    assert_eq!(get(&meta, "bk1", "k").await.unwrap().id, first_id);
    // If-Match with another ETag fails; with the current one it replaces.
    assert_eq!(
        commit_if(
            &meta,
            second.clone(),
            WriteCondition::EtagMatches("00".into())
        )
        .await
        .unwrap_err(),
        MetaError::PreconditionFailed
    );
    commit_if(
        &meta,
        second.clone(),
        WriteCondition::EtagMatches(format!("\"{}\"", first.etag)),
    )
    .await
    .unwrap();
    assert_eq!(get(&meta, "bk1", "k").await.unwrap().id, second.id);
    // If-Match on a missing key is NoSuchKey.
    let other = object("bk1", "missing", vec![]);
    assert_eq!(
        commit_if(&meta, other, WriteCondition::EtagMatches("*".into()))
            .await
            .unwrap_err(),
        MetaError::NoSuchKey("missing".into())
    );
    // A metadata update of the replaced object is refused.
    let mut stale = first;
    stale.attributes.tags = BTreeMap::from([("a".into(), "b".into())]);
    assert_eq!(
        commit_if(&meta, stale, WriteCondition::SameObject(first_id))
            .await
            .unwrap_err(),
        MetaError::PreconditionFailed
    );
    let mut fresh = second.clone();
    fresh.attributes.tags = BTreeMap::from([("a".into(), "b".into())]);
    commit_if(&meta, fresh, WriteCondition::SameObject(second.id))
        .await
        .unwrap();
    let tagged = get(&meta, "bk1", "k").await.unwrap();
    assert_eq!(tagged.attributes.tags["a"], "b");
    assert_eq!(tagged.groups, second.groups);
    // Long after every grace period: block 1 (the replaced object) is
    // released, block 2 (re-committed in place) is not.
    let later = super::service::now_millis() + 3_600_000;
    let released = heartbeat_at(&meta, report("dn0", ROOMY, 0), later).await;
    assert!(released.contains(&key(1)), "{released:?}");
    assert!(!released.contains(&key(2)), "{released:?}");
}

#[tokio::test]
async fn complete_upload_checks_its_condition() {
    let dir = tempfile::tempdir().unwrap();
    let meta = open(dir.path());
    register(&meta, 1).await;
    create_bucket(&meta, "bk1", "root").await;
    commit(&meta, object("bk1", "k", vec![group(1, &["dn0"])])).await;
    let upload = UploadRecord {
        upload_id: "up".into(),
        bucket: "bk1".into(),
        key: "k".into(),
        owner: "root".into(),
        created: T0,
        content_type: None,
        headers: BTreeMap::new(),
        user_metadata: BTreeMap::new(),
        replication: ReplicationConfig::REPLICATED_1,
        attributes: Default::default(),
    };
    call(&meta, MetaRequest::CreateUpload { record: upload })
        .await
        .unwrap();
    let etag = "0123456789abcdef0123456789abcdef".to_string();
    let part = PartRecord {
        upload_id: "up".into(),
        number: 1,
        size: 1,
        etag: etag.clone(),
        created: T0,
        groups: vec![group(5, &["dn0"])],
        checksum: None,
    };
    call(&meta, MetaRequest::CommitPart { part }).await.unwrap();
    let complete = |condition| MetaRequest::CompleteUpload {
        bucket: "bk1".into(),
        key: "k".into(),
        upload_id: "up".into(),
        parts: vec![CompletedPart {
            number: 1,
            etag: etag.clone(),
        }],
        condition: Some(condition),
    };
    assert_eq!(
        call(&meta, complete(WriteCondition::KeyAbsent))
            .await
            .unwrap_err(),
        MetaError::PreconditionFailed
    );
    // The refused completion left the upload in place.
    let done = call(&meta, complete(WriteCondition::EtagMatches("*".into()))).await;
    assert!(
        matches!(done, Ok(MetaResponse::Object(Some(_)))),
        "{done:?}"
    );
}

#[tokio::test]
async fn bucket_tags_are_replaced_whole() {
    let dir = tempfile::tempdir().unwrap();
    let meta = open(dir.path());
    create_bucket(&meta, "bk1", "root").await;
    let tags = BTreeMap::from([("team".to_string(), "blue".to_string())]);
    call(
        &meta,
        MetaRequest::SetBucketTags {
            name: "bk1".into(),
            tags: tags.clone(),
        },
    )
    .await
    .unwrap();
    let got = call(&meta, MetaRequest::GetBucket { name: "bk1".into() }).await;
    assert!(matches!(got, Ok(MetaResponse::Bucket(Some(b))) if b.tags == tags));
    let missing = call(
        &meta,
        MetaRequest::SetBucketTags {
            name: "nope".into(),
            tags,
        },
    )
    .await;
    assert_eq!(missing.unwrap_err(), MetaError::NoSuchBucket("nope".into()));
}

/// Records written before tags and checksums existed still load.
#[test]
fn records_without_the_new_fields_still_load() {
    use super::types::{BucketRecord, ObjectRecord, PartSummary};
    let mut record = object("bk1", "k", vec![group(1, &["dn0"])]);
    record.parts = vec![PartSummary {
        number: 1,
        size: 1,
        etag: "e".into(),
        checksum: None,
    }];
    let mut json = serde_json::to_value(&record).unwrap();
    json.as_object_mut().unwrap().remove("attributes");
    json["parts"][0].as_object_mut().unwrap().remove("checksum");
    let old: ObjectRecord = serde_json::from_value(json).unwrap();
    assert_eq!(old.attributes, Default::default());
    assert_eq!(old.parts[0].checksum, None);
    assert_eq!(old.groups, record.groups);
    let bucket: BucketRecord =
        serde_json::from_str(r#"{"name":"b","owner":"root","created":1,"replication":null}"#)
            .unwrap();
    assert!(bucket.tags.is_empty());
    // A commit request from a gateway that knows no conditions.
    let mut request = serde_json::to_value(MetaRequest::CommitObject {
        record,
        condition: None,
    })
    .unwrap();
    request["CommitObject"]
        .as_object_mut()
        .unwrap()
        .remove("condition");
    let decoded: MetaRequest = serde_json::from_value(request).unwrap();
    assert!(matches!(
        decoded,
        MetaRequest::CommitObject {
            condition: None,
            ..
        }
    ));
}
