//! Versions of an unversioned bucket, as S3 answers them: versioning was
//! never enabled (an empty VersioningConfiguration), and each object is its
//! one version, `null`, which is the latest. Enabling versioning is not
//! offered.

use super::list::{next_marker, page};
use super::{xml_response, AuthorizedBucket, RequestContext};
use crate::error::S3Error;
use crate::params::ListVersionsParams;
use crate::xml::object_documents::{self, ListVersionsDoc};
use axum::response::Response;

/// GetBucketVersioning: a bucket that never had versioning.
pub fn get_bucket_versioning() -> Response {
    xml_response(object_documents::versioning_configuration())
}

/// PutBucketVersioning: Tessera keeps one version per key.
pub fn put_bucket_versioning() -> Result<Response, S3Error> {
    Err(S3Error::not_implemented(
        "PutBucketVersioning (Tessera keeps one version per key)",
    ))
}

/// ListObjectVersions: the objects as their `null` versions. Since a key has
/// one version, the page after (key-marker, version-id-marker) starts after
/// the key-marker whatever the version marker says.
pub async fn list_object_versions(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    params: ListVersionsParams,
) -> Result<Response, S3Error> {
    let page = page(
        ctx,
        &bucket.name,
        &params.prefix,
        params.key_marker.clone(),
        params.delimiter.clone(),
        params.max_keys,
    )
    .await?;
    let next = next_marker(&page);
    Ok(xml_response(object_documents::list_versions(
        &ListVersionsDoc {
            bucket: &bucket.name,
            prefix: &params.prefix,
            key_marker: params.key_marker.as_deref().unwrap_or(""),
            version_id_marker: params.version_id_marker.as_deref().unwrap_or(""),
            delimiter: params.delimiter.as_deref(),
            max_keys: params.max_keys,
            url_encode: params.url_encode,
            next_key_marker: next.as_deref(),
            owner: &bucket.owner,
            page: &page,
        },
    )))
}
