//! PostObject: an HTML form upload (`multipart/form-data`). The fields before
//! the `file` part are read (small, bounded), the policy's SigV4 signature and
//! conditions are checked, and only then is the file part streamed into the
//! store, its length held to the policy's `content-length-range` as it flows.

use super::acl::written_access;
use super::versions::insert_new_version_id;
use super::{empty_response, RequestContext};
use crate::auth::{verify_post_form, PostPolicy, VerifiedRequest};
use crate::encryption::{self, NewEncryption};
use crate::error::{S3Code, S3Error};
use crate::headers::{etag_value, ObjectMetadata};
use crate::request_body::{commit_or_discard, MAX_OBJECT_UPLOAD};
use crate::router::MAX_KEY_LEN;
use crate::tags::{validate_tags, MAX_OBJECT_TAGS};
use crate::telemetry::count_bytes_in;
use crate::xml::object_documents::parse_tagging;
use crate::xml::XmlWriter;
use access::Action;
use axum::body::Body;
use axum::response::Response;
use block_client::KeyWriter;
use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, ETAG, LOCATION};
use http::StatusCode;
use md5::{Digest, Md5};
use meta_api::now_millis;
use meta_api::{BucketRecord, ObjectAttributes, ObjectRecord};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use proto::ObjectId;
use sse::Sealer;
use std::collections::BTreeMap;
use std::time::SystemTime;

/// Bytes escaped in the redirect's query values: all but RFC 3986 unreserved.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
/// Largest form field other than the file (S3 caps the fields at 20 KB).
const MAX_FIELD_BYTES: u64 = 20 * 1024;
/// Most fields before the file part.
const MAX_FIELDS: usize = 64;

fn malformed() -> S3Error {
    S3Error::new(S3Code::MalformedPOSTRequest)
}

fn form_error(e: multer::Error) -> S3Error {
    match e {
        multer::Error::FieldSizeExceeded { .. } | multer::Error::StreamSizeExceeded { .. } => {
            S3Error::with_message(
                S3Code::MaxMessageLengthExceeded,
                "Your POST request fields preceding the upload file were too large.",
            )
        }
        other => {
            tracing::debug!(error = %other, "malformed form upload");
            malformed()
        }
    }
}

/// The form fields stored as object headers: Content-Type and the other
/// standard headers, and `x-amz-meta-*`.
fn metadata_of(fields: &BTreeMap<String, String>) -> Result<ObjectMetadata, S3Error> {
    let mut headers = HeaderMap::new();
    for (name, value) in fields {
        let stored = matches!(
            name.as_str(),
            "content-type"
                | "cache-control"
                | "content-disposition"
                | "content-encoding"
                | "content-language"
                | "expires"
        ) || name.starts_with("x-amz-meta-");
        if !stored {
            continue;
        }
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| malformed())?;
        let value = HeaderValue::from_str(value).map_err(|_| malformed())?;
        headers.insert(name, value);
    }
    ObjectMetadata::from_request(&headers)
}

/// Streams the file part into `writer`, keeping its size within `range`.
async fn store_file(
    field: &mut multer::Field<'_>,
    writer: &mut KeyWriter,
    hasher: &mut Md5,
    mut sealer: Option<Sealer>,
    range: (u64, u64),
) -> Result<u64, S3Error> {
    let mut size = 0u64;
    while let Some(chunk) = field.chunk().await.map_err(form_error)? {
        count_bytes_in(chunk.len());
        size += chunk.len() as u64;
        if size > range.1 {
            return Err(S3Error::with_message(
                S3Code::EntityTooLarge,
                "Your proposed upload exceeds the maximum allowed size",
            )
            .detail("MaxSizeAllowed", range.1.to_string()));
        }
        hasher.update(&chunk);
        match sealer.as_mut() {
            None => writer.write(Bytes::clone(&chunk)).await?,
            Some(sealer) => {
                for package in sealer.push(&chunk) {
                    writer.write(package).await?;
                }
            }
        }
    }
    if let Some(last) = sealer.and_then(Sealer::finish) {
        writer.write(last).await?;
    }
    if size < range.0 {
        return Err(S3Error::with_message(
            S3Code::EntityTooSmall,
            "Your proposed upload is smaller than the minimum allowed size",
        )
        .detail("MinSizeAllowed", range.0.to_string()));
    }
    Ok(size)
}

/// The form's encryption fields, as the headers of a PUT would carry them;
/// a value no header could carry is refused, never dropped.
/// The object's tags from the form's `tagging` field, a Tagging XML
/// document as PutObjectTagging takes.
fn tags_of(fields: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, S3Error> {
    let Some(document) = fields.get("tagging") else {
        return Ok(BTreeMap::new());
    };
    let pairs = parse_tagging(document.as_bytes())?;
    validate_tags(pairs, MAX_OBJECT_TAGS)
}

fn encryption_fields(fields: &BTreeMap<String, String>) -> Result<HeaderMap, S3Error> {
    fields
        .iter()
        .filter(|(name, _)| name.starts_with(encryption::SSE_HEADER))
        .map(|(name, value)| {
            match (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                (Ok(name), Ok(value)) => Ok((name, value)),
                _ => Err(
                    S3Error::invalid_argument("The encryption field is not valid.")
                        .detail("ArgumentName", name.clone()),
                ),
            }
        })
        .collect()
}

/// The success answer the form asked for: a 303 redirect, or status 200, 201
/// (with a PostResponse document) or 204 (the default).
fn success_response(
    fields: &BTreeMap<String, String>,
    bucket: &str,
    key: &str,
    etag: &str,
) -> Response {
    let location = format!("/{bucket}/{}", key);
    if let Some(redirect) = fields
        .get("success_action_redirect")
        .or_else(|| fields.get("redirect"))
        .filter(|r| !r.is_empty())
    {
        let encode = |s: &str| utf8_percent_encode(s, QUERY_VALUE).to_string();
        let separator = if redirect.contains('?') { '&' } else { '?' };
        let target = format!(
            "{redirect}{separator}bucket={}&key={}&etag={}",
            encode(bucket),
            encode(key),
            encode(&format!("\"{etag}\""))
        );
        if let Ok(value) = HeaderValue::from_str(&target) {
            let mut response = empty_response(StatusCode::SEE_OTHER);
            response.headers_mut().insert(LOCATION, value);
            response.headers_mut().insert(ETAG, etag_value(etag));
            return response;
        }
    }
    let mut response = match fields.get("success_action_status").map(String::as_str) {
        Some("200") => empty_response(StatusCode::OK),
        Some("201") => {
            let mut w = XmlWriter::new();
            w.open("PostResponse");
            w.element("Location", &location);
            w.element("Bucket", bucket);
            w.element("Key", key);
            w.element("ETag", &format!("\"{etag}\""));
            w.close("PostResponse");
            let mut response = Response::new(Body::from(w.finish()));
            *response.status_mut() = StatusCode::CREATED;
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/xml"));
            response
        }
        _ => empty_response(StatusCode::NO_CONTENT),
    };
    response.headers_mut().insert(ETAG, etag_value(etag));
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(LOCATION, value);
    }
    response
}

/// PostObject: form fields, policy check, then the file streamed into the store.
pub async fn post_object(
    ctx: &RequestContext<'_>,
    bucket: &BucketRecord,
    body: Body,
) -> Result<Response, S3Error> {
    let content_type = ctx
        .parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let boundary = multer::parse_boundary(content_type).map_err(|_| malformed())?;
    let limits = multer::SizeLimit::new()
        .per_field(MAX_FIELD_BYTES)
        .for_field("file", MAX_OBJECT_UPLOAD)
        .for_field("File", MAX_OBJECT_UPLOAD);
    let mut form = multer::Multipart::with_constraints(
        body.into_data_stream(),
        boundary,
        multer::Constraints::new().size_limit(limits),
    );
    let mut fields: BTreeMap<String, String> = BTreeMap::new();
    let (mut file, filename) = loop {
        let field = form
            .next_field()
            .await
            .map_err(form_error)?
            .ok_or_else(|| {
                S3Error::invalid_argument("POST requires exactly one file upload per request.")
                    .detail("ArgumentName", "file")
            })?;
        let name = field.name().unwrap_or_default().to_ascii_lowercase();
        if name == "file" {
            let filename = field.file_name().unwrap_or_default().to_string();
            break (field, filename);
        }
        if fields.len() >= MAX_FIELDS {
            return Err(form_error(multer::Error::StreamSizeExceeded { limit: 0 }));
        }
        let value = field.text().await.map_err(form_error)?;
        fields.insert(name, value);
    };
    let key = fields
        .get("key")
        .map(|k| k.replace("${filename}", &filename))
        .filter(|k| !k.is_empty())
        .ok_or_else(|| {
            S3Error::invalid_argument(
                "Bucket POST must contain a field named 'key'.  If it is specified, please \
                 check the order of the fields.",
            )
            .detail("ArgumentName", "key")
        })?;
    if key.len() > MAX_KEY_LEN {
        return Err(S3Error::new(S3Code::KeyTooLongError)
            .detail("Size", key.len().to_string())
            .detail("MaxSizeAllowed", MAX_KEY_LEN.to_string()));
    }
    fields.insert("key".to_string(), key.clone());
    fields.insert("bucket".to_string(), bucket.name.clone());
    let meta = &ctx.state.meta;
    let (policy, identity) = verify_post_form(
        &fields,
        &ctx.state.credentials,
        &ctx.state.config.realm(),
        SystemTime::now(),
    )
    .await?;
    // Judged as a PutObject by whoever signed the form (or by no one): the
    // bucket's owner, ACL and policy, the user's policy and the key's limits.
    let writer = RequestContext {
        state: ctx.state,
        parts: ctx.parts,
        request: VerifiedRequest::of_form(identity),
    };
    if !writer.allowed(Action::PutObject, bucket, None, Some(&key))? {
        return Err(S3Error::new(S3Code::AccessDenied));
    }
    let access = written_access(&writer, bucket, fields.get("acl").map(String::as_str))?;
    let tags = tags_of(&fields)?;
    let metadata = metadata_of(&fields)?;
    let encryption_fields = encryption_fields(&fields)?;
    encryption::refuse_keys_in_clear(
        &encryption_fields,
        &ctx.parts.extensions,
        ctx.state.config.sse_c_over_http,
    )?;
    let encryption = NewEncryption::prepare(
        encryption::for_write(&encryption_fields, bucket)?,
        meta,
        &ctx.state.config.region,
    )
    .await?;
    let range = policy
        .as_ref()
        .and_then(PostPolicy::length_range)
        .unwrap_or((0, MAX_OBJECT_UPLOAD));
    let replication = meta
        .call(meta_api::DefaultReplication {
            bucket: bucket.name.to_string(),
        })
        .await?;
    // A form's file has no declared length: it stays in memory while it
    // fits a record, and goes to blocks once longer.
    let mut writer = ctx
        .state
        .store
        .small_object_writer(replication, ctx.state.config.inline_max);
    let mut hasher = Md5::new();
    let sealer = encryption.as_ref().map(NewEncryption::sealer);
    let size = match store_file(&mut file, &mut writer, &mut hasher, sealer, range).await {
        Ok(size) => size,
        Err(e) => {
            writer.abort().await;
            return Err(e);
        }
    };
    let written = writer.finish().await?;
    let md5 = hex::encode(hasher.finalize());
    let etag = match &encryption {
        Some(encryption) => encryption.etag(&md5),
        None => md5,
    };
    let groups = written.groups.clone();
    let record = ObjectRecord {
        id: ObjectId::random(),
        bucket: bucket.name.clone(),
        key: key.clone(),
        size,
        etag: etag.clone(),
        content_type: metadata.content_type,
        headers: metadata.headers,
        user_metadata: metadata.user_metadata,
        created: now_millis(),
        replication: written.replication,
        groups: written.groups,
        inline: written.inline.map(meta_api::InlineBody),
        parts: vec![],
        attributes: ObjectAttributes {
            owner: access.owner,
            acl: access.acl,
            tags,
            encryption: encryption.as_ref().map(NewEncryption::for_commit),
            ..Default::default()
        },
        version: Default::default(),
    };
    let stamp = commit_or_discard(
        meta,
        groups,
        meta.call(meta_api::CommitObject {
            record,
            condition: None,
        }),
    )
    .await?;
    let mut response = success_response(&fields, &bucket.name, &key, &etag);
    insert_new_version_id(response.headers_mut(), &stamp);
    let attributes = ObjectAttributes {
        encryption: encryption.as_ref().map(NewEncryption::for_commit),
        ..Default::default()
    };
    encryption::insert_headers(response.headers_mut(), &attributes);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn success_status_follows_the_form() {
        let none = success_response(&fields(&[]), "b", "k", "abc");
        assert_eq!(none.status(), StatusCode::NO_CONTENT);
        assert_eq!(none.headers()[ETAG], "\"abc\"");
        let ok = success_response(&fields(&[("success_action_status", "200")]), "b", "k", "e");
        assert_eq!(ok.status(), StatusCode::OK);
        let created = success_response(&fields(&[("success_action_status", "201")]), "b", "k", "e");
        assert_eq!(created.status(), StatusCode::CREATED);
        let redirect = success_response(
            &fields(&[("success_action_redirect", "http://h/done?x=1")]),
            "b",
            "a b",
            "e",
        );
        assert_eq!(redirect.status(), StatusCode::SEE_OTHER);
        assert_eq!(
            redirect.headers()[LOCATION],
            "http://h/done?x=1&bucket=b&key=a%20b&etag=%22e%22"
        );
    }

    #[test]
    fn encryption_fields_are_taken_whole_or_refused() {
        let taken = encryption_fields(&fields(&[
            ("x-amz-server-side-encryption", "AES256"),
            ("key", "k"),
        ]))
        .unwrap();
        assert_eq!(taken.len(), 1);
        assert_eq!(taken["x-amz-server-side-encryption"], "AES256");
        let refused = encryption_fields(&fields(&[("x-amz-server-side-encryption", "AES256\n")]));
        assert_eq!(refused.unwrap_err().code(), S3Code::InvalidArgument);
    }

    #[test]
    fn tags_come_from_the_tagging_field() {
        assert!(tags_of(&fields(&[])).unwrap().is_empty());
        let document =
            "<Tagging><TagSet><Tag><Key>0</Key><Value>1</Value></Tag></TagSet></Tagging>";
        let tags = tags_of(&fields(&[("tagging", document)])).unwrap();
        assert_eq!(tags.get("0").map(String::as_str), Some("1"));
        assert!(tags_of(&fields(&[("tagging", "<Tagging>")])).is_err());
    }

    #[test]
    fn metadata_comes_from_content_type_and_meta_fields() {
        let metadata = metadata_of(&fields(&[
            ("content-type", "image/png"),
            ("x-amz-meta-uuid", "14365123651274"),
            ("policy", "ignored"),
        ]))
        .unwrap();
        assert_eq!(metadata.content_type.as_deref(), Some("image/png"));
        assert_eq!(metadata.user_metadata["uuid"], "14365123651274");
    }
}
