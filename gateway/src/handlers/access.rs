//! The context of one authenticated request and the access checks the
//! endpoint table runs before a handler: a handler of a bucket endpoint
//! receives an [`AuthorizedBucket`], which only these checks make.

use crate::auth::{Identity, VerifiedRequest};
use crate::error::{S3Code, S3Error};
use crate::router::Right;
use crate::state::AppState;
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

/// A bucket the caller was found allowed to use for the endpoint at hand.
#[derive(Debug)]
pub struct AuthorizedBucket(Arc<BucketRecord>);

impl Deref for AuthorizedBucket {
    type Target = BucketRecord;
    fn deref(&self) -> &BucketRecord {
        &self.0
    }
}

impl RequestContext<'_> {
    /// Who is calling.
    pub fn identity(&self) -> &Identity {
        &self.request.identity
    }

    /// The bucket, when it exists and the caller may use it with `right`: the
    /// root user reaches every bucket, another user the buckets it owns,
    /// within its access key's limits; anyone may read a public-read bucket
    /// through an endpoint that is `public`.
    pub async fn authorize_bucket(
        &self,
        name: &str,
        right: Right,
        public: bool,
    ) -> Result<AuthorizedBucket, S3Error> {
        let bucket = self.existing_bucket(name).await?;
        let identity = self.identity();
        let owns = !identity.anonymous && (identity.is_root || bucket.owner == identity.user);
        let key_allows = match identity.right_in(name) {
            Some(BucketRight::ReadWrite) => true,
            Some(BucketRight::Read) => right == Right::Read,
            None => false,
        };
        let public = public && bucket.public_read;
        if (owns && key_allows) || public {
            Ok(AuthorizedBucket(bucket))
        } else {
            Err(S3Error::new(S3Code::AccessDenied))
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

    /// The object at `key` in `bucket`, or NoSuchKey.
    pub async fn existing_object(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Arc<ObjectRecord>, S3Error> {
        let request = GetObject {
            bucket: bucket.to_string(),
            key: key.to_string(),
        };
        self.state
            .meta
            .call(request)
            .await?
            .ok_or_else(|| S3Error::no_such_key(key))
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
