//! Conditional writes checked inside the commit transaction: PutObject and
//! CompleteMultipartUpload with If-None-Match: * or If-Match, and in-place
//! metadata updates that must still find the same object; bucket tags.

use meta_api::*;
use std::collections::BTreeMap;
use test_support::meta::*;

async fn commit_if(
    meta: &MetaUnderTest,
    record: ObjectRecord,
    condition: WriteCondition,
) -> Result<(), MetaError> {
    meta.call(CommitObject {
        record,
        condition: Some(condition),
    })
    .await
    .map(drop)
}

async fn put_conditions_are_checked_at_commit(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.register(1).await;
    meta.create_bucket("bk1", "root").await;
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
    assert_eq!(meta.get("bk1", "k").await.unwrap().id, first_id);
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
    assert_eq!(meta.get("bk1", "k").await.unwrap().id, second.id);
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
    let tagged = meta.get("bk1", "k").await.unwrap();
    assert_eq!(tagged.attributes.tags["a"], "b");
    assert_eq!(tagged.groups, second.groups);
    // Long after every grace period: block 1 (the replaced object) is
    // released, block 2 (re-committed in place) is not.
    let later = T0 + 3_600_000;
    let released = meta.heartbeat_at(report("dn0", ROOMY, 0), later).await;
    assert!(released.contains(&key(1)), "{released:?}");
    assert!(!released.contains(&key(2)), "{released:?}");
}

/// Commits of one key from many tasks at once, each with a condition only
/// one of them can meet: If-None-Match: * on a new key, then If-Match with
/// the ETag they all read. Exactly one commit of each race wins and the key
/// holds the winner; the checks and the write are one transaction.
async fn racing_conditional_commits_have_one_winner(transport: Transport) {
    const RACERS: usize = 16;
    let meta = MetaUnderTest::open(transport).await;
    meta.register(1).await;
    meta.create_bucket("bk1", "root").await;
    let race = |condition: WriteCondition, round: u64| {
        let handles: Vec<_> = (0..RACERS as u64)
            .map(|i| {
                let client = meta.meta.clone();
                let condition = condition.clone();
                let mut record = object("bk1", "race", vec![group(100 * round + i, &["dn0"])]);
                record.etag = format!("{:032x}", 100 * round + i);
                tokio::spawn(async move {
                    let id = record.id;
                    let done = client
                        .call(CommitObject {
                            record,
                            condition: Some(condition),
                        })
                        .await;
                    (id, done)
                })
            })
            .collect();
        async move {
            let mut winners = Vec::new();
            for handle in handles {
                match handle.await.unwrap() {
                    (id, Ok(_)) => winners.push(id),
                    (_, Err(e)) => assert_eq!(e, MetaError::PreconditionFailed),
                }
            }
            winners
        }
    };
    let winners = race(WriteCondition::KeyAbsent, 1).await;
    assert_eq!(
        winners.len(),
        1,
        "If-None-Match: * let {} commits in",
        winners.len()
    );
    let current = meta.get("bk1", "race").await.unwrap();
    assert_eq!(current.id, winners[0]);
    let winners = race(WriteCondition::EtagMatches(current.etag.clone()), 2).await;
    assert_eq!(
        winners.len(),
        1,
        "If-Match let {} commits in",
        winners.len()
    );
    assert_eq!(meta.get("bk1", "race").await.unwrap().id, winners[0]);
}

async fn complete_upload_checks_its_condition(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.register(1).await;
    meta.create_bucket("bk1", "root").await;
    meta.commit(object("bk1", "k", vec![group(1, &["dn0"])]))
        .await;
    let upload = upload("bk1", "k", "up");
    meta.call(CreateUpload { record: upload }).await.unwrap();
    let etag = "0123456789abcdef0123456789abcdef".to_string();
    let part = PartRecord {
        upload_id: "up".into(),
        number: 1,
        size: 1,
        etag: etag.clone(),
        created: T0,
        groups: vec![group(5, &["dn0"])],
        checksum: None,
        key_salt: None,
    };
    meta.call(CommitPart { part }).await.unwrap();
    let complete = |condition| CompleteUpload {
        bucket: "bk1".into(),
        key: "k".into(),
        upload_id: "up".into(),
        parts: vec![CompletedPart::new(1, etag.clone())],
        condition: Some(condition),
    };
    assert_eq!(
        meta.call(complete(WriteCondition::KeyAbsent))
            .await
            .unwrap_err(),
        MetaError::PreconditionFailed
    );
    // The refused completion left the upload in place.
    let done = meta
        .call(complete(WriteCondition::EtagMatches("*".into())))
        .await;
    assert!(done.is_ok(), "{done:?}");
}

async fn bucket_tags_are_replaced_whole(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.create_bucket("bk1", "root").await;
    let tags = BTreeMap::from([("team".to_string(), "blue".to_string())]);
    meta.call(SetBucketTags {
        name: "bk1".into(),
        tags: tags.clone(),
    })
    .await
    .unwrap();
    let got = meta.call(GetBucket { name: "bk1".into() }).await;
    assert!(matches!(got, Ok(Some(b)) if b.tags == tags));
    let missing = meta
        .call(SetBucketTags {
            name: "nope".into(),
            tags,
        })
        .await;
    assert_eq!(missing.unwrap_err(), MetaError::NoSuchBucket("nope".into()));
}

/// Records written before tags and checksums existed still load.
#[test]
fn records_without_the_new_fields_still_load() {
    let mut record = object("bk1", "k", vec![group(1, &["dn0"])]);
    record.parts = vec![PartSummary {
        number: 1,
        size: 1,
        etag: "e".into(),
        checksum: None,
        key_salt: None,
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
    let mut request = serde_json::to_value(AnyRequest::from(CommitObject {
        record,
        condition: None,
    }))
    .unwrap();
    request["CommitObject"]
        .as_object_mut()
        .unwrap()
        .remove("condition");
    let decoded: AnyRequest = serde_json::from_value(request).unwrap();
    assert!(matches!(
        decoded,
        AnyRequest::CommitObject(CommitObject {
            condition: None,
            ..
        })
    ));
}

test_support::conformance!(
    put_conditions_are_checked_at_commit,
    racing_conditional_commits_have_one_winner,
    complete_upload_checks_its_condition,
    bucket_tags_are_replaced_whole,
);
