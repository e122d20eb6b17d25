//! Response documents (and the Tagging request body) of the object
//! operations beyond the basics: CopyObject, UploadPartCopy, tagging,
//! versioning, ACLs and GetObjectAttributes.

use super::documents::{
    checksum_element, common_prefixes, complete_upload_document, encode_name, owner, page_settings,
    quoted,
};
use super::parse::{parse_document, Element};
use super::MalformedXml;
use super::XmlWriter;
use crate::dates::iso8601;
use meta_api::{StoredChecksum, UnixMillis, Versioning, VersionsPage};
use std::collections::BTreeMap;

pub use super::documents::STORAGE_CLASS;
/// Largest Tagging request body accepted (10 tags of 128 + 256 characters fit easily).
pub const TAGGING_BODY_LIMIT: u64 = 64 * 1024;

/// CopyObjectResult: the new object's ETag and modification time.
pub fn copy_object_result(
    etag: &str,
    modified: UnixMillis,
    checksum: Option<&StoredChecksum>,
) -> Vec<u8> {
    copy_result("CopyObjectResult", etag, modified, checksum)
}

/// CopyPartResult of UploadPartCopy.
pub fn copy_part_result(
    etag: &str,
    modified: UnixMillis,
    checksum: Option<&StoredChecksum>,
) -> Vec<u8> {
    copy_result("CopyPartResult", etag, modified, checksum)
}

fn copy_result(
    root: &str,
    etag: &str,
    modified: UnixMillis,
    checksum: Option<&StoredChecksum>,
) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root(root);
    w.element("LastModified", &iso8601(modified));
    w.element("ETag", &quoted(etag));
    if let Some(checksum) = checksum {
        checksum_element(&mut w, checksum);
    }
    w.close(root);
    w.finish()
}

/// CompleteMultipartUploadResult of an object with a checksum: the plain
/// document's elements, then the checksum and its type.
pub fn complete_upload_with_checksum(
    location: &str,
    bucket: &str,
    key: &str,
    etag: &str,
    checksum: &StoredChecksum,
    kind: &str,
) -> Vec<u8> {
    complete_upload_document(location, bucket, key, etag, Some((checksum, kind)))
}

/// Tagging: the tag set of an object or bucket.
pub fn tagging(tags: &BTreeMap<String, String>) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("Tagging");
    w.open("TagSet");
    for (key, value) in tags {
        w.open("Tag");
        w.element("Key", key);
        w.element("Value", value);
        w.close("Tag");
    }
    w.close("TagSet");
    w.close("Tagging");
    w.finish()
}

fn malformed() -> MalformedXml {
    MalformedXml
}

fn only_child<'e>(element: &'e Element, name: &str) -> Result<&'e Element, MalformedXml> {
    let mut found = element.children.iter().filter(|c| c.name == name);
    match (found.next(), found.next()) {
        (Some(one), None) => Ok(one),
        _ => Err(malformed()),
    }
}

/// Reads a Tagging body into (key, value) pairs in document order.
/// Unknown elements are MalformedXML; the tag rules are checked by the caller.
pub fn parse_tagging(bytes: &[u8]) -> Result<Vec<(String, String)>, MalformedXml> {
    let root = parse_document(bytes)?;
    if root.name != "Tagging" {
        return Err(malformed());
    }
    let set = only_child(&root, "TagSet")?;
    let mut out = Vec::with_capacity(set.children.len());
    for tag in &set.children {
        if tag.name != "Tag" || tag.children.len() != 2 {
            return Err(malformed());
        }
        let key = only_child(tag, "Key")?;
        let value = only_child(tag, "Value")?;
        if !key.children.is_empty() || !value.children.is_empty() {
            return Err(malformed());
        }
        out.push((key.text.clone(), value.text.clone()));
    }
    Ok(out)
}

/// A VersioningConfiguration: empty for a bucket that never had versioning.
pub fn versioning_configuration(versioning: Option<Versioning>) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("VersioningConfiguration");
    if let Some(versioning) = versioning {
        w.element("Status", versioning.as_str());
    }
    w.close("VersioningConfiguration");
    w.finish()
}

/// The Status of a PutBucketVersioning body. MFA delete cannot be enabled
/// (there is no MFA device to check), so MfaDelete may only be Disabled.
pub fn parse_versioning_configuration(bytes: &[u8]) -> Result<Versioning, VersioningDocumentError> {
    let root = parse_document(bytes).map_err(|_| VersioningDocumentError::Malformed)?;
    if root.name != "VersioningConfiguration" {
        return Err(VersioningDocumentError::Malformed);
    }
    let mut status = None;
    for child in &root.children {
        if !child.children.is_empty() {
            return Err(VersioningDocumentError::Malformed);
        }
        match (child.name.as_str(), child.text.as_str()) {
            ("Status", "Enabled") if status.is_none() => status = Some(Versioning::Enabled),
            ("Status", "Suspended") if status.is_none() => status = Some(Versioning::Suspended),
            ("MfaDelete", "Disabled") => {}
            ("MfaDelete", "Enabled") => return Err(VersioningDocumentError::MfaDelete),
            _ => return Err(VersioningDocumentError::Malformed),
        }
    }
    status.ok_or(VersioningDocumentError::Malformed)
}

/// Why a PutBucketVersioning body was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum VersioningDocumentError {
    /// Not a VersioningConfiguration with one Status of Enabled or Suspended.
    Malformed,
    /// MfaDelete Enabled.
    MfaDelete,
}

/// What a ListObjectVersions answer shows.
pub struct ListVersionsDoc<'a> {
    /// Bucket name.
    pub bucket: &'a str,
    /// The prefix asked for.
    pub prefix: &'a str,
    /// The key marker asked for.
    pub key_marker: &'a str,
    /// The version id marker asked for.
    pub version_id_marker: &'a str,
    /// The delimiter asked for.
    pub delimiter: Option<&'a str>,
    /// The page size asked for.
    pub max_keys: u32,
    /// Whether keys are URL-encoded.
    pub url_encode: bool,
    /// The bucket owner (the owner of versions that name none).
    pub owner: &'a str,
    /// The versions, delete markers and prefixes.
    pub page: &'a VersionsPage,
}

/// ListVersionsResult.
pub fn list_versions(doc: &ListVersionsDoc<'_>) -> Vec<u8> {
    let url = doc.url_encode;
    let page = doc.page;
    let mut w = XmlWriter::new();
    w.open_root("ListVersionsResult");
    w.element("Name", doc.bucket);
    w.element("Prefix", &encode_name(doc.prefix, url));
    w.element("KeyMarker", &encode_name(doc.key_marker, url));
    w.element("VersionIdMarker", doc.version_id_marker);
    if let Some(next) = &page.next_key_marker {
        w.element("NextKeyMarker", &encode_name(next, url));
    }
    w.optional(
        "NextVersionIdMarker",
        page.next_version_id_marker.as_deref(),
    );
    page_settings(&mut w, doc.max_keys, doc.delimiter, url);
    w.boolean("IsTruncated", page.is_truncated);
    for version in &page.versions {
        let element = if version.version.delete_marker {
            "DeleteMarker"
        } else {
            "Version"
        };
        w.open(element);
        w.element("Key", &encode_name(&version.key, url));
        w.element("VersionId", version.version.id_or_null());
        w.boolean("IsLatest", version.is_latest);
        w.element("LastModified", &iso8601(version.created));
        if !version.version.delete_marker {
            w.element("ETag", &quoted(&version.etag));
            w.number("Size", version.size);
            w.element("StorageClass", STORAGE_CLASS);
        }
        owner(
            &mut w,
            "Owner",
            version.owner.as_deref().unwrap_or(doc.owner),
        );
        w.close(element);
    }
    common_prefixes(&mut w, &page.common_prefixes, url);
    w.close("ListVersionsResult");
    w.finish()
}

/// AccessControlPolicy: the owner holds FULL_CONTROL, and nobody else anything.
pub fn owner_full_control(owner_name: &str) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("AccessControlPolicy");
    owner(&mut w, "Owner", owner_name);
    w.open("AccessControlList");
    w.open("Grant");
    w.open_with_attributes(
        "Grantee",
        &[
            ("xmlns:xsi", "http://www.w3.org/2001/XMLSchema-instance"),
            ("xsi:type", "CanonicalUser"),
        ],
    );
    w.element("ID", &meta_api::canonical_user_id(owner_name));
    w.close("Grantee");
    w.element("Permission", "FULL_CONTROL");
    w.close("Grant");
    w.close("AccessControlList");
    w.close("AccessControlPolicy");
    w.finish()
}

/// One part as GetObjectAttributes shows it.
pub struct AttributePart<'a> {
    /// Part number.
    pub number: u32,
    /// Bytes in the part.
    pub size: u64,
    /// The part's checksum, if it has one.
    pub checksum: Option<&'a StoredChecksum>,
}

/// The ObjectParts section of GetObjectAttributes.
pub struct AttributeParts<'a> {
    /// Parts of the object in all.
    pub total: usize,
    /// The part-number-marker asked for.
    pub marker: u32,
    /// The max-parts asked for.
    pub max_parts: u32,
    /// Whether more parts follow.
    pub is_truncated: bool,
    /// The parts on this page.
    pub parts: Vec<AttributePart<'a>>,
}

/// What GetObjectAttributes answers; each field is None when not asked for.
#[derive(Default)]
pub struct AttributesDoc<'a> {
    /// ETag, unquoted as this operation shows it.
    pub etag: Option<&'a str>,
    /// The object checksum and its type (FULL_OBJECT or COMPOSITE).
    pub checksum: Option<(StoredChecksum, &'a str)>,
    /// The parts of a multipart object.
    pub parts: Option<AttributeParts<'a>>,
    /// Storage class.
    pub storage_class: bool,
    /// Object size.
    pub size: Option<u64>,
}

/// GetObjectAttributesResponse.
pub fn object_attributes(doc: &AttributesDoc<'_>) -> Vec<u8> {
    let mut w = XmlWriter::new();
    w.open_root("GetObjectAttributesResponse");
    w.optional("ETag", doc.etag);
    if let Some((checksum, kind)) = &doc.checksum {
        w.open("Checksum");
        checksum_element(&mut w, checksum);
        w.element("ChecksumType", kind);
        w.close("Checksum");
    }
    if let Some(parts) = &doc.parts {
        w.open("ObjectParts");
        // The wire name; SDKs call it TotalPartsCount.
        w.number("PartsCount", parts.total as u64);
        w.number("PartNumberMarker", u64::from(parts.marker));
        let next = parts.parts.last().map_or(parts.marker, |p| p.number);
        w.number("NextPartNumberMarker", u64::from(next));
        w.number("MaxParts", u64::from(parts.max_parts));
        w.boolean("IsTruncated", parts.is_truncated);
        for part in &parts.parts {
            w.open("Part");
            w.number("PartNumber", u64::from(part.number));
            w.number("Size", part.size);
            if let Some(checksum) = part.checksum {
                checksum_element(&mut w, checksum);
            }
            w.close("Part");
        }
        w.close("ObjectParts");
    }
    if doc.storage_class {
        w.element("StorageClass", STORAGE_CLASS);
    }
    if let Some(size) = doc.size {
        w.number("ObjectSize", size);
    }
    w.close("GetObjectAttributesResponse");
    w.finish()
}

#[cfg(test)]
#[path = "object_documents_tests.rs"]
mod tests;
