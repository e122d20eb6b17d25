//! The fields of endpoints beyond their bucket, each parsed from the request
//! by its type: the object key, the upload id and part number, the version,
//! and the parameter sets of listings and reads.

use super::{required, RouteInput};
use crate::error::S3Error;
use crate::params::{
    part_number, version_ref, ListBucketsParams, ListPartsParams, ListUploadsParams, ListV1Params,
    ListV2Params, ListVersionsParams, ReadParams,
};
use std::ops::Deref;

/// A field of an endpoint, parsed from the request its rule matched.
pub trait RouteField: Sized {
    /// The field of `input`, or the S3 error of a missing or invalid one.
    fn from_route(input: &RouteInput<'_>) -> Result<Self, S3Error>;
}

/// An object key, decoded from the path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectKey(pub String);

impl Deref for ObjectKey {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ObjectKey {
    fn from(key: &str) -> Self {
        Self(key.to_string())
    }
}

impl RouteField for ObjectKey {
    fn from_route(input: &RouteInput<'_>) -> Result<Self, S3Error> {
        input
            .target
            .key
            .clone()
            .map(Self)
            .ok_or_else(|| S3Error::internal("an object endpoint matched a request without a key"))
    }
}

/// The `uploadId` query parameter, which must be there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadId(pub String);

impl Deref for UploadId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for UploadId {
    fn from(id: &str) -> Self {
        Self(id.to_string())
    }
}

impl RouteField for UploadId {
    fn from_route(input: &RouteInput<'_>) -> Result<Self, S3Error> {
        Ok(Self(required(&input.query, "uploadId")?.to_string()))
    }
}

/// The `partNumber` query parameter, which must be there and in 1..=10000.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartNumber(pub u32);

impl RouteField for PartNumber {
    fn from_route(input: &RouteInput<'_>) -> Result<Self, S3Error> {
        Ok(Self(part_number(required(&input.query, "partNumber")?)?))
    }
}

/// The `versionId` query parameter, if sent: the version a request names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VersionParam(pub Option<meta_api::naming::VersionRef>);

impl RouteField for VersionParam {
    fn from_route(input: &RouteInput<'_>) -> Result<Self, S3Error> {
        let version = input.query.get("versionId").map(version_ref).transpose()?;
        Ok(Self(version))
    }
}

macro_rules! query_params {
    ($($params:ty),*) => {$(
        impl RouteField for $params {
            fn from_route(input: &RouteInput<'_>) -> Result<Self, S3Error> {
                <$params>::from_query(&input.query)
            }
        }
    )*};
}

query_params!(
    ListBucketsParams,
    ListV1Params,
    ListV2Params,
    ListPartsParams,
    ListUploadsParams,
    ListVersionsParams,
    ReadParams
);
