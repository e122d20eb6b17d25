//! The EC writer's stripe buffers against real datanodes: each stream reuses
//! its own stripe buffer sets (HDDS-17033), takes at most `stripe_queue + 2`
//! of them from the client's shared pool whatever the object size, gives
//! every one back on finish, abort, drop and failure, and a partial last
//! stripe written into reused buffers still reads back with two cells lost.

use block_client::{ClientError, StoreClient};
use bytes::Bytes;
use meta_api::MetaError;
use proto::{EcLayout, ReplicationConfig};
use std::time::Duration;
use test_support::data::random_bytes;
use test_support::meta::{MetaUnderTest, Transport};
use test_support::streams::{rs, StreamCluster as Cluster, CELL};

const STRIPE: usize = 3 * CELL as usize;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_takes_at_most_queue_plus_two_sets_whatever_the_size() {
    let queue = 4;
    let cluster = Cluster::start_tuned(5, 64 * CELL as u64, |c| c.stripe_queue = queue).await;
    let pool = cluster.client.buffer_pool().clone();
    for (seed, size) in [1usize << 20, 64 << 20].into_iter().enumerate() {
        let before = pool.stats();
        let data = random_bytes(size, seed as u64);
        let record = cluster
            .put(&format!("sets/{size}"), rs(3, 2), &data, 100_000)
            .await;
        let after = pool.stats();
        let takes = after.takes - before.takes;
        let stripes = size.div_ceil(STRIPE);
        assert!(
            (1..=(queue as u64 + 2)).contains(&takes),
            "{size} bytes: {takes} sets taken for {stripes} stripes"
        );
        assert_eq!(after.in_use_bytes, 0, "{after:?}");
        assert_eq!(after.returns, after.takes, "{after:?}");
        cluster.check_reads(&record, &data).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_last_stripes_in_reused_buffers_read_back_with_two_cells_lost() {
    let mut cluster = Cluster::start_tuned(6, 64 * CELL as u64, |c| c.stripe_queue = 1).await;
    let pool = cluster.client.buffer_pool().clone();
    let cell = CELL as usize;
    // Ten full stripes of random bytes go through the buffers first, so the
    // last stripe's padding lands on buffers that held other bytes.
    let shapes = [
        ("cell-1-partial", 10 * STRIPE + cell + 1234),
        ("cell-0-partial", 10 * STRIPE + 5000),
        ("cell-2-partial", 10 * STRIPE + 2 * cell + 77),
    ];
    let mut objects = Vec::new();
    for (seed, (name, size)) in shapes.into_iter().enumerate() {
        let before = pool.stats().takes;
        let data = random_bytes(size, 50 + seed as u64);
        let record = cluster.put(name, rs(3, 2), &data, 10_000).await;
        let takes = pool.stats().takes - before;
        assert!(
            takes <= 3,
            "{name}: {takes} sets for 11 stripes, so no reuse"
        );
        assert_eq!(record.groups.len(), 1, "{name}");
        objects.push((record, data));
    }
    assert_eq!(pool.stats().in_use_bytes, 0);
    // Lose data cells 0 and 1 of the first object's group: its last stripe
    // is rebuilt from the (zero-padded) cell 2 and the parity.
    let group = &objects[0].0.groups[0];
    let lost: Vec<usize> = group
        .replicas
        .iter()
        .filter(|r| r.index < 2)
        .map(|r| cluster.datanode_at(&r.addr))
        .collect();
    assert_eq!(lost.len(), 2);
    for i in lost {
        cluster.stop(i).await;
    }
    for (record, data) in &objects {
        cluster.check_reads(record, data).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_and_drop_give_every_buffer_back() {
    let cluster = Cluster::start_tuned(5, 64 * CELL as u64, |_| {}).await;
    let pool = cluster.client.buffer_pool().clone();

    let mut writer = cluster.client.writer(rs(3, 2));
    Cluster::feed(&mut writer, &random_bytes(20 * STRIPE + 99, 1), 30_000).await;
    assert!(pool.stats().in_use_bytes > 0);
    writer.abort().await;
    let stats = pool.stats();
    assert_eq!(stats.in_use_bytes, 0, "{stats:?}");
    assert_eq!(stats.returns, stats.takes);

    let mut writer = cluster.client.writer(rs(3, 2));
    Cluster::feed(&mut writer, &random_bytes(20 * STRIPE + 99, 2), 30_000).await;
    drop(writer);
    // The flush task cleans up in the background once the writer is gone.
    let mut stats = pool.stats();
    for _ in 0..400 {
        if stats.in_use_bytes == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        stats = pool.stats();
    }
    assert_eq!(stats.in_use_bytes, 0, "{stats:?}");
    assert_eq!(stats.returns, stats.takes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_gives_every_buffer_back() {
    // Five datanodes for rs-3-2: once two are gone no new group can be placed
    // (a short one needs four).
    let mut cluster = Cluster::start_tuned(5, 8 * CELL as u64, |c| c.stripe_queue = 2).await;
    let pool = cluster.client.buffer_pool().clone();
    let mut writer = cluster.client.writer(rs(3, 2));
    Cluster::feed(&mut writer, &random_bytes(12 * STRIPE, 3), 40_000).await;
    writer.flush().await.unwrap();
    let victim = cluster.datanode_with_open_upload();
    cluster.stop(victim).await;
    cluster.stop((victim + 1) % 5).await;
    let rest = random_bytes(12 * STRIPE, 4);
    let mut failure = None;
    for chunk in rest.chunks(40_000) {
        if let Err(e) = writer.write(Bytes::copy_from_slice(chunk)).await {
            failure = Some(e);
            break;
        }
    }
    let err = match failure {
        Some(e) => {
            drop(writer);
            e
        }
        None => writer.finish().await.unwrap_err(),
    };
    assert!(
        matches!(err, ClientError::Meta(MetaError::NotEnoughDatanodes { .. })),
        "{err:?}"
    );
    let stats = pool.stats();
    assert_eq!(stats.in_use_bytes, 0, "{stats:?}");
    assert_eq!(stats.returns, stats.takes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_streams_stay_within_the_shared_bound() {
    let set = 5 * CELL as u64;
    let limit = 3 * set;
    let cluster = Cluster::start_tuned(5, 64 * CELL as u64, |c| c.buffer_pool_bytes = limit).await;
    let pool = cluster.client.buffer_pool().clone();
    let writes = (0..4u64).map(|i| {
        let cluster = &cluster;
        async move {
            let data = random_bytes(2 << 20, 100 + i);
            let record = cluster
                .put(&format!("shared/{i}"), rs(3, 2), &data, 64 * 1024)
                .await;
            (record, data)
        }
    });
    let objects = futures::future::join_all(writes).await;
    // Four streams of 2 MiB keys wanted more sets than the bound holds: the
    // peak reaches past one set and stops at the bound.
    let peak = pool.stats().peak_in_use_bytes;
    assert!(peak > set, "peak {peak}: the streams never shared the pool");
    assert!(peak <= limit, "peak {peak} over the limit {limit}");
    assert_eq!(pool.stats().in_use_bytes, 0);
    for (record, data) in &objects {
        cluster.check_reads(record, data).await;
    }
}

/// A client of a meta with no datanodes.
fn client(meta: &MetaUnderTest) -> StoreClient {
    StoreClient::new(meta.meta.clone(), Default::default())
}

#[tokio::test]
async fn empty_key_finishes_without_groups() {
    let meta = MetaUnderTest::open(Transport::Local).await;
    let client = client(&meta);
    let mut writer = client.writer(ReplicationConfig::RS_3_2);
    writer.write(Bytes::new()).await.unwrap();
    assert!(writer.is_empty());
    let key = writer.finish().await.unwrap();
    assert_eq!(key.size, 0);
    assert!(key.groups.is_empty());
    assert_eq!(client.buffer_pool().stats().takes, 0);
}

#[tokio::test]
async fn cells_off_checksum_chunks_are_refused() {
    let meta = MetaUnderTest::open(Transport::Local).await;
    let layout = EcLayout {
        data: 3,
        parity: 2,
        cell_size: 1000,
    };
    let mut writer = client(&meta).writer(ReplicationConfig::Ec(layout));
    let err = writer.write(Bytes::from_static(b"x")).await.unwrap_err();
    assert!(
        matches!(err, ClientError::Meta(MetaError::InvalidRequest(_))),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_failed_allocation_fails_the_write_and_returns_every_buffer() {
    // No datanode is registered, so the first group cannot be allocated.
    let meta = MetaUnderTest::open(Transport::Local).await;
    let client = client(&meta);
    let layout = EcLayout {
        data: 3,
        parity: 2,
        cell_size: 16 * 1024,
    };
    let mut writer = client.writer(ReplicationConfig::Ec(layout));
    let stripe = vec![1u8; 3 * 16 * 1024];
    let mut failed = None;
    for _ in 0..20 {
        if let Err(e) = writer.write(Bytes::from(stripe.clone())).await {
            failed = Some(e);
            break;
        }
    }
    let err = match failed {
        Some(e) => e,
        None => writer.finish().await.unwrap_err(),
    };
    assert!(
        matches!(err, ClientError::Meta(MetaError::NotEnoughDatanodes { .. })),
        "{err:?}"
    );
    let stats = client.buffer_pool().stats();
    assert!(stats.takes >= 1);
    assert_eq!(stats.in_use_bytes, 0, "{stats:?}");
    assert_eq!(stats.returns, stats.takes);
}
