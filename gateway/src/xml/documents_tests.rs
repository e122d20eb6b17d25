//! Response documents against the examples of AWS's S3 API reference. The
//! comparison is structural (element names, order and text), so indentation
//! and the escaping of `"` as `&quot;` do not matter; the namespace is
//! checked on the raw output.

use super::*;
use crate::xml::parse::{parse_document, Element};

fn normalized(mut e: Element) -> Element {
    e.text = e.text.trim().to_string();
    e.children = e.children.into_iter().map(normalized).collect();
    e
}

fn assert_same_document(ours: &[u8], aws: &str) {
    let text = String::from_utf8(ours.to_vec()).unwrap();
    assert!(
        text.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"),
        "{text}"
    );
    let ours = normalized(parse_document(ours).unwrap());
    let aws = normalized(parse_document(aws.as_bytes()).unwrap());
    assert_eq!(ours, aws, "\nours: {text}");
}

fn has_namespace(doc: &[u8], root: &str) -> bool {
    let text = String::from_utf8(doc.to_vec()).unwrap();
    text.contains(&format!(
        "<{root} xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    ))
}

/// Milliseconds of an ISO 8601 timestamp from the examples.
fn ms(iso: &str) -> i64 {
    let t =
        time::OffsetDateTime::parse(iso, &time::format_description::well_known::Rfc3339).unwrap();
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}

fn bucket(name: &str, created: &str) -> BucketRecord {
    BucketRecord {
        object_lock: None,
        lifecycle: Vec::new(),
        encryption: None,
        name: name.into(),
        owner: "webfile".into(),
        created: ms(created),
        replication: None,
        tags: Default::default(),
        public_read: false,
        cors: Vec::new(),
        acl: None,
        ownership: None,
        public_access_block: None,
        policy: None,
        versioning: None,
    }
}

/// ListBuckets, "Sample Response" (GET Service).
#[test]
fn list_buckets_matches_aws_example() {
    let doc = list_buckets(
        "webfile",
        &[
            bucket("quotes", "2006-02-03T16:45:09.000Z"),
            bucket("samples", "2006-02-03T16:41:58.000Z"),
        ],
        &BucketsPage::default(),
    );
    assert!(has_namespace(&doc, "ListAllMyBucketsResult"));
    assert_same_document(
        &doc,
        &format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<ListAllMyBucketsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01">
  <Owner>
    <ID>{webfile}</ID>
  </Owner>
  <Buckets>
    <Bucket>
      <Name>quotes</Name>
      <CreationDate>2006-02-03T16:45:09.000Z</CreationDate>
    </Bucket>
    <Bucket>
      <Name>samples</Name>
      <CreationDate>2006-02-03T16:41:58.000Z</CreationDate>
    </Bucket>
  </Buckets>
</ListAllMyBucketsResult>"#,
            webfile = meta_api::canonical_user_id("webfile")
        ),
    );
}

/// A page of buckets: regions, the token of the next page, the prefix.
#[test]
fn list_buckets_page_shows_region_token_and_prefix() {
    let doc = list_buckets(
        "webfile",
        &[bucket("quotes", "2006-02-03T16:45:09.000Z")],
        &BucketsPage {
            region: Some("eu-west-1"),
            continuation_token: Some("cXVvdGVz".into()),
            prefix: Some("q"),
        },
    );
    assert_same_document(
        &doc,
        &format!(
            r#"<ListAllMyBucketsResult>
  <Owner><ID>{}</ID></Owner>
  <Buckets>
    <Bucket>
      <Name>quotes</Name>
      <CreationDate>2006-02-03T16:45:09.000Z</CreationDate>
      <BucketRegion>eu-west-1</BucketRegion>
    </Bucket>
  </Buckets>
  <ContinuationToken>cXVvdGVz</ContinuationToken>
  <Prefix>q</Prefix>
</ListAllMyBucketsResult>"#,
            meta_api::canonical_user_id("webfile")
        ),
    );
}

fn summary(key: &str, created: &str, etag: &str, size: u64) -> ObjectSummary {
    ObjectSummary {
        key: key.into(),
        size,
        etag: etag.into(),
        created: ms(created),
    }
}

/// ListObjectsV2, "Example 1: Listing keys" (one object kept).
#[test]
fn list_objects_v2_matches_aws_example_1() {
    let page = ListPage {
        objects: vec![summary(
            "my-image.jpg",
            "2009-10-12T17:50:30.000Z",
            "fba9dede5f27731c9771645a39863328",
            434234,
        )],
        ..ListPage::default()
    };
    let doc = list_objects_v2(&ListV2Doc {
        bucket: "bucket",
        prefix: "",
        delimiter: None,
        max_keys: 1000,
        url_encode: false,
        continuation_token: None,
        next_continuation_token: None,
        start_after: None,
        owner: None,
        page: &page,
    });
    assert!(has_namespace(&doc, "ListBucketResult"));
    assert_same_document(
        &doc,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
    <Name>bucket</Name>
    <Prefix/>
    <KeyCount>1</KeyCount>
    <MaxKeys>1000</MaxKeys>
    <IsTruncated>false</IsTruncated>
    <Contents>
        <Key>my-image.jpg</Key>
        <LastModified>2009-10-12T17:50:30.000Z</LastModified>
        <ETag>"fba9dede5f27731c9771645a39863328"</ETag>
        <Size>434234</Size>
        <StorageClass>STANDARD</StorageClass>
    </Contents>
</ListBucketResult>"#,
    );
}

/// ListObjectsV2, "Example 2: Listing keys using the max-keys, prefix, and
/// start-after parameters" (storage class is STANDARD in Tessera).
#[test]
fn list_objects_v2_matches_aws_example_2() {
    let page = ListPage {
        objects: vec![summary(
            "ExampleObject.txt",
            "2013-09-17T18:07:53.000Z",
            "599bab3ed2c697f1d26842727561fd94",
            857,
        )],
        ..ListPage::default()
    };
    let doc = list_objects_v2(&ListV2Doc {
        bucket: "quotes",
        prefix: "E",
        delimiter: None,
        max_keys: 3,
        url_encode: false,
        continuation_token: None,
        next_continuation_token: None,
        start_after: Some("ExampleGuide.pdf"),
        owner: None,
        page: &page,
    });
    assert_same_document(
        &doc,
        r#"<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>quotes</Name>
  <Prefix>E</Prefix>
  <StartAfter>ExampleGuide.pdf</StartAfter>
  <KeyCount>1</KeyCount>
  <MaxKeys>3</MaxKeys>
  <IsTruncated>false</IsTruncated>
  <Contents>
    <Key>ExampleObject.txt</Key>
    <LastModified>2013-09-17T18:07:53.000Z</LastModified>
    <ETag>"599bab3ed2c697f1d26842727561fd94"</ETag>
    <Size>857</Size>
    <StorageClass>STANDARD</StorageClass>
  </Contents>
</ListBucketResult>"#,
    );
}

#[test]
fn list_objects_v2_with_prefixes_tokens_and_url_encoding() {
    let page = ListPage {
        objects: vec![summary("a b+c", "2013-09-17T18:07:53.000Z", "x", 1)],
        common_prefixes: vec!["dir é/".into()],
        is_truncated: true,
        next_marker: Some("dir é/".into()),
    };
    let doc = list_objects_v2(&ListV2Doc {
        bucket: "b",
        prefix: "",
        delimiter: Some("/"),
        max_keys: 2,
        url_encode: true,
        continuation_token: Some("tok"),
        next_continuation_token: Some("next"),
        start_after: None,
        owner: Some("alice"),
        page: &page,
    });
    assert_same_document(
        &doc,
        &format!(
            r#"<ListBucketResult>
  <Name>b</Name><Prefix/><Delimiter>/</Delimiter>
  <ContinuationToken>tok</ContinuationToken><NextContinuationToken>next</NextContinuationToken>
  <KeyCount>2</KeyCount><MaxKeys>2</MaxKeys><EncodingType>url</EncodingType>
  <IsTruncated>true</IsTruncated>
  <Contents>
    <Key>a%20b%2Bc</Key><LastModified>2013-09-17T18:07:53.000Z</LastModified>
    <ETag>"x"</ETag><Size>1</Size>
    <Owner><ID>{alice}</ID></Owner>
    <StorageClass>STANDARD</StorageClass>
  </Contents>
  <CommonPrefixes><Prefix>dir%20%C3%A9/</Prefix></CommonPrefixes>
</ListBucketResult>"#,
            alice = meta_api::canonical_user_id("alice")
        ),
    );
}

/// ListObjects (v1), "Sample Response" with a delimiter, as GET Bucket shows it.
#[test]
fn list_objects_v1_matches_aws_shape() {
    let page = ListPage {
        objects: vec![summary(
            "sample.jpg",
            "2011-02-26T01:56:20.000Z",
            "bf1d737a4d46a19f3bced6905cc8b902",
            142863,
        )],
        common_prefixes: vec!["photos/".into()],
        is_truncated: true,
        next_marker: Some("photos/".into()),
    };
    let doc = list_objects_v1(&ListV1Doc {
        bucket: "example-bucket",
        prefix: "",
        marker: "",
        delimiter: Some("/"),
        max_keys: 2,
        url_encode: false,
        next_marker: Some("photos/"),
        owner: "owner",
        page: &page,
    });
    assert_same_document(
        &doc,
        &format!(
            r#"<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>example-bucket</Name>
  <Prefix></Prefix>
  <Marker></Marker>
  <NextMarker>photos/</NextMarker>
  <MaxKeys>2</MaxKeys>
  <Delimiter>/</Delimiter>
  <IsTruncated>true</IsTruncated>
  <Contents>
    <Key>sample.jpg</Key>
    <LastModified>2011-02-26T01:56:20.000Z</LastModified>
    <ETag>"bf1d737a4d46a19f3bced6905cc8b902"</ETag>
    <Size>142863</Size>
    <Owner><ID>{owner}</ID></Owner>
    <StorageClass>STANDARD</StorageClass>
  </Contents>
  <CommonPrefixes>
    <Prefix>photos/</Prefix>
  </CommonPrefixes>
</ListBucketResult>"#,
            owner = meta_api::canonical_user_id("owner")
        ),
    );
}

/// CreateMultipartUpload, "Sample Response".
#[test]
fn initiate_upload_matches_aws_example() {
    let doc = initiate_upload(
        "example-bucket",
        "example-object",
        "VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA",
    );
    assert!(has_namespace(&doc, "InitiateMultipartUploadResult"));
    assert_same_document(
        &doc,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<InitiateMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Bucket>example-bucket</Bucket>
  <Key>example-object</Key>
  <UploadId>VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA</UploadId>
</InitiateMultipartUploadResult>"#,
    );
}

/// CompleteMultipartUpload, "Sample Response".
#[test]
fn complete_upload_matches_aws_example() {
    let doc = complete_upload(
        "http://Example-Bucket.s3.Region.amazonaws.com/Example-Object",
        "Example-Bucket",
        "Example-Object",
        "3858f62230ac3c915f300c664312c11f-9",
    );
    assert!(has_namespace(&doc, "CompleteMultipartUploadResult"));
    assert_same_document(
        &doc,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<CompleteMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Location>http://Example-Bucket.s3.Region.amazonaws.com/Example-Object</Location>
  <Bucket>Example-Bucket</Bucket>
  <Key>Example-Object</Key>
  <ETag>"3858f62230ac3c915f300c664312c11f-9"</ETag>
</CompleteMultipartUploadResult>"#,
    );
}

fn upload() -> UploadRecord {
    UploadRecord {
        upload_id: "XXBsb2FkIElEIGZvciBlbHZpbmcncyVcdS1tb3ZpZS5tMnRzEEEwbG9hZA".into(),
        bucket: "example-bucket".into(),
        key: "example-object".into(),
        owner: "someName".into(),
        created: ms("2010-11-10T20:48:33.000Z"),
        content_type: None,
        headers: Default::default(),
        user_metadata: Default::default(),
        replication: proto::ReplicationConfig::RS_3_2,
        attributes: Default::default(),
    }
}

/// ListParts, "Sample Response" (one part kept; IDs are user names in Tessera).
#[test]
fn list_parts_matches_aws_example() {
    let parts = vec![PartRecord {
        upload_id: upload().upload_id,
        number: 2,
        size: 10485760,
        etag: "7778aef83f66abc1fa1e8477f296d394".into(),
        created: ms("2010-11-10T20:48:34.000Z"),
        groups: vec![],
        checksum: None,
        key_salt: None,
    }];
    let doc = list_parts(&ListPartsDoc {
        upload: &upload(),
        part_number_marker: 1,
        max_parts: 2,
        is_truncated: true,
        parts: &parts,
    });
    assert_same_document(
        &doc,
        &format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<ListPartsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Bucket>example-bucket</Bucket>
  <Key>example-object</Key>
  <UploadId>XXBsb2FkIElEIGZvciBlbHZpbmcncyVcdS1tb3ZpZS5tMnRzEEEwbG9hZA</UploadId>
  <Initiator><ID>{someName}</ID></Initiator>
  <Owner><ID>{someName}</ID></Owner>
  <StorageClass>STANDARD</StorageClass>
  <PartNumberMarker>1</PartNumberMarker>
  <NextPartNumberMarker>2</NextPartNumberMarker>
  <MaxParts>2</MaxParts>
  <IsTruncated>true</IsTruncated>
  <Part>
    <PartNumber>2</PartNumber>
    <LastModified>2010-11-10T20:48:34.000Z</LastModified>
    <ETag>"7778aef83f66abc1fa1e8477f296d394"</ETag>
    <Size>10485760</Size>
  </Part>
</ListPartsResult>"#,
            someName = meta_api::canonical_user_id("someName")
        ),
    );
}

#[test]
fn list_uploads_shows_each_upload() {
    let page = UploadPage {
        uploads: vec![upload()],
        common_prefixes: vec!["photos/".into()],
        ..UploadPage::default()
    };
    let doc = list_uploads(&ListUploadsDoc {
        bucket: "example-bucket",
        prefix: "",
        delimiter: Some("/"),
        key_marker: "",
        upload_id_marker: "",
        max_uploads: 1000,
        url_encode: false,
        page: &page,
    });
    let text = String::from_utf8(doc).unwrap();
    assert!(text.contains("<Key>example-object</Key>"));
    assert!(text.contains("<Initiated>2010-11-10T20:48:33.000Z</Initiated>"));
    assert!(text.contains("<NextUploadIdMarker>XXBsb2"));
    assert!(text.contains("<Delimiter>/</Delimiter>"));
    assert!(text.contains("<CommonPrefixes><Prefix>photos/</Prefix></CommonPrefixes>"));
    assert!(text.contains("<IsTruncated>false</IsTruncated>"));
}

#[test]
fn list_uploads_truncated_at_a_common_prefix_has_no_upload_marker() {
    let page = UploadPage {
        uploads: vec![upload()],
        common_prefixes: vec!["z/".into()],
        is_truncated: true,
        next_key_marker: Some("z/".into()),
        next_upload_id_marker: None,
    };
    let doc = list_uploads(&ListUploadsDoc {
        bucket: "example-bucket",
        prefix: "",
        delimiter: Some("/"),
        key_marker: "",
        upload_id_marker: "",
        max_uploads: 2,
        url_encode: false,
        page: &page,
    });
    let text = String::from_utf8(doc).unwrap();
    assert!(
        text.contains("<NextKeyMarker>z/</NextKeyMarker><NextUploadIdMarker/>"),
        "{text}"
    );
    assert!(text.contains("<IsTruncated>true</IsTruncated>"));
}

#[test]
fn location_constraint_is_empty_for_us_east_1() {
    let east = String::from_utf8(location_constraint("us-east-1")).unwrap();
    assert!(east.ends_with(
        "<LocationConstraint xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"></LocationConstraint>"
    ));
    let west = String::from_utf8(location_constraint("eu-west-1")).unwrap();
    assert!(west.contains(">eu-west-1</LocationConstraint>"));
}

/// DeleteObjects, "Sample Response" (one deleted key, one error).
#[test]
fn delete_result_matches_aws_example() {
    let outcomes = [
        DeleteOutcome::Deleted {
            key: "sample1.txt",
            version_id: None,
            marker: None,
        },
        DeleteOutcome::Failed {
            key: "sample2.txt",
            version_id: None,
            code: "AccessDenied",
            message: "Access Denied",
        },
    ];
    let doc = delete_result(&outcomes, false);
    assert!(has_namespace(&doc, "DeleteResult"));
    assert_same_document(
        &doc,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Deleted>
    <Key>sample1.txt</Key>
  </Deleted>
  <Error>
    <Key>sample2.txt</Key>
    <Code>AccessDenied</Code>
    <Message>Access Denied</Message>
  </Error>
</DeleteResult>"#,
    );
    let quiet = String::from_utf8(delete_result(&outcomes, true)).unwrap();
    assert!(!quiet.contains("<Deleted>") && quiet.contains("<Key>sample2.txt</Key>"));
}
