//! The GET path over real HTTP against an in-process cluster (meta, five
//! datanodes on 127.0.0.1:0, the S3 router): shared readers stay exact across
//! overwrites and deletes, concurrent GETs of one object get the right
//! bytes, and a warm GET no longer asks meta for the access key and user.

use bytes::Bytes;
use http::StatusCode;
use metrics::{Counter, CounterFn, Gauge, Histogram, Key, KeyName, Metadata, SharedString, Unit};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use test_support::data::random_bytes;
use test_support::s3::ROOT;

/// Meta requests served in this process, by kind (from `tessera_meta_requests_total`).
type MetaCalls = Arc<Mutex<BTreeMap<String, u64>>>;

struct CountingRecorder(MetaCalls);

struct KindCounter {
    kind: String,
    calls: MetaCalls,
}

impl CounterFn for KindCounter {
    fn increment(&self, value: u64) {
        *self.calls.lock().entry(self.kind.clone()).or_default() += value;
    }

    fn absolute(&self, _value: u64) {}
}

impl metrics::Recorder for CountingRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        if key.name() != "tessera_meta_requests_total" {
            return Counter::noop();
        }
        let kind = key
            .labels()
            .find(|l| l.key() == "kind")
            .map_or_else(String::new, |l| l.value().to_string());
        Counter::from_arc(Arc::new(KindCounter {
            kind,
            calls: self.0.clone(),
        }))
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

/// The gateway's test cluster, with root's requests made short.
struct Cluster(test_support::s3::Cluster);

impl Cluster {
    async fn start() -> Self {
        Self(test_support::s3::Cluster::start(Duration::from_millis(200)).await)
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (StatusCode, Bytes) {
        let reply = self.0.send(ROOT, method, path, headers, body).await;
        (reply.status, reply.body)
    }

    async fn put(&self, path: &str, data: &[u8]) {
        let (status, body) = self.send("PUT", path, &[], data).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    }

    async fn get(&self, path: &str, range: Option<&str>) -> (StatusCode, Bytes) {
        match range {
            Some(range) => self.send("GET", path, &[("range", range)], b"").await,
            None => self.send("GET", path, &[], b"").await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gets_share_readers_stay_exact_across_overwrites_and_skip_credential_lookups() {
    let calls = MetaCalls::default();
    metrics::set_global_recorder(CountingRecorder(calls.clone())).unwrap();
    let cluster = Arc::new(Cluster::start().await);
    let (status, _) = cluster.send("PUT", "/media", &[], b"").await;
    assert_eq!(status, StatusCode::OK);

    // Larger than one small range: streamed by a sequential reader.
    let v1 = Arc::new(random_bytes(7 * 1024 * 1024 + 3, 1));
    cluster.put("/media/clip", &v1).await;
    let gets: Vec<_> = (0..6usize)
        .map(|i| {
            let (cluster, v1) = (cluster.clone(), v1.clone());
            tokio::spawn(async move {
                if i % 2 == 0 {
                    let (status, body) = cluster.get("/media/clip", None).await;
                    assert_eq!(status, StatusCode::OK);
                    assert!(body == v1[..], "whole GET {i}");
                } else {
                    let start = i * 1_000_003;
                    let range = format!("bytes={start}-{}", start + 99_999);
                    let (status, body) = cluster.get("/media/clip", Some(&range)).await;
                    assert_eq!(status, StatusCode::PARTIAL_CONTENT);
                    assert!(body == v1[start..start + 100_000], "range GET {i}");
                }
            })
        })
        .collect();
    for get in gets {
        get.await.unwrap();
    }

    // Warm GETs: the access key and user come from the gateway's cache.
    let before = calls.lock().clone();
    const WARM: u64 = 10;
    for _ in 0..WARM {
        let (status, body) = cluster.get("/media/clip", Some("bytes=0-9")).await;
        assert_eq!(status, StatusCode::PARTIAL_CONTENT);
        assert_eq!(body, v1[..10]);
    }
    let after = calls.lock().clone();
    let delta = |kind: &str| after.get(kind).unwrap_or(&0) - before.get(kind).unwrap_or(&0);
    assert_eq!(
        delta("get_object"),
        WARM,
        "every GET reads the record: {after:?}"
    );
    assert_eq!(
        (delta("get_access_key"), delta("get_user")),
        (0, 0),
        "credential lookups were not cached: {before:?} -> {after:?}"
    );
    let total: u64 = after.values().sum::<u64>() - before.values().sum::<u64>();
    println!("meta requests per warm GET: {}", total as f64 / WARM as f64);

    // Overwrite: the next GET sees the new bytes at once.
    let v2 = random_bytes(5 * 1024 * 1024 + 11, 2);
    cluster.put("/media/clip", &v2).await;
    let (_, body) = cluster.get("/media/clip", None).await;
    assert!(body == v2[..], "GET after overwrite");
    let (_, body) = cluster.get("/media/clip", Some("bytes=100-199")).await;
    assert_eq!(body, v2[100..200]);

    // Delete then put again: a new version, never the old reader.
    let (status, _) = cluster.send("DELETE", "/media/clip", &[], b"").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = cluster.get("/media/clip", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let v3 = random_bytes(1000, 3);
    cluster.put("/media/clip", &v3).await;
    let (_, body) = cluster.get("/media/clip", None).await;
    assert_eq!(body, v3[..]);

    // A refused write frees its blocks; one kept for its record has none,
    // and asks meta nothing more than the refused commit.
    let absent = [("if-none-match", "*")];
    for (body, discards) in [(random_bytes(1000, 4), 0), (random_bytes(64 * 1024, 5), 1)] {
        let before = calls.lock().clone();
        let (status, _) = cluster.send("PUT", "/media/clip", &absent, &body).await;
        assert_eq!(status, StatusCode::PRECONDITION_FAILED);
        let after = calls.lock().clone();
        let delta = |kind: &str| after.get(kind).unwrap_or(&0) - before.get(kind).unwrap_or(&0);
        assert_eq!(delta("commit_object"), 1, "{} bytes", body.len());
        assert_eq!(delta("discard_blocks"), discards, "{} bytes", body.len());
    }

    Arc::into_inner(cluster).unwrap().0.stop().await;
}
