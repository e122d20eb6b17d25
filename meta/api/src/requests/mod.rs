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
mod group;
mod objects;
mod uploads;
mod users;

pub use buckets::*;
pub use datanodes::*;
pub use group::*;
pub use objects::*;
pub use uploads::*;
pub use users::*;

use crate::error::MetaError;
use crate::principal::Principal;
use crate::records::*;
use proto::ReplicationConfig;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::sync::Arc;

/// Whose request it is: which [`Principal`]s may send it is decided in
/// [`AnyRequest::may_be_sent_by`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Role {
    /// A datanode's, about itself: heartbeats and block reports.
    Datanode,
    /// A gateway's: the namespace, S3 credentials, block placement.
    Gateway,
    /// `tessera admin`'s: users, keys, credentials and cluster settings.
    Admin,
}

/// How meta serves a request, which decides where a meta group serves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Access {
    /// A read of one record, served on the caller's task rather than on the
    /// blocking pool.
    PointRead,
    /// A read of many records (a listing), served on the blocking pool.
    Read,
    /// A change to the store: in a group, replicated through the log and
    /// applied by every member.
    Write,
    /// A handout from a range the store reserves ahead (block ids): a lone
    /// meta takes it from its own reservation; a group's leader from the
    /// range the log reserved for its term, without an entry of its own.
    /// Sent again after a lost answer, it only skips an id.
    Reserved,
    /// The group's own business (Raft messages, membership), served by the
    /// group layer rather than a handler.
    Group,
}

/// A request to meta and the type of its answer.
pub trait MetaRequest: Serialize + DeserializeOwned + Debug + Send + Sized + 'static {
    /// What meta answers.
    type Response: Serialize + DeserializeOwned + Debug + Send + 'static;
    /// The request's name in metrics and logs.
    const NAME: &'static str;
    /// The least role a caller needs.
    const ROLE: Role;
    /// How meta serves it.
    const ACCESS: Access;

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
    ($( $request:ident => $response:ty, $name:literal, $role:ident, $access:ident; )*) => {
        $(
            impl MetaRequest for $request {
                type Response = $response;
                const NAME: &'static str = $name;
                const ROLE: Role = Role::$role;
                const ACCESS: Access = Access::$access;

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
        #[derive(Clone, Debug, Serialize, Deserialize)]
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

            /// How meta serves the request.
            pub fn access(&self) -> Access {
                match self {
                    $(Self::$request(_) => Access::$access,)*
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
}

request_table! {
    // Datanodes.
    Heartbeat => HeartbeatReply, "heartbeat", Datanode, Write;
    BlockReport => u64, "block_report", Datanode, Write;
    FinishRepair => (), "finish_repair", Datanode, Write;
    ReportBadReplica => (), "report_bad_replica", Gateway, Write;
    AllocateBlock => BlockGroup, "allocate_block", Gateway, Reserved;
    DiscardBlocks => (), "discard_blocks", Gateway, Write;
    // Credentials.
    GetAccessKey => Option<AccessKeyRecord>, "get_access_key", Gateway, PointRead;
    GetUser => Option<UserRecord>, "get_user", Gateway, PointRead;
    // Buckets.
    CreateBucket => (), "create_bucket", Gateway, Write;
    GetBucket => Option<Arc<BucketRecord>>, "get_bucket", Gateway, PointRead;
    DeleteBucket => (), "delete_bucket", Gateway, Write;
    ListBuckets => Vec<BucketRecord>, "list_buckets", Gateway, Read;
    SetBucketCors => (), "set_bucket_cors", Gateway, Write;
    SetBucketLifecycle => (), "set_bucket_lifecycle", Gateway, Write;
    SetBucketEncryption => (), "set_bucket_encryption", Gateway, Write;
    ResolveKmsKey => String, "resolve_kms_key", Gateway, Write;
    SetBucketTags => (), "set_bucket_tags", Gateway, Write;
    SetBucketAccess => (), "set_bucket_access", Gateway, Write;
    SetBucketVersioning => (), "set_bucket_versioning", Gateway, Write;
    SetObjectLockConfiguration => (), "set_object_lock_configuration", Gateway, Write;
    DefaultReplication => ReplicationConfig, "default_replication", Gateway, Read;
    // Objects.
    CommitObject => VersionStamp, "commit_object", Gateway, Write;
    GetObject => Option<Arc<ObjectRecord>>, "get_object", Gateway, PointRead;
    DeleteObject => Deleted, "delete_object", Gateway, Write;
    UpdateObject => (), "update_object", Gateway, Write;
    SetObjectLock => (), "set_object_lock", Gateway, Write;
    ListObjects => ListPage, "list_objects", Gateway, Read;
    ListObjectVersions => VersionsPage, "list_object_versions", Gateway, Read;
    // Multipart uploads.
    CreateUpload => (), "create_upload", Gateway, Write;
    GetUpload => Option<UploadRecord>, "get_upload", Gateway, PointRead;
    CommitPart => (), "commit_part", Gateway, Write;
    ListParts => PartsPage, "list_parts", Gateway, Read;
    CompleteUpload => ObjectRecord, "complete_upload", Gateway, Write;
    AbortUpload => (), "abort_upload", Gateway, Write;
    ListUploads => UploadPage, "list_uploads", Gateway, Read;
    // Administration.
    CreateUser => (), "create_user", Admin, Write;
    DeleteUser => (), "delete_user", Admin, Write;
    ListUsers => Vec<UserRecord>, "list_users", Admin, Read;
    CreateKey => AccessKeyRecord, "create_key", Admin, Write;
    DeleteKey => (), "delete_key", Admin, Write;
    ListKeys => Vec<AccessKeyRecord>, "list_keys", Admin, Read;
    LimitKey => (), "limit_key", Admin, Write;
    SetBucketPublicRead => (), "set_bucket_public_read", Admin, Write;
    SetUserPolicy => (), "set_user_policy", Admin, Write;
    GetClusterStatus => ClusterStatus, "status", Admin, Read;
    SetDatanodeAdminState => (), "set_datanode_admin_state", Admin, Write;
    SetBalancer => (), "set_balancer", Admin, Write;
    MintCredential => String, "mint_credential", Admin, Write;
    CreateKmsKey => KmsKeyRecord, "create_kms_key", Admin, Write;
    ListKmsKeys => Vec<KmsKeyRecord>, "list_kms_keys", Admin, Read;
    // The meta group.
    RaftMessage => Box<serde_json::value::RawValue>, "raft_message", Admin, Group;
    GetGroupStatus => GroupStatus, "group_status", Admin, Group;
    AddGroupMember => (), "add_group_member", Admin, Group;
    RemoveGroupMember => (), "remove_group_member", Admin, Group;
    GetGroupSecrets => GroupSecrets, "group_secrets", Admin, Group;
    TakeGroupSnapshot => u64, "take_group_snapshot", Admin, Group;
}

impl AnyRequest {
    /// Whether `principal` may send this request: the admin anything, a
    /// gateway the gateway's requests, a datanode the datanode's requests
    /// about itself. The one place this is decided.
    pub fn may_be_sent_by(&self, principal: &Principal) -> bool {
        match principal {
            Principal::Admin => true,
            Principal::Gateway(_) => self.role() == Role::Gateway,
            Principal::Datanode(id) => self.role() == Role::Datanode && self.datanode() == Some(id),
        }
    }

    /// The datanode a datanode's request speaks for, which must be the
    /// datanode whose credential the connection presented.
    pub fn datanode(&self) -> Option<&proto::DatanodeId> {
        match self {
            AnyRequest::Heartbeat(heartbeat) => Some(&heartbeat.report.id),
            AnyRequest::BlockReport(report) => Some(&report.datanode),
            AnyRequest::FinishRepair(finish) => Some(&finish.datanode),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::DatanodeId;

    fn datanode(id: &str) -> Principal {
        Principal::Datanode(DatanodeId(id.to_string()))
    }

    fn may(principal: &Principal, request: &AnyRequest) -> bool {
        request.may_be_sent_by(principal)
    }

    #[test]
    fn each_principal_may_send_its_own_requests_only() {
        let heartbeat = |id: &str| {
            AnyRequest::from(Heartbeat {
                report: DatanodeReport {
                    id: DatanodeId(id.into()),
                    addr: "127.0.0.1:1".into(),
                    local_socket: None,
                    capacity: 0,
                    used: 0,
                    garbage: 0,
                    blocks: 0,
                    deleted: Vec::new(),
                    damaged: Vec::new(),
                    scrub: Default::default(),
                    location: None,
                    disks: Vec::new(),
                },
            })
        };
        let report = |id: &str| {
            AnyRequest::from(BlockReport {
                datanode: DatanodeId(id.into()),
                blocks: Vec::new(),
            })
        };
        let allocate = AnyRequest::from(AllocateBlock {
            config: proto::ReplicationConfig::Replicated { replicas: 1 },
            exclude: Vec::new(),
        });
        let status = AnyRequest::from(GetClusterStatus);
        let gateway = Principal::Gateway("g".into());
        let a = datanode("a");

        assert!(may(&a, &heartbeat("a")) && may(&a, &report("a")));
        assert!(!may(&a, &heartbeat("b")) && !may(&a, &report("b")));
        assert!(!may(&a, &allocate) && !may(&a, &status));
        assert!(may(&gateway, &allocate));
        assert!(!may(&gateway, &heartbeat("a")) && !may(&gateway, &report("a")));
        assert!(!may(&gateway, &status));
        for request in [heartbeat("a"), report("b"), allocate, status] {
            assert!(may(&Principal::Admin, &request));
        }
    }
}
