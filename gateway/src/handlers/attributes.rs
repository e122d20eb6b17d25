//! GetObjectAttributes: ETag, Checksum, ObjectParts, StorageClass and
//! ObjectSize of an object without its data, chosen by the
//! `x-amz-object-attributes` header.

use super::{xml_response, AuthorizedBucket, RequestContext};
use crate::conditional::{self, Precondition};
use crate::dates::http_date;
use crate::error::{S3Code, S3Error};
use crate::object_checksum::object_checksum;
use crate::params::MAX_PAGE;
use crate::xml::object_documents::{self, AttributePart, AttributeParts, AttributesDoc};
use axum::response::Response;
use http::header::{HeaderValue, LAST_MODIFIED};
use http::HeaderMap;
use meta_api::naming::VersionRef;

/// The attributes a client may ask for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WantedAttributes {
    /// ETag.
    pub etag: bool,
    /// Checksum.
    pub checksum: bool,
    /// ObjectParts.
    pub parts: bool,
    /// StorageClass.
    pub storage_class: bool,
    /// ObjectSize.
    pub size: bool,
}

fn invalid_attribute() -> S3Error {
    S3Error::invalid_argument("Invalid attribute name specified.")
        .detail("ArgumentName", "x-amz-object-attributes")
}

/// Reads `x-amz-object-attributes`; InvalidArgument when empty or unknown.
pub fn wanted_attributes(headers: &HeaderMap) -> Result<WantedAttributes, S3Error> {
    let mut wanted = WantedAttributes::default();
    let mut any = false;
    for value in headers.get_all("x-amz-object-attributes") {
        let text = value.to_str().map_err(|_| invalid_attribute())?;
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            any = true;
            match name {
                "ETag" => wanted.etag = true,
                "Checksum" => wanted.checksum = true,
                "ObjectParts" => wanted.parts = true,
                "StorageClass" => wanted.storage_class = true,
                "ObjectSize" => wanted.size = true,
                _ => return Err(invalid_attribute()),
            }
        }
    }
    if !any {
        return Err(S3Error::with_message(
            S3Code::InvalidRequest,
            "The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty",
        ));
    }
    Ok(wanted)
}

fn header_number(headers: &HeaderMap, name: &'static str, default: u32) -> Result<u32, S3Error> {
    match headers.get(name).map(|v| v.to_str().unwrap_or("")) {
        None => Ok(default),
        Some(raw) => raw.trim().parse::<u32>().map_err(|_| {
            S3Error::invalid_argument(format!("Invalid {name} value"))
                .detail("ArgumentName", name)
                .detail("ArgumentValue", raw.to_string())
        }),
    }
}

/// GetObjectAttributes.
pub async fn get_object_attributes(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: &str,
    version: Option<VersionRef>,
) -> Result<Response, S3Error> {
    let headers = &ctx.parts.headers;
    let wanted = wanted_attributes(headers)?;
    let max_parts = header_number(headers, "x-amz-max-parts", MAX_PAGE)?.min(MAX_PAGE);
    let marker = header_number(headers, "x-amz-part-number-marker", 0)?;
    let record = ctx.authorized_object(bucket, key, version.as_ref()).await?;
    // An SSE-C object tells its attributes only to a holder of its key.
    crate::encryption::BodyKey::of(&record, headers, crate::encryption::KeyFor::Object)?;
    match conditional::evaluate(headers, &record.etag, record.created) {
        Precondition::Proceed => {}
        Precondition::NotModified | Precondition::Failed => {
            return Err(S3Error::new(S3Code::PreconditionFailed))
        }
    }
    let checksum = wanted.checksum.then(|| object_checksum(&record)).flatten();
    let parts = (wanted.parts && !record.parts.is_empty()).then(|| {
        let after: Vec<_> = record.parts.iter().filter(|p| p.number > marker).collect();
        let is_truncated = after.len() > max_parts as usize;
        AttributeParts {
            total: record.parts.len(),
            marker,
            max_parts,
            is_truncated,
            parts: after
                .into_iter()
                .take(max_parts as usize)
                .map(|p| AttributePart {
                    number: p.number,
                    size: p.size,
                    checksum: p.checksum.as_ref(),
                })
                .collect(),
        }
    });
    let document = object_documents::object_attributes(&AttributesDoc {
        etag: wanted.etag.then_some(record.etag.as_str()),
        checksum,
        parts,
        storage_class: wanted.storage_class,
        size: wanted.size.then_some(record.size),
    });
    let mut response = xml_response(document);
    if let Ok(value) = HeaderValue::from_str(&http_date(record.created)) {
        response.headers_mut().insert(LAST_MODIFIED, value);
    }
    super::versions::insert_version_id(response.headers_mut(), bucket, &record.version);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_names_are_checked() {
        let mut headers = HeaderMap::new();
        assert_eq!(
            wanted_attributes(&headers).unwrap_err().code(),
            S3Code::InvalidRequest
        );
        headers.insert(
            "x-amz-object-attributes",
            HeaderValue::from_static("ETag, ObjectSize"),
        );
        let wanted = wanted_attributes(&headers).unwrap();
        assert!(wanted.etag && wanted.size && !wanted.parts && !wanted.checksum);
        headers.insert(
            "x-amz-object-attributes",
            HeaderValue::from_static("ETag,Bogus"),
        );
        assert_eq!(
            wanted_attributes(&headers).unwrap_err().code(),
            S3Code::InvalidArgument
        );
    }
}
