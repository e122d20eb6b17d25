//! Request bodies: object data streamed into a `KeyWriter` while its MD5 is
//! computed (PutObject, UploadPart), and small XML bodies read whole under a
//! size limit. Every body goes through `auth::body_stream`, which checks the
//! payload hash, aws-chunked signatures, declared length and checksums.

use crate::auth::{self, BodyStream, VerifiedRequest};
use crate::error::{S3Code, S3Error};
use crate::telemetry::count_bytes_in;
use axum::body::Body;
use blockstore::client::{KeyWriter, WrittenKey};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http::HeaderMap;
use md5::{Digest, Md5};

/// Largest single PUT (and part) S3 accepts: 5 GiB.
pub const MAX_OBJECT_UPLOAD: u64 = 5 * 1024 * 1024 * 1024;
/// Bytes gathered before they are hashed and handed to the writer together.
const BATCH_BYTES: usize = 1024 * 1024;
/// Batches at least this large are hashed on the blocking pool, concurrently
/// with the write; smaller ones inline, where a thread hop costs more than MD5.
const BLOCKING_HASH_MIN: usize = 128 * 1024;

/// What a stored body left behind: durable blocks, not yet visible.
#[derive(Debug)]
pub struct StoredBody {
    /// Hex MD5 of the bytes, the object's or part's ETag.
    pub etag: String,
    /// Where the bytes were stored.
    pub written: WrittenKey,
}

/// The object data of a PUT: requires a declared length (Content-Length, or
/// x-amz-decoded-content-length for aws-chunked) of at most 5 GiB.
pub fn open_object_body(
    request: &VerifiedRequest,
    headers: &HeaderMap,
    body: Body,
) -> Result<BodyStream, S3Error> {
    let stream = auth::body_stream(request, headers, body)?;
    match stream.declared_length() {
        None => Err(S3Error::new(S3Code::MissingContentLength)),
        Some(len) if len > MAX_OBJECT_UPLOAD => Err(S3Error::new(S3Code::EntityTooLarge)
            .detail("ProposedSize", len.to_string())
            .detail("MaxSizeAllowed", MAX_OBJECT_UPLOAD.to_string())),
        Some(_) => Ok(stream),
    }
}

fn too_big() -> S3Error {
    S3Error::new(S3Code::MaxMessageLengthExceeded)
}

/// Reads a small request body (an XML document) whole; MaxMessageLengthExceeded
/// past `limit`. A request that declares no body at all reads as empty.
pub async fn read_small_body(
    request: &VerifiedRequest,
    headers: &HeaderMap,
    body: Body,
    limit: u64,
) -> Result<Bytes, S3Error> {
    let declares_body = headers.contains_key(http::header::CONTENT_LENGTH)
        || headers.contains_key(http::header::TRANSFER_ENCODING)
        || headers.contains_key("x-amz-decoded-content-length");
    if !declares_body {
        return Ok(Bytes::new());
    }
    let mut stream = auth::body_stream(request, headers, body)?;
    if stream.declared_length().is_some_and(|len| len > limit) {
        return Err(too_big());
    }
    let mut out = BytesMut::new();
    while let Some(item) = stream.next().await {
        let chunk = item?;
        count_bytes_in(chunk.len());
        if (out.len() + chunk.len()) as u64 > limit {
            return Err(too_big());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out.freeze())
}

/// Hashes and writes one batch; large batches hash on the blocking pool while
/// the writer sends the same bytes.
async fn write_batch(
    hasher: &mut Md5,
    writer: &mut KeyWriter,
    batch: Vec<Bytes>,
    batch_len: usize,
) -> Result<(), S3Error> {
    if batch_len < BLOCKING_HASH_MIN {
        for chunk in batch {
            hasher.update(&chunk);
            writer.write(chunk).await?;
        }
        return Ok(());
    }
    let mut state = std::mem::take(hasher);
    let to_hash = batch.clone();
    let hashing = tokio::task::spawn_blocking(move || {
        for chunk in &to_hash {
            state.update(chunk);
        }
        state
    });
    let writing = async {
        for chunk in batch {
            writer.write(chunk).await?;
        }
        Ok::<(), S3Error>(())
    };
    let (hashed, written) = tokio::join!(hashing, writing);
    *hasher = hashed.map_err(S3Error::internal)?;
    written
}

/// Aborts a writer that is dropped unfinished, e.g. when the client goes
/// away and the request future is cancelled mid-body.
struct AbortOnDrop(Option<KeyWriter>);

impl AbortOnDrop {
    /// The writer, for as long as it is armed.
    fn writer(&mut self) -> Result<&mut KeyWriter, S3Error> {
        self.0
            .as_mut()
            .ok_or_else(|| S3Error::internal("key writer already taken"))
    }

    /// Takes the writer back; dropping the guard then does nothing.
    fn disarm(mut self) -> Result<KeyWriter, S3Error> {
        self.0
            .take()
            .ok_or_else(|| S3Error::internal("key writer already taken"))
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(writer) = self.0.take() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(writer.abort());
            }
        }
    }
}

/// Streams `body` into `writer`, computing the MD5 as bytes pass. The writer
/// is aborted, and nothing is kept, when the body fails (a failed signature or
/// checksum is its last item), a write fails, or the MD5 is not `expected_md5`.
pub async fn store_body(
    mut body: BodyStream,
    writer: KeyWriter,
    expected_md5: Option<[u8; 16]>,
) -> Result<StoredBody, S3Error> {
    let mut guard = AbortOnDrop(Some(writer));
    let mut hasher = Md5::new();
    let result = async {
        let writer = guard.writer()?;
        let mut batch = Vec::new();
        let mut batch_len = 0;
        while let Some(item) = body.next().await {
            let chunk = item?;
            count_bytes_in(chunk.len());
            batch_len += chunk.len();
            batch.push(chunk);
            if batch_len >= BATCH_BYTES {
                write_batch(&mut hasher, writer, std::mem::take(&mut batch), batch_len).await?;
                batch_len = 0;
            }
        }
        write_batch(&mut hasher, writer, batch, batch_len).await
    }
    .await;
    let writer = guard.disarm()?;
    if let Err(e) = result {
        writer.abort().await;
        return Err(e);
    }
    let digest: [u8; 16] = hasher.finalize().into();
    if expected_md5.is_some_and(|expected| expected != digest) {
        writer.abort().await;
        return Err(S3Error::new(S3Code::BadDigest).detail("CalculatedDigest", base64_md5(&digest)));
    }
    let written = writer.finish().await?;
    Ok(StoredBody {
        etag: hex::encode(digest),
        written,
    })
}

fn base64_md5(digest: &[u8; 16]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(digest)
}

/// Commits what a PUT or UploadPart stored with `commit`. On a definite refusal
/// (NoSuchBucket, NoSuchUpload, ...) the written blocks are freed; when the
/// answer was lost the commit may have landed, so the blocks are left alone
/// rather than risk deleting a visible object (an orphan costs only space).
pub async fn commit_or_discard<F>(
    meta: &blockstore::meta::MetaClient,
    groups: Vec<blockstore::meta::BlockGroup>,
    commit: F,
) -> Result<(), S3Error>
where
    F: std::future::Future<Output = Result<(), blockstore::meta::MetaError>>,
{
    let Err(error) = commit.await else {
        return Ok(());
    };
    if error.may_have_applied() {
        tracing::warn!(%error, "commit outcome unknown; keeping its blocks");
    } else if let Err(discard) = meta.discard_blocks(groups).await {
        tracing::warn!(error = %discard, "discarding blocks of an uncommitted write failed");
    }
    Err(error.into())
}
