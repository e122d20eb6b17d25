//! ACLs: Get/PutBucketAcl, Get/PutObjectAcl, and the ACL and owner of what a
//! request creates (a bucket, or an object by PutObject, CopyObject,
//! CreateMultipartUpload or a form), from `x-amz-acl`, `x-amz-grant-*` or an
//! AccessControlPolicy body, within what the bucket's object ownership and
//! public access block allow.

use super::{empty_response, recommit_object, xml_response, AuthorizedBucket, RequestContext};
use crate::error::{S3Code, S3Error};
use crate::request_body::read_small_body;
use crate::xml::access_documents::{
    access_control_policy, parse_access_control_policy, ACCESS_BODY_LIMIT,
};
use access::{canonical_user_id, grants_from_headers, Grant, Grantee, ObjectOwnership, Permission};
use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use meta_api::naming::VersionRef;
use meta_api::{BucketAccessChange, BucketRecord, SetBucketAccess};
use std::sync::Arc;

/// A header's text, for the ACL parser.
fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether `grants` give FULL_CONTROL to these users and nothing else: what
/// S3 still accepts where ACLs are off (`bucket-owner-full-control`).
fn only_full_control_to(grants: &[Grant], users: &[&str]) -> bool {
    grants.iter().all(|grant| {
        grant.permission == Permission::FullControl
            && matches!(&grant.grantee, Grantee::User(id) if users.iter().any(|u| canonical_user_id(u) == *id))
    })
}

/// AccessDenied when the bucket's public access block refuses public ACLs
/// and `grants` are public.
fn refuse_public_acl(bucket: &BucketRecord, grants: &[Grant]) -> Result<(), S3Error> {
    let blocked = bucket
        .public_access_block
        .is_some_and(|block| block.block_public_acls);
    if blocked && grants.iter().any(|g| g.grantee.is_public()) {
        Err(S3Error::new(S3Code::AccessDenied))
    } else {
        Ok(())
    }
}

fn acls_not_supported() -> S3Error {
    S3Error::new(S3Code::AccessControlListNotSupported)
}

/// The request's `x-amz-acl`, if it has one.
pub fn canned_acl(headers: &HeaderMap) -> Option<&str> {
    header_text(headers, "x-amz-acl")
}

/// The owner and ACL of an object written into `bucket` by the caller.
#[derive(Debug, Default)]
pub struct WrittenAccess {
    /// The owner, when not the bucket owner.
    pub owner: Option<String>,
    /// The ACL asked for; None: private.
    pub acl: Option<Vec<Grant>>,
}

/// The owner and ACL of an object the caller writes into `bucket`, from the
/// request's ACL headers: under BucketOwnerEnforced only the bucket owner's
/// FULL_CONTROL may be asked for (else AccessControlListNotSupported) and the
/// bucket owner owns the object; under BucketOwnerPreferred the bucket owner
/// owns what is written with `bucket-owner-full-control`; else the writer
/// does (an unsigned writer's object is the bucket owner's).
pub fn written_access(
    ctx: &RequestContext<'_>,
    bucket: &BucketRecord,
    canned: Option<&str>,
) -> Result<WrittenAccess, S3Error> {
    let headers = &ctx.parts.headers;
    let writer = ctx.requester().user.unwrap_or(&bucket.owner);
    let ownership = bucket.effective_ownership();
    let owner = match ownership {
        ObjectOwnership::BucketOwnerEnforced => bucket.owner.as_str(),
        ObjectOwnership::BucketOwnerPreferred if canned == Some("bucket-owner-full-control") => {
            bucket.owner.as_str()
        }
        _ => writer,
    };
    let header = |name: &str| match name {
        "x-amz-acl" => canned,
        _ => header_text(headers, name),
    };
    let acl = grants_from_headers(
        header,
        &canonical_user_id(owner),
        &canonical_user_id(&bucket.owner),
    )?;
    if ownership == ObjectOwnership::BucketOwnerEnforced {
        return match acl {
            Some(grants) if !only_full_control_to(&grants, &[&bucket.owner, writer]) => {
                Err(acls_not_supported())
            }
            _ => Ok(WrittenAccess::default()),
        };
    }
    if let Some(grants) = &acl {
        refuse_public_acl(bucket, grants)?;
    }
    Ok(WrittenAccess {
        owner: (owner != bucket.owner).then(|| owner.to_string()),
        acl,
    })
}

/// The ACL a request asks to set on a resource of `owner`: its headers or
/// its AccessControlPolicy body, not both (UnexpectedContent) and not
/// neither (MissingSecurityHeader).
async fn requested_acl(
    ctx: &RequestContext<'_>,
    body: Body,
    owner: &str,
    bucket_owner: &str,
) -> Result<Vec<Grant>, S3Error> {
    let headers = &ctx.parts.headers;
    let from_headers = grants_from_headers(
        |name| header_text(headers, name),
        &canonical_user_id(owner),
        &canonical_user_id(bucket_owner),
    )?;
    let document = read_small_body(&ctx.request, headers, body, ACCESS_BODY_LIMIT).await?;
    let has_body = !document.iter().all(u8::is_ascii_whitespace);
    match (from_headers, has_body) {
        (Some(_), true) => Err(S3Error::new(S3Code::UnexpectedContent)),
        (Some(grants), false) => Ok(grants),
        (None, true) => {
            let (owner_id, grants) = parse_access_control_policy(&document)?;
            if owner_id != canonical_user_id(owner) {
                return Err(S3Error::invalid_argument("Invalid id")
                    .detail("ArgumentName", "CanonicalUser/ID")
                    .detail("ArgumentValue", owner_id));
            }
            Ok(grants)
        }
        (None, false) => {
            Err(S3Error::new(S3Code::MissingSecurityHeader)
                .detail("MissingHeaderName", "x-amz-acl"))
        }
    }
}

/// GetBucketAcl and GetObjectAcl (the object, or its `version`, must
/// exist): the stored grants,
/// or the owner's FULL_CONTROL where there are none or ACLs are off.
pub async fn get_acl(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: Option<&str>,
    version: Option<VersionRef>,
) -> Result<Response, S3Error> {
    let enforced = !bucket.effective_ownership().acls_enabled();
    let (owner, grants) = match key {
        None => (bucket.owner.clone(), bucket.acl.clone()),
        Some(key) => {
            let record = ctx.authorized_object(bucket, key, version.as_ref()).await?;
            let owner = super::access::object_access(&record);
            let owner = super::bucket_access(bucket)
                .object_owner(&owner)
                .to_string();
            (owner, record.attributes.acl.clone())
        }
    };
    let owner_id = canonical_user_id(&owner);
    let grants = match grants {
        Some(grants) if !enforced => grants,
        _ => vec![Grant::full_control(&owner_id)],
    };
    Ok(xml_response(access_control_policy(&owner_id, &grants)))
}

/// PutBucketAcl and PutObjectAcl (of the latest version, or `version`).
pub async fn put_acl(
    ctx: &RequestContext<'_>,
    bucket: &AuthorizedBucket,
    key: Option<&str>,
    version: Option<VersionRef>,
    body: Body,
) -> Result<Response, S3Error> {
    let record = match key {
        Some(key) => Some(ctx.authorized_object(bucket, key, version.as_ref()).await?),
        None => None,
    };
    let owner = match &record {
        Some(record) => {
            let object = super::access::object_access(record);
            super::bucket_access(bucket)
                .object_owner(&object)
                .to_string()
        }
        None => bucket.owner.clone(),
    };
    let grants = requested_acl(ctx, body, &owner, &bucket.owner).await?;
    if !bucket.effective_ownership().acls_enabled() {
        if !only_full_control_to(&grants, &[&bucket.owner]) {
            return Err(acls_not_supported());
        }
        return Ok(empty_response(StatusCode::OK));
    }
    refuse_public_acl(bucket, &grants)?;
    match record {
        Some(record) => {
            let mut record = Arc::unwrap_or_clone(record);
            record.attributes.acl = Some(grants);
            recommit_object(ctx, record).await?;
        }
        None => {
            let request = SetBucketAccess {
                bucket: bucket.name.clone(),
                change: BucketAccessChange::Acl(Some(grants)),
            };
            ctx.state.meta.call(request).await?;
        }
    }
    Ok(empty_response(StatusCode::OK))
}

/// The ACL, ownership and public access block a new bucket starts with:
/// `x-amz-object-ownership` (default the gateway's, BucketOwnerEnforced
/// unless set), every public access block flag on (unless the gateway's
/// default turns them off), and the ACL of the ACL headers, which
/// BucketOwnerEnforced allows only as the owner's FULL_CONTROL and the block
/// only when private.
pub fn new_bucket_access(
    ctx: &RequestContext<'_>,
    owner: &str,
) -> Result<meta_api::NewBucketAccess, S3Error> {
    let headers = &ctx.parts.headers;
    let ownership = match header_text(headers, "x-amz-object-ownership") {
        Some(name) => ObjectOwnership::parse(name.trim()).ok_or_else(|| {
            S3Error::invalid_argument(format!("Invalid x-amz-object-ownership header: {name}"))
                .detail("ArgumentName", "x-amz-object-ownership")
        })?,
        None => ctx.state.config.default_ownership,
    };
    let owner_id = canonical_user_id(owner);
    let acl = grants_from_headers(|name| header_text(headers, name), &owner_id, &owner_id)?;
    let mut access = meta_api::NewBucketAccess {
        ownership,
        ..Default::default()
    };
    if !ctx.state.config.default_block_public_access {
        access.public_access_block = None;
    }
    if let Some(grants) = acl {
        if only_full_control_to(&grants, &[owner]) {
            return Ok(access);
        }
        if !ownership.acls_enabled() {
            return Err(S3Error::new(S3Code::InvalidBucketAclWithObjectOwnership));
        }
        if access.public_access_block.is_some() && grants.iter().any(|g| g.grantee.is_public()) {
            return Err(S3Error::new(
                S3Code::InvalidBucketAclWithBlockPublicAccessError,
            ));
        }
        access.acl = Some(grants);
    }
    Ok(access)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_users_full_control_passes() {
        let alice = canonical_user_id("alice");
        assert!(only_full_control_to(
            &[Grant::full_control(&alice)],
            &["alice"]
        ));
        assert!(only_full_control_to(&[], &["alice"]));
        assert!(!only_full_control_to(
            &[Grant::full_control(&alice)],
            &["bob"]
        ));
        let read = Grant::new(Grantee::User(alice.clone()), Permission::Read);
        assert!(!only_full_control_to(&[read], &["alice"]));
        let public = Grant::new(Grantee::AllUsers, Permission::FullControl);
        assert!(!only_full_control_to(&[public], &["alice"]));
    }
}
