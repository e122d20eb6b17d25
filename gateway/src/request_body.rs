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
/// Bytes gathered before they are hashed together.
const BATCH_BYTES: usize = 1024 * 1024;
/// Batches at least this large are hashed on the blocking pool, concurrently
/// with the rest of the PUT; smaller ones inline.
const BLOCKING_HASH_MIN: usize = 128 * 1024;

/// What a stored body left behind: durable blocks, not yet visible.
#[derive(Debug)]
pub struct StoredBody {
    /// Hex MD5 of the bytes, the object's or part's ETag.
    pub etag: String,
    /// Where the bytes were stored.
    pub written: WrittenKey,
    /// The `x-amz-checksum-*` the client sent and the body matched, if any.
    pub checksum: Option<(auth::ChecksumAlgorithm, String)>,
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

/// The body's MD5, computed one batch behind the bytes on the blocking pool:
/// while batch `n` is hashed, batch `n + 1` is received and handed to the
/// writer, whose flush task encodes and sends earlier stripes meanwhile. So
/// one PUT runs at the pace of its slowest stage, not the sum of them. Small
/// batches are hashed inline, where a thread hop costs more than the MD5.
struct BodyDigest {
    /// The state when no batch is being hashed.
    idle: Option<Md5>,
    /// The batch being hashed; it hands the state back when done.
    hashing: Option<tokio::task::JoinHandle<Md5>>,
}

impl BodyDigest {
    fn new() -> Self {
        Self {
            idle: Some(Md5::new()),
            hashing: None,
        }
    }

    /// The state after every batch fed so far.
    async fn settled(&mut self) -> Result<Md5, S3Error> {
        match self.hashing.take() {
            Some(hashing) => hashing.await.map_err(S3Error::internal),
            None => self
                .idle
                .take()
                .ok_or_else(|| S3Error::internal("body digest already finished")),
        }
    }

    /// Hashes `batch` after the batches before it, in the background when it
    /// is large; waits only for the previous batch's hash.
    async fn feed(&mut self, batch: Vec<Bytes>, batch_len: usize) -> Result<(), S3Error> {
        let mut state = self.settled().await?;
        if batch_len < BLOCKING_HASH_MIN {
            for chunk in &batch {
                state.update(chunk);
            }
            self.idle = Some(state);
        } else {
            self.hashing = Some(tokio::task::spawn_blocking(move || {
                for chunk in &batch {
                    state.update(chunk);
                }
                state
            }));
        }
        Ok(())
    }

    async fn finish(mut self) -> Result<[u8; 16], S3Error> {
        Ok(self.settled().await?.finalize().into())
    }
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
    let mut digest = BodyDigest::new();
    let result = async {
        let writer = guard.writer()?;
        let mut batch = Vec::new();
        let mut batch_len = 0;
        while let Some(item) = body.next().await {
            let chunk = item?;
            count_bytes_in(chunk.len());
            batch_len += chunk.len();
            batch.push(chunk.clone());
            // The writer copies into its stripe and returns; the stripe is
            // encoded and sent by its flush task while the body goes on.
            writer.write(chunk).await?;
            if batch_len >= BATCH_BYTES {
                digest.feed(std::mem::take(&mut batch), batch_len).await?;
                batch_len = 0;
            }
        }
        digest.feed(batch, batch_len).await
    }
    .await;
    let writer = guard.disarm()?;
    if let Err(e) = result {
        writer.abort().await;
        return Err(e);
    }
    let digest = match digest.finish().await {
        Ok(digest) => digest,
        Err(e) => {
            writer.abort().await;
            return Err(e);
        }
    };
    if expected_md5.is_some_and(|expected| expected != digest) {
        writer.abort().await;
        return Err(S3Error::new(S3Code::BadDigest).detail("CalculatedDigest", base64_md5(&digest)));
    }
    let written = writer.finish().await?;
    Ok(StoredBody {
        etag: hex::encode(digest),
        written,
        checksum: body.verified_checksum(),
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
