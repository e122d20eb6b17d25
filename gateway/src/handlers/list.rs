//! Object listings: ListObjectsV2 and ListObjects (v1). Meta pages and rolls
//! up common prefixes; this file turns pages into S3's markers and tokens.

use super::{xml_response, AuthorizedBucket, RequestContext};
use crate::error::S3Error;
use crate::params::{continuation_token, ListV1Params, ListV2Params};
use crate::xml::documents::{self, ListV1Doc, ListV2Doc};
use axum::response::Response;
use meta_api::ListPage;

/// Where the page after `page` starts: meta's marker, else the greatest key
/// or common prefix returned.
pub(super) fn next_marker(page: &ListPage) -> Option<String> {
    if !page.is_truncated {
        return None;
    }
    if let Some(marker) = &page.next_marker {
        return Some(marker.clone());
    }
    let last_key = page.objects.last().map(|o| o.key.as_str());
    let last_prefix = page.common_prefixes.last().map(String::as_str);
    last_key.max(last_prefix).map(str::to_string)
}

/// One page of `bucket` from meta; max-keys=0 asks nothing of meta.
pub(super) async fn page(
    ctx: &RequestContext<'_>,
    bucket: &str,
    prefix: &str,
    start_after: Option<String>,
    delimiter: Option<String>,
    max_keys: u32,
) -> Result<ListPage, S3Error> {
    // max-keys=0 answers an empty, complete page, as S3 does.
    if max_keys == 0 {
        return Ok(ListPage::default());
    }
    Ok(ctx
        .state
        .meta
        .call(meta_api::ListObjects {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            start_after,
            delimiter,
            max_keys,
        })
        .await?)
}

/// ListObjectsV2: continuation tokens are the opaque base64 of the next marker.
pub async fn list_objects_v2(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    params: ListV2Params,
) -> Result<Response, S3Error> {
    let listing = page(
        ctx,
        &bucket.name,
        &params.prefix,
        params.resume_after.clone(),
        params.delimiter.clone(),
        params.max_keys,
    )
    .await?;
    let next_token = next_marker(&listing).map(|m| continuation_token(&m));
    let document = documents::list_objects_v2(&ListV2Doc {
        bucket: &bucket.name,
        prefix: &params.prefix,
        delimiter: params.delimiter.as_deref(),
        max_keys: params.max_keys,
        url_encode: params.url_encode,
        continuation_token: params.continuation_token.as_deref(),
        next_continuation_token: next_token.as_deref(),
        start_after: params.start_after.as_deref(),
        owner: params.fetch_owner.then_some(bucket.owner.as_str()),
        page: &listing,
    });
    Ok(xml_response(document))
}

/// ListObjects (v1): `marker` to resume; NextMarker only with a delimiter, as in S3.
pub async fn list_objects_v1(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    params: ListV1Params,
) -> Result<Response, S3Error> {
    let listing = page(
        ctx,
        &bucket.name,
        &params.prefix,
        params.marker.clone(),
        params.delimiter.clone(),
        params.max_keys,
    )
    .await?;
    let next = params
        .delimiter
        .as_ref()
        .and_then(|_| next_marker(&listing));
    let document = documents::list_objects_v1(&ListV1Doc {
        bucket: &bucket.name,
        prefix: &params.prefix,
        marker: params.marker.as_deref().unwrap_or(""),
        delimiter: params.delimiter.as_deref(),
        max_keys: params.max_keys,
        url_encode: params.url_encode,
        next_marker: next.as_deref(),
        owner: &bucket.owner,
        page: &listing,
    });
    Ok(xml_response(document))
}

#[cfg(test)]
mod tests {
    use super::*;
    use meta_api::ObjectSummary;

    fn summary(key: &str) -> ObjectSummary {
        ObjectSummary {
            key: key.into(),
            size: 0,
            etag: String::new(),
            created: 0,
        }
    }

    #[test]
    fn next_marker_prefers_meta_then_the_greatest_entry() {
        let mut page = ListPage {
            objects: vec![summary("a"), summary("c")],
            common_prefixes: vec!["b/".into()],
            is_truncated: false,
            next_marker: None,
        };
        assert_eq!(next_marker(&page), None);
        page.is_truncated = true;
        assert_eq!(next_marker(&page).as_deref(), Some("c"));
        page.common_prefixes = vec!["d/".into()];
        assert_eq!(next_marker(&page).as_deref(), Some("d/"));
        page.next_marker = Some("m".into());
        assert_eq!(next_marker(&page).as_deref(), Some("m"));
    }
}
