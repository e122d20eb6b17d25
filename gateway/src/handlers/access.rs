//! The context of one authenticated request and the access checks the
//! endpoint table runs before a handler: a handler of a bucket endpoint
//! receives an [`AuthorizedBucket`], which only these checks make.

use crate::auth::{Identity, VerifiedRequest};
use crate::error::{S3Code, S3Error};
use crate::state::AppState;
use access::{decide, Action, BucketAccess, Decision, ObjectAccess, Requester, Right};
use http::request::Parts;
use meta_api::{BucketRecord, BucketRight, GetBucket, GetObject, ObjectRecord};
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

/// What of `bucket` decides access.
pub fn bucket_access(bucket: &BucketRecord) -> BucketAccess<'_> {
    BucketAccess {
        owner: &bucket.owner,
        acl: bucket.acl.as_deref(),
        ownership: bucket.effective_ownership(),
        public_access_block: bucket.public_access_block.as_ref(),
        public_read: bucket.public_read,
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
        }
    }

    /// The bucket, when it exists and the caller may do `action` in it: its
    /// access key must allow the action's right there, and the bucket's
    /// settings must grant it ([`access::decide`]). Actions on an existing
    /// object are judged on the object once the handler has it.
    pub async fn authorize_bucket(
        &self,
        name: &str,
        action: Action,
    ) -> Result<AuthorizedBucket, S3Error> {
        let record = self.existing_bucket(name).await?;
        let key_allows = match self.identity().right_in(name) {
            Some(BucketRight::ReadWrite) => true,
            Some(BucketRight::Read) => action.right() == Right::Read,
            None => self.identity().anonymous,
        };
        let granted = action.on_object()
            || decide(&self.requester(), action, &bucket_access(&record), None) == Decision::Allow;
        if key_allows && granted {
            Ok(AuthorizedBucket { record, action })
        } else {
            Err(S3Error::new(S3Code::AccessDenied))
        }
    }

    /// Whether the caller may do `action` in `bucket`.
    pub fn allowed(
        &self,
        action: Action,
        bucket: &BucketRecord,
        object: Option<&ObjectRecord>,
    ) -> bool {
        let object = object.map(object_access);
        decide(
            &self.requester(),
            action,
            &bucket_access(bucket),
            object.as_ref(),
        ) == Decision::Allow
    }

    /// The object at `key`, when the caller may do the bucket's action to
    /// it; a missing key is NoSuchKey only to a caller who may list the
    /// bucket (AccessDenied to others, as S3 answers).
    pub async fn authorized_object(
        &self,
        bucket: &AuthorizedBucket,
        key: &str,
    ) -> Result<Arc<ObjectRecord>, S3Error> {
        let request = GetObject {
            bucket: bucket.name.clone(),
            key: key.to_string(),
        };
        match self.state.meta.call(request).await? {
            Some(record) if self.allowed(bucket.action, bucket, Some(&record)) => Ok(record),
            Some(_) => Err(S3Error::new(S3Code::AccessDenied)),
            None if self.allowed(Action::ListBucket, bucket, None) => {
                Err(S3Error::no_such_key(key))
            }
            None => Err(S3Error::new(S3Code::AccessDenied)),
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
