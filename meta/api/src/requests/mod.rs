//! Every request meta serves, each a type of its own paired with the type of
//! its answer ([`MetaRequest::Response`]), so the compiler checks that a
//! handler answers what its caller expects.
//!
//! The table at the bottom of this file is the one list of requests: it
//! gives each its answer, its name in metrics and logs, the role a caller
//! needs and whether it is a point read, and from it follow the envelopes
//! that carry requests over the wire ([`AnyRequest`], [`AnyResponse`]) and the
//! dispatch to handlers ([`AnyRequest::dispatch`]). Adding an operation is a
//! request type in one of the family modules, its line in the table, and an
//! implementation of [`Handle`] in the service.

mod buckets;
mod datanodes;
mod objects;
mod uploads;
mod users;

pub use buckets::*;
pub use datanodes::*;
pub use objects::*;
pub use uploads::*;
pub use users::*;

use crate::error::MetaError;
use crate::records::*;
use proto::ReplicationConfig;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::sync::Arc;

/// Who may send a request. A connection's role comes from the token it
/// presented; a role may send every request of the roles below it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Role {
    /// Datanodes and gateways: the namespace, block placement, heartbeats.
    Cluster,
    /// `tessera admin`: users, keys and cluster settings besides.
    Admin,
}

/// A request to meta and the type of its answer.
pub trait MetaRequest: Serialize + DeserializeOwned + Debug + Send + Sized + 'static {
    /// What meta answers.
    type Response: Serialize + DeserializeOwned + Debug + Send + 'static;
    /// The request's name in metrics and logs.
    const NAME: &'static str;
    /// The least role a caller needs.
    const ROLE: Role;
    /// A point read of the store, served on the caller's task rather than on
    /// the blocking pool.
    const POINT_READ: bool;

    /// The request in its envelope.
    fn into_any(self) -> AnyRequest;

    /// This request's answer out of its envelope; the name of the request
    /// whose answer it holds instead, when it holds another.
    fn response_of(answer: AnyResponse) -> Result<Self::Response, &'static str>;
}

/// Serves one kind of request; the service implements it once per request.
pub trait Handle<R: MetaRequest> {
    /// Serves `request` as of `now`.
    fn handle(&self, request: R, now: UnixMillis) -> Result<R::Response, MetaError>;
}

macro_rules! request_table {
    ($( $request:ident => $response:ty, $name:literal, $role:ident $(, $point_read:ident)?; )*) => {
        $(
            impl MetaRequest for $request {
                type Response = $response;
                const NAME: &'static str = $name;
                const ROLE: Role = Role::$role;
                const POINT_READ: bool = request_table!(@point_read $($point_read)?);

                fn into_any(self) -> AnyRequest {
                    AnyRequest::$request(self)
                }

                fn response_of(answer: AnyResponse) -> Result<Self::Response, &'static str> {
                    match answer {
                        AnyResponse::$request(response) => Ok(response),
                        other => Err(other.name()),
                    }
                }
            }

            impl From<$request> for AnyRequest {
                fn from(request: $request) -> Self {
                    AnyRequest::$request(request)
                }
            }
        )*

        /// Any request, as it travels over the wire.
        #[derive(Debug, Serialize, Deserialize)]
        pub enum AnyRequest {
            $(
                #[doc = concat!("A [`", stringify!($request), "`].")]
                $request($request),
            )*
        }

        /// Any answer, as it travels over the wire.
        #[derive(Debug, Serialize, Deserialize)]
        pub enum AnyResponse {
            $(
                #[doc = concat!("The answer to a [`", stringify!($request), "`].")]
                $request($response),
            )*
        }

        impl AnyRequest {
            /// The request's name in metrics and logs.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Self::$request(_) => $name,)*
                }
            }

            /// The least role a caller needs.
            pub fn role(&self) -> Role {
                match self {
                    $(Self::$request(_) => Role::$role,)*
                }
            }

            /// Whether the request is a point read (see [`MetaRequest::POINT_READ`]).
            pub fn is_point_read(&self) -> bool {
                match self {
                    $(Self::$request(_) => <$request as MetaRequest>::POINT_READ,)*
                }
            }

            /// Hands the request to its handler.
            pub fn dispatch<H>(self, handler: &H, now: UnixMillis) -> Result<AnyResponse, MetaError>
            where
                H: $(Handle<$request> +)* Sized,
            {
                match self {
                    $(Self::$request(request) => handler.handle(request, now).map(AnyResponse::$request),)*
                }
            }
        }

        impl AnyResponse {
            /// The name of the request this answers.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Self::$request(_) => $name,)*
                }
            }
        }

        /// Every request's name, in table order.
        pub const REQUEST_NAMES: &[&str] = &[$($name),*];
    };
    (@point_read point_read) => { true };
    (@point_read) => { false };
}

request_table! {
    // Datanodes.
    Heartbeat => HeartbeatReply, "heartbeat", Cluster;
    BlockReport => u64, "block_report", Cluster;
    ReportBadReplica => (), "report_bad_replica", Cluster;
    AllocateBlock => BlockGroup, "allocate_block", Cluster;
    DiscardBlocks => (), "discard_blocks", Cluster;
    // Credentials.
    GetAccessKey => Option<AccessKeyRecord>, "get_access_key", Cluster, point_read;
    GetUser => Option<UserRecord>, "get_user", Cluster, point_read;
    // Buckets.
    CreateBucket => (), "create_bucket", Cluster;
    GetBucket => Option<Arc<BucketRecord>>, "get_bucket", Cluster, point_read;
    DeleteBucket => (), "delete_bucket", Cluster;
    ListBuckets => Vec<BucketRecord>, "list_buckets", Cluster;
    SetBucketCors => (), "set_bucket_cors", Cluster;
    SetBucketTags => (), "set_bucket_tags", Cluster;
    DefaultReplication => ReplicationConfig, "default_replication", Cluster;
    // Objects.
    CommitObject => (), "commit_object", Cluster;
    GetObject => Option<Arc<ObjectRecord>>, "get_object", Cluster, point_read;
    DeleteObject => Option<ObjectRecord>, "delete_object", Cluster;
    ListObjects => ListPage, "list_objects", Cluster;
    // Multipart uploads.
    CreateUpload => (), "create_upload", Cluster;
    GetUpload => Option<UploadRecord>, "get_upload", Cluster, point_read;
    CommitPart => (), "commit_part", Cluster;
    ListParts => PartsPage, "list_parts", Cluster;
    CompleteUpload => ObjectRecord, "complete_upload", Cluster;
    AbortUpload => (), "abort_upload", Cluster;
    ListUploads => UploadPage, "list_uploads", Cluster;
    // Administration.
    CreateUser => (), "create_user", Admin;
    DeleteUser => (), "delete_user", Admin;
    ListUsers => Vec<UserRecord>, "list_users", Admin;
    CreateKey => AccessKeyRecord, "create_key", Admin;
    DeleteKey => (), "delete_key", Admin;
    ListKeys => Vec<AccessKeyRecord>, "list_keys", Admin;
    LimitKey => (), "limit_key", Admin;
    SetBucketPublicRead => (), "set_bucket_public_read", Admin;
    GetClusterStatus => ClusterStatus, "status", Admin;
}
