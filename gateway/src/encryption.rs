//! Server-side encryption as requests ask for it and answers tell it, and
//! the key that opens a stored body.
//!
//! SSE-S3 (`x-amz-server-side-encryption: AES256`, or the bucket's default
//! encryption): the gateway makes a data key for the body, seals the body
//! with it as it streams to the datanodes (`sse::Sealer`), and hands the key
//! to meta with the commit; meta stores it sealed under its master key and
//! hands it back, opened, with every read, when the gateway opens the
//! packages a range needs (`sse::SealedBody`). A multipart upload gets its
//! data key at creation, and each part seals under a key derived from it
//! and a random salt kept with the part. SSE-C and SSE-KMS are refused
//! (501) rather than stored in clear.

use crate::error::{S3Code, S3Error};
use crate::listener::ClientConnection;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use block_client::KeyReader;
use bytes::{Bytes, BytesMut};
use futures::{stream, Stream, StreamExt, TryStreamExt};
use http::{HeaderMap, HeaderValue};
use md5::{Digest, Md5};
use meta_api::{
    BucketRecord, Encryption, EncryptionMode, MetaClient, ObjectAttributes, ObjectRecord,
};
use rand::RngCore;
use sse::{BodyOpener, DataKey, KeyEncryptionKey, OpenError, SealedBody, Sealer};
use zeroize::Zeroizing;

/// The encryption a write asks for, and a read's answer tells.
pub const SSE_HEADER: &str = "x-amz-server-side-encryption";
/// Prefix of the SSE-C headers (customer-provided keys).
const CUSTOMER_PREFIX: &str = "x-amz-server-side-encryption-customer-";
/// The SSE-C algorithm a write names and a read's answer tells.
const CUSTOMER_ALGORITHM_HEADER: &str = "x-amz-server-side-encryption-customer-algorithm";
/// The MD5 of the SSE-C key, as a write sends it and a read's answer tells.
const CUSTOMER_KEY_MD5_HEADER: &str = "x-amz-server-side-encryption-customer-key-md5";
/// Prefix of the SSE-C headers of a copy's source.
const COPY_SOURCE_CUSTOMER_PREFIX: &str = "x-amz-copy-source-server-side-encryption-customer-";
/// The KMS key of SSE-KMS.
const KMS_KEY_HEADER: &str = "x-amz-server-side-encryption-aws-kms-key-id";
/// The encryption context of SSE-KMS.
const KMS_CONTEXT_HEADER: &str = "x-amz-server-side-encryption-context";
/// Tessera has no AWS account; the ARNs of its KMS keys name this one.
const KMS_ACCOUNT: &str = "000000000000";
/// Binds a data key sealed under a client's key to its use.
const CUSTOMER_CONTEXT: &[u8] = b"tessera sse-c v1";

fn has_prefixed(headers: &HeaderMap, prefix: &str) -> bool {
    headers.keys().any(|name| name.as_str().starts_with(prefix))
}

/// Whose SSE-C headers: the request's object, or a copy's source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyFor {
    /// `x-amz-server-side-encryption-customer-*`.
    Object,
    /// `x-amz-copy-source-server-side-encryption-customer-*`.
    CopySource,
}

impl KeyFor {
    fn prefix(self) -> &'static str {
        match self {
            Self::Object => CUSTOMER_PREFIX,
            Self::CopySource => COPY_SOURCE_CUSTOMER_PREFIX,
        }
    }
}

/// A key a client sent for SSE-C: it seals the body's data key, and only
/// its MD5 is kept.
#[derive(Clone, Debug)]
pub struct CustomerKey {
    key: KeyEncryptionKey,
    /// Base64 of the key's MD5, as the client sent it.
    md5: String,
}

/// SSE-C's refusals of a key's headers, in S3's words.
fn customer_refusal(message: &'static str) -> S3Error {
    S3Error::invalid_argument(message)
}

impl CustomerKey {
    /// The key `headers` carry for `whose`, checked as S3 checks it; None
    /// when they carry none.
    pub fn from_headers(headers: &HeaderMap, whose: KeyFor) -> Result<Option<Self>, S3Error> {
        let prefix = whose.prefix();
        if !has_prefixed(headers, prefix) {
            return Ok(None);
        }
        let text = |name: &str| {
            headers
                .get(format!("{prefix}{name}"))
                .map(|v| v.to_str().unwrap_or(""))
        };
        match text("algorithm") {
            Some("AES256") => {}
            Some(_) => {
                return Err(S3Error::with_message(
                    S3Code::InvalidEncryptionAlgorithmError,
                    "The encryption request you specified is not valid. The valid value is AES256.",
                ))
            }
            None => {
                return Err(customer_refusal(
                    "Requests specifying Server Side Encryption with Customer provided keys must \
                     provide a valid encryption algorithm.",
                ))
            }
        }
        let key = text("key").ok_or_else(|| {
            customer_refusal(
                "Requests specifying Server Side Encryption with Customer provided keys must \
                 provide an appropriate secret key.",
            )
        })?;
        let bytes = Zeroizing::new(STANDARD.decode(key).unwrap_or_default());
        let key = KeyEncryptionKey::from_bytes(&bytes).map_err(|_| {
            customer_refusal("The secret key was invalid for the specified algorithm.")
        })?;
        let md5 = text("key-md5").ok_or_else(|| {
            customer_refusal(
                "Requests specifying Server Side Encryption with Customer provided keys must \
                 provide the client calculated MD5 of the secret key.",
            )
        })?;
        let computed = STANDARD.encode(Md5::digest(bytes.as_slice()));
        if md5 != computed {
            return Err(customer_refusal(
                "The calculated MD5 hash of the key did not match the hash that was provided.",
            ));
        }
        Ok(Some(Self { key, md5: computed }))
    }

    /// The data key `encryption` holds sealed under this key; AccessDenied
    /// when this is not the key it was written with.
    fn open(&self, encryption: &Encryption) -> Result<DataKey, S3Error> {
        let denied = || {
            S3Error::with_message(
                S3Code::AccessDenied,
                "The provided encryption key does not match the key the object was written with.",
            )
        };
        if encryption.customer_key_md5.as_deref() != Some(self.md5.as_str()) {
            return Err(denied());
        }
        let sealed = hex::decode(&encryption.sealed_key).map_err(|_| denied())?;
        self.key
            .open(&sealed, CUSTOMER_CONTEXT)
            .map_err(|_| denied())
    }
}

/// The encryption a write asks for.
#[derive(Clone, Debug)]
pub enum Requested {
    /// SSE-S3.
    S3,
    /// SSE-C, with the client's key.
    Customer(CustomerKey),
    /// SSE-KMS, under the key named (None: the default key) and bound to
    /// the encryption context given (base64 of a JSON object).
    Kms {
        /// The key as the request names it: an id, an ARN or an alias.
        key: Option<String>,
        /// `x-amz-server-side-encryption-context`, checked, as sent.
        context: Option<String>,
    },
}

impl Requested {
    /// The mode records keep.
    pub fn mode(&self) -> EncryptionMode {
        match self {
            Self::S3 => EncryptionMode::S3,
            Self::Customer(_) => EncryptionMode::Customer,
            Self::Kms { .. } => EncryptionMode::Kms,
        }
    }
}

/// The encryption context of an SSE-KMS write, if it gives one: base64 of
/// a JSON object whose values are strings, as S3 takes it.
fn kms_context(headers: &HeaderMap) -> Result<Option<String>, S3Error> {
    let Some(value) = headers.get(KMS_CONTEXT_HEADER) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("");
    let valid = STANDARD
        .decode(text)
        .ok()
        .and_then(|json| serde_json::from_slice::<serde_json::Value>(&json).ok())
        .and_then(|value| {
            value
                .as_object()
                .map(|map| map.values().all(serde_json::Value::is_string))
        })
        .unwrap_or(false);
    if !valid {
        return Err(S3Error::invalid_argument(
            "The header 'x-amz-server-side-encryption-context' shall be Base64-encoded UTF-8 \
             string holding JSON which represents a string-string map",
        )
        .detail("ArgumentName", KMS_CONTEXT_HEADER));
    }
    Ok(Some(text.to_string()))
}

/// The encryption a write (PutObject, CopyObject, CreateMultipartUpload,
/// PostObject) asks for in `headers`, refused as S3 refuses what it does
/// not accept, and with 501 what Tessera does not offer yet.
pub fn requested(headers: &HeaderMap) -> Result<Option<Requested>, S3Error> {
    let customer = CustomerKey::from_headers(headers, KeyFor::Object)?;
    let method = headers.get(SSE_HEADER).map(|v| v.to_str().unwrap_or(""));
    if customer.is_some() && method.is_some() {
        return Err(customer_refusal(
            "Server Side Encryption with Customer provided key is incompatible with the \
             encryption method specified",
        ));
    }
    let requested = match method {
        None => customer.map(Requested::Customer),
        Some("AES256") => Some(Requested::S3),
        Some("aws:kms") => {
            let key = headers
                .get(KMS_KEY_HEADER)
                .map(|v| v.to_str().unwrap_or("").to_string());
            return Ok(Some(Requested::Kms {
                key,
                context: kms_context(headers)?,
            }));
        }
        Some("aws:kms:dsse") => {
            return Err(S3Error::not_implemented(
                "dual-layer server-side encryption with KMS keys (DSSE-KMS)",
            ))
        }
        Some(other) => {
            return Err(S3Error::invalid_argument(
                "The encryption method specified is not supported",
            )
            .detail("ArgumentName", SSE_HEADER)
            .detail("ArgumentValue", other.to_string()))
        }
    };
    if headers.contains_key(KMS_KEY_HEADER) || headers.contains_key(KMS_CONTEXT_HEADER) {
        return Err(S3Error::invalid_argument(
            "Server Side Encryption with AWS KMS managed key requires HTTP header \
             x-amz-server-side-encryption : aws:kms",
        )
        .detail("ArgumentName", SSE_HEADER));
    }
    Ok(requested)
}

/// Refuses `x-amz-server-side-encryption` on a request that takes none: a
/// read or an upload part (S3 answers it 400).
pub fn refuse_on_read(headers: &HeaderMap) -> Result<(), S3Error> {
    if let Some(value) = headers.get(SSE_HEADER) {
        return Err(S3Error::invalid_argument(
            "x-amz-server-side-encryption header is not supported for this operation.",
        )
        .detail("ArgumentName", SSE_HEADER)
        .detail("ArgumentValue", value.to_str().unwrap_or_default()));
    }
    Ok(())
}

/// Refuses a customer key sent in clear: SSE-C needs HTTPS, unless the
/// operator allows it over HTTP (`keys_over_http`: TLS ends in front of
/// the gateway).
pub fn refuse_keys_in_clear(
    headers: &HeaderMap,
    extensions: &http::Extensions,
    keys_over_http: bool,
) -> Result<(), S3Error> {
    let secure = extensions
        .get::<ClientConnection>()
        .is_some_and(|client| client.secure);
    let sends_key = |whose: KeyFor| headers.contains_key(format!("{}key", whose.prefix()));
    if !secure && !keys_over_http && (sends_key(KeyFor::Object) || sends_key(KeyFor::CopySource)) {
        return Err(S3Error::with_message(
            S3Code::InvalidRequest,
            "Requests specifying Server Side Encryption with Customer provided keys must be \
             made over a secure connection.",
        ));
    }
    Ok(())
}

/// The encryption a write gets: what it asks for, else its bucket's default.
pub fn for_write(headers: &HeaderMap, bucket: &BucketRecord) -> Result<Option<Requested>, S3Error> {
    Ok(requested(headers)?.or_else(|| {
        bucket
            .encryption
            .as_ref()
            .map(|default| match default.mode {
                EncryptionMode::Kms => Requested::Kms {
                    key: default.kms_key_id.clone(),
                    context: None,
                },
                EncryptionMode::S3 | EncryptionMode::Customer => Requested::S3,
            })
    }))
}

/// Bytes of a part's key salt.
const SALT_LEN: usize = 16;

/// A new body's encryption: its data key, and what the commit carries.
pub struct NewEncryption {
    key: DataKey,
    /// The record's encryption, as the commit carries it.
    commit: Encryption,
    /// A part's salt, which made its key from the upload's.
    salt: Option<[u8; SALT_LEN]>,
}

impl NewEncryption {
    /// A fresh data key for a body (or a multipart upload) written as
    /// `requested`, if anything; for SSE-KMS meta resolves the key the
    /// request names first (KMS.NotFoundException before any byte is
    /// stored).
    pub async fn prepare(
        requested: Option<Requested>,
        meta: &MetaClient,
        region: &str,
    ) -> Result<Option<Self>, S3Error> {
        let Some(requested) = requested else {
            return Ok(None);
        };
        let kms_key = match &requested {
            Requested::Kms { key, .. } => {
                let resolve = meta_api::ResolveKmsKey { key: key.clone() };
                let id = meta.call(resolve).await?;
                Some(format!("arn:aws:kms:{region}:{KMS_ACCOUNT}:key/{id}"))
            }
            _ => None,
        };
        Self::new(requested, kms_key).map(Some)
    }

    /// A fresh data key for a body written as `requested` (under KMS key
    /// `kms_key`, an ARN meta resolved, for SSE-KMS).
    fn new(requested: Requested, kms_key: Option<String>) -> Result<Self, S3Error> {
        let key = DataKey::random().map_err(S3Error::internal)?;
        let mut commit = Encryption {
            mode: requested.mode(),
            sealed_key: String::new(),
            customer_key_md5: None,
            kms_key_id: kms_key,
            kms_context: None,
            data_key: Some(hex::encode(key.as_bytes())),
        };
        match requested {
            Requested::S3 => {}
            Requested::Customer(customer) => {
                let sealed = customer
                    .key
                    .seal(&key, CUSTOMER_CONTEXT)
                    .map_err(S3Error::internal)?;
                commit.sealed_key = hex::encode(sealed);
                commit.customer_key_md5 = Some(customer.md5);
                commit.data_key = None;
            }
            Requested::Kms { context, .. } => commit.kms_context = context,
        }
        Ok(Self {
            key,
            commit,
            salt: None,
        })
    }

    /// The key of a new part of `upload` (for SSE-S3 and SSE-KMS meta
    /// answered it with the upload's data key; for SSE-C the part's request
    /// carries the client's key in `headers`): derived with a fresh salt,
    /// so a part uploaded again never reuses a key. None when the upload
    /// is not encrypted.
    pub fn for_part(
        upload: &ObjectAttributes,
        headers: &HeaderMap,
    ) -> Result<Option<Self>, S3Error> {
        let customer_upload = upload
            .encryption
            .as_ref()
            .is_some_and(|e| e.mode == EncryptionMode::Customer);
        if customer_upload && !has_prefixed(headers, CUSTOMER_PREFIX) {
            return Err(S3Error::with_message(
                S3Code::InvalidRequest,
                "The multipart upload initiate requested encryption. Subsequent part requests \
                 must include the appropriate encryption parameters.",
            ));
        }
        // S3 answers a part's other key 400, where a read's is 403.
        let upload_key = upload_key(upload, headers, KeyFor::Object).map_err(|e| {
            if e.code() == S3Code::AccessDenied {
                S3Error::with_message(
                    S3Code::InvalidRequest,
                    "The provided encryption parameters did not match the ones used originally.",
                )
            } else {
                e
            }
        })?;
        let (Some(upload_key), Some(encryption)) = (upload_key, upload.encryption.as_ref()) else {
            return Ok(None);
        };
        let mut salt = [0u8; SALT_LEN];
        rand::thread_rng().fill_bytes(&mut salt);
        Ok(Some(Self {
            key: upload_key.derive(&salt),
            commit: encryption.clone(),
            salt: Some(salt),
        }))
    }

    /// The sealer of the body.
    pub fn sealer(&self) -> Sealer {
        Sealer::new(&self.key)
    }

    /// The record's encryption: for SSE-S3 and SSE-KMS carrying the key
    /// for meta to seal, for SSE-C the key sealed already.
    pub fn for_commit(&self) -> Encryption {
        self.commit.clone()
    }

    /// The ETag of a body whose MD5 is `md5` (hex): the MD5 itself for
    /// SSE-S3; under a customer or KMS key, where S3's ETag is not the MD5
    /// of the plaintext, the MD5 of the data key and the body's MD5, so
    /// that the ETag confirms no guess of the contents.
    pub fn etag(&self, md5: &str) -> String {
        match self.commit.mode {
            EncryptionMode::S3 => md5.to_string(),
            EncryptionMode::Customer | EncryptionMode::Kms => {
                let mut digest = Md5::new();
                digest.update(self.key.as_bytes());
                digest.update(md5.as_bytes());
                hex::encode(digest.finalize())
            }
        }
    }

    /// A part's salt, as its record keeps it.
    pub fn key_salt(&self) -> Option<String> {
        self.salt.map(hex::encode)
    }
}

/// The data key of a record (or upload) with these `attributes`, for a
/// request with these `headers`: the key meta handed out with it (SSE-S3),
/// or the one sealed under the client's key, which `headers` must carry
/// (SSE-C). None when it is stored as sent.
fn upload_key(
    attributes: &ObjectAttributes,
    headers: &HeaderMap,
    whose: KeyFor,
) -> Result<Option<DataKey>, S3Error> {
    let customer = CustomerKey::from_headers(headers, whose)?;
    let not_applicable = || {
        S3Error::with_message(
            S3Code::InvalidRequest,
            "The encryption parameters are not applicable to this object.",
        )
    };
    match (&attributes.encryption, customer) {
        (None, None) => Ok(None),
        (Some(e), None) if e.mode == EncryptionMode::Customer => Err(S3Error::with_message(
            S3Code::InvalidRequest,
            "The object was stored using a form of Server Side Encryption. The correct \
             parameters must be provided to retrieve the object.",
        )),
        (Some(e), None) => transit_key(e).map(Some),
        (Some(e), Some(customer)) if e.mode == EncryptionMode::Customer => {
            customer.open(e).map(Some)
        }
        (_, Some(_)) => Err(not_applicable()),
    }
}

/// The data key meta handed out with a record (opened from its seal).
fn transit_key(encryption: &Encryption) -> Result<DataKey, S3Error> {
    encryption
        .data_key
        .as_deref()
        .and_then(|hex| hex::decode(hex).ok())
        .and_then(|bytes| DataKey::from_bytes(&bytes).ok())
        .ok_or_else(|| S3Error::internal("meta answered an encrypted record without its key"))
}

/// Adds the headers that tell how a version is encrypted:
/// `x-amz-server-side-encryption` for SSE-S3, with the key's ARN and the
/// encryption context for SSE-KMS; the customer algorithm and key MD5 for
/// SSE-C.
pub fn insert_headers(headers: &mut HeaderMap, attributes: &ObjectAttributes) {
    let Some(encryption) = &attributes.encryption else {
        return;
    };
    let algorithm = HeaderValue::from_static(encryption.mode.algorithm());
    let mut insert = |name: &'static str, value: Option<&String>| {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
            headers.insert(name, value);
        }
    };
    match encryption.mode {
        EncryptionMode::Customer => {
            insert(
                CUSTOMER_KEY_MD5_HEADER,
                encryption.customer_key_md5.as_ref(),
            );
            headers.insert(CUSTOMER_ALGORITHM_HEADER, algorithm);
        }
        EncryptionMode::Kms => {
            insert(KMS_KEY_HEADER, encryption.kms_key_id.as_ref());
            insert(KMS_CONTEXT_HEADER, encryption.kms_context.as_ref());
            headers.insert(SSE_HEADER, algorithm);
        }
        EncryptionMode::S3 => {
            headers.insert(SSE_HEADER, algorithm);
        }
    }
}

/// How a record's stored bytes become its body.
#[derive(Clone, Debug)]
pub struct BodyKey {
    body: SealedBody,
}

impl BodyKey {
    /// The key of `record`'s body, for a request with these `headers` (an
    /// SSE-C object opens only with the client's key in them, under
    /// `whose`); None when it is stored as sent. A multipart object's parts
    /// each open under their own derived key.
    pub fn of(
        record: &ObjectRecord,
        headers: &HeaderMap,
        whose: KeyFor,
    ) -> Result<Option<Self>, S3Error> {
        let Some(key) = upload_key(&record.attributes, headers, whose)? else {
            return Ok(None);
        };
        if record.parts.is_empty() {
            return Ok(Some(Self {
                body: SealedBody::single(record.size, key),
            }));
        }
        let pieces = record
            .parts
            .iter()
            .map(|part| {
                let salt = part
                    .key_salt
                    .as_deref()
                    .and_then(|salt| hex::decode(salt).ok())
                    .ok_or_else(|| {
                        S3Error::internal(format!(
                            "part {} of an encrypted object has no key salt",
                            part.number
                        ))
                    })?;
                Ok((part.size, salt))
            })
            .collect::<Result<_, S3Error>>()?;
        Ok(Some(Self {
            body: SealedBody::parts(key, pieces),
        }))
    }

    /// The stored bytes plaintext `range` needs, and their opener.
    pub fn sealed_range(&self, range: std::ops::Range<u64>) -> (std::ops::Range<u64>, BodyOpener) {
        self.body.range(range)
    }
}

fn unreadable(error: OpenError) -> S3Error {
    tracing::error!(%error, "an encrypted body does not open");
    S3Error::internal(error)
}

/// The plaintext of stored `pieces` through `opener`.
pub fn open_all(mut opener: BodyOpener, pieces: Vec<Bytes>) -> Result<Vec<Bytes>, S3Error> {
    let mut plain = Vec::new();
    for piece in pieces {
        plain.extend(opener.push_bytes(piece).map_err(unreadable)?);
    }
    plain.extend(opener.finish().map_err(unreadable)?);
    Ok(plain)
}

/// The plaintext of a stream of stored pieces through `opener`.
pub fn open_stream<S>(
    stored: S,
    opener: BodyOpener,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send
where
    S: Stream<Item = Result<Bytes, std::io::Error>> + Send + Unpin,
{
    stream::try_unfold(
        (stored, Some(opener)),
        |(mut stored, mut opener)| async move {
            loop {
                let Some(open) = opener.as_mut() else {
                    return Ok::<_, std::io::Error>(None);
                };
                match stored.next().await {
                    Some(piece) => {
                        let plain = open.push_bytes(piece?).map_err(std::io::Error::other)?;
                        if !plain.is_empty() {
                            return Ok(Some((plain, (stored, opener))));
                        }
                    }
                    None => {
                        let last = opener.take().map(BodyOpener::finish).transpose();
                        let last = last.map_err(std::io::Error::other)?.unwrap_or_default();
                        return Ok(Some((last, (stored, None))));
                    }
                }
            }
        },
    )
    .map_ok(|plain: Vec<Bytes>| stream::iter(plain.into_iter().map(Ok)))
    .try_flatten()
}

/// `len` bytes of plaintext at `offset` of a record read by `reader`,
/// opened with `key` when it is encrypted (copies read this way).
pub async fn read_plain_at(
    reader: &KeyReader,
    key: Option<&BodyKey>,
    offset: u64,
    len: usize,
) -> Result<Bytes, S3Error> {
    let Some(key) = key else {
        return Ok(reader.read_at(offset, len).await?);
    };
    let (sealed, opener) = key.sealed_range(offset..offset + len as u64);
    let stored = reader
        .read_at(sealed.start, (sealed.end - sealed.start) as usize)
        .await?;
    let plain = open_all(opener, vec![stored])?;
    let mut out = BytesMut::with_capacity(len);
    for piece in plain {
        out.extend_from_slice(&piece);
    }
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn mode(pairs: &[(&str, &str)]) -> Option<EncryptionMode> {
        requested(&headers(pairs))
            .unwrap()
            .as_ref()
            .map(Requested::mode)
    }

    /// A record of `size` bytes, stored as sent.
    fn record_of(size: u64) -> ObjectRecord {
        let mut record = ObjectRecord::new(
            "b",
            "k",
            "e",
            proto::ReplicationConfig::Replicated { replicas: 1 },
            Vec::new(),
        );
        record.size = size;
        record
    }

    #[test]
    fn writes_ask_for_what_s3_accepts() {
        assert_eq!(mode(&[]), None);
        assert_eq!(mode(&[(SSE_HEADER, "AES256")]), Some(EncryptionMode::S3));
        let code = |pairs: &[(&str, &str)]| requested(&headers(pairs)).unwrap_err().code();
        assert_eq!(code(&[(SSE_HEADER, "aes256")]), S3Code::InvalidArgument);
        assert_eq!(
            code(&[(SSE_HEADER, "aws:kms:dsse")]),
            S3Code::NotImplemented
        );
        assert_eq!(
            code(&[(SSE_HEADER, "AES256"), (KMS_KEY_HEADER, "k")]),
            S3Code::InvalidArgument
        );
        assert_eq!(
            code(&[(SSE_HEADER, "AES256"), (KMS_CONTEXT_HEADER, "e30=")]),
            S3Code::InvalidArgument
        );
        let kms = |pairs: &[(&str, &str)]| match requested(&headers(pairs)) {
            Ok(Some(Requested::Kms { key, context })) => Ok((key, context)),
            Ok(_) => panic!("not SSE-KMS: {pairs:?}"),
            Err(e) => Err(e.code()),
        };
        assert_eq!(kms(&[(SSE_HEADER, "aws:kms")]), Ok((None, None)));
        let context = STANDARD.encode(br#"{"a":"b","c":"d"}"#);
        assert_eq!(
            kms(&[
                (SSE_HEADER, "aws:kms"),
                (KMS_KEY_HEADER, "alias/app"),
                (KMS_CONTEXT_HEADER, &context)
            ]),
            Ok((Some("alias/app".into()), Some(context.clone())))
        );
        for bad in [
            STANDARD.encode(br#"{"n":1}"#),
            STANDARD.encode(br#"["a"]"#),
            STANDARD.encode(b"not json"),
            "%%%".to_string(),
        ] {
            assert_eq!(
                kms(&[(SSE_HEADER, "aws:kms"), (KMS_CONTEXT_HEADER, &bad)]),
                Err(S3Code::InvalidArgument),
                "{bad}"
            );
        }
        assert_eq!(
            refuse_on_read(&headers(&[(SSE_HEADER, "AES256")]))
                .unwrap_err()
                .code(),
            S3Code::InvalidArgument
        );
        assert!(refuse_on_read(&headers(&[])).is_ok());
        let mut bucket: BucketRecord =
            serde_json::from_str(r#"{"name":"b","owner":"o","created":0,"replication":null}"#)
                .unwrap();
        let default_mode = |bucket: &BucketRecord| {
            for_write(&headers(&[]), bucket)
                .unwrap()
                .as_ref()
                .map(Requested::mode)
        };
        assert_eq!(default_mode(&bucket), None);
        bucket.encryption = Some(meta_api::BucketEncryption {
            mode: EncryptionMode::S3,
            bucket_key_enabled: false,
            kms_key_id: None,
        });
        assert_eq!(default_mode(&bucket), Some(EncryptionMode::S3));
    }

    const KEY_A: [u8; 32] = [7; 32];
    const KEY_B: [u8; 32] = [9; 32];

    /// SSE-C headers for `key`, under `prefix`.
    fn customer(prefix: &str, key: &[u8]) -> Pairs {
        vec![
            (format!("{prefix}algorithm"), "AES256".into()),
            (format!("{prefix}key"), STANDARD.encode(key)),
            (
                format!("{prefix}key-md5"),
                STANDARD.encode(Md5::digest(key)),
            ),
        ]
    }

    /// Header pairs a test builds and changes.
    type Pairs = Vec<(String, String)>;

    fn owned(pairs: &[(String, String)]) -> HeaderMap {
        let pairs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        headers(&pairs)
    }

    #[test]
    fn customer_key_headers_are_checked_as_s3_checks_them() {
        let good = customer(CUSTOMER_PREFIX, &KEY_A);
        assert_eq!(
            mode(
                &good
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_str()))
                    .collect::<Vec<_>>()
            ),
            Some(EncryptionMode::Customer)
        );
        let refused = |change: &dyn Fn(&mut Pairs)| {
            let mut pairs = customer(CUSTOMER_PREFIX, &KEY_A);
            change(&mut pairs);
            requested(&owned(&pairs)).unwrap_err().code()
        };
        assert_eq!(
            refused(&|p| p[0].1 = "AES128".into()),
            S3Code::InvalidEncryptionAlgorithmError
        );
        assert_eq!(refused(&|p| drop(p.remove(0))), S3Code::InvalidArgument);
        assert_eq!(refused(&|p| drop(p.remove(1))), S3Code::InvalidArgument);
        assert_eq!(refused(&|p| drop(p.remove(2))), S3Code::InvalidArgument);
        assert_eq!(
            refused(&|p| p[1].1 = STANDARD.encode([1u8; 16])),
            S3Code::InvalidArgument,
            "a 128-bit key"
        );
        assert_eq!(
            refused(&|p| p[2].1 = STANDARD.encode(Md5::digest(KEY_B))),
            S3Code::InvalidArgument,
            "the MD5 of another key"
        );
        assert_eq!(
            refused(&|p| p.push((SSE_HEADER.into(), "AES256".into()))),
            S3Code::InvalidArgument,
            "both SSE-C and SSE-S3"
        );
        let clear = owned(&customer(CUSTOMER_PREFIX, &KEY_A));
        let plain = http::Extensions::new();
        assert_eq!(
            refuse_keys_in_clear(&clear, &plain, false)
                .unwrap_err()
                .code(),
            S3Code::InvalidRequest
        );
        assert!(refuse_keys_in_clear(&clear, &plain, true).is_ok());
        let mut tls = http::Extensions::new();
        tls.insert(ClientConnection {
            peer: "127.0.0.1:1".parse().unwrap(),
            secure: true,
        });
        assert!(refuse_keys_in_clear(&clear, &tls, false).is_ok());
        assert!(refuse_keys_in_clear(&headers(&[]), &plain, false).is_ok());
    }

    #[test]
    fn a_customer_sealed_body_opens_only_with_its_key() {
        let write = owned(&customer(CUSTOMER_PREFIX, &KEY_A));
        let new = NewEncryption::new(requested(&write).unwrap().unwrap(), None).unwrap();
        let commit = new.for_commit();
        assert_eq!(commit.data_key, None, "the data key leaves only sealed");
        assert!(!commit.sealed_key.contains(&hex::encode(KEY_A)));
        let mut record = record_of(10);
        record.attributes.encryption = Some(commit);
        let mut answer = HeaderMap::new();
        insert_headers(&mut answer, &record.attributes);
        assert_eq!(
            answer[CUSTOMER_KEY_MD5_HEADER],
            STANDARD.encode(Md5::digest(KEY_A))
        );
        assert!(!answer.contains_key(SSE_HEADER));
        let code = |h: &HeaderMap, whose| BodyKey::of(&record, h, whose).unwrap_err().code();
        assert!(BodyKey::of(&record, &write, KeyFor::Object)
            .unwrap()
            .is_some());
        assert_eq!(code(&headers(&[]), KeyFor::Object), S3Code::InvalidRequest);
        let other = owned(&customer(CUSTOMER_PREFIX, &KEY_B));
        assert_eq!(code(&other, KeyFor::Object), S3Code::AccessDenied);
        let source = owned(&customer(COPY_SOURCE_CUSTOMER_PREFIX, &KEY_A));
        assert!(BodyKey::of(&record, &source, KeyFor::CopySource)
            .unwrap()
            .is_some());
        assert_eq!(code(&write, KeyFor::CopySource), S3Code::InvalidRequest);
        // A key with the right MD5 on record but a seal it does not open.
        let mut forged = record.clone();
        forged.attributes.encryption.as_mut().unwrap().sealed_key =
            NewEncryption::new(requested(&other).unwrap().unwrap(), None)
                .unwrap()
                .for_commit()
                .sealed_key;
        assert_eq!(
            BodyKey::of(&forged, &write, KeyFor::Object)
                .unwrap_err()
                .code(),
            S3Code::AccessDenied
        );
        // Keys sent for an object that has none are refused.
        let mut clear = record.clone();
        clear.attributes.encryption = None;
        assert_eq!(
            BodyKey::of(&clear, &write, KeyFor::Object)
                .unwrap_err()
                .code(),
            S3Code::InvalidRequest
        );
    }

    #[test]
    fn parts_open_under_keys_derived_from_the_upload_key() {
        let upload = NewEncryption::new(Requested::S3, None).unwrap();
        let attributes = ObjectAttributes {
            encryption: Some(upload.for_commit()),
            ..Default::default()
        };
        let mut record = record_of(10);
        let mut stored = Vec::new();
        let mut plain = Vec::new();
        for (number, size) in [(1u32, 70_000usize), (2, 5)] {
            let part = NewEncryption::for_part(&attributes, &HeaderMap::new())
                .unwrap()
                .unwrap();
            let body: Vec<u8> = (0..size).map(|i| (i as u32 * number) as u8).collect();
            let mut sealer = part.sealer();
            stored.extend(sealer.push(&body).concat());
            stored.extend(sealer.finish().unwrap_or_default());
            plain.extend(body);
            record.parts.push(meta_api::PartSummary {
                number,
                size: size as u64,
                etag: "e".into(),
                checksum: None,
                key_salt: part.key_salt(),
            });
        }
        record.size = plain.len() as u64;
        record.attributes = attributes;
        let key = BodyKey::of(&record, &HeaderMap::new(), KeyFor::Object)
            .unwrap()
            .unwrap();
        let (sealed, opener) = key.sealed_range(69_999..70_003);
        let piece = Bytes::copy_from_slice(&stored[sealed.start as usize..sealed.end as usize]);
        assert_eq!(
            open_all(opener, vec![piece]).unwrap().concat(),
            &plain[69_999..70_003]
        );
        record.parts[1].key_salt = None;
        assert!(
            BodyKey::of(&record, &HeaderMap::new(), KeyFor::Object).is_err(),
            "a part without its salt"
        );
    }

    #[tokio::test]
    async fn streamed_and_whole_openings_agree() {
        let new = NewEncryption::new(Requested::S3, None).unwrap();
        let plain: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut sealer = new.sealer();
        let mut stored: Vec<Bytes> = sealer.push(&plain);
        stored.extend(sealer.finish());
        let mut record = record_of(10);
        record.size = plain.len() as u64;
        record.attributes.encryption = Some(new.for_commit());
        let key = BodyKey::of(&record, &HeaderMap::new(), KeyFor::Object)
            .unwrap()
            .unwrap();
        let all: Vec<u8> = stored.concat();
        let (sealed, opener) = key.sealed_range(70_000..150_000);
        let piece = Bytes::copy_from_slice(&all[sealed.start as usize..sealed.end as usize]);
        let whole = open_all(opener, vec![piece.clone()]).unwrap().concat();
        assert_eq!(whole, &plain[70_000..150_000]);
        let (_, opener) = key.sealed_range(70_000..150_000);
        let pieces: Vec<Result<Bytes, std::io::Error>> = piece
            .chunks(999)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let streamed: Vec<Bytes> = open_stream(stream::iter(pieces), opener)
            .try_collect()
            .await
            .unwrap();
        assert_eq!(streamed.concat(), whole);
        record.attributes.encryption.as_mut().unwrap().data_key = None;
        assert!(BodyKey::of(&record, &HeaderMap::new(), KeyFor::Object).is_err());
    }
}
