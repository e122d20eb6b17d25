//! Server-side encryption as requests ask for it and answers tell it, and
//! the key that opens a stored body.
//!
//! SSE-S3 (`x-amz-server-side-encryption: AES256`): the gateway makes a data
//! key for the body, seals the body with it as it streams to the datanodes
//! (`sse::Sealer`), and hands the key to meta with the commit; meta stores it
//! sealed under its master key and hands it back, opened, with every read,
//! when the gateway opens the packages a range needs (`sse::Opener`). SSE-C,
//! SSE-KMS and encrypted multipart uploads are refused (501) rather than
//! stored in clear.

use crate::error::{S3Code, S3Error};
use block_client::KeyReader;
use bytes::{Bytes, BytesMut};
use futures::{stream, Stream, StreamExt, TryStreamExt};
use http::{HeaderMap, HeaderValue};
use meta_api::{Encryption, EncryptionMode, ObjectAttributes, ObjectRecord};
use sse::{DataKey, OpenError, Opener, SealedRange, Sealer};

/// The encryption a write asks for, and a read's answer tells.
pub const SSE_HEADER: &str = "x-amz-server-side-encryption";
/// Prefix of the SSE-C headers (customer-provided keys).
const CUSTOMER_PREFIX: &str = "x-amz-server-side-encryption-customer-";
/// Prefix of the SSE-C headers of a copy's source.
const COPY_SOURCE_CUSTOMER_PREFIX: &str = "x-amz-copy-source-server-side-encryption-customer-";
/// The KMS key of SSE-KMS.
const KMS_KEY_HEADER: &str = "x-amz-server-side-encryption-aws-kms-key-id";

fn has_prefixed(headers: &HeaderMap, prefix: &str) -> bool {
    headers.keys().any(|name| name.as_str().starts_with(prefix))
}

/// The encryption a write (PutObject, CopyObject, PostObject) asks for in
/// `headers`, refused as S3 refuses what it does not accept, and with 501
/// what Tessera does not offer yet.
pub fn requested(headers: &HeaderMap) -> Result<Option<EncryptionMode>, S3Error> {
    if has_prefixed(headers, CUSTOMER_PREFIX) || has_prefixed(headers, COPY_SOURCE_CUSTOMER_PREFIX)
    {
        return Err(S3Error::not_implemented(
            "server-side encryption with customer keys (SSE-C)",
        ));
    }
    let mode = match headers.get(SSE_HEADER).map(|v| v.to_str().unwrap_or("")) {
        None => None,
        Some("AES256") => Some(EncryptionMode::S3),
        Some("aws:kms" | "aws:kms:dsse") => {
            return Err(S3Error::not_implemented(
                "server-side encryption with KMS keys (SSE-KMS)",
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
    if headers.contains_key(KMS_KEY_HEADER) {
        return Err(S3Error::invalid_argument(
            "Server Side Encryption with AWS KMS managed key requires HTTP header \
             x-amz-server-side-encryption : aws:kms",
        )
        .detail("ArgumentName", SSE_HEADER));
    }
    Ok(mode)
}

/// Refuses encryption headers on a request that takes none: a read (S3
/// answers them 400), or a write Tessera cannot encrypt yet (501).
pub fn refuse_on_read(headers: &HeaderMap) -> Result<(), S3Error> {
    if has_prefixed(headers, CUSTOMER_PREFIX) {
        return Err(S3Error::with_message(
            S3Code::InvalidRequest,
            "The encryption parameters are not applicable to this object.",
        ));
    }
    if headers.contains_key(SSE_HEADER) {
        return Err(S3Error::invalid_argument(
            "x-amz-server-side-encryption header is not supported for this operation.",
        )
        .detail("ArgumentName", SSE_HEADER));
    }
    Ok(())
}

/// Refuses a multipart upload that asks for encryption: not offered yet.
pub fn refuse_for_multipart(headers: &HeaderMap) -> Result<(), S3Error> {
    if requested(headers)?.is_some() {
        return Err(S3Error::not_implemented(
            "server-side encryption of multipart uploads",
        ));
    }
    Ok(())
}

/// A new body's encryption: its data key, and what the commit carries.
pub struct NewEncryption {
    key: DataKey,
    mode: EncryptionMode,
}

impl NewEncryption {
    /// A fresh data key for a body written in `mode`.
    pub fn new(mode: EncryptionMode) -> Result<Self, S3Error> {
        Ok(Self {
            key: DataKey::random().map_err(S3Error::internal)?,
            mode,
        })
    }

    /// The sealer of the body.
    pub fn sealer(&self) -> Sealer {
        Sealer::new(&self.key)
    }

    /// The record's encryption, carrying the key for meta to seal.
    pub fn for_commit(&self) -> Encryption {
        Encryption {
            mode: self.mode,
            sealed_key: String::new(),
            data_key: Some(hex::encode(self.key.as_bytes())),
        }
    }
}

/// Adds `x-amz-server-side-encryption` for an encrypted version.
pub fn insert_headers(headers: &mut HeaderMap, attributes: &ObjectAttributes) {
    if let Some(encryption) = &attributes.encryption {
        headers.insert(
            SSE_HEADER,
            HeaderValue::from_static(encryption.mode.header_value()),
        );
    }
}

/// How a record's stored bytes become its body.
#[derive(Clone, Debug)]
pub struct BodyKey {
    key: DataKey,
    /// The plaintext length.
    size: u64,
}

impl BodyKey {
    /// The key of `record`'s body; None when it is stored as sent.
    pub fn of(record: &ObjectRecord) -> Result<Option<Self>, S3Error> {
        let Some(encryption) = &record.attributes.encryption else {
            return Ok(None);
        };
        let key = encryption
            .data_key
            .as_deref()
            .and_then(|hex| hex::decode(hex).ok())
            .and_then(|bytes| DataKey::from_bytes(&bytes).ok())
            .ok_or_else(|| {
                S3Error::internal("meta answered an encrypted record without its key")
            })?;
        Ok(Some(Self {
            key,
            size: record.size,
        }))
    }

    /// The stored bytes plaintext `range` needs, and their opener.
    pub fn sealed_range(&self, range: std::ops::Range<u64>) -> (std::ops::Range<u64>, Opener) {
        let sealed = SealedRange::of(range, self.size);
        let opener = sealed.opener(&self.key);
        (sealed.sealed, opener)
    }
}

fn unreadable(error: OpenError) -> S3Error {
    tracing::error!(%error, "an encrypted body does not open");
    S3Error::internal(error)
}

/// The plaintext of stored `pieces` through `opener`.
pub fn open_all(mut opener: Opener, pieces: Vec<Bytes>) -> Result<Vec<Bytes>, S3Error> {
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
    opener: Opener,
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
                        let last = opener.take().map(Opener::finish).transpose();
                        let last = last.map_err(std::io::Error::other)?.flatten();
                        return Ok(Some((last.into_iter().collect(), (stored, None))));
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

    #[test]
    fn writes_ask_for_what_s3_accepts() {
        assert_eq!(requested(&headers(&[])).unwrap(), None);
        assert_eq!(
            requested(&headers(&[(SSE_HEADER, "AES256")])).unwrap(),
            Some(EncryptionMode::S3)
        );
        let code = |pairs: &[(&str, &str)]| requested(&headers(pairs)).unwrap_err().code();
        assert_eq!(code(&[(SSE_HEADER, "aes256")]), S3Code::InvalidArgument);
        assert_eq!(code(&[(SSE_HEADER, "aws:kms")]), S3Code::NotImplemented);
        assert_eq!(
            code(&[(SSE_HEADER, "AES256"), (KMS_KEY_HEADER, "k")]),
            S3Code::InvalidArgument
        );
        assert_eq!(
            code(&[("x-amz-server-side-encryption-customer-algorithm", "AES256")]),
            S3Code::NotImplemented
        );
        assert_eq!(
            refuse_on_read(&headers(&[(SSE_HEADER, "AES256")]))
                .unwrap_err()
                .code(),
            S3Code::InvalidArgument
        );
        assert!(refuse_on_read(&headers(&[])).is_ok());
        assert_eq!(
            refuse_for_multipart(&headers(&[(SSE_HEADER, "AES256")]))
                .unwrap_err()
                .code(),
            S3Code::NotImplemented
        );
    }

    #[tokio::test]
    async fn streamed_and_whole_openings_agree() {
        let new = NewEncryption::new(EncryptionMode::S3).unwrap();
        let plain: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut sealer = new.sealer();
        let mut stored: Vec<Bytes> = sealer.push(&plain);
        stored.extend(sealer.finish());
        let mut record = ObjectRecord::new(
            "b",
            "k",
            "e",
            proto::ReplicationConfig::Replicated { replicas: 1 },
            Vec::new(),
        );
        record.size = plain.len() as u64;
        record.attributes.encryption = Some(new.for_commit());
        let key = BodyKey::of(&record).unwrap().unwrap();
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
        assert!(BodyKey::of(&record).is_err());
    }
}
