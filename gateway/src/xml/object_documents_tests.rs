use super::*;
use crate::xml::MalformedXml;
use meta_api::{VersionStamp, VersionSummary};

fn text(doc: Vec<u8>) -> String {
    String::from_utf8(doc).unwrap()
}

const DECL: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>";
const NS: &str = "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"";

/// CopyObject, "Sample Response" of the AWS API reference.
#[test]
fn copy_object_result_matches_aws_example() {
    let doc = copy_object_result("9b2cf535f27731c974343645a3985328", 1_234_567_890_000, None);
    assert_eq!(
        text(doc),
        format!(
            "{DECL}<CopyObjectResult {NS}><LastModified>2009-02-13T23:31:30.000Z</LastModified>\
             <ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag></CopyObjectResult>"
        )
    );
}

#[test]
fn copy_part_result_carries_checksum() {
    let checksum = StoredChecksum {
        algorithm: "CRC32C".into(),
        value: "sOO8/Q==".into(),
    };
    let doc = text(copy_part_result("e", 0, Some(&checksum)));
    assert!(doc.contains("<CopyPartResult "), "{doc}");
    assert!(doc.ends_with("<ChecksumCRC32C>sOO8/Q==</ChecksumCRC32C></CopyPartResult>"));
}

/// GetObjectTagging, "Sample Response".
#[test]
fn tagging_round_trips() {
    let tags = BTreeMap::from([("tag1".to_string(), "val1".to_string())]);
    let doc = tagging(&tags);
    assert_eq!(
        text(doc.clone()),
        format!(
            "{DECL}<Tagging {NS}><TagSet><Tag><Key>tag1</Key><Value>val1</Value></Tag>\
             </TagSet></Tagging>"
        )
    );
    assert_eq!(
        parse_tagging(&doc).unwrap(),
        vec![("tag1".to_string(), "val1".to_string())]
    );
}

#[test]
fn tagging_body_is_strict() {
    for bad in [
        "<Tagging/>",
        "<Tagging><TagSet><Tag><Key>a</Key></Tag></TagSet></Tagging>",
        "<Tagging><TagSet><Tag><Key>a</Key><Value>b</Value><X/></Tag></TagSet></Tagging>",
        "<Other><TagSet/></Other>",
    ] {
        assert_eq!(
            parse_tagging(bad.as_bytes()).unwrap_err(),
            MalformedXml,
            "{bad}"
        );
    }
    let empty = parse_tagging(b"<Tagging><TagSet/></Tagging>").unwrap();
    assert!(empty.is_empty());
    let empty_value = parse_tagging(
        b"<Tagging><TagSet><Tag><Key>k</Key><Value></Value></Tag></TagSet></Tagging>",
    )
    .unwrap();
    assert_eq!(empty_value, vec![("k".to_string(), String::new())]);
}

#[test]
fn versioning_configuration_shows_status_once_set() {
    assert_eq!(
        text(versioning_configuration(None)),
        format!("{DECL}<VersioningConfiguration {NS}></VersioningConfiguration>")
    );
    assert_eq!(
        text(versioning_configuration(Some(Versioning::Suspended))),
        format!("{DECL}<VersioningConfiguration {NS}><Status>Suspended</Status></VersioningConfiguration>")
    );
}

#[test]
fn versioning_configuration_bodies() {
    let parse = |body: &str| parse_versioning_configuration(body.as_bytes());
    assert_eq!(
        parse("<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>"),
        Ok(Versioning::Enabled)
    );
    assert_eq!(
        parse(
            r#"<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Suspended</Status><MfaDelete>Disabled</MfaDelete></VersioningConfiguration>"#
        ),
        Ok(Versioning::Suspended)
    );
    assert_eq!(
        parse("<VersioningConfiguration><Status>Enabled</Status><MfaDelete>Enabled</MfaDelete></VersioningConfiguration>"),
        Err(VersioningDocumentError::MfaDelete)
    );
    for bad in [
        "<VersioningConfiguration><Status>enabled</Status></VersioningConfiguration>",
        "<VersioningConfiguration></VersioningConfiguration>",
        "<VersioningConfiguration><Status>Enabled</Status><Status>Enabled</Status></VersioningConfiguration>",
        "<Versioning><Status>Enabled</Status></Versioning>",
        "<VersioningConfiguration><Other>1</Other></VersioningConfiguration>",
    ] {
        assert_eq!(parse(bad), Err(VersioningDocumentError::Malformed), "{bad}");
    }
}

#[test]
fn versions_and_markers_in_a_listing() {
    let stamp = |id: Option<&str>, delete_marker| VersionStamp {
        id: id.map(str::to_string),
        seq: 1,
        delete_marker,
    };
    let page = VersionsPage {
        versions: vec![
            VersionSummary {
                key: "a b".into(),
                version: stamp(Some("v2"), true),
                is_latest: true,
                size: 0,
                etag: String::new(),
                created: 0,
                owner: None,
            },
            VersionSummary {
                key: "a b".into(),
                version: stamp(None, false),
                is_latest: false,
                size: 3,
                etag: "e".into(),
                created: 0,
                owner: Some("alice".into()),
            },
        ],
        common_prefixes: vec!["p/".to_string()],
        is_truncated: true,
        next_key_marker: Some("a b".into()),
        next_version_id_marker: Some("null".into()),
    };
    let doc = text(list_versions(&ListVersionsDoc {
        bucket: "bk",
        prefix: "",
        key_marker: "",
        version_id_marker: "",
        delimiter: Some("/"),
        max_keys: 1,
        url_encode: true,
        owner: "root",
        page: &page,
    }));
    let owner = |name: &str| format!("<Owner><ID>{}</ID>", meta_api::canonical_user_id(name));
    for part in [
        "<NextKeyMarker>a%20b</NextKeyMarker><NextVersionIdMarker>null</NextVersionIdMarker>",
        &format!("<DeleteMarker><Key>a%20b</Key><VersionId>v2</VersionId><IsLatest>true</IsLatest><LastModified>1970-01-01T00:00:00.000Z</LastModified>{}", owner("root")),
        "<Version><Key>a%20b</Key><VersionId>null</VersionId><IsLatest>false</IsLatest>",
        &format!("<Size>3</Size><StorageClass>STANDARD</StorageClass>{}", owner("alice")),
        "<CommonPrefixes><Prefix>p/</Prefix></CommonPrefixes>",
        "<IsTruncated>true</IsTruncated>",
    ] {
        assert!(doc.contains(part), "{part} missing in {doc}");
    }
}

/// GetBucketAcl, "Sample Response" (IDs are user names in Tessera).
#[test]
fn acl_grants_owner_full_control() {
    let doc = text(owner_full_control("root"));
    assert!(doc.contains(&format!(
        "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" \
         xsi:type=\"CanonicalUser\"><ID>{}</ID></Grantee>\
         <Permission>FULL_CONTROL</Permission></Grant>",
        meta_api::canonical_user_id("root")
    )));
    assert!(doc.starts_with(&format!("{DECL}<AccessControlPolicy {NS}><Owner>")));
}

#[test]
fn attributes_in_documented_order() {
    let checksum = StoredChecksum {
        algorithm: "CRC32".into(),
        value: "AAAAAA==".into(),
    };
    let doc = text(object_attributes(&AttributesDoc {
        etag: Some("abc-2"),
        checksum: Some((checksum.clone(), "COMPOSITE")),
        parts: Some(AttributeParts {
            total: 2,
            marker: 0,
            max_parts: 1,
            is_truncated: true,
            parts: vec![AttributePart {
                number: 1,
                size: 5,
                checksum: Some(&checksum),
            }],
        }),
        storage_class: true,
        size: Some(10),
    }));
    assert_eq!(
        doc,
        format!(
            "{DECL}<GetObjectAttributesResponse {NS}><ETag>abc-2</ETag><Checksum>\
             <ChecksumCRC32>AAAAAA==</ChecksumCRC32><ChecksumType>COMPOSITE</ChecksumType>\
             </Checksum><ObjectParts><PartsCount>2</PartsCount>\
             <PartNumberMarker>0</PartNumberMarker><NextPartNumberMarker>1</NextPartNumberMarker>\
             <MaxParts>1</MaxParts><IsTruncated>true</IsTruncated><Part><PartNumber>1</PartNumber>\
             <Size>5</Size><ChecksumCRC32>AAAAAA==</ChecksumCRC32></Part></ObjectParts>\
             <StorageClass>STANDARD</StorageClass><ObjectSize>10</ObjectSize>\
             </GetObjectAttributesResponse>"
        )
    );
}

/// CompleteMultipartUpload, "Sample Response" with a checksum added.
#[test]
fn complete_upload_names_checksum_after_etag() {
    let checksum = StoredChecksum {
        algorithm: "CRC64NVME".into(),
        value: "AAAAAAAAAAA=".into(),
    };
    let doc = text(complete_upload_with_checksum(
        "http://h/b/k",
        "b",
        "k",
        "e-2",
        &checksum,
        "FULL_OBJECT",
    ));
    assert!(doc.ends_with(
        "<ETag>&quot;e-2&quot;</ETag><ChecksumCRC64NVME>AAAAAAAAAAA=</ChecksumCRC64NVME>\
         <ChecksumType>FULL_OBJECT</ChecksumType></CompleteMultipartUploadResult>"
    ));
}
