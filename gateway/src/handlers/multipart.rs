//! Multipart uploads: CreateMultipartUpload, UploadPart,
//! CompleteMultipartUpload, AbortMultipartUpload, ListParts,
//! ListMultipartUploads.

use super::object::{chosen_replication, store_request_body};
use super::{empty_response, xml_response, RequestContext};
use crate::dates::now_millis;
use crate::error::S3Error;
use crate::headers::{etag_value, ObjectMetadata};
use crate::params::{ListPartsParams, ListUploadsParams};
use crate::request_body::{commit_or_discard, read_small_body};
use crate::xml::documents::{self, ListPartsDoc, ListUploadsDoc};
use crate::xml::parse::{parse_complete_upload, COMPLETE_UPLOAD_BODY_LIMIT};
use axum::body::Body;
use axum::response::Response;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use blockstore::meta::{BucketRecord, PartRecord, UploadRecord};
use http::header::{ETAG, HOST};
use http::StatusCode;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use rand::RngCore;

/// A fresh upload id: 32 URL-safe characters, unguessable.
fn new_upload_id() -> String {
    let mut bytes = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// CreateMultipartUpload: records the upload with the object's future
/// metadata and replication.
pub async fn create_upload(
    ctx: &RequestContext<'_>,
    bucket: &BucketRecord,
    key: String,
) -> Result<Response, S3Error> {
    let metadata = ObjectMetadata::from_request(&ctx.parts.headers)?;
    let replication = chosen_replication(ctx, bucket).await?;
    let record = UploadRecord {
        upload_id: new_upload_id(),
        bucket: bucket.name.clone(),
        key,
        owner: ctx.identity().user.clone(),
        created: now_millis(),
        content_type: metadata.content_type,
        headers: metadata.headers,
        user_metadata: metadata.user_metadata,
        replication,
    };
    let document = documents::initiate_upload(&record.bucket, &record.key, &record.upload_id);
    ctx.state.meta.create_upload(record).await?;
    Ok(xml_response(document))
}

async fn existing_upload(
    ctx: &RequestContext<'_>,
    bucket: &BucketRecord,
    key: &str,
    upload_id: &str,
) -> Result<UploadRecord, S3Error> {
    ctx.state
        .meta
        .get_upload(&bucket.name, key, upload_id)
        .await?
        .ok_or_else(|| S3Error::no_such_upload(upload_id))
}

/// UploadPart: stores the part with the upload's replication; a re-upload of
/// the same number replaces it.
pub async fn upload_part(
    ctx: &RequestContext<'_>,
    bucket: &BucketRecord,
    key: &str,
    upload_id: &str,
    part_number: u32,
    body: Body,
) -> Result<Response, S3Error> {
    let upload = existing_upload(ctx, bucket, key, upload_id).await?;
    let stored = store_request_body(ctx, upload.replication, body).await?;
    let groups = stored.written.groups.clone();
    let etag = etag_value(&stored.etag);
    let part = PartRecord {
        upload_id: upload.upload_id,
        number: part_number,
        size: stored.written.size,
        etag: stored.etag,
        created: now_millis(),
        groups: stored.written.groups,
    };
    let meta = &ctx.state.meta;
    commit_or_discard(meta, groups, meta.commit_part(part)).await?;
    let mut response = empty_response(StatusCode::OK);
    response.headers_mut().insert(ETAG, etag);
    Ok(response)
}

/// Characters escaped in the key of the Location URL.
const LOCATION_KEY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// CompleteMultipartUpload: meta checks the parts (InvalidPart,
/// InvalidPartOrder, EntityTooSmall) and commits the object.
pub async fn complete_upload(
    ctx: &RequestContext<'_>,
    bucket: &BucketRecord,
    key: &str,
    upload_id: &str,
    body: Body,
) -> Result<Response, S3Error> {
    let document = read_small_body(
        &ctx.request,
        &ctx.parts.headers,
        body,
        COMPLETE_UPLOAD_BODY_LIMIT,
    )
    .await?;
    let parts = parse_complete_upload(&document)?;
    let object = ctx
        .state
        .meta
        .complete_upload(&bucket.name, key, upload_id, parts)
        .await?;
    let host = ctx
        .parts
        .headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let location = format!(
        "http://{host}/{}/{}",
        bucket.name,
        utf8_percent_encode(key, LOCATION_KEY)
    );
    Ok(xml_response(documents::complete_upload(
        &location,
        &bucket.name,
        key,
        &object.etag,
    )))
}

/// AbortMultipartUpload: 204; the parts' blocks are freed by meta.
pub async fn abort_upload(
    ctx: &RequestContext<'_>,
    bucket: &BucketRecord,
    key: &str,
    upload_id: &str,
) -> Result<Response, S3Error> {
    ctx.state
        .meta
        .abort_upload(&bucket.name, key, upload_id)
        .await?;
    Ok(empty_response(StatusCode::NO_CONTENT))
}

/// ListParts: pages by part-number-marker and max-parts.
pub async fn list_parts(
    ctx: &RequestContext<'_>,
    bucket: &BucketRecord,
    key: &str,
    upload_id: &str,
    params: ListPartsParams,
) -> Result<Response, S3Error> {
    let upload = existing_upload(ctx, bucket, key, upload_id).await?;
    let (parts, is_truncated) = if params.max_parts == 0 {
        (Vec::new(), false)
    } else {
        ctx.state
            .meta
            .list_parts(upload_id, params.part_number_marker, params.max_parts)
            .await?
    };
    Ok(xml_response(documents::list_parts(&ListPartsDoc {
        upload: &upload,
        part_number_marker: params.part_number_marker,
        max_parts: params.max_parts,
        is_truncated,
        parts: &parts,
    })))
}

/// The page of `uploads` after the markers, in key then initiation order.
fn page_uploads(
    mut uploads: Vec<UploadRecord>,
    params: &ListUploadsParams,
) -> (Vec<UploadRecord>, bool) {
    uploads.retain(|u| u.key.starts_with(&params.prefix));
    uploads
        .sort_by(|a, b| (&a.key, a.created, &a.upload_id).cmp(&(&b.key, b.created, &b.upload_id)));
    if let Some(key_marker) = &params.key_marker {
        let after_id = params.upload_id_marker.as_ref().and_then(|id| {
            uploads
                .iter()
                .position(|u| &u.key == key_marker && &u.upload_id == id)
        });
        match after_id {
            Some(index) => {
                uploads.drain(..=index);
            }
            None => uploads.retain(|u| &u.key > key_marker),
        }
    }
    let is_truncated = uploads.len() > params.max_uploads as usize;
    uploads.truncate(params.max_uploads as usize);
    (uploads, is_truncated)
}

/// ListMultipartUploads: uploads in progress in the bucket (no delimiter roll-up).
pub async fn list_uploads(
    ctx: &RequestContext<'_>,
    bucket: &BucketRecord,
    params: ListUploadsParams,
) -> Result<Response, S3Error> {
    let all = ctx.state.meta.list_uploads(&bucket.name).await?;
    let (uploads, is_truncated) = page_uploads(all, &params);
    Ok(xml_response(documents::list_uploads(&ListUploadsDoc {
        bucket: &bucket.name,
        prefix: &params.prefix,
        key_marker: params.key_marker.as_deref().unwrap_or(""),
        upload_id_marker: params.upload_id_marker.as_deref().unwrap_or(""),
        max_uploads: params.max_uploads,
        url_encode: params.url_encode,
        is_truncated,
        uploads: &uploads,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use blockstore::ReplicationConfig;

    fn upload(key: &str, id: &str, created: i64) -> UploadRecord {
        UploadRecord {
            upload_id: id.into(),
            bucket: "b".into(),
            key: key.into(),
            owner: "u".into(),
            created,
            content_type: None,
            headers: Default::default(),
            user_metadata: Default::default(),
            replication: ReplicationConfig::REPLICATED_1,
        }
    }

    fn params(prefix: &str, key: Option<&str>, id: Option<&str>, max: u32) -> ListUploadsParams {
        ListUploadsParams {
            prefix: prefix.into(),
            key_marker: key.map(Into::into),
            upload_id_marker: id.map(Into::into),
            max_uploads: max,
            url_encode: false,
        }
    }

    fn ids(page: &(Vec<UploadRecord>, bool)) -> Vec<&str> {
        page.0.iter().map(|u| u.upload_id.as_str()).collect()
    }

    #[test]
    fn uploads_page_by_key_then_upload_markers() {
        let all = vec![
            upload("b", "3", 3),
            upload("a", "2", 2),
            upload("a", "1", 1),
            upload("c", "4", 0),
        ];
        let page = page_uploads(all.clone(), &params("", None, None, 1000));
        assert_eq!(ids(&page), ["1", "2", "3", "4"]);
        assert!(!page.1);
        let page = page_uploads(all.clone(), &params("", None, None, 2));
        assert_eq!((ids(&page), page.1), (vec!["1", "2"], true));
        let page = page_uploads(all.clone(), &params("", Some("a"), None, 1000));
        assert_eq!(ids(&page), ["3", "4"]);
        let page = page_uploads(all.clone(), &params("", Some("a"), Some("1"), 1000));
        assert_eq!(ids(&page), ["2", "3", "4"]);
        let page = page_uploads(all, &params("b", None, None, 1000));
        assert_eq!(ids(&page), ["3"]);
    }

    #[test]
    fn upload_ids_are_random_and_url_safe() {
        let a = new_upload_id();
        assert_eq!(a.len(), 32);
        assert!(a
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_ne!(a, new_upload_id());
    }
}
