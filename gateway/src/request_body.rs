//! Request bodies: object data streamed into a `KeyWriter` while its MD5 is
//! computed (PutObject, UploadPart), and small XML bodies read whole under a
//! size limit. Every body goes through `auth::body_stream`, which checks the
//! payload hash, aws-chunked signatures, declared length and checksums.

use crate::auth::{self, BodyStream, ChecksumAlgorithm, VerifiedRequest};
use crate::error::{S3Code, S3Error};
use crate::telemetry::count_bytes_in;
use axum::body::Body;
use block_client::{KeyWriter, WrittenKey};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http::HeaderMap;
use md5::{Digest, Md5};
use sse::Sealer;

/// Largest single PUT (and part) S3 accepts: 5 GiB.
pub const MAX_OBJECT_UPLOAD: u64 = 5 * 1024 * 1024 * 1024;
/// Bytes gathered before they are hashed together.
const BATCH_BYTES: usize = 1024 * 1024;
/// A body reaching a batch this large is hashed on the blocking pool,
/// concurrently with the rest of the PUT; smaller ones inline.
const BLOCKING_HASH_MIN: usize = 128 * 1024;

/// What a stored body left behind: durable blocks, not yet visible.
#[derive(Debug)]
pub struct StoredBody {
    /// Hex MD5 of the bytes, the object's or part's ETag.
    pub etag: String,
    /// Bytes of the body as sent (stored longer when sealed).
    pub size: u64,
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

/// Reads a small document whose bytes the client vouches for: its
/// Content-MD5 is checked when sent (`x-amz-checksum-*` values are checked
/// by the body stream). With `required`, a request with neither is refused,
/// as S3 refuses it on the operations that require one.
pub async fn read_checked_document(
    request: &VerifiedRequest,
    headers: &HeaderMap,
    body: Body,
    limit: u64,
    required: bool,
) -> Result<Bytes, S3Error> {
    let expected_md5 = crate::headers::content_md5(headers)?;
    let has_checksum = headers.contains_key("x-amz-trailer")
        || ChecksumAlgorithm::ALL
            .iter()
            .any(|algorithm| headers.contains_key(algorithm.header_name()));
    if required && expected_md5.is_none() && !has_checksum {
        return Err(S3Error::with_message(
            S3Code::InvalidRequest,
            "Missing required header for this request: Content-MD5",
        ));
    }
    let document = read_small_body(request, headers, body, limit).await?;
    if let Some(expected) = expected_md5 {
        let hashed = document.clone();
        let actual: [u8; 16] = tokio::task::spawn_blocking(move || Md5::digest(&hashed).into())
            .await
            .map_err(S3Error::internal)?;
        if actual != expected {
            return Err(S3Error::new(S3Code::BadDigest));
        }
    }
    Ok(document)
}

/// Batches a body's hasher may have queued: 8 MiB, so that a pause of the
/// receive side (a full stripe queue, a slow datanode) never leaves the hash
/// idle, nor a pause of the hash the receive side.
const HASH_QUEUE_BATCHES: usize = 8;

/// The body's MD5. MD5 cannot be split across cores, so it bounds one PUT
/// stream; it runs on a thread of its own (the blocking pool) fed through a
/// queue of batches, concurrently with receiving the body, encoding and
/// sending stripes. Bodies smaller than one batch are hashed inline, where
/// the thread costs more than the MD5.
struct BodyDigest {
    /// The state while everything is hashed inline.
    inline: Option<Md5>,
    /// The background hasher, once the body reached a full batch.
    background: Option<BackgroundHasher>,
}

struct BackgroundHasher {
    batches: tokio::sync::mpsc::Sender<Vec<Bytes>>,
    done: tokio::task::JoinHandle<Md5>,
}

impl BodyDigest {
    fn new() -> Self {
        Self {
            inline: Some(Md5::new()),
            background: None,
        }
    }

    /// Hashes `batch` after the batches before it: inline while the body is
    /// small, else queued for the background hasher (waiting only while its
    /// queue is full).
    async fn feed(&mut self, batch: Vec<Bytes>, batch_len: usize) -> Result<(), S3Error> {
        if self.background.is_none() && batch_len < BLOCKING_HASH_MIN {
            let state = self
                .inline
                .as_mut()
                .ok_or_else(|| S3Error::internal("body digest already finished"))?;
            for chunk in &batch {
                state.update(chunk);
            }
            return Ok(());
        }
        if self.background.is_none() {
            let mut state = self
                .inline
                .take()
                .ok_or_else(|| S3Error::internal("body digest already finished"))?;
            let (batches, mut queued) =
                tokio::sync::mpsc::channel::<Vec<Bytes>>(HASH_QUEUE_BATCHES);
            let done = tokio::task::spawn_blocking(move || {
                while let Some(batch) = queued.blocking_recv() {
                    for chunk in &batch {
                        state.update(chunk);
                    }
                }
                state
            });
            self.background = Some(BackgroundHasher { batches, done });
        }
        let hasher = self.background.as_ref().expect("started above");
        hasher
            .batches
            .send(batch)
            .await
            .map_err(|_| S3Error::internal("body hasher ended early"))
    }

    async fn finish(self) -> Result<[u8; 16], S3Error> {
        let state = match self.background {
            Some(BackgroundHasher { batches, done }) => {
                drop(batches);
                done.await.map_err(S3Error::internal)?
            }
            None => self
                .inline
                .ok_or_else(|| S3Error::internal("body digest already finished"))?,
        };
        Ok(state.finalize().into())
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

/// Streams `body` into `writer`, computing the MD5 as bytes pass, sealed
/// by `sealer` on the way when the body is to be encrypted (the MD5 and the
/// size are the plaintext's). The writer is aborted, and nothing is kept,
/// when the body fails (a failed signature or checksum is its last item), a
/// write fails, or the MD5 is not `expected_md5`.
pub async fn store_body(
    mut body: BodyStream,
    writer: KeyWriter,
    expected_md5: Option<[u8; 16]>,
    mut sealer: Option<Sealer>,
) -> Result<StoredBody, S3Error> {
    let mut guard = AbortOnDrop(Some(writer));
    let mut digest = BodyDigest::new();
    let mut size = 0u64;
    let result = async {
        let writer = guard.writer()?;
        let mut batch = Vec::new();
        let mut batch_len = 0;
        while let Some(item) = body.next().await {
            let chunk = item?;
            count_bytes_in(chunk.len());
            size += chunk.len() as u64;
            batch_len += chunk.len();
            batch.push(chunk.clone());
            // The writer copies into its stripe and returns; the stripe is
            // encoded and sent by its flush task while the body goes on.
            match sealer.as_mut() {
                None => writer.write(chunk).await?,
                Some(sealer) => {
                    for package in sealer.push(&chunk) {
                        writer.write(package).await?;
                    }
                }
            }
            if batch_len >= BATCH_BYTES {
                digest.feed(std::mem::take(&mut batch), batch_len).await?;
                batch_len = 0;
            }
        }
        if let Some(last) = sealer.take().and_then(Sealer::finish) {
            writer.write(last).await?;
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
        size,
        written,
        checksum: body.verified_checksum(),
    })
}

fn base64_md5(digest: &[u8; 16]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(digest)
}

/// Commits what a PUT or UploadPart stored with `commit`. On a definite refusal
/// (NoSuchBucket, NoSuchUpload, ...) the written blocks, if any (a body kept
/// for its record has none), are freed; when the
/// answer was lost the commit may have landed, so the blocks are left alone
/// rather than risk deleting a visible object (an orphan costs only space).
pub async fn commit_or_discard<F, T>(
    meta: &meta_api::MetaClient,
    groups: Vec<meta_api::BlockGroup>,
    commit: F,
) -> Result<T, S3Error>
where
    F: std::future::Future<Output = Result<T, meta_api::MetaError>>,
{
    let error = match commit.await {
        Ok(answer) => return Ok(answer),
        Err(error) => error,
    };
    if error.may_have_applied() {
        tracing::warn!(%error, "commit outcome unknown; keeping its blocks");
    } else if groups.is_empty() {
        // Nothing to free: no round trip to meta.
    } else if let Err(discard) = meta.call(meta_api::DiscardBlocks { groups }).await {
        tracing::warn!(error = %discard, "discarding blocks of an uncommitted write failed");
    }
    Err(error.into())
}
