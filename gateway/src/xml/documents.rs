//! The S3 response documents Tessera sends, each built from plain data so
//! that tests can compare them with AWS's documented examples.

use super::XmlWriter;
use crate::dates::iso8601;
use meta_api::{
    BucketRecord, ListPage, ObjectSummary, PartRecord, StoredChecksum, UploadPage, UploadRecord,
};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::borrow::Cow;

/// S3 reports one storage class for everything Tessera stores.
pub const STORAGE_CLASS: &str = "STANDARD";

/// Characters escaped by `encoding-type=url`: all but unreserved ones and '/'.
const URL_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// `value` URL-encoded when the client asked for `encoding-type=url`.
pub fn encode_name(value: &str, url: bool) -> Cow<'_, str> {
    if url {
        utf8_percent_encode(value, URL_ENCODE).into()
    } else {
        Cow::Borrowed(value)
    }
}

/// An ETag as S3 shows it: in double quotes.
pub fn quoted(etag: &str) -> String {
    format!("\"{etag}\"")
}

/// `<ChecksumCRC32C>value</ChecksumCRC32C>` and the like.
pub(super) fn checksum_element(w: &mut XmlWriter, checksum: &StoredChecksum) {
    w.element(&format!("Checksum{}", checksum.algorithm), &checksum.value);
}

/// `<element><ID>canonical id</ID></element>` of the user `name`: the same
/// ID in every answer. S3 no longer returns DisplayName (since November 2025).
pub(super) fn owner(w: &mut XmlWriter, element: &str, name: &str) {
    w.open(element);
    w.element("ID", &meta_api::canonical_user_id(name));
    w.close(element);
}

/// What a paginated ListBuckets answer adds to the buckets.
#[derive(Debug, Default)]
pub struct BucketsPage<'a> {
    /// Each bucket's region, shown when the request had any parameter.
    pub region: Option<&'a str>,
    /// Where the next page starts, when there is one.
    pub continuation_token: Option<String>,
    /// The prefix asked for, echoed.
    pub prefix: Option<&'a str>,
}

/// ListAllMyBucketsResult for ListBuckets.
pub fn list_buckets(owner_name: &str, buckets: &[BucketRecord], page: &BucketsPage<'_>) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("ListAllMyBucketsResult");
    owner(&mut w, "Owner", owner_name);
    w.open("Buckets");
    for bucket in buckets {
        w.open("Bucket");
        w.element("Name", &bucket.name);
        w.element("CreationDate", &iso8601(bucket.created));
        if let Some(region) = page.region {
            w.element("BucketRegion", region);
        }
        w.close("Bucket");
    }
    w.close("Buckets");
    if let Some(token) = &page.continuation_token {
        w.element("ContinuationToken", token);
    }
    if let Some(prefix) = page.prefix {
        w.element("Prefix", prefix);
    }
    w.close("ListAllMyBucketsResult");
    w.finish()
}

/// LocationConstraint for GetBucketLocation: empty for us-east-1, as in S3.
pub fn location_constraint(region: &str) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("LocationConstraint");
    if region != "us-east-1" {
        w.text(region);
    }
    w.close("LocationConstraint");
    w.finish()
}

/// InitiateMultipartUploadResult for CreateMultipartUpload.
pub fn initiate_upload(bucket: &str, key: &str, upload_id: &str) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("InitiateMultipartUploadResult");
    w.element("Bucket", bucket);
    w.element("Key", key);
    w.element("UploadId", upload_id);
    w.close("InitiateMultipartUploadResult");
    w.finish()
}

/// CompleteMultipartUploadResult; `etag` unquoted.
pub fn complete_upload(location: &str, bucket: &str, key: &str, etag: &str) -> Vec<u8> {
    complete_upload_document(location, bucket, key, etag, None)
}

/// CompleteMultipartUploadResult, with the object checksum and its type
/// (FULL_OBJECT or COMPOSITE) when it has one.
pub(super) fn complete_upload_document(
    location: &str,
    bucket: &str,
    key: &str,
    etag: &str,
    checksum: Option<(&StoredChecksum, &str)>,
) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("CompleteMultipartUploadResult");
    w.element("Location", location);
    w.element("Bucket", bucket);
    w.element("Key", key);
    w.element("ETag", &quoted(etag));
    if let Some((checksum, kind)) = checksum {
        checksum_element(&mut w, checksum);
        w.element("ChecksumType", kind);
    }
    w.close("CompleteMultipartUploadResult");
    w.finish()
}

/// The outcome of one key of a DeleteObjects request.
pub enum DeleteOutcome<'a> {
    /// The key (or version) was deleted, or was absent.
    Deleted {
        /// The key.
        key: &'a str,
        /// The version id the request named, if any.
        version_id: Option<&'a str>,
        /// The delete marker made or removed, if any.
        marker: Option<&'a str>,
    },
    /// The key could not be deleted.
    Failed {
        /// The key.
        key: &'a str,
        /// The version id the request named, if any.
        version_id: Option<&'a str>,
        /// S3 error code.
        code: &'a str,
        /// Error message.
        message: &'a str,
    },
}

/// DeleteResult; in quiet mode only the failures are listed.
pub fn delete_result(outcomes: &[DeleteOutcome<'_>], quiet: bool) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("DeleteResult");
    for outcome in outcomes {
        match outcome {
            DeleteOutcome::Deleted {
                key,
                version_id,
                marker,
            } if !quiet => {
                w.open("Deleted");
                w.element("Key", key);
                w.optional("VersionId", *version_id);
                if let Some(marker) = marker {
                    w.boolean("DeleteMarker", true);
                    w.element("DeleteMarkerVersionId", marker);
                }
                w.close("Deleted");
            }
            DeleteOutcome::Deleted { .. } => {}
            DeleteOutcome::Failed {
                key,
                version_id,
                code,
                message,
            } => {
                w.open("Error");
                w.element("Key", key);
                w.optional("VersionId", *version_id);
                w.element("Code", code);
                w.element("Message", message);
                w.close("Error");
            }
        }
    }
    w.close("DeleteResult");
    w.finish()
}

/// One object of a listing: `Contents` of ListObjects.
fn object_entry(w: &mut XmlWriter, object: &ObjectSummary, url: bool, owner_name: Option<&str>) {
    w.open("Contents");
    w.element("Key", &encode_name(&object.key, url));
    w.element("LastModified", &iso8601(object.created));
    w.element("ETag", &quoted(&object.etag));
    w.number("Size", object.size);
    if let Some(name) = owner_name {
        owner(w, "Owner", name);
    }
    w.element("StorageClass", STORAGE_CLASS);
    w.close("Contents");
}

/// MaxKeys, Delimiter and EncodingType, in the order of ListObjects (v1)
/// and ListObjectVersions.
pub(super) fn page_settings(w: &mut XmlWriter, max_keys: u32, delimiter: Option<&str>, url: bool) {
    w.number("MaxKeys", u64::from(max_keys));
    if let Some(d) = delimiter {
        w.element("Delimiter", &encode_name(d, url));
    }
    if url {
        w.element("EncodingType", "url");
    }
}

/// IsTruncated, then the page's objects and common prefixes.
pub(super) fn listing_entries(
    w: &mut XmlWriter,
    page: &ListPage,
    url: bool,
    owner_name: Option<&str>,
) {
    w.boolean("IsTruncated", page.is_truncated);
    for object in &page.objects {
        object_entry(w, object, url, owner_name);
    }
    common_prefixes(w, &page.common_prefixes, url);
}

/// The `CommonPrefixes` elements of a listing.
pub(super) fn common_prefixes(w: &mut XmlWriter, prefixes: &[String], url: bool) {
    for prefix in prefixes {
        w.open("CommonPrefixes");
        w.element("Prefix", &encode_name(prefix, url));
        w.close("CommonPrefixes");
    }
}

/// What a ListObjectsV2 answer shows besides the page itself.
pub struct ListV2Doc<'a> {
    /// Bucket name.
    pub bucket: &'a str,
    /// The prefix asked for.
    pub prefix: &'a str,
    /// The delimiter asked for.
    pub delimiter: Option<&'a str>,
    /// The page size asked for.
    pub max_keys: u32,
    /// Whether keys are URL-encoded.
    pub url_encode: bool,
    /// The token the client sent, echoed.
    pub continuation_token: Option<&'a str>,
    /// Token for the next page, when truncated.
    pub next_continuation_token: Option<&'a str>,
    /// The start-after key asked for.
    pub start_after: Option<&'a str>,
    /// The bucket owner, shown per object when the client asked for fetch-owner.
    pub owner: Option<&'a str>,
    /// The objects and prefixes.
    pub page: &'a ListPage,
}

/// ListBucketResult of ListObjectsV2.
pub fn list_objects_v2(doc: &ListV2Doc<'_>) -> Vec<u8> {
    let url = doc.url_encode;
    let mut w = XmlWriter::new();
    w.open_root("ListBucketResult");
    w.element("Name", doc.bucket);
    w.element("Prefix", &encode_name(doc.prefix, url));
    if let Some(d) = doc.delimiter {
        w.element("Delimiter", &encode_name(d, url));
    }
    w.optional("ContinuationToken", doc.continuation_token);
    w.optional("NextContinuationToken", doc.next_continuation_token);
    if let Some(s) = doc.start_after {
        w.element("StartAfter", &encode_name(s, url));
    }
    let key_count = doc.page.objects.len() + doc.page.common_prefixes.len();
    w.number("KeyCount", key_count as u64);
    w.number("MaxKeys", u64::from(doc.max_keys));
    if url {
        w.element("EncodingType", "url");
    }
    listing_entries(&mut w, doc.page, url, doc.owner);
    w.close("ListBucketResult");
    w.finish()
}

/// What a ListObjects (v1) answer shows besides the page itself.
pub struct ListV1Doc<'a> {
    /// Bucket name.
    pub bucket: &'a str,
    /// The prefix asked for.
    pub prefix: &'a str,
    /// The marker asked for.
    pub marker: &'a str,
    /// The delimiter asked for.
    pub delimiter: Option<&'a str>,
    /// The page size asked for.
    pub max_keys: u32,
    /// Whether keys are URL-encoded.
    pub url_encode: bool,
    /// Sent only with a delimiter, as in S3.
    pub next_marker: Option<&'a str>,
    /// The bucket owner, shown per object.
    pub owner: &'a str,
    /// The objects and prefixes.
    pub page: &'a ListPage,
}

/// ListBucketResult of ListObjects (v1).
pub fn list_objects_v1(doc: &ListV1Doc<'_>) -> Vec<u8> {
    let url = doc.url_encode;
    let mut w = XmlWriter::new();
    w.open_root("ListBucketResult");
    w.element("Name", doc.bucket);
    w.element("Prefix", &encode_name(doc.prefix, url));
    w.element("Marker", &encode_name(doc.marker, url));
    if let Some(m) = doc.next_marker {
        w.element("NextMarker", &encode_name(m, url));
    }
    page_settings(&mut w, doc.max_keys, doc.delimiter, url);
    listing_entries(&mut w, doc.page, url, Some(doc.owner));
    w.close("ListBucketResult");
    w.finish()
}

/// What a ListParts answer shows besides the parts.
pub struct ListPartsDoc<'a> {
    /// The upload whose parts are listed.
    pub upload: &'a UploadRecord,
    /// The part-number marker asked for.
    pub part_number_marker: u32,
    /// The page size asked for.
    pub max_parts: u32,
    /// Whether more parts follow.
    pub is_truncated: bool,
    /// The parts on this page.
    pub parts: &'a [PartRecord],
}

/// ListPartsResult.
pub fn list_parts(doc: &ListPartsDoc<'_>) -> Vec<u8> {
    let upload = doc.upload;
    let mut w = XmlWriter::new();
    w.open_root("ListPartsResult");
    w.element("Bucket", &upload.bucket);
    w.element("Key", &upload.key);
    w.element("UploadId", &upload.upload_id);
    owner(&mut w, "Initiator", &upload.owner);
    owner(&mut w, "Owner", &upload.owner);
    w.element("StorageClass", STORAGE_CLASS);
    w.number("PartNumberMarker", u64::from(doc.part_number_marker));
    let next = doc.parts.last().map_or(0, |p| p.number);
    w.number("NextPartNumberMarker", u64::from(next));
    w.number("MaxParts", u64::from(doc.max_parts));
    w.boolean("IsTruncated", doc.is_truncated);
    for part in doc.parts {
        w.open("Part");
        w.number("PartNumber", u64::from(part.number));
        w.element("LastModified", &iso8601(part.created));
        w.element("ETag", &quoted(&part.etag));
        w.number("Size", part.size);
        w.close("Part");
    }
    w.close("ListPartsResult");
    w.finish()
}

/// What a ListMultipartUploads answer shows besides the uploads.
pub struct ListUploadsDoc<'a> {
    /// Bucket name.
    pub bucket: &'a str,
    /// The prefix asked for.
    pub prefix: &'a str,
    /// The delimiter asked for, if any.
    pub delimiter: Option<&'a str>,
    /// The key marker asked for.
    pub key_marker: &'a str,
    /// The upload-id marker asked for.
    pub upload_id_marker: &'a str,
    /// The page size asked for.
    pub max_uploads: u32,
    /// Whether keys are URL-encoded.
    pub url_encode: bool,
    /// The uploads and common prefixes on this page.
    pub page: &'a UploadPage,
}

/// ListMultipartUploadsResult.
pub fn list_uploads(doc: &ListUploadsDoc<'_>) -> Vec<u8> {
    let url = doc.url_encode;
    let mut w = XmlWriter::new();
    w.open_root("ListMultipartUploadsResult");
    w.element("Bucket", doc.bucket);
    w.element("KeyMarker", &encode_name(doc.key_marker, url));
    w.element("UploadIdMarker", doc.upload_id_marker);
    let page = doc.page;
    let last = page.uploads.last();
    let next_key = match &page.next_key_marker {
        Some(marker) => marker.as_str(),
        None => last.map_or("", |u| u.key.as_str()),
    };
    let next_id = match (&page.next_key_marker, &page.next_upload_id_marker) {
        (Some(_), id) => id.as_deref().unwrap_or(""),
        (None, _) => last.map_or("", |u| u.upload_id.as_str()),
    };
    w.element("NextKeyMarker", &encode_name(next_key, url));
    w.element("NextUploadIdMarker", next_id);
    w.element("Prefix", &encode_name(doc.prefix, url));
    if let Some(d) = doc.delimiter {
        w.element("Delimiter", &encode_name(d, url));
    }
    w.number("MaxUploads", u64::from(doc.max_uploads));
    if url {
        w.element("EncodingType", "url");
    }
    w.boolean("IsTruncated", page.is_truncated);
    for upload in &page.uploads {
        w.open("Upload");
        w.element("Key", &encode_name(&upload.key, url));
        w.element("UploadId", &upload.upload_id);
        owner(&mut w, "Initiator", &upload.owner);
        owner(&mut w, "Owner", &upload.owner);
        w.element("StorageClass", STORAGE_CLASS);
        w.element("Initiated", &iso8601(upload.created));
        w.close("Upload");
    }
    common_prefixes(&mut w, &page.common_prefixes, url);
    w.close("ListMultipartUploadsResult");
    w.finish()
}

#[cfg(test)]
#[path = "documents_tests.rs"]
mod tests;
