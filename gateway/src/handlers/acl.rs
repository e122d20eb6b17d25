//! ACLs as Tessera has them: the owner holds FULL_CONTROL and nobody else
//! anything. GetBucketAcl/GetObjectAcl say so; a request that asks for
//! exactly that (canned `private`, or a policy granting only the owner
//! FULL_CONTROL) is accepted, and any other grant is NotImplemented.

use super::{empty_response, xml_response, AuthorizedBucket, RequestContext};
use crate::error::S3Error;
use crate::request_body::read_small_body;
use crate::xml::object_documents;
use crate::xml::parse::{parse_document, Element};
use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use meta_api::BucketRecord;

/// The canned ACL header.
pub const CANNED_ACL_HEADER: &str = "x-amz-acl";
/// Largest AccessControlPolicy body read.
const ACL_BODY_LIMIT: u64 = 64 * 1024;

/// Accepts a request's ACL headers when they ask for nothing but the owner's
/// FULL_CONTROL: `x-amz-acl: private` (or none) and no `x-amz-grant-*`.
pub fn check_acl_headers(headers: &HeaderMap) -> Result<(), S3Error> {
    if let Some(value) = headers.get(CANNED_ACL_HEADER) {
        let canned = value.to_str().unwrap_or("");
        if canned != "private" {
            return Err(S3Error::not_implemented(&format!(
                "canned ACL {canned} (only private is supported)"
            )));
        }
    }
    if let Some((name, _)) = headers
        .iter()
        .find(|(name, _)| name.as_str().starts_with("x-amz-grant-"))
    {
        return Err(S3Error::not_implemented(&format!(
            "ACL grant header {name}"
        )));
    }
    Ok(())
}

/// Whether an AccessControlPolicy grants only FULL_CONTROL to `owner`.
fn grants_only_owner(policy: &Element, owner: &str) -> bool {
    let Some(list) = policy
        .children
        .iter()
        .find(|c| c.name == "AccessControlList")
    else {
        return false;
    };
    list.children.iter().all(|grant| {
        let permission = grant
            .children
            .iter()
            .find(|c| c.name == "Permission")
            .map(|p| p.text.trim());
        let grantee_id = grant
            .children
            .iter()
            .find(|c| c.name == "Grantee")
            .and_then(|g| g.children.iter().find(|c| c.name == "ID"))
            .map(|id| id.text.trim());
        grant.name == "Grant" && permission == Some("FULL_CONTROL") && grantee_id == Some(owner)
    })
}

/// GetBucketAcl and GetObjectAcl (the object must exist).
pub async fn get_acl(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: Option<&str>,
) -> Result<Response, S3Error> {
    require_object(ctx, bucket, key).await?;
    Ok(xml_response(object_documents::owner_full_control(
        &bucket.owner,
    )))
}

/// PutBucketAcl and PutObjectAcl: 200 when the ACL asked for is the one
/// every bucket and object has.
pub async fn put_acl(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: Option<&str>,
    body: Body,
) -> Result<Response, S3Error> {
    let headers = &ctx.parts.headers;
    check_acl_headers(headers)?;
    let document = read_small_body(&ctx.request, headers, body, ACL_BODY_LIMIT).await?;
    if !document.is_empty() {
        let policy = parse_document(&document)?;
        if policy.name != "AccessControlPolicy"
            || !grants_only_owner(&policy, &meta_api::canonical_user_id(&bucket.owner))
        {
            return Err(S3Error::not_implemented(
                "ACL grants other than the owner's FULL_CONTROL",
            ));
        }
    }
    require_object(ctx, bucket, key).await?;
    Ok(empty_response(StatusCode::OK))
}

/// NoSuchKey unless `key` (when the ACL is an object's) exists.
async fn require_object(
    ctx: &RequestContext<'_>,
    bucket: &BucketRecord,
    key: Option<&str>,
) -> Result<(), S3Error> {
    if let Some(key) = key {
        ctx.existing_object(&bucket.name, key).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::S3Code;
    use http::HeaderValue;

    #[test]
    fn only_private_is_accepted() {
        let mut headers = HeaderMap::new();
        assert!(check_acl_headers(&headers).is_ok());
        headers.insert(CANNED_ACL_HEADER, HeaderValue::from_static("private"));
        assert!(check_acl_headers(&headers).is_ok());
        headers.insert(CANNED_ACL_HEADER, HeaderValue::from_static("public-read"));
        assert_eq!(
            check_acl_headers(&headers).unwrap_err().code(),
            S3Code::NotImplemented
        );
        let mut grant = HeaderMap::new();
        grant.insert("x-amz-grant-read", HeaderValue::from_static("id=x"));
        assert_eq!(
            check_acl_headers(&grant).unwrap_err().code(),
            S3Code::NotImplemented
        );
    }

    #[test]
    fn policy_must_grant_only_the_owner() {
        let own = object_documents::owner_full_control("alice");
        let policy = parse_document(&own).unwrap();
        let id = |name| meta_api::canonical_user_id(name);
        assert!(grants_only_owner(&policy, &id("alice")));
        assert!(!grants_only_owner(&policy, &id("bob")));
    }
}
