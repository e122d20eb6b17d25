//! Listings and bucket settings through the service.

use meta_api::*;
use test_support::meta::*;

const BUCKET: &str = "bkt";

async fn listing_a_missing_bucket_fails(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    let list = |bucket: &str| ListObjects {
        bucket: bucket.into(),
        prefix: String::new(),
        start_after: None,
        delimiter: None,
        max_keys: 1000,
    };
    assert_eq!(
        meta.call(list("nope")).await.unwrap_err(),
        MetaError::NoSuchBucket("nope".into())
    );
    meta.create_bucket("empty", "root").await;
    let Ok(page) = meta.call(list("empty")).await else {
        panic!()
    };
    assert_eq!(page, ListPage::default());
}

async fn bulk_insert_lands_in_one_transaction_and_lists(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.create_bucket(BUCKET, "root").await;
    let records: Vec<_> = (0..2000)
        .map(|i| object(BUCKET, &format!("d{:02}/k{i:05}", i % 20), vec![]))
        .collect();
    meta.service.bulk_insert_objects(&records).unwrap();
    let request = ListObjects {
        bucket: BUCKET.into(),
        prefix: String::new(),
        start_after: None,
        delimiter: Some("/".into()),
        max_keys: 1000,
    };
    let Ok(page) = meta.call(request).await else {
        panic!("listing failed");
    };
    assert_eq!(page.common_prefixes.len(), 20);
    assert!(page.objects.is_empty() && !page.is_truncated);
    // A record for a missing bucket fails the whole batch.
    let stray = [object(BUCKET, "new", vec![]), object("nope", "x", vec![])];
    assert!(matches!(
        meta.service.bulk_insert_objects(&stray),
        Err(MetaError::NoSuchBucket(_))
    ));
    let request = GetObject {
        version: None,
        bucket: BUCKET.into(),
        key: "new".into(),
    };
    assert!(matches!(meta.call(request).await, Ok(None)));
}

async fn bucket_cors_public_read_and_key_limits_are_stored(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.create_bucket(BUCKET, "root").await;
    let rule = CorsRule {
        allowed_origins: vec!["*".into()],
        allowed_methods: vec!["GET".into()],
        ..CorsRule::default()
    };
    let set = SetBucketCors {
        bucket: BUCKET.into(),
        rules: vec![rule.clone()],
    };
    assert!(matches!(meta.call(set).await, Ok(())));
    let public = SetBucketPublicRead {
        name: BUCKET.into(),
        public_read: true,
    };
    assert!(matches!(meta.call(public).await, Ok(())));
    let get = GetBucket {
        name: BUCKET.into(),
    };
    let Ok(Some(bucket)) = meta.call(get).await else {
        panic!("bucket missing");
    };
    assert_eq!(bucket.cors, vec![rule]);
    // The public-read switch writes a policy and lifts the blocks that would stop it.
    let policy = bucket.policy.clone().expect("public-read writes a policy");
    assert!(policy.contains(r#""Principal":"*""#) && policy.contains("s3:GetObject"));
    assert!(access::Policy::parse(&policy, BUCKET).unwrap().is_public());
    let block = bucket
        .public_access_block
        .expect("new buckets have a block");
    assert!(!block.block_public_policy && !block.restrict_public_buckets);
    assert!(block.block_public_acls && block.ignore_public_acls);
    let off = SetBucketPublicRead {
        name: BUCKET.into(),
        public_read: false,
    };
    assert!(matches!(meta.call(off).await, Ok(())));
    let get = GetBucket {
        name: BUCKET.into(),
    };
    let Ok(Some(bucket)) = meta.call(get).await else {
        panic!("bucket missing");
    };
    assert_eq!(bucket.policy, None);
    // A policy of the owner's own is not the switch's to replace.
    let own = SetBucketAccess {
        bucket: BUCKET.into(),
        change: BucketAccessChange::Policy(Some("{}".into())),
    };
    assert!(matches!(meta.call(own).await, Ok(())));
    let again = SetBucketPublicRead {
        name: BUCKET.into(),
        public_read: true,
    };
    assert!(matches!(
        meta.call(again).await,
        Err(MetaError::InvalidRequest(_))
    ));

    let access_key = meta
        .service
        .root_credentials()
        .expect("a lone meta has root credentials")
        .access_key;
    let grants = vec![BucketGrant {
        bucket: BUCKET.into(),
        right: BucketRight::Read,
    }];
    let limit = LimitKey {
        access_key: access_key.clone(),
        grants: Some(grants.clone()),
    };
    assert!(matches!(meta.call(limit).await, Ok(())));
    let lookup = GetAccessKey {
        access_key: access_key.clone(),
    };
    let Ok(Some(key)) = meta.call(lookup).await else {
        panic!("key missing");
    };
    assert_eq!(key.bucket_grants, Some(grants));
    // A grant on a missing bucket, or for a missing key, is refused.
    let bad = LimitKey {
        access_key,
        grants: Some(vec![BucketGrant {
            bucket: "nope".into(),
            right: BucketRight::ReadWrite,
        }]),
    };
    assert!(matches!(
        meta.call(bad).await,
        Err(MetaError::NoSuchBucket(_))
    ));
    let unknown = LimitKey {
        access_key: "AKNOPE".into(),
        grants: None,
    };
    assert!(matches!(
        meta.call(unknown).await,
        Err(MetaError::NoSuchAccessKey(_))
    ));
}

test_support::conformance!(
    listing_a_missing_bucket_fails,
    bulk_insert_lands_in_one_transaction_and_lists,
    bucket_cors_public_read_and_key_limits_are_stored,
);
