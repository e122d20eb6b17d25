//! The context of one authenticated request and the access checks the
//! endpoint table runs before a handler: a handler of a bucket endpoint
//! receives an [`AuthorizedBucket`], which only these checks make.

use super::conditions::RequestValues;
use crate::auth::{Identity, VerifiedRequest};
use crate::error::{S3Code, S3Error};
use crate::state::AppState;
use access::{
    decide, Action, BucketAccess, Decision, Facts, ObjectAccess, Policy, Requester, Right,
};
use http::request::Parts;
use meta_api::naming::VersionRef;
use meta_api::{
    BucketGrant, BucketRecord, BucketRight, GetBucket, GetObject, MetaError, ObjectRecord,
};
use std::ops::Deref;
use std::sync::Arc;

/// One authenticated request on its way through a handler.
pub struct RequestContext<'a> {
    /// Shared gateway state.
    pub state: &'a AppState,
    /// The HTTP request head.
    pub parts: &'a Parts,
    /// The verified signature and how to read the body.
    pub request: VerifiedRequest,
}

/// A bucket the caller was found allowed to use for the endpoint at hand,
/// with the action the endpoint is: actions on an existing object are
/// judged again on the object ([`RequestContext::authorized_object`]).
#[derive(Debug)]
pub struct AuthorizedBucket {
    record: Arc<BucketRecord>,
    action: Action,
}

impl Deref for AuthorizedBucket {
    type Target = BucketRecord;
    fn deref(&self) -> &BucketRecord {
        &self.record
    }
}

/// What of `bucket` decides access, but its policy (which
/// [`RequestContext::allowed`] adds).
pub fn bucket_access(bucket: &BucketRecord) -> BucketAccess<'_> {
    BucketAccess {
        name: &bucket.name,
        owner: &bucket.owner,
        acl: bucket.acl.as_deref(),
        ownership: bucket.effective_ownership(),
        public_access_block: bucket.public_access_block.as_ref(),
        public_read: bucket.public_read,
        policy: None,
    }
}

/// What of `object` decides access to it.
pub fn object_access(object: &ObjectRecord) -> ObjectAccess<'_> {
    ObjectAccess {
        owner: object.attributes.owner.as_deref(),
        acl: object.attributes.acl.as_deref(),
    }
}

impl RequestContext<'_> {
    /// The body of a bucket configuration, which S3 wants vouched for by
    /// Content-MD5 or an `x-amz-checksum-*` (see
    /// [`read_checked_document`](crate::request_body::read_checked_document)).
    pub async fn vouched_configuration(
        &self,
        body: axum::body::Body,
        limit: u64,
    ) -> Result<bytes::Bytes, S3Error> {
        crate::request_body::read_checked_document(
            &self.request,
            &self.parts.headers,
            body,
            limit,
            true,
        )
        .await
    }

    /// Who is calling.
    pub fn identity(&self) -> &Identity {
        &self.request.identity
    }

    /// The caller as the access decision sees it.
    pub fn requester(&self) -> Requester<'_> {
        let identity = self.identity();
        Requester {
            user: (!identity.anonymous).then_some(identity.user.as_str()),
            is_root: identity.is_root,
            policy: None,
            key_policy: None,
        }
    }

    /// The policy of the signing key's bucket limits, built once per set of
    /// limits.
    fn key_policy(&self, grants: &[BucketGrant]) -> Arc<Policy> {
        let limits = grants
            .iter()
            .map(|g| format!("{}:{:?}", g.bucket, g.right))
            .collect::<Vec<_>>()
            .join(",");
        let build = |_: &str| {
            Ok(Policy::of_bucket_rights(grants.iter().map(|g| {
                let right = match g.right {
                    BucketRight::Read => Right::Read,
                    BucketRight::ReadWrite => Right::Write,
                };
                (g.bucket.as_str(), right)
            })))
        };
        let access_key = &self.identity().access_key;
        match self
            .state
            .key_policies
            .get(access_key, Some(&limits), build)
        {
            Ok(Some(policy)) => policy,
            // Built, not parsed: it cannot fail; an empty limit reaches nothing.
            _ => Arc::new(Policy::of_bucket_rights([])),
        }
    }

    /// The key the request's path names, if any.
    fn target_key(&self) -> Option<String> {
        let domain = self.state.config.domain.as_deref();
        crate::router::target(&self.parts.uri, &self.parts.headers, domain)
            .ok()?
            .key
    }

    /// The bucket, when it exists and the caller may do `action` in it (to
    /// the key the path names): its access key must allow the action's
    /// right there, and the bucket's settings must grant it
    /// ([`access::decide`]). Actions on an existing object are judged on the
    /// object once the handler has it, and an action on keys the request
    /// lists in its body (DeleteObjects) key by key.
    pub async fn authorize_bucket(
        &self,
        name: &str,
        action: Action,
    ) -> Result<AuthorizedBucket, S3Error> {
        self.authorize_bucket_at(name, action, self.target_key().as_deref())
            .await
    }

    /// [`Self::authorize_bucket`] for `key` (the source of a copy).
    pub async fn authorize_bucket_at(
        &self,
        name: &str,
        action: Action,
        key: Option<&str>,
    ) -> Result<AuthorizedBucket, S3Error> {
        let record = self.existing_bucket(name).await?;
        let judged_later = action.on_object() || (action.on_key() && key.is_none());
        if judged_later || self.allowed(action, &record, None, key)? {
            Ok(AuthorizedBucket { record, action })
        } else {
            Err(S3Error::new(S3Code::AccessDenied))
        }
    }

    /// Whether the caller may do `action` in `bucket` (to `object` at
    /// `key`), judged with the bucket's policy and the request's condition
    /// values.
    pub fn allowed(
        &self,
        action: Action,
        bucket: &BucketRecord,
        object: Option<&ObjectRecord>,
        key: Option<&str>,
    ) -> Result<bool, S3Error> {
        let unparsable = |holder: &str, e: access::MalformedPolicy| {
            S3Error::internal(format!("the stored policy of {holder} does not parse: {e}"))
        };
        let policy = (self.state.bucket_policies)
            .of_bucket(bucket)
            .map_err(|e| unparsable(&bucket.name, e))?;
        let identity = self.identity();
        let user_policy = (self.state.user_policies)
            .get(
                &identity.user,
                identity.user_policy.as_deref(),
                Policy::parse_user,
            )
            .map_err(|e| unparsable(&identity.user, e))?;
        let key_policy = match (&identity.bucket_grants, identity.anonymous) {
            (Some(grants), false) => Some(self.key_policy(grants)),
            _ => None,
        };
        let requester = Requester {
            policy: user_policy.as_deref(),
            key_policy: key_policy.as_deref(),
            ..self.requester()
        };
        let mut access = bucket_access(bucket);
        access.policy = policy.as_deref();
        let values = RequestValues {
            parts: self.parts,
            request: &self.request,
            object,
        };
        let facts = Facts {
            key,
            values: &values,
        };
        let object = object.map(object_access);
        let decision = decide(&requester, action, &access, object.as_ref(), &facts);
        Ok(decision == Decision::Allow)
    }

    /// The object at `key` (its latest version, or `version`), when the
    /// caller may do the bucket's action to it; a missing key is NoSuchKey only to a caller who may list the
    /// bucket (AccessDenied to others, as S3 answers).
    pub async fn authorized_object(
        &self,
        bucket: &AuthorizedBucket,
        key: &str,
        version: Option<&VersionRef>,
    ) -> Result<Arc<ObjectRecord>, S3Error> {
        let request = GetObject {
            bucket: bucket.name.clone(),
            key: key.to_string(),
            version: version.cloned(),
        };
        // A delete marker or a missing version says as much as a missing
        // key does, and only to the same callers.
        let found = match self.state.meta.call(request).await {
            Ok(Some(record)) => Ok(record),
            Ok(None) => Err(S3Error::no_such_key(key)),
            Err(e @ (MetaError::DeleteMarker { .. } | MetaError::NoSuchVersion(_))) => {
                Err(e.into())
            }
            Err(e) => return Err(e.into()),
        };
        let allowed = match &found {
            Ok(record) => self.allowed(bucket.action, bucket, Some(record), Some(key))?,
            Err(_) => self.allowed(Action::ListBucket, bucket, None, None)?,
        };
        match found {
            _ if !allowed => Err(S3Error::new(S3Code::AccessDenied)),
            found => found,
        }
    }

    /// The bucket `name`, or NoSuchBucket.
    pub async fn existing_bucket(&self, name: &str) -> Result<Arc<BucketRecord>, S3Error> {
        let request = GetBucket {
            name: name.to_string(),
        };
        self.state
            .meta
            .call(request)
            .await?
            .ok_or_else(|| S3Error::no_such_bucket(name))
    }

    /// AccessDenied for a key limited to some buckets: it creates none.
    pub fn refuse_limited_keys(&self) -> Result<(), S3Error> {
        if self.identity().bucket_grants.is_some() {
            Err(S3Error::new(S3Code::AccessDenied))
        } else {
            Ok(())
        }
    }
}
