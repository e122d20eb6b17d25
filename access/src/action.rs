//! The IAM actions of the S3 operations Tessera serves: their `s3:` names
//! (as policies name them), whether they only read, and which ACL
//! permission grants them.

use crate::acl::Permission;

/// Whether an action only reads (an access key limited to `read` may call it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Right {
    /// Reads only.
    Read,
    /// Changes something.
    Write,
}

/// Where an action's ACL permission is looked up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// The bucket's ACL.
    Bucket,
    /// The object's ACL (the object must exist).
    Object,
}

/// What a policy's Resource names for an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arn {
    /// `arn:aws:s3:::bucket`.
    Bucket,
    /// `arn:aws:s3:::bucket/key`.
    Key,
}

macro_rules! actions {
    ($( $(#[$doc:meta])* $name:ident = $text:literal, $right:ident, $scope:ident, $arn:ident, $permission:expr; )*) => {
        /// An S3 action, as IAM policies name it (`s3:GetObject`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Action {
            $( $(#[$doc])* $name, )*
        }

        impl Action {
            /// Every action.
            pub const ALL: &'static [Action] = &[$(Action::$name,)*];

            /// The policy name, `s3:GetObject`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Action::$name => $text,)*
                }
            }

            /// Whether the action only reads.
            pub fn right(self) -> Right {
                match self {
                    $(Action::$name => Right::$right,)*
                }
            }

            fn scope(self) -> Scope {
                match self {
                    $(Action::$name => Scope::$scope,)*
                }
            }

            fn arn(self) -> Arn {
                match self {
                    $(Action::$name => Arn::$arn,)*
                }
            }

            /// The ACL permission that grants the action, if any does
            /// (FULL_CONTROL grants every one that has one).
            pub fn acl_permission(self) -> Option<Permission> {
                match self {
                    $(Action::$name => $permission,)*
                }
            }
        }
    };
}

use Permission::{Read, ReadAcp, Write, WriteAcp};

actions! {
    /// ListBuckets.
    ListAllMyBuckets = "s3:ListAllMyBuckets", Read, Bucket, Bucket, None;
    /// CreateBucket.
    CreateBucket = "s3:CreateBucket", Write, Bucket, Bucket, None;
    /// DeleteBucket.
    DeleteBucket = "s3:DeleteBucket", Write, Bucket, Bucket, None;
    /// ListObjects, ListObjectsV2, HeadBucket.
    ListBucket = "s3:ListBucket", Read, Bucket, Bucket, Some(Read);
    /// ListObjectVersions.
    ListBucketVersions = "s3:ListBucketVersions", Read, Bucket, Bucket, Some(Read);
    /// ListMultipartUploads.
    ListBucketMultipartUploads = "s3:ListBucketMultipartUploads", Read, Bucket, Bucket, Some(Read);
    /// GetBucketLocation.
    GetBucketLocation = "s3:GetBucketLocation", Read, Bucket, Bucket, None;
    /// GetBucketAcl.
    GetBucketAcl = "s3:GetBucketAcl", Read, Bucket, Bucket, Some(ReadAcp);
    /// PutBucketAcl.
    PutBucketAcl = "s3:PutBucketAcl", Write, Bucket, Bucket, Some(WriteAcp);
    /// GetBucketCors.
    GetBucketCors = "s3:GetBucketCORS", Read, Bucket, Bucket, None;
    /// PutBucketCors, DeleteBucketCors.
    PutBucketCors = "s3:PutBucketCORS", Write, Bucket, Bucket, None;
    /// GetBucketEncryption.
    GetEncryptionConfiguration = "s3:GetEncryptionConfiguration", Read, Bucket, Bucket, None;
    /// PutBucketEncryption, DeleteBucketEncryption.
    PutEncryptionConfiguration = "s3:PutEncryptionConfiguration", Write, Bucket, Bucket, None;
    /// GetBucketLifecycleConfiguration.
    GetLifecycleConfiguration = "s3:GetLifecycleConfiguration", Read, Bucket, Bucket, None;
    /// PutBucketLifecycleConfiguration, DeleteBucketLifecycle.
    PutLifecycleConfiguration = "s3:PutLifecycleConfiguration", Write, Bucket, Bucket, None;
    /// GetBucketTagging.
    GetBucketTagging = "s3:GetBucketTagging", Read, Bucket, Bucket, None;
    /// PutBucketTagging, DeleteBucketTagging.
    PutBucketTagging = "s3:PutBucketTagging", Write, Bucket, Bucket, None;
    /// GetBucketVersioning.
    GetBucketVersioning = "s3:GetBucketVersioning", Read, Bucket, Bucket, None;
    /// PutBucketVersioning.
    PutBucketVersioning = "s3:PutBucketVersioning", Write, Bucket, Bucket, None;
    /// GetBucketOwnershipControls.
    GetBucketOwnershipControls = "s3:GetBucketOwnershipControls", Read, Bucket, Bucket, None;
    /// PutBucketOwnershipControls, DeleteBucketOwnershipControls.
    PutBucketOwnershipControls = "s3:PutBucketOwnershipControls", Write, Bucket, Bucket, None;
    /// GetPublicAccessBlock.
    GetBucketPublicAccessBlock = "s3:GetBucketPublicAccessBlock", Read, Bucket, Bucket, None;
    /// PutPublicAccessBlock, DeletePublicAccessBlock.
    PutBucketPublicAccessBlock = "s3:PutBucketPublicAccessBlock", Write, Bucket, Bucket, None;
    /// GetBucketPolicy.
    GetBucketPolicy = "s3:GetBucketPolicy", Read, Bucket, Bucket, None;
    /// PutBucketPolicy.
    PutBucketPolicy = "s3:PutBucketPolicy", Write, Bucket, Bucket, None;
    /// DeleteBucketPolicy.
    DeleteBucketPolicy = "s3:DeleteBucketPolicy", Write, Bucket, Bucket, None;
    /// GetBucketPolicyStatus.
    GetBucketPolicyStatus = "s3:GetBucketPolicyStatus", Read, Bucket, Bucket, None;
    /// PutObject, CopyObject (the target), multipart uploads, browser forms.
    PutObject = "s3:PutObject", Write, Bucket, Key, Some(Write);
    /// DeleteObject, DeleteObjects.
    DeleteObject = "s3:DeleteObject", Write, Bucket, Key, Some(Write);
    /// AbortMultipartUpload.
    AbortMultipartUpload = "s3:AbortMultipartUpload", Write, Bucket, Key, Some(Write);
    /// ListParts.
    ListMultipartUploadParts = "s3:ListMultipartUploadParts", Read, Bucket, Key, Some(Write);
    /// GetObject, HeadObject, the source of a copy.
    GetObject = "s3:GetObject", Read, Object, Key, Some(Read);
    /// GetObjectAttributes.
    GetObjectAttributes = "s3:GetObjectAttributes", Read, Object, Key, Some(Read);
    /// GetObjectAcl.
    GetObjectAcl = "s3:GetObjectAcl", Read, Object, Key, Some(ReadAcp);
    /// PutObjectAcl.
    PutObjectAcl = "s3:PutObjectAcl", Write, Object, Key, Some(WriteAcp);
    /// GetObjectTagging.
    GetObjectTagging = "s3:GetObjectTagging", Read, Object, Key, None;
    /// PutObjectTagging.
    PutObjectTagging = "s3:PutObjectTagging", Write, Object, Key, None;
    /// DeleteObjectTagging.
    DeleteObjectTagging = "s3:DeleteObjectTagging", Write, Object, Key, None;
    /// GetObject, HeadObject and copies of a named version.
    GetObjectVersion = "s3:GetObjectVersion", Read, Object, Key, Some(Read);
    /// GetObjectAttributes of a named version.
    GetObjectVersionAttributes = "s3:GetObjectVersionAttributes", Read, Object, Key, Some(Read);
    /// DeleteObject of a named version.
    DeleteObjectVersion = "s3:DeleteObjectVersion", Write, Bucket, Key, Some(Write);
    /// GetObjectAcl of a named version.
    GetObjectVersionAcl = "s3:GetObjectVersionAcl", Read, Object, Key, Some(ReadAcp);
    /// PutObjectAcl of a named version.
    PutObjectVersionAcl = "s3:PutObjectVersionAcl", Write, Object, Key, Some(WriteAcp);
    /// GetObjectTagging of a named version.
    GetObjectVersionTagging = "s3:GetObjectVersionTagging", Read, Object, Key, None;
    /// PutObjectTagging of a named version.
    PutObjectVersionTagging = "s3:PutObjectVersionTagging", Write, Object, Key, None;
    /// DeleteObjectTagging of a named version.
    DeleteObjectVersionTagging = "s3:DeleteObjectVersionTagging", Write, Object, Key, None;
    /// GetObjectLockConfiguration.
    GetBucketObjectLockConfiguration = "s3:GetBucketObjectLockConfiguration", Read, Bucket, Bucket, None;
    /// PutObjectLockConfiguration, and CreateBucket with object lock.
    PutBucketObjectLockConfiguration = "s3:PutBucketObjectLockConfiguration", Write, Bucket, Bucket, None;
    /// GetObjectRetention.
    GetObjectRetention = "s3:GetObjectRetention", Read, Object, Key, None;
    /// PutObjectRetention, and writes that set a retention.
    PutObjectRetention = "s3:PutObjectRetention", Write, Object, Key, None;
    /// GetObjectLegalHold.
    GetObjectLegalHold = "s3:GetObjectLegalHold", Read, Object, Key, None;
    /// PutObjectLegalHold, and writes that set a legal hold.
    PutObjectLegalHold = "s3:PutObjectLegalHold", Write, Object, Key, None;
    /// Removing or shortening a GOVERNANCE retention.
    BypassGovernanceRetention = "s3:BypassGovernanceRetention", Write, Bucket, Key, None;
}

impl Action {
    /// Whether the action is judged on an existing object (its owner and
    /// ACL) rather than on the bucket.
    pub fn on_object(self) -> bool {
        self.scope() == Scope::Object
    }

    /// Whether a policy names the action's resource as `bucket/key` (else
    /// as the bucket).
    pub fn on_key(self) -> bool {
        self.arn() == Arn::Key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_actions_name_keys_and_bucket_actions_buckets() {
        assert!(Action::GetObject.on_key());
        assert!(Action::PutObject.on_key());
        assert!(!Action::ListBucket.on_key());
        assert!(!Action::GetBucketAcl.on_key());
    }

    #[test]
    fn names_are_unique_iam_names() {
        let mut names: Vec<&str> = Action::ALL.iter().map(|a| a.name()).collect();
        assert!(names.iter().all(|n| n.starts_with("s3:") && n.len() > 3));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Action::ALL.len());
    }

    /// The grants of AWS's table "ACL permissions and the access policy
    /// permissions they map to".
    #[test]
    fn acl_permissions_follow_aws_mapping() {
        use Action::*;
        let granted_by = |p| {
            let mut actions: Vec<Action> = Action::ALL
                .iter()
                .copied()
                .filter(|a| a.acl_permission() == Some(p))
                .collect();
            actions.sort_by_key(|a| a.name());
            actions
        };
        assert_eq!(
            granted_by(Permission::Read),
            [
                GetObject,
                GetObjectAttributes,
                GetObjectVersion,
                GetObjectVersionAttributes,
                ListBucket,
                ListBucketMultipartUploads,
                ListBucketVersions
            ]
        );
        assert_eq!(
            granted_by(Permission::Write),
            [
                AbortMultipartUpload,
                DeleteObject,
                DeleteObjectVersion,
                ListMultipartUploadParts,
                PutObject
            ]
        );
        assert_eq!(
            granted_by(Permission::ReadAcp),
            [GetBucketAcl, GetObjectAcl, GetObjectVersionAcl]
        );
        assert_eq!(
            granted_by(Permission::WriteAcp),
            [PutBucketAcl, PutObjectAcl, PutObjectVersionAcl]
        );
        assert!(GetObject.on_object() && !PutObject.on_object() && !ListBucket.on_object());
        assert_eq!(PutObjectTagging.right(), Right::Write);
        assert_eq!(GetBucketAcl.right(), Right::Read);
    }
}
