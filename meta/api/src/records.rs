//! Records kept by the metadata service. They travel inside requests and
//! their answers, so they are plain serde data with little behaviour of their own.

use crate::lifecycle::{LifecycleRule, LifecycleStatus, Subject};
use crate::location::Location;
pub use access::{canonical_user_id, Grant, ObjectOwnership, PublicAccessBlock};
use proto::token::BlockToken;
use proto::{BlockId, BlockKey, DatanodeId, ObjectId, ReplicationConfig};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use crate::time::{now_millis, UnixMillis};

/// Where one internal block (EC) or one replica of a block lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaLocation {
    /// Internal block index within the group (0 for replicas).
    pub index: u8,
    /// The datanode holding this block file.
    pub datanode: DatanodeId,
    /// The datanode's address when the record was read (meta refreshes it from
    /// the registry on every lookup, so a restarted datanode on a new port is found).
    pub addr: String,
}

/// One block group (EC) or replicated block of an object, in object order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockGroup {
    /// Identifier of the group (or replicated block).
    pub block: BlockId,
    /// Bytes of object data in this group (its real length; padding not counted).
    pub length: u64,
    /// Where each internal block or replica lives.
    pub replicas: Vec<ReplicaLocation>,
    /// Meta's capability for these block files, signed when it hands the
    /// group out (lookup: read; allocation: write); never stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<BlockToken>,
}

impl BlockGroup {
    /// Every block file of this group, with the datanode that holds it.
    pub fn block_keys(&self) -> impl Iterator<Item = (BlockKey, &ReplicaLocation)> {
        self.replicas
            .iter()
            .map(|r| (BlockKey::new(self.block, r.index), r))
    }
}

/// Size and ETag of one part of a completed multipart object, kept for
/// GetObject?partNumber and for ListParts after completion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartSummary {
    /// Part number, 1-based.
    pub number: u32,
    /// Bytes in the part.
    pub size: u64,
    /// Hex MD5 of the part, without quotes.
    pub etag: String,
    /// The part's additional checksum, when its upload sent one.
    #[serde(default)]
    pub checksum: Option<StoredChecksum>,
    /// For an encrypted upload: the salt (hex) that makes the part's data
    /// key from the upload's (`sse::DataKey::derive`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_salt: Option<String>,
}

/// An additional checksum (`x-amz-checksum-*`) kept with an object or part,
/// as the client sent it and the gateway verified it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredChecksum {
    /// S3's algorithm name: CRC32, CRC32C, CRC64NVME, SHA1 or SHA256.
    pub algorithm: String,
    /// Base64 of the digest (CRCs big-endian).
    pub value: String,
}

/// What S3 keeps with an object besides data and headers: tags and the
/// additional checksum. Absent in records written before they existed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectAttributes {
    /// Object tags, by key.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// The whole-object checksum of a single PUT (or a copy).
    #[serde(default)]
    pub checksum: Option<StoredChecksum>,
    /// For multipart: the checksum algorithm named at CreateMultipartUpload.
    #[serde(default)]
    pub checksum_algorithm: Option<String>,
    /// For multipart: FULL_OBJECT or COMPOSITE, as named at CreateMultipartUpload.
    #[serde(default)]
    pub checksum_type: Option<String>,
    /// For multipart: the upload that made the object, so that a retried
    /// completion of it (its first answer lost) is answered with the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_id: Option<String>,
    /// The user who owns the object when not the bucket owner (a writer
    /// granted WRITE on the bucket, where ACLs are on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The object's ACL; None: `private`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl: Option<Vec<Grant>>,
    /// The version's object lock retention, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Retention>,
    /// The version's legal hold: None until one was first set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub legal_hold: Option<bool>,
    /// How the version's body is encrypted at rest; None: stored as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<Encryption>,
}

/// The server-side encryption of a body at rest (see the `sse` crate).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Encryption {
    /// Which encryption the writer asked for.
    pub mode: EncryptionMode,
    /// The body's data key sealed (hex), as stored: under meta's master key
    /// (SSE-S3), or under the client's key by the gateway (SSE-C).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sealed_key: String,
    /// SSE-C: base64 of the MD5 of the client's key, answered back and
    /// compared with the key a read brings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customer_key_md5: Option<String>,
    /// SSE-KMS: the id of the KMS key the data key is sealed under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    /// SSE-KMS: the encryption context the writer gave
    /// (`x-amz-server-side-encryption-context`, base64 of a JSON object),
    /// bound to the sealed key and answered back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms_context: Option<String>,
    /// The data key itself (hex), only ever between meta and a gateway:
    /// a commit carries it for meta to seal, an answer to a read for the
    /// gateway to open the body. Never stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_key: Option<String>,
}

impl std::fmt::Debug for Encryption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encryption")
            .field("mode", &self.mode)
            .field("sealed", &!self.sealed_key.is_empty())
            .field("data_key", &self.data_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// A server-side encryption mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EncryptionMode {
    /// SSE-S3 (`AES256`): a data key per body, sealed under meta's master key.
    S3,
    /// SSE-C: a data key per body, sealed by the gateway under the key the
    /// client sends with every write and read; meta never sees either key.
    Customer,
    /// SSE-KMS (`aws:kms`): a data key per body, sealed under a key of
    /// meta's key service that the writer names (or the default one).
    Kms,
}

impl EncryptionMode {
    /// The algorithm S3 names for this mode (in
    /// `x-amz-server-side-encryption`, or for SSE-C in
    /// `x-amz-server-side-encryption-customer-algorithm`).
    pub fn algorithm(self) -> &'static str {
        match self {
            Self::S3 | Self::Customer => "AES256",
            Self::Kms => "aws:kms",
        }
    }
}

/// An object lock retention mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockMode {
    /// Users with `s3:BypassGovernanceRetention` may shorten or remove it.
    Governance,
    /// Nobody may shorten or remove it until it expires.
    Compliance,
}

impl LockMode {
    /// The mode as S3 writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Governance => "GOVERNANCE",
            Self::Compliance => "COMPLIANCE",
        }
    }

    /// The mode S3 writes as `text` (case-sensitive, as S3 reads it).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "GOVERNANCE" => Some(Self::Governance),
            "COMPLIANCE" => Some(Self::Compliance),
            _ => None,
        }
    }
}

/// A version's retention: it may not be deleted before `until`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// How strict the retention is.
    pub mode: LockMode,
    /// When it ends.
    pub until: UnixMillis,
}

impl Retention {
    /// Whether it still protects its version at `now`.
    pub fn active(&self, now: UnixMillis) -> bool {
        self.until > now
    }

    /// Whether a version retained by `current` may be given `new` at `now`,
    /// as S3 allows: anything once `current` has expired; a COMPLIANCE
    /// retention only lengthened; a GOVERNANCE one lengthened, or changed
    /// in any way with `bypass_governance`.
    pub fn may_change(
        current: Option<&Retention>,
        new: Option<&Retention>,
        now: UnixMillis,
        bypass_governance: bool,
    ) -> bool {
        let Some(current) = current.filter(|c| c.active(now)) else {
            return true;
        };
        let lengthened = new.is_some_and(|n| n.mode == current.mode && n.until >= current.until);
        match current.mode {
            LockMode::Compliance => lengthened,
            LockMode::Governance => lengthened || bypass_governance,
        }
    }
}

impl ObjectAttributes {
    /// Whether object lock forbids removing the version at `now`: a legal
    /// hold, or an active retention (GOVERNANCE yields to
    /// `bypass_governance`).
    pub fn locked(&self, now: UnixMillis, bypass_governance: bool) -> bool {
        self.legal_hold == Some(true)
            || self.retention.is_some_and(|r| {
                r.active(now) && (r.mode == LockMode::Compliance || !bypass_governance)
            })
    }
}

/// A bucket's object lock (present: enabled, which it stays).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectLock {
    /// The retention new versions get when their write names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_retention: Option<DefaultRetention>,
}

/// A bucket's default retention rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefaultRetention {
    /// The mode new versions get.
    pub mode: LockMode,
    /// How long from their write.
    pub period: RetentionPeriod,
}

/// The length of a default retention, as the rule gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RetentionPeriod {
    /// Days of 24 hours.
    Days(u32),
    /// Years of 365 days.
    Years(u32),
}

impl DefaultRetention {
    /// The retention of a version written at `now`.
    pub fn from(&self, now: UnixMillis) -> Retention {
        const DAY: i64 = 24 * 3600 * 1000;
        let days = match self.period {
            RetentionPeriod::Days(days) => i64::from(days),
            RetentionPeriod::Years(years) => i64::from(years) * 365,
        };
        Retention {
            mode: self.mode,
            until: now.saturating_add(days.saturating_mul(DAY)),
        }
    }
}

/// A check made inside the commit transaction, so conditional writes are atomic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WriteCondition {
    /// `If-None-Match: *`: no object may exist at the key.
    KeyAbsent,
    /// `If-Match`: the object at the key must have this ETag (unquoted).
    EtagMatches(String),
    /// The object at the key must still be this one (metadata updates in place).
    SameObject(ObjectId),
}

/// A committed object: visible to readers from the moment it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRecord {
    /// Unique identifier, distinct across overwrites of the same key.
    pub id: ObjectId,
    /// Bucket holding the object.
    pub bucket: String,
    /// Object key.
    pub key: String,
    /// Bytes in the body.
    pub size: u64,
    /// Hex MD5 of the body, or `md5(part md5s)-N` for multipart; without quotes.
    pub etag: String,
    /// Content-Type sent on upload, if any.
    pub content_type: Option<String>,
    /// Other standard headers kept as sent (Content-Encoding, Cache-Control, ...),
    /// by lower-case header name.
    pub headers: BTreeMap<String, String>,
    /// `x-amz-meta-*` values, by lower-case name without the prefix.
    pub user_metadata: BTreeMap<String, String>,
    /// When the object was stored.
    pub created: UnixMillis,
    /// How the body's bytes are protected.
    pub replication: ReplicationConfig,
    /// Block groups holding the body, in object order.
    pub groups: Vec<BlockGroup>,
    /// Parts in order for a multipart object; empty for a single PUT.
    pub parts: Vec<PartSummary>,
    /// Tags and checksums.
    #[serde(default)]
    pub attributes: ObjectAttributes,
    /// Which version of the key this is, in a bucket that has had
    /// versioning; the default (the null version) everywhere else.
    #[serde(default, skip_serializing_if = "VersionStamp::is_default")]
    pub version: VersionStamp,
    /// The body itself, for an object small enough to live in its record
    /// (then `groups` is empty): no datanode holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline: Option<InlineBody>,
}

/// The most bytes meta keeps in one record's [`InlineBody`]: every update of
/// the record rewrites it whole, and meta's decoded cache holds it.
pub const MAX_INLINE_BODY: usize = 256 * 1024;

/// An object's stored bytes (sealed, when encrypted) kept in its record;
/// base64 in the record's JSON.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct InlineBody(pub bytes::Bytes);

impl InlineBody {
    /// Bytes held.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True for no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for InlineBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "InlineBody({} bytes)", self.0.len())
    }
}

impl Serialize for InlineBody {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use base64::Engine;
        serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for InlineBody {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use base64::Engine;
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map(|bytes| Self(bytes.into()))
            .map_err(serde::de::Error::custom)
    }
}

/// How S3 names the null version.
pub const NULL_VERSION: &str = "null";

/// A version's identity among the versions of its key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionStamp {
    /// The version id S3 clients see; None: the `null` version (written
    /// while versioning was off or suspended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its place among the versions of all keys: later writes have higher
    /// numbers (0: written before the bucket had versioning).
    #[serde(default)]
    pub seq: u64,
    /// A delete marker: a version without data that hides the key.
    #[serde(default)]
    pub delete_marker: bool,
}

impl VersionStamp {
    /// The null version of a bucket that never had versioning.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// The id as S3 answers it: `null` for the null version.
    pub fn id_or_null(&self) -> &str {
        self.id.as_deref().unwrap_or(NULL_VERSION)
    }
}

impl ObjectRecord {
    /// What lifecycle rules look at in this version.
    pub fn lifecycle_subject(&self) -> Subject<'_> {
        Subject {
            key: &self.key,
            tags: &self.attributes.tags,
            size: self.size,
            created: self.created,
            delete_marker: self.version.delete_marker,
        }
    }
    /// A record of the data in `groups` at `bucket`/`key`, sized by the groups'
    /// lengths, with a fresh id and no headers, metadata, parts or attributes:
    /// callers set what else their object carries.
    pub fn new(
        bucket: impl Into<String>,
        key: impl Into<String>,
        etag: impl Into<String>,
        replication: ReplicationConfig,
        groups: Vec<BlockGroup>,
    ) -> Self {
        Self {
            id: ObjectId::random(),
            bucket: bucket.into(),
            key: key.into(),
            size: groups.iter().map(|g| g.length).sum(),
            etag: etag.into(),
            content_type: None,
            headers: BTreeMap::new(),
            user_metadata: BTreeMap::new(),
            created: 0,
            replication,
            groups,
            parts: Vec::new(),
            attributes: ObjectAttributes::default(),
            version: VersionStamp::default(),
            inline: None,
        }
    }
}

/// One entry of an object listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectSummary {
    /// Object key.
    pub key: String,
    /// Bytes in the body.
    pub size: u64,
    /// Hex ETag, without quotes.
    pub etag: String,
    /// When the object was stored.
    pub created: UnixMillis,
}

/// A page of a listing, in UTF-8 byte order of keys.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListPage {
    /// Objects on this page, in key order.
    pub objects: Vec<ObjectSummary>,
    /// Prefixes rolled up by the delimiter, each once, in order.
    pub common_prefixes: Vec<String>,
    /// Whether more entries follow this page.
    pub is_truncated: bool,
    /// When truncated: the last key or common prefix returned; the next page
    /// starts strictly after it.
    pub next_marker: Option<String>,
}

/// A bucket and who owns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketRecord {
    /// Bucket name.
    pub name: String,
    /// User name of the owner.
    pub owner: String,
    /// When the bucket was created.
    pub created: UnixMillis,
    /// Default replication for new objects; None means "the cluster default".
    pub replication: Option<ReplicationConfig>,
    /// Bucket tags, by key.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Anonymous GET/HEAD of objects and listings are allowed (set by an admin).
    #[serde(default)]
    pub public_read: bool,
    /// CORS rules answered to browsers; empty when the bucket has none.
    #[serde(default)]
    pub cors: Vec<CorsRule>,
    /// The bucket's ACL; None: `private`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl: Option<Vec<Grant>>,
    /// Its object ownership control; None: none set (buckets made before
    /// they existed), which behaves as ObjectWriter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<ObjectOwnership>,
    /// Its public access block, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_access_block: Option<PublicAccessBlock>,
    /// Its bucket policy, as put (JSON), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Its versioning; None: never enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versioning: Option<Versioning>,
    /// Its object lock, once enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_lock: Option<ObjectLock>,
    /// Its lifecycle rules; empty when it has no lifecycle configuration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lifecycle: Vec<LifecycleRule>,
    /// The encryption of writes that ask for none; None: stored as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<BucketEncryption>,
}

/// A bucket's default encryption (PutBucketEncryption).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketEncryption {
    /// The encryption writes get when they ask for none.
    pub mode: EncryptionMode,
    /// `BucketKeyEnabled` as put; kept and answered back, with no effect
    /// on how bodies are sealed.
    #[serde(default)]
    pub bucket_key_enabled: bool,
    /// For `aws:kms`: the KMS key as put (an id, an ARN or an alias);
    /// None: the default key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
}

/// A key of meta's built-in key service (SSE-KMS). Its key material is
/// stored sealed under meta's master key and never leaves meta.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KmsKeyRecord {
    /// The key's id (a UUID), as ARNs and object records name it.
    pub id: String,
    /// Its alias, without the `alias/` prefix (`aws/s3` for the default key).
    pub alias: String,
    /// When it was made.
    pub created: UnixMillis,
}

/// A bucket's versioning once it was first enabled (it never returns to
/// "never enabled").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Versioning {
    /// Every write makes a new version.
    Enabled,
    /// Writes replace the null version; older versions stay.
    Suspended,
}

impl Versioning {
    /// The status as S3 writes it in a VersioningConfiguration.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enabled => "Enabled",
            Self::Suspended => "Suspended",
        }
    }
}

/// One version (or delete marker) in a listing of versions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionSummary {
    /// Object key.
    pub key: String,
    /// The version's identity.
    pub version: VersionStamp,
    /// Whether it is the key's latest version.
    pub is_latest: bool,
    /// Bytes in the body (0 for a delete marker).
    pub size: u64,
    /// ETag without quotes (empty for a delete marker).
    pub etag: String,
    /// When it was written.
    pub created: UnixMillis,
    /// Its owner when not the bucket owner.
    pub owner: Option<String>,
}

/// A page of a listing of versions: keys in UTF-8 byte order, the versions
/// of each key newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionsPage {
    /// Versions and delete markers on this page.
    pub versions: Vec<VersionSummary>,
    /// Prefixes rolled up by the delimiter, each once, in order.
    pub common_prefixes: Vec<String>,
    /// Whether more entries follow this page.
    pub is_truncated: bool,
    /// When truncated: the key of the last entry (or the last common prefix).
    pub next_key_marker: Option<String>,
    /// When truncated after a version: its id (`null` for the null version).
    pub next_version_id_marker: Option<String>,
}

impl BucketRecord {
    /// The ownership that decides access: ObjectWriter when none is set.
    pub fn effective_ownership(&self) -> ObjectOwnership {
        self.ownership.unwrap_or(ObjectOwnership::ObjectWriter)
    }
}

/// One CORS rule of a bucket, as PutBucketCors gave it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorsRule {
    /// The rule's optional ID.
    pub id: Option<String>,
    /// Origins the rule matches; each may hold one `*` wildcard.
    pub allowed_origins: Vec<String>,
    /// HTTP methods the rule allows (GET, PUT, POST, DELETE, HEAD).
    pub allowed_methods: Vec<String>,
    /// Request headers a preflight may ask for; each may hold one `*`.
    pub allowed_headers: Vec<String>,
    /// Response headers the browser may expose to scripts.
    pub expose_headers: Vec<String>,
    /// How long a browser may cache the preflight answer.
    pub max_age_seconds: Option<u32>,
}

/// A multipart upload in progress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadRecord {
    /// Identifier the client uses for the upload.
    pub upload_id: String,
    /// Bucket the object will land in.
    pub bucket: String,
    /// Key the object will get.
    pub key: String,
    /// User who started the upload.
    pub owner: String,
    /// When the upload started.
    pub created: UnixMillis,
    /// Content-Type for the completed object.
    pub content_type: Option<String>,
    /// Standard headers for the completed object, by lower-case name.
    pub headers: BTreeMap<String, String>,
    /// `x-amz-meta-*` values for the completed object, by name without the prefix.
    pub user_metadata: BTreeMap<String, String>,
    /// How the parts' bytes are protected.
    pub replication: ReplicationConfig,
    /// Tags and checksum settings for the completed object.
    #[serde(default)]
    pub attributes: ObjectAttributes,
}

/// One uploaded part; a re-upload of the same number replaces it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartRecord {
    /// Upload the part belongs to.
    pub upload_id: String,
    /// Part number, 1-based.
    pub number: u32,
    /// Bytes in the part.
    pub size: u64,
    /// Hex MD5 of the part, without quotes.
    pub etag: String,
    /// When the part was stored.
    pub created: UnixMillis,
    /// Block groups holding the part, in order.
    pub groups: Vec<BlockGroup>,
    /// The part's additional checksum, when the client sent one.
    #[serde(default)]
    pub checksum: Option<StoredChecksum>,
    /// For an encrypted upload: the salt (hex) of the part's data key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_salt: Option<String>,
}

/// A part named in CompleteMultipartUpload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletedPart {
    /// Part number, 1-based.
    pub number: u32,
    /// The ETag the client sent, with or without quotes.
    pub etag: String,
    /// Checksums the client named for the part (`ChecksumCRC32` and the
    /// like); each must be the one the part was uploaded with.
    #[serde(default)]
    pub checksums: Vec<StoredChecksum>,
}

impl CompletedPart {
    /// A part named by number and ETag only.
    pub fn new(number: u32, etag: impl Into<String>) -> CompletedPart {
        CompletedPart {
            number,
            etag: etag.into(),
            checksums: Vec::new(),
        }
    }
}

/// A user: owns buckets and access keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRecord {
    /// User name.
    pub name: String,
    /// When the user was created.
    pub created: UnixMillis,
    /// The root user may reach every bucket.
    pub is_root: bool,
    /// The user's policy (JSON in the IAM policy language), when an operator
    /// gave it one: the user may then do only what it allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

/// An S3 access key and its secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessKeyRecord {
    /// The public access key id.
    pub access_key: String,
    /// The secret used to sign requests.
    pub secret_key: String,
    /// User the key belongs to.
    pub user: String,
    /// When the key was created.
    pub created: UnixMillis,
    /// When set, the key reaches only these buckets, each with its right
    /// (even buckets its user owns); None means every bucket the user may use.
    #[serde(default)]
    pub bucket_grants: Option<Vec<BucketGrant>>,
}

/// What a limited access key may do in one bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BucketRight {
    /// Reads only: GET/HEAD objects, listings.
    Read,
    /// Reads and writes.
    ReadWrite,
}

/// One bucket a limited access key may reach.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketGrant {
    /// Bucket name.
    pub bucket: String,
    /// What the key may do there.
    pub right: BucketRight,
}

/// The right a key with `grants` (its `bucket_grants`) has in `bucket`: None
/// when the key is limited to other buckets, ReadWrite when it is not limited.
pub fn key_right(grants: Option<&[BucketGrant]>, bucket: &str) -> Option<BucketRight> {
    match grants {
        None => Some(BucketRight::ReadWrite),
        Some(grants) => grants.iter().find(|g| g.bucket == bucket).map(|g| g.right),
    }
}

/// What an operator asked of a datanode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdminState {
    /// Takes new blocks; its block files count while it lives.
    #[default]
    InService,
    /// Leaving for good: no new blocks, and every block file it holds is
    /// copied to another datanode; then [`AdminState::Decommissioned`].
    Decommissioning,
    /// Holds no block file any group needs: it can be stopped.
    Decommissioned,
    /// Down for a while on purpose: no new blocks, and its block files are
    /// not repaired around even once it is dead.
    Maintenance,
}

/// Liveness of a datanode as meta sees it from heartbeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DatanodeState {
    /// Heartbeats arrive; gets new blocks.
    Healthy,
    /// Missed heartbeats for the stale interval; gets no new blocks.
    Stale,
    /// Missed heartbeats for the dead interval; gets no new blocks.
    Dead,
}

/// A registered datanode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatanodeRecord {
    /// Identifier the datanode registered with.
    pub id: DatanodeId,
    /// TCP address clients use for the block protocol.
    pub addr: String,
    /// Unix socket for short-circuit reads, when the datanode offers one.
    pub local_socket: Option<String>,
    /// Disk capacity in bytes.
    pub capacity: u64,
    /// Bytes of block files stored.
    pub used: u64,
    /// Bytes of deleted block files its volumes still hold, until compacted.
    #[serde(default)]
    pub garbage: u64,
    /// Block files stored.
    pub blocks: u64,
    /// When the last heartbeat arrived.
    pub last_heartbeat: UnixMillis,
    /// Liveness derived from heartbeats.
    pub state: DatanodeState,
    /// How far its scrubber got, as of its last heartbeat.
    #[serde(default)]
    pub scrub: ScrubProgress,
    /// What an operator asked of it (kept apart from heartbeats).
    #[serde(default)]
    pub admin: AdminState,
    /// Where it stands among failure domains: the location it reported,
    /// else its advertised host.
    #[serde(default)]
    pub location: Location,
    /// Its disks, as of its last heartbeat.
    #[serde(default)]
    pub disks: Vec<DiskReport>,
}

/// One disk of a datanode, as its heartbeat reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskReport {
    /// Its folder on the datanode's host.
    pub path: String,
    /// Block files on it.
    pub blocks: u64,
    /// Bytes of block files on it.
    pub used: u64,
    /// Bytes its filesystem can still take.
    pub available: u64,
    /// Why it was taken out of service, if it was (its block files were
    /// reported lost and are rebuilt elsewhere).
    #[serde(default)]
    pub failed: Option<String>,
}

impl DatanodeRecord {
    /// Bytes it can still take: its capacity less its block files and its
    /// volumes' garbage.
    pub fn free(&self) -> u64 {
        self.capacity
            .saturating_sub(self.used)
            .saturating_sub(self.garbage)
    }
}

/// How far a datanode's scrubber (which reads every block file against its
/// checksums in the background) got.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubProgress {
    /// Whole passes over every block file since the datanode started.
    pub passes: u64,
    /// Bytes checked in the current pass.
    pub checked_bytes: u64,
    /// Bytes the current pass checks in all.
    pub pass_bytes: u64,
    /// When the last whole pass ended (0: none yet).
    pub last_pass_end: UnixMillis,
    /// Damaged block files found since the datanode started.
    pub damaged: u64,
}

/// A block file a datanode found damaged (by its scrubber) and took out of
/// service; meta counts it as missing and has it rebuilt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DamagedBlockFile {
    /// The block file.
    pub key: BlockKey,
    /// What was wrong with it.
    pub reason: String,
}

/// What a datanode reports on each heartbeat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatanodeReport {
    /// Identifier of the reporting datanode.
    pub id: DatanodeId,
    /// TCP address for the block protocol.
    pub addr: String,
    /// Unix socket for short-circuit reads, if offered.
    pub local_socket: Option<String>,
    /// Disk capacity in bytes.
    pub capacity: u64,
    /// Bytes of block files stored.
    pub used: u64,
    /// Bytes of deleted block files its volumes still hold, until compacted.
    #[serde(default)]
    pub garbage: u64,
    /// Block files stored.
    pub blocks: u64,
    /// Block files deleted since the last heartbeat, acknowledging earlier commands.
    pub deleted: Vec<BlockKey>,
    /// Block files found damaged since the last answered heartbeat.
    #[serde(default)]
    pub damaged: Vec<DamagedBlockFile>,
    /// How far the scrubber got.
    #[serde(default)]
    pub scrub: ScrubProgress,
    /// Where it stands (`--location`); None puts it on its advertised host.
    #[serde(default)]
    pub location: Option<Location>,
    /// Its disks.
    #[serde(default)]
    pub disks: Vec<DiskReport>,
}

/// Cluster overview for `tessera admin status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStatus {
    /// Every registered datanode.
    pub datanodes: Vec<DatanodeRecord>,
    /// Number of buckets.
    pub buckets: u64,
    /// Number of objects.
    pub objects: u64,
    /// Block files queued for deletion.
    pub pending_deletions: u64,
    /// How well the stored groups are protected, and the repairs.
    #[serde(default)]
    pub redundancy: RedundancyStatus,
    /// The lifecycle worker's passes.
    #[serde(default)]
    pub lifecycle: LifecycleStatus,
    /// The balancer, and how far each datanode's use is from the mean.
    #[serde(default)]
    pub balance: BalanceStatus,
}

/// The block groups by how much of their redundancy they keep (as the last
/// redundancy scan found them), and the repair work.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedundancyStatus {
    /// Groups with every block file readable.
    pub healthy: u64,
    /// Groups missing block files but keeping a spare.
    pub degraded: u64,
    /// Groups one more loss away from unreadable.
    pub at_risk: u64,
    /// Groups that cannot be read until a datanode returns.
    pub lost: u64,
    /// Groups waiting for repair.
    pub queued: u64,
    /// Repairs running.
    pub running: u64,
    /// Bytes read and written by repairs since meta started.
    pub repaired_bytes: u64,
    /// When the last scan ran (0: none yet).
    pub last_scan: UnixMillis,
    /// Groups readable but with more block files in one failure domain
    /// than the placement rule allows (counted apart from the states above).
    #[serde(default)]
    pub misplaced: u64,
}

/// What the balancer does: it moves block files from datanodes whose use
/// is above the mean to those below it, until every datanode's use (bytes
/// the records list there over its capacity) is within the threshold of
/// the mean.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalanceStatus {
    /// Whether it runs (`tessera admin balance start|stop`).
    pub enabled: bool,
    /// Largest distance of a datanode's use from the mean, in percentage points.
    pub threshold_percent: u32,
    /// Block file bytes the balancer hands out a second in the whole cluster (0: no limit).
    pub bandwidth: u64,
    /// What it did last.
    pub state: BalanceState,
    /// Moves queued and not yet done.
    pub queued: u64,
    /// Moves done since meta started.
    pub moved: u64,
    /// Bytes those moves copied.
    pub moved_bytes: u64,
    /// Moves that failed since meta started (planned again later).
    pub failed: u64,
    /// When it last planned moves (0: never).
    pub last_round: UnixMillis,
    /// Each datanode in service, with the bytes the records list on it, as
    /// the last redundancy scan counted them.
    pub datanodes: Vec<DatanodeUse>,
}

/// Where the balancer stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum BalanceState {
    /// Stopped by an operator.
    #[default]
    Off,
    /// Not yet run since meta started.
    Waiting,
    /// Every datanode is within the threshold of the mean.
    Balanced,
    /// Moves are planned or under way.
    Moving,
    /// Some datanode is outside the threshold, but no move keeps every
    /// group's placement: nothing to do until the cluster changes.
    Stuck,
}

/// One datanode's share of the stored bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatanodeUse {
    /// The datanode.
    pub id: DatanodeId,
    /// Bytes of the block files the records list on it.
    pub listed_bytes: u64,
    /// Its capacity, as of its last heartbeat.
    pub capacity: u64,
}

/// Smallest size of every part of a multipart upload but the last, as in S3.
pub const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;
/// Highest part number, as in S3.
pub const MAX_PART_NUMBER: u32 = 10_000;

/// One page of an upload's parts, in number order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartsPage {
    /// Parts on this page.
    pub parts: Vec<PartRecord>,
    /// Whether more parts follow.
    pub is_truncated: bool,
}

/// What one ListMultipartUploads page asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadQuery {
    /// Only uploads whose key starts with this.
    pub prefix: String,
    /// Start after this key (or, with `upload_id_marker`, within it).
    pub key_marker: Option<String>,
    /// Within `key_marker`, start after this upload.
    pub upload_id_marker: Option<String>,
    /// Roll keys up to the first occurrence of this after the prefix.
    pub delimiter: Option<String>,
    /// Most uploads and common prefixes on the page.
    pub max_uploads: u32,
}

/// One page of uploads in progress.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadPage {
    /// Uploads on this page, by key, then initiation time, then id.
    pub uploads: Vec<UploadRecord>,
    /// Prefixes rolled up by the delimiter, each once, in order.
    pub common_prefixes: Vec<String>,
    /// Whether more entries follow this page.
    pub is_truncated: bool,
    /// When truncated: the key (or common prefix) the next page starts after.
    pub next_key_marker: Option<String>,
    /// When truncated after an upload: its id, the next page's upload-id marker.
    pub next_upload_id_marker: Option<String>,
}

/// Most blocks one piece of a block report may list.
pub const MAX_REPORTED_BLOCKS: usize = 50_000;

/// One committed block file a datanode holds. Travels as a compact
/// `[block id, index, age ms]` triple, since reports list every block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "(u64, u8, u64)", into = "(u64, u8, u64)")]
pub struct ReportedBlock {
    /// The block file.
    pub key: BlockKey,
    /// Milliseconds since it was committed on the datanode (its sidecar's
    /// mtime), by the datanode's clock; an age, so clocks need not agree.
    pub age_ms: u64,
}

impl From<(u64, u8, u64)> for ReportedBlock {
    fn from((block, index, age_ms): (u64, u8, u64)) -> Self {
        Self {
            key: BlockKey::new(BlockId(block), index),
            age_ms,
        }
    }
}

impl From<ReportedBlock> for (u64, u8, u64) {
    fn from(b: ReportedBlock) -> Self {
        (b.key.block.0, b.key.index, b.age_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retention(mode: LockMode, until: UnixMillis) -> Retention {
        Retention { mode, until }
    }

    #[test]
    fn retention_changes_follow_s3() {
        use LockMode::*;
        let now = 1_000;
        let may = |current: Option<Retention>, new: Option<Retention>, bypass| {
            Retention::may_change(current.as_ref(), new.as_ref(), now, bypass)
        };
        // Nothing, or something expired, may become anything.
        assert!(may(None, None, false));
        assert!(may(Some(retention(Compliance, now)), None, false));
        for mode in [Governance, Compliance] {
            let current = Some(retention(mode, 2_000));
            // Lengthened or kept, same mode: always.
            assert!(may(current, Some(retention(mode, 2_000)), false));
            assert!(may(current, Some(retention(mode, 3_000)), false));
            // Shortened or removed: only GOVERNANCE, only with bypass.
            for new in [Some(retention(mode, 1_999)), None] {
                assert!(!may(current, new, false));
                assert_eq!(may(current, new, true), mode == Governance);
            }
        }
        // A change of mode loosens COMPLIANCE and needs bypass from GOVERNANCE.
        let governance = Some(retention(Governance, 2_000));
        assert!(!may(governance, Some(retention(Compliance, 3_000)), false));
        assert!(may(governance, Some(retention(Compliance, 3_000)), true));
        let compliance = Some(retention(Compliance, 2_000));
        assert!(!may(compliance, Some(retention(Governance, 3_000)), true));
    }

    #[test]
    fn locked_versions() {
        let now = 1_000;
        let mut attributes = ObjectAttributes::default();
        assert!(!attributes.locked(now, false));
        attributes.legal_hold = Some(false);
        assert!(!attributes.locked(now, false));
        attributes.retention = Some(retention(LockMode::Governance, now + 1));
        assert!(attributes.locked(now, false));
        assert!(!attributes.locked(now, true));
        assert!(!attributes.locked(now + 1, false));
        attributes.retention = Some(retention(LockMode::Compliance, now + 1));
        assert!(attributes.locked(now, true));
        attributes.retention = None;
        attributes.legal_hold = Some(true);
        assert!(attributes.locked(now, true));
    }

    #[test]
    fn default_retention_counts_days_and_years() {
        let rule = |period| DefaultRetention {
            mode: LockMode::Governance,
            period,
        };
        let day = 24 * 3600 * 1000;
        assert_eq!(rule(RetentionPeriod::Days(2)).from(5).until, 5 + 2 * day);
        assert_eq!(rule(RetentionPeriod::Years(1)).from(0).until, 365 * day);
    }

    #[test]
    fn limited_keys_reach_only_their_buckets() {
        let mut key = AccessKeyRecord {
            access_key: "AK".into(),
            secret_key: "s".into(),
            user: "u".into(),
            created: 0,
            bucket_grants: None,
        };
        assert_eq!(
            key_right(key.bucket_grants.as_deref(), "any"),
            Some(BucketRight::ReadWrite)
        );
        key.bucket_grants = Some(vec![BucketGrant {
            bucket: "photos".into(),
            right: BucketRight::Read,
        }]);
        assert_eq!(
            key_right(key.bucket_grants.as_deref(), "photos"),
            Some(BucketRight::Read)
        );
        assert_eq!(key_right(key.bucket_grants.as_deref(), "other"), None);
    }

    #[test]
    fn reported_blocks_travel_as_compact_triples() {
        let block = ReportedBlock {
            key: BlockKey::new(BlockId(7), 3),
            age_ms: 1234,
        };
        let text = serde_json::to_string(&block).unwrap();
        assert_eq!(text, "[7,3,1234]");
        assert_eq!(serde_json::from_str::<ReportedBlock>(&text).unwrap(), block);
    }

    #[test]
    fn a_new_record_is_sized_by_its_groups() {
        let group = |block, length| BlockGroup {
            block: BlockId(block),
            length,
            replicas: Vec::new(),
            token: None,
        };
        let record = ObjectRecord::new(
            "b",
            "k",
            "etag",
            ReplicationConfig::REPLICATED_1,
            vec![group(1, 100), group(2, 23)],
        );
        assert_eq!(record.size, 123);
        assert_ne!(
            record.id,
            ObjectRecord::new("b", "k", "", ReplicationConfig::REPLICATED_1, vec![]).id
        );
    }
}
