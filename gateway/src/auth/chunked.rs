//! aws-chunked de-framing: a `Stream` adapter over the raw body that yields the object's bytes.
//!
//! Signed (`STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]`):
//! `hex-size;chunk-signature=sig\r\n<data>\r\n` ... `0;chunk-signature=sig\r\n`, then the trailer
//! lines (`x-amz-checksum-crc32c:v\r\nx-amz-trailer-signature:sig\r\n`) and `\r\n`. Each chunk
//! signature is chained from the previous one, starting at the request's (the seed); a chunk's
//! bytes are yielded only once its signature checked out, so no unverified byte reaches the
//! writer. At most one chunk ([`MAX_SIGNED_CHUNK`]) is held.
//!
//! Unsigned (`STREAMING-UNSIGNED-PAYLOAD-TRAILER`): `hex-size\r\n<data>\r\n` ... `0\r\n`, trailer
//! lines, `\r\n`; bytes are yielded as they arrive.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use sha2::{Digest as _, Sha256};

use super::canonical::{sha256_hex, signature_matches, SigningKey, EMPTY_SHA256};
use super::BodyError;

/// The largest chunk of a signed stream we hold while its signature is pending (SDKs send 64 KiB
/// to 8 MiB).
pub(crate) const MAX_SIGNED_CHUNK: u64 = 16 * 1024 * 1024;
/// The longest chunk header or trailer line, CRLF excluded.
const MAX_LINE: usize = 4096;
/// The most trailer lines (S3 sends one checksum and the trailer signature).
const MAX_TRAILERS: usize = 16;
const TRAILER_SIGNATURE: &str = "x-amz-trailer-signature";

/// The chained signatures of a signed aws-chunked body: every chunk, then the trailer, signs the
/// previous signature, starting with the request's.
#[derive(Clone, Debug)]
pub(crate) struct SignatureChain {
    key: SigningKey,
    amz_date: String,
    scope: String,
    previous: String,
}

impl SignatureChain {
    /// A chain seeded with the request's signature.
    pub fn new(key: SigningKey, amz_date: String, scope: String, seed: String) -> Self {
        Self {
            key,
            amz_date,
            scope,
            previous: seed,
        }
    }

    fn advance(&mut self, string_to_sign: &str, given: &str) -> bool {
        let computed = self.key.sign(string_to_sign);
        let matches = signature_matches(&computed, given);
        if matches {
            self.previous = computed;
        }
        matches
    }

    /// Checks a chunk's signature: `AWS4-HMAC-SHA256-PAYLOAD\n{date}\n{scope}\n{previous}\n
    /// {sha256("")}\n{sha256(chunk)}`.
    fn next_chunk(&mut self, chunk_sha256_hex: &str, given: &str) -> bool {
        let string_to_sign = format!(
            "AWS4-HMAC-SHA256-PAYLOAD\n{}\n{}\n{}\n{EMPTY_SHA256}\n{chunk_sha256_hex}",
            self.amz_date, self.scope, self.previous
        );
        self.advance(&string_to_sign, given)
    }

    /// Checks the trailer signature: `AWS4-HMAC-SHA256-TRAILER\n{date}\n{scope}\n{previous}\n
    /// {sha256(trailer lines, each "name:value\n")}`.
    fn next_trailer(&mut self, canonical_trailers: &[u8], given: &str) -> bool {
        let string_to_sign = format!(
            "AWS4-HMAC-SHA256-TRAILER\n{}\n{}\n{}\n{}",
            self.amz_date,
            self.scope,
            self.previous,
            sha256_hex(canonical_trailers)
        );
        self.advance(&string_to_sign, given)
    }
}

/// How the body is framed and signed.
#[derive(Debug)]
pub(crate) enum Framing {
    /// Chunk signatures chained from the seed; `trailer`: a signed trailer section follows.
    Signed {
        chain: SignatureChain,
        trailer: bool,
    },
    /// `STREAMING-UNSIGNED-PAYLOAD-TRAILER`.
    UnsignedTrailer,
}

#[derive(Debug)]
enum State {
    ChunkHeader,
    ChunkData {
        remaining: u64,
        signature: Option<String>,
    },
    ChunkEnd,
    Trailers,
    Done,
}

/// De-frames an aws-chunked body; see the module documentation. The trailer the client announced
/// in `x-amz-trailer` must be the one that arrives; its value is [`AwsChunkedStream::trailer_value`]
/// once the stream has ended.
pub(crate) struct AwsChunkedStream<S> {
    inner: S,
    inner_ended: bool,
    framing: Framing,
    announced_trailer: Option<String>,
    state: State,
    /// The part of the current frame not parsed yet.
    pending: Bytes,
    /// A header or trailer line split across frames.
    line: Vec<u8>,
    /// Pieces of the current signed chunk, held until its signature is checked.
    chunk: Vec<Bytes>,
    chunk_hasher: Sha256,
    /// Verified data, to yield.
    ready: VecDeque<Bytes>,
    trailers: Vec<(String, String)>,
    trailer_value: Option<String>,
    finished: bool,
}

fn malformed(detail: &str) -> BodyError {
    BodyError::MalformedChunk(detail.to_string())
}

impl<S> AwsChunkedStream<S>
where
    S: Stream<Item = Result<Bytes, BodyError>> + Unpin,
{
    /// Wraps the raw body. `announced_trailer` is the lowercased `x-amz-trailer` value.
    pub fn new(inner: S, framing: Framing, announced_trailer: Option<String>) -> Self {
        Self {
            inner,
            inner_ended: false,
            framing,
            announced_trailer,
            state: State::ChunkHeader,
            pending: Bytes::new(),
            line: Vec::new(),
            chunk: Vec::new(),
            chunk_hasher: Sha256::new(),
            ready: VecDeque::new(),
            trailers: Vec::new(),
            trailer_value: None,
            finished: false,
        }
    }

    /// The value of the announced trailer, once the stream has ended without error.
    pub fn trailer_value(&self) -> Option<&str> {
        self.trailer_value.as_deref()
    }

    /// Takes one CRLF-terminated line from `pending`, or keeps its start in `line`.
    fn take_line(&mut self) -> Result<Option<Vec<u8>>, BodyError> {
        let newline = self.pending.iter().position(|&b| b == b'\n');
        let taken = newline.map_or(self.pending.len(), |pos| pos + 1);
        if self.line.len() + taken > MAX_LINE + 2 {
            return Err(malformed("chunk header or trailer line too long"));
        }
        let part = self.pending.split_to(taken);
        self.line.extend_from_slice(&part);
        if newline.is_none() {
            return Ok(None);
        }
        let mut line = std::mem::take(&mut self.line);
        line.pop();
        if line.pop() != Some(b'\r') {
            return Err(malformed("line not terminated by CRLF"));
        }
        Ok(Some(line))
    }

    fn on_chunk_header(&mut self, line: &[u8]) -> Result<(), BodyError> {
        let line = std::str::from_utf8(line).map_err(|_| malformed("chunk header not ASCII"))?;
        let mut fields = line.split(';');
        let size_text = fields.next().unwrap_or_default().trim();
        if size_text.is_empty()
            || size_text.len() > 16
            || !size_text.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(malformed("invalid chunk size"));
        }
        let size =
            u64::from_str_radix(size_text, 16).map_err(|_| malformed("invalid chunk size"))?;
        let signature = fields
            .find_map(|field| field.trim().strip_prefix("chunk-signature="))
            .map(str::to_string);
        if let Framing::Signed { chain, .. } = &mut self.framing {
            let Some(signature) = signature.as_deref() else {
                return Err(malformed("chunk-signature missing"));
            };
            if size > MAX_SIGNED_CHUNK {
                return Err(malformed("chunk larger than 16 MiB"));
            }
            if size == 0 && !chain.next_chunk(EMPTY_SHA256, signature) {
                return Err(BodyError::SignatureDoesNotMatch);
            }
        }
        self.state = if size == 0 {
            State::Trailers
        } else {
            State::ChunkData {
                remaining: size,
                signature,
            }
        };
        Ok(())
    }

    fn on_chunk_data(&mut self) -> Result<(), BodyError> {
        let State::ChunkData {
            remaining,
            signature,
        } = &mut self.state
        else {
            return Ok(());
        };
        let taken = usize::try_from(*remaining)
            .unwrap_or(usize::MAX)
            .min(self.pending.len());
        let piece = self.pending.split_to(taken);
        *remaining -= taken as u64;
        let Framing::Signed { chain, .. } = &mut self.framing else {
            self.ready.push_back(piece);
            if *remaining == 0 {
                self.state = State::ChunkEnd;
            }
            return Ok(());
        };
        self.chunk_hasher.update(&piece);
        self.chunk.push(piece);
        if *remaining > 0 {
            return Ok(());
        }
        let digest = hex::encode(self.chunk_hasher.finalize_reset());
        if !chain.next_chunk(&digest, signature.as_deref().unwrap_or_default()) {
            self.chunk.clear();
            return Err(BodyError::SignatureDoesNotMatch);
        }
        self.ready.extend(self.chunk.drain(..));
        self.state = State::ChunkEnd;
        Ok(())
    }

    fn on_trailer(&mut self, line: &[u8]) -> Result<(), BodyError> {
        if self.trailers.len() == MAX_TRAILERS {
            return Err(malformed("too many trailers"));
        }
        let line = std::str::from_utf8(line).map_err(|_| malformed("trailer not UTF-8"))?;
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| malformed("trailer line without ':'"))?;
        self.trailers
            .push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        Ok(())
    }

    /// At the blank line closing the body: checks the trailer signature and that the trailer is
    /// the announced one.
    fn finish_trailers(&mut self) -> Result<(), BodyError> {
        let signature = self
            .trailers
            .iter()
            .position(|(name, _)| name == TRAILER_SIGNATURE)
            .map(|i| self.trailers.remove(i).1);
        match &mut self.framing {
            Framing::Signed { trailer: false, .. } => {
                if signature.is_some() || !self.trailers.is_empty() {
                    return Err(malformed("trailers sent without a -TRAILER payload"));
                }
            }
            Framing::Signed {
                chain,
                trailer: true,
            } => {
                let signature =
                    signature.ok_or_else(|| malformed("x-amz-trailer-signature missing"))?;
                self.trailers.sort();
                let mut canonical = Vec::new();
                for (name, value) in &self.trailers {
                    canonical.extend_from_slice(format!("{name}:{value}\n").as_bytes());
                }
                if !chain.next_trailer(&canonical, &signature) {
                    return Err(BodyError::SignatureDoesNotMatch);
                }
            }
            Framing::UnsignedTrailer => {}
        }
        let trailers = std::mem::take(&mut self.trailers);
        match (&self.announced_trailer, trailers.as_slice()) {
            (None, []) => Ok(()),
            (Some(announced), [(name, value)]) if name == announced => {
                self.trailer_value = Some(value.clone());
                Ok(())
            }
            (Some(announced), _) => Err(BodyError::MalformedChunk(format!(
                "expected the trailer {announced} announced by x-amz-trailer"
            ))),
            (None, _) => Err(malformed(
                "a trailer was sent that x-amz-trailer did not announce",
            )),
        }
    }

    /// Parses as much of `pending` as the current state allows.
    fn step(&mut self) -> Result<(), BodyError> {
        match self.state {
            State::ChunkHeader => {
                if let Some(line) = self.take_line()? {
                    self.on_chunk_header(&line)?;
                }
            }
            State::ChunkData { .. } => self.on_chunk_data()?,
            State::ChunkEnd => {
                if let Some(line) = self.take_line()? {
                    if !line.is_empty() {
                        return Err(malformed("chunk data not followed by CRLF"));
                    }
                    self.state = State::ChunkHeader;
                }
            }
            State::Trailers => {
                if let Some(line) = self.take_line()? {
                    if line.is_empty() {
                        self.finish_trailers()?;
                        self.state = State::Done;
                    } else {
                        self.on_trailer(&line)?;
                    }
                }
            }
            State::Done => return Err(malformed("data after the final chunk")),
        }
        Ok(())
    }

    /// The raw body ended: fine once the final chunk and its trailers are in. The closing blank
    /// line may be missing, as some clients omit it.
    fn at_end(&mut self) -> Result<(), BodyError> {
        match self.state {
            State::Done => Ok(()),
            State::Trailers if self.line.is_empty() => {
                self.finish_trailers()?;
                self.state = State::Done;
                Ok(())
            }
            _ => Err(BodyError::IncompleteBody),
        }
    }
}

impl<S> Stream for AwsChunkedStream<S>
where
    S: Stream<Item = Result<Bytes, BodyError>> + Unpin,
{
    type Item = Result<Bytes, BodyError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(data) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(data)));
            }
            if this.finished {
                return Poll::Ready(None);
            }
            let progress = if !this.pending.is_empty() {
                this.step()
            } else if this.inner_ended {
                this.finished = true;
                this.at_end()
            } else {
                match ready!(this.inner.poll_next_unpin(cx)) {
                    Some(Ok(frame)) => {
                        this.pending = frame;
                        Ok(())
                    }
                    Some(Err(err)) => Err(err),
                    None => {
                        this.inner_ended = true;
                        Ok(())
                    }
                }
            };
            if let Err(err) = progress {
                this.finished = true;
                this.chunk.clear();
                this.pending = Bytes::new();
                return Poll::Ready(Some(Err(err)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::testing::{
        aws_streaming_body, aws_trailer_body, example_time, AWS_STREAMING_SEED, AWS_TRAILER_SEED,
        EXAMPLE_SECRET,
    };
    use futures::executor::block_on;
    use futures::stream;

    const SCOPE: &str = "20130524/us-east-1/s3/aws4_request";

    fn chain(seed: &str) -> SignatureChain {
        let key = SigningKey::derive(EXAMPLE_SECRET, example_time(), "us-east-1");
        SignatureChain::new(key, "20130524T000000Z".into(), SCOPE.into(), seed.into())
    }

    /// Runs the decoder over `body` cut into frames of `frame` bytes; returns the data items and
    /// the final error, if any.
    fn decode(
        body: &[u8],
        frame: usize,
        framing: Framing,
        announced: Option<&str>,
    ) -> (Vec<Bytes>, Option<BodyError>, Option<String>) {
        let frames: Vec<Result<Bytes, BodyError>> = body
            .chunks(frame)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let mut decoder =
            AwsChunkedStream::new(stream::iter(frames), framing, announced.map(str::to_string));
        let mut items = Vec::new();
        let mut error = None;
        while let Some(item) = block_on(decoder.next()) {
            match item {
                Ok(data) => {
                    assert!(error.is_none(), "data after an error");
                    items.push(data);
                }
                Err(err) => error = Some(err),
            }
        }
        (items, error, decoder.trailer_value().map(str::to_string))
    }

    fn signed(seed: &str, trailer: bool) -> Framing {
        Framing::Signed {
            chain: chain(seed),
            trailer,
        }
    }

    fn total(items: &[Bytes]) -> usize {
        items.iter().map(Bytes::len).sum()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]

        /// Any bytes, however framed: data or an error, never a panic, and
        /// no data after an error (checked by `decode`).
        #[test]
        fn any_body_decodes_or_fails(
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
            frame in 1usize..64,
            signed_framing in proptest::prelude::any::<bool>(),
        ) {
            super::super::fuzzing::aws_chunked(&body, frame, signed_framing);
        }

        /// Data sent in chunks of any sizes, in frames of any size, comes out whole.
        #[test]
        fn chunked_data_comes_out_whole(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..3000),
            chunk in 1usize..700,
            frame in 1usize..300,
        ) {
            let mut body = Vec::new();
            for piece in data.chunks(chunk) {
                body.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                body.extend_from_slice(piece);
                body.extend_from_slice(b"\r\n");
            }
            body.extend_from_slice(b"0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n");
            let (items, error, value) =
                decode(&body, frame, Framing::UnsignedTrailer, Some("x-amz-checksum-crc32"));
            proptest::prop_assert!(error.is_none(), "{error:?}");
            proptest::prop_assert_eq!(items.concat(), data);
            proptest::prop_assert_eq!(value.as_deref(), Some("AAAAAA=="));
        }
    }

    /// SDKs send signed chunks of up to 8 MiB; the bound admits them and
    /// stays a bound.
    #[test]
    fn the_signed_chunk_bound_admits_what_sdks_send() {
        assert!((8 << 20..=64 << 20).contains(&MAX_SIGNED_CHUNK));
    }

    /// AWS "Transferring Payload in Multiple Chunks": every chunk signature of the example
    /// verifies, whatever the frame boundaries.
    #[test]
    fn aws_example_multiple_chunks() {
        let body = aws_streaming_body();
        for frame in [1, 7, 100, 4096, 65536 + 90, body.len()] {
            let (items, error, _) = decode(&body, frame, signed(AWS_STREAMING_SEED, false), None);
            assert!(error.is_none(), "frame {frame}: {error:?}");
            assert_eq!(total(&items), 66560);
            assert!(items.iter().all(|b| b.iter().all(|&c| c == b'a')));
        }
    }

    /// AWS "sigv4-streaming-trailers": chunk signatures, CRC32C trailer and trailer signature.
    #[test]
    fn aws_example_signed_trailer() {
        let body = aws_trailer_body();
        for frame in [3, 4096, body.len()] {
            let (items, error, value) = decode(
                &body,
                frame,
                signed(AWS_TRAILER_SEED, true),
                Some("x-amz-checksum-crc32c"),
            );
            assert!(error.is_none(), "{error:?}");
            assert_eq!(total(&items), 66560);
            assert_eq!(value.as_deref(), Some("sOO8/Q=="));
        }
        // A trailer that was not announced, or another one than announced.
        let (_, error, _) = decode(&body, 4096, signed(AWS_TRAILER_SEED, true), None);
        assert!(matches!(error, Some(BodyError::MalformedChunk(_))));
        let (_, error, _) = decode(
            &body,
            4096,
            signed(AWS_TRAILER_SEED, true),
            Some("x-amz-checksum-crc32"),
        );
        assert!(matches!(error, Some(BodyError::MalformedChunk(_))));
        // A changed trailer value breaks the trailer signature.
        let tampered = String::from_utf8_lossy(&body).replace("sOO8/Q==", "sOO8/R==");
        let (_, error, value) = decode(
            tampered.as_bytes(),
            4096,
            signed(AWS_TRAILER_SEED, true),
            Some("x-amz-checksum-crc32c"),
        );
        assert!(matches!(error, Some(BodyError::SignatureDoesNotMatch)));
        assert_eq!(value, None);
    }

    /// A signed body without -TRAILER takes no trailer lines, not even a
    /// lone trailer signature.
    #[test]
    fn signed_bodies_without_trailer_take_no_trailer_lines() {
        let body = aws_streaming_body();
        assert!(body.ends_with(b"\r\n\r\n"));
        let cut = body.len() - 2;
        for extra in [
            "x-amz-trailer-signature:abc\r\n",
            "x-amz-checksum-crc32:AAAAAA==\r\n",
        ] {
            let with_trailer = [&body[..cut], extra.as_bytes(), b"\r\n"].concat();
            let (_, error, _) =
                decode(&with_trailer, 4096, signed(AWS_STREAMING_SEED, false), None);
            assert!(
                matches!(&error, Some(BodyError::MalformedChunk(m)) if m.contains("without a -TRAILER")),
                "{extra}: {error:?}"
            );
        }
    }

    /// One flipped byte in the second chunk: the first chunk is yielded, nothing of the second.
    #[test]
    fn tampered_chunk_data() {
        let mut body = aws_streaming_body();
        let second_chunk_data = body.len() - 200;
        body[second_chunk_data] = b'b';
        let (items, error, _) = decode(&body, 4096, signed(AWS_STREAMING_SEED, false), None);
        assert!(matches!(error, Some(BodyError::SignatureDoesNotMatch)));
        assert_eq!(total(&items), 65536);
        // A wrong seed fails the first chunk: nothing is yielded.
        let (items, error, _) = decode(&body, 4096, signed(&"0".repeat(64), false), None);
        assert!(matches!(error, Some(BodyError::SignatureDoesNotMatch)));
        assert!(items.is_empty());
    }

    #[test]
    fn truncated_stream() {
        let body = aws_streaming_body();
        for cut in [10, 60000, 65536 + 100, body.len() - 60] {
            let (_, error, _) = decode(&body[..cut], 4096, signed(AWS_STREAMING_SEED, false), None);
            assert!(
                matches!(error, Some(BodyError::IncompleteBody)),
                "cut {cut}: {error:?}"
            );
        }
        // Only the closing blank line missing: accepted, as some clients send it so.
        let (items, error, _) = decode(
            &body[..body.len() - 2],
            4096,
            signed(AWS_STREAMING_SEED, false),
            None,
        );
        assert!(error.is_none());
        assert_eq!(total(&items), 66560);
    }

    #[test]
    fn unsigned_trailer_yields_as_it_arrives() {
        let body = b"5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n";
        let (items, error, value) = decode(
            body,
            4,
            Framing::UnsignedTrailer,
            Some("x-amz-checksum-crc32"),
        );
        assert!(error.is_none(), "{error:?}");
        assert_eq!(items.concat(), b"hello world");
        assert!(items.len() > 2, "data is yielded frame by frame");
        assert_eq!(value.as_deref(), Some("DUoRhQ=="));
    }

    /// Header lines up to [`MAX_LINE`] bytes before their CRLF pass, longer
    /// ones are refused, whether they arrive at once or in pieces.
    #[test]
    fn line_length_bound_is_exact() {
        let body = |line_len: usize| {
            let mut line = b"5;".to_vec();
            line.resize(line_len, b'x');
            [&line[..], b"\r\nhello\r\n0\r\n\r\n"].concat()
        };
        for frame in [usize::MAX, 7] {
            let (items, error, _) = decode(&body(MAX_LINE), frame, Framing::UnsignedTrailer, None);
            assert!(error.is_none(), "{error:?}");
            assert_eq!(items.concat(), b"hello");
            let (_, error, _) = decode(&body(MAX_LINE + 1), frame, Framing::UnsignedTrailer, None);
            assert!(
                matches!(&error, Some(BodyError::MalformedChunk(m)) if m.contains("too long")),
                "{error:?}"
            );
        }
    }

    /// A chunk size of up to 16 hex digits is read; 17 are refused even when
    /// their value is small.
    #[test]
    fn chunk_size_digits_are_bounded() {
        let (items, error, _) = decode(
            b"0000000000000005\r\nhello\r\n0\r\n\r\n",
            64,
            Framing::UnsignedTrailer,
            None,
        );
        assert!(error.is_none(), "{error:?}");
        assert_eq!(items.concat(), b"hello");
        let (items, error, _) = decode(
            b"00000000000000005\r\nhello\r\n0\r\n\r\n",
            64,
            Framing::UnsignedTrailer,
            None,
        );
        assert!(items.is_empty());
        assert!(
            matches!(error, Some(BodyError::MalformedChunk(_))),
            "{error:?}"
        );
    }

    /// A signed chunk of exactly 16 MiB is announced without refusal (the
    /// body then ends short of its data); one byte more is refused at once.
    #[test]
    fn signed_chunk_bound_is_exact() {
        let header = |size: u64| format!("{size:x};chunk-signature={}\r\n", "0".repeat(64));
        let framing = || signed(AWS_STREAMING_SEED, false);
        let (_, error, _) = decode(header(MAX_SIGNED_CHUNK).as_bytes(), 64, framing(), None);
        assert!(
            matches!(error, Some(BodyError::IncompleteBody)),
            "{error:?}"
        );
        let (_, error, _) = decode(header(MAX_SIGNED_CHUNK + 1).as_bytes(), 64, framing(), None);
        assert!(
            matches!(error, Some(BodyError::MalformedChunk(_))),
            "{error:?}"
        );
    }

    /// A body cut inside a trailer line is incomplete, not a body without
    /// trailers.
    #[test]
    fn a_body_cut_mid_trailer_is_incomplete() {
        let body = b"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:DUoR";
        let (_, error, _) = decode(body, 8, Framing::UnsignedTrailer, None);
        assert!(
            matches!(error, Some(BodyError::IncompleteBody)),
            "{error:?}"
        );
        // Cut after the final chunk's line, before any trailer: complete.
        let (items, error, _) = decode(b"5\r\nhello\r\n0\r\n", 8, Framing::UnsignedTrailer, None);
        assert!(error.is_none(), "{error:?}");
        assert_eq!(items.concat(), b"hello");
    }

    #[test]
    fn malformed_framing() {
        let unsigned = |body: &[u8]| decode(body, 5, Framing::UnsignedTrailer, None).1;
        for body in [
            &b"zz\r\nhello\r\n0\r\n\r\n"[..],
            b"5\r\nhelloXY0\r\n\r\n",
            b"5\nhello\r\n0\r\n\r\n",
            b"0\r\nno-colon\r\n\r\n",
            b"0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n",
            b"0\r\n\r\nextra",
            b"11111111111111111\r\n",
        ] {
            assert!(
                matches!(unsigned(body), Some(BodyError::MalformedChunk(_))),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        let long_line = vec![b'1'; MAX_LINE + 10];
        assert!(matches!(
            unsigned(&long_line),
            Some(BodyError::MalformedChunk(_))
        ));
        // Signed: a chunk without signature, a chunk over the limit, trailers without -TRAILER.
        let framing = || signed(AWS_STREAMING_SEED, false);
        let (_, error, _) = decode(b"5\r\nhello\r\n", 64, framing(), None);
        assert!(matches!(error, Some(BodyError::MalformedChunk(_))));
        let huge = format!("1000001;chunk-signature={}\r\n", "0".repeat(64));
        let (_, error, _) = decode(huge.as_bytes(), 64, framing(), None);
        assert!(matches!(error, Some(BodyError::MalformedChunk(_))));
    }
}
