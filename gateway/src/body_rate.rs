//! A floor under the rate of request bodies.
//!
//! A client that starts a PUT and then sends a byte now and then holds an
//! upload slot, its buffers and a connection for as long as it likes. Every
//! request body is read through [`RateFloor`]: in each window of
//! `window` it must deliver at least `min_bytes_per_second x window` bytes,
//! or the body fails with [`BodyTooSlow`], which the gateway answers with
//! S3's RequestTimeout (and the upload slot is freed as the handler returns).
//! A body that stops altogether is thus cut within one window.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// Default [`BodyRateLimit::window`].
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(20);
/// Default [`BodyRateLimit::min_bytes_per_second`].
pub const DEFAULT_MIN_BYTES_PER_SECOND: u64 = 1024;

/// The least a request body must deliver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyRateLimit {
    /// The rate each window must reach on average; 0 turns the floor off.
    pub min_bytes_per_second: u64,
    /// How long a window is: a stalled body is cut after at most this.
    pub window: Duration,
}

impl Default for BodyRateLimit {
    fn default() -> Self {
        Self {
            min_bytes_per_second: DEFAULT_MIN_BYTES_PER_SECOND,
            window: DEFAULT_WINDOW,
        }
    }
}

impl BodyRateLimit {
    fn bytes_per_window(&self) -> u64 {
        let millis = self.window.as_millis().min(u128::from(u64::MAX)) as u64;
        self.min_bytes_per_second.saturating_mul(millis) / 1000
    }
}

/// The error a body too slow for the floor ends with.
#[derive(Debug, thiserror::Error)]
#[error("the request body sent {got} bytes in {window:?}, under the {floor} the gateway requires")]
pub struct BodyTooSlow {
    /// Bytes received in the last window.
    pub got: u64,
    /// The bytes a window requires.
    pub floor: u64,
    /// The window.
    pub window: Duration,
}

/// A request body that fails with [`BodyTooSlow`] when a window ends short.
pub struct RateFloor {
    inner: Body,
    limit: BodyRateLimit,
    floor: u64,
    in_window: u64,
    deadline: Pin<Box<Sleep>>,
    failed: bool,
}

impl RateFloor {
    /// `inner`, held to `limit` from now.
    pub fn new(inner: Body, limit: BodyRateLimit) -> Self {
        Self {
            inner,
            limit,
            floor: limit.bytes_per_window(),
            in_window: 0,
            deadline: Box::pin(tokio::time::sleep(limit.window)),
            failed: false,
        }
    }

    /// Closes the window that ended at `now`: refused if it fell short.
    fn next_window(&mut self) -> Result<(), BodyTooSlow> {
        if self.in_window < self.floor {
            return Err(BodyTooSlow {
                got: self.in_window,
                floor: self.floor,
                window: self.limit.window,
            });
        }
        self.in_window = 0;
        let next = Instant::now() + self.limit.window;
        self.deadline.as_mut().reset(next);
        Ok(())
    }
}

impl http_body::Body for RateFloor {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.in_window += data.len() as u64;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(other) => Poll::Ready(other),
            Poll::Pending => {
                while this.deadline.as_mut().poll(cx).is_ready() {
                    if let Err(slow) = this.next_window() {
                        this.failed = true;
                        metrics::counter!(crate::telemetry::SLOW_BODIES.name).increment(1);
                        return Poll::Ready(Some(Err(axum::Error::new(slow))));
                    }
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The middleware (`axum::middleware::from_fn_with_state(limit, hold_to_rate_floor)`):
/// every request body is read through a [`RateFloor`].
pub async fn hold_to_rate_floor(
    State(limit): State<BodyRateLimit>,
    request: Request,
    next: Next,
) -> Response {
    if limit.min_bytes_per_second == 0 {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let body = Body::new(RateFloor::new(body, limit));
    next.run(Request::from_parts(parts, body)).await
}

/// Whether a body error is the floor's refusal.
pub fn is_too_slow(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(e) = source {
        if e.is::<BodyTooSlow>() {
            return true;
        }
        source = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use http_body_util::BodyExt;

    fn limit(rate: u64, window_ms: u64) -> BodyRateLimit {
        BodyRateLimit {
            min_bytes_per_second: rate,
            window: Duration::from_millis(window_ms),
        }
    }

    /// A body that sends `pieces` bytes, each after `gap`, then ends.
    fn trickle(pieces: usize, size: usize, gap: Duration) -> Body {
        let stream = futures::stream::iter(0..pieces).then(move |_| async move {
            tokio::time::sleep(gap).await;
            Ok::<_, std::io::Error>(Bytes::from(vec![7u8; size]))
        });
        Body::from_stream(stream)
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_at_the_rate_passes_and_a_trickle_is_cut() {
        // 1000 B/s over 1 s windows: 100 bytes every 50 ms is 2000 B/s.
        let fast = RateFloor::new(
            trickle(60, 100, Duration::from_millis(50)),
            limit(1000, 1000),
        );
        let bytes = fast.collect().await.unwrap().to_bytes();
        assert_eq!(bytes.len(), 6000);
        // 10 bytes every 100 ms is 100 B/s: the first window ends short.
        let slow = RateFloor::new(
            trickle(60, 10, Duration::from_millis(100)),
            limit(1000, 1000),
        );
        let started = Instant::now();
        let err = slow.collect().await.unwrap_err();
        assert!(is_too_slow(&err), "{err}");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_millis(1200),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_is_cut_within_one_window() {
        let stalled =
            Body::from_stream(futures::stream::pending::<Result<Bytes, std::io::Error>>());
        let started = Instant::now();
        let err = RateFloor::new(stalled, limit(1, 2000))
            .collect()
            .await
            .unwrap_err();
        assert!(is_too_slow(&err));
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    #[test]
    fn the_floor_scales_with_the_window() {
        assert_eq!(limit(1024, 20_000).bytes_per_window(), 20_480);
        assert_eq!(limit(0, 20_000).bytes_per_window(), 0);
        assert_eq!(limit(1000, 500).bytes_per_window(), 500);
    }
}
