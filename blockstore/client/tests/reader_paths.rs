//! The key reader against real datanodes on 127.0.0.1:0, with faults made by
//! real means (a TCP proxy that stops forwarding, a byte flipped on disk):
//! positioned reads beside a stalled sequential read, close, concurrent
//! random ranges, deadlines with the suspect cache, bad-replica reports,
//! and the zero-copy paths.

use block_client::ClientConfig;
use block_client::{ClientError, KeyReader};
use bytes::Bytes;
use futures::StreamExt;
use proto::ReplicationConfig;
use rand::{Rng, SeedableRng};
use test_support::data::{eventually, random_bytes};
use test_support::proxy::StallProxy;
use test_support::streams::{client_config, redirect, rs, StreamCluster as Cluster, CELL};

/// The tests' client settings with a read deadline of `read_deadline`, and
/// datanodes that failed skipped for the rest of the test.
fn reader_config(read_deadline: Duration) -> ClientConfig {
    ClientConfig {
        io_timeout: Duration::from_secs(600),
        read_deadline,
        suspect_ttl: Duration::from_secs(3600),
        connect_timeout: Duration::from_secs(5),
        ..client_config()
    }
}
use std::sync::Arc;
use std::time::Duration;

/// Long enough that no read in these tests gives up on its own.
const PATIENT: Duration = Duration::from_secs(600);

async fn collect(reader: &Arc<KeyReader>, start: u64, end: u64) -> Result<Vec<u8>, ClientError> {
    let mut out = Vec::new();
    let mut stream = reader.sequential(start, end);
    while let Some(chunk) = stream.next().await {
        out.extend_from_slice(&chunk?);
    }
    Ok(out)
}

fn joined(chunks: Vec<Bytes>) -> Vec<u8> {
    chunks.iter().flat_map(|c| c.iter().copied()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn positioned_read_completes_while_a_sequential_read_waits_on_a_stalled_datanode() {
    let cluster = Cluster::start(5).await;
    let client = cluster.client(reader_config(PATIENT));
    let data = random_bytes(6 * 3 * CELL as usize, 1);
    let record = cluster
        .put_with(&client, "stall", rs(3, 2), &data, 50_000)
        .await;
    // Stall the datanode of data cell 0 of the first group.
    let cell0 = &record.groups[0]
        .replicas
        .iter()
        .find(|r| r.index == 0)
        .unwrap()
        .addr;
    let proxy = StallProxy::start(cell0).await;
    let reader = Arc::new(client.reader(&redirect(&record, cell0, proxy.addr())));
    proxy.stall();

    let sequential = {
        let reader = reader.clone();
        let end = data.len() as u64;
        tokio::spawn(async move { collect(&reader, 0, end).await })
    };
    // The sequential read has asked the stalled datanode and waits on it.
    eventually("the sequential read reached the stalled datanode", || {
        proxy.received() > 0
    })
    .await;

    // Cell 1 of stripe 0 lives on another datanode: served while the
    // sequential read of the same reader is stuck.
    let at = u64::from(CELL);
    let got = reader.read_at(at, CELL as usize).await.unwrap();
    assert_eq!(
        &got[..],
        &data[at as usize..(at + u64::from(CELL)) as usize]
    );
    let chunks = reader.read_chunks_at(at + 10, 100).await.unwrap();
    assert_eq!(joined(chunks), &data[at as usize + 10..at as usize + 110]);
    assert!(
        !sequential.is_finished(),
        "the sequential read should still wait"
    );
    assert_eq!(proxy.forwarded(), 0, "nothing passed the stalled proxy");

    proxy.resume();
    assert_eq!(sequential.await.unwrap().unwrap(), data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_reader_fails_without_contacting_any_datanode() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client(reader_config(PATIENT));
    let data = random_bytes(300_000, 2);
    let record = cluster
        .put_with(
            &client,
            "close",
            ReplicationConfig::REPLICATED_3,
            &data,
            50_000,
        )
        .await;
    let mut proxies = Vec::new();
    let mut proxied = record.clone();
    for dn in cluster.datanodes.iter().flatten() {
        let addr = dn.addr().to_string();
        let proxy = StallProxy::start(&addr).await;
        proxied = redirect(&proxied, &addr, proxy.addr());
        proxies.push(proxy);
    }
    let reader = Arc::new(client.reader(&proxied));
    assert_eq!(
        &reader.read_at(1000, 5000).await.unwrap()[..],
        &data[1000..6000]
    );
    let seen: Vec<u64> = proxies.iter().map(StallProxy::received).collect();
    assert!(seen.iter().sum::<u64>() > 0, "reads go through the proxies");

    reader.close();
    assert!(reader.is_closed());
    let err = reader.read_at(0, 100).await.unwrap_err();
    assert!(matches!(err, ClientError::Closed), "{err:?}");
    let err = reader.read_chunks_at(0, 200_000).await.unwrap_err();
    assert!(matches!(err, ClientError::Closed), "{err:?}");
    let err = collect(&reader, 0, data.len() as u64).await.unwrap_err();
    assert!(matches!(err, ClientError::Closed), "{err:?}");
    let after: Vec<u64> = proxies.iter().map(StallProxy::received).collect();
    assert_eq!(seen, after, "no datanode saw a request after close");
}

async fn random_ranges_from_many_tasks(replication: ReplicationConfig, seed: u64) {
    let cluster = Cluster::start(5).await;
    let client = cluster.client(reader_config(PATIENT));
    let data = Arc::new(random_bytes(700_000, seed));
    let record = cluster
        .put_with(&client, "shared", replication, &data, 50_000)
        .await;
    let reader = Arc::new(client.reader(&record));
    let tasks: Vec<_> = (0..12u64)
        .map(|t| {
            let (reader, data) = (reader.clone(), data.clone());
            tokio::spawn(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed * 100 + t);
                for i in 0..25 {
                    let offset = rng.gen_range(0..data.len() as u64);
                    let len = rng.gen_range(1..200_000usize);
                    let end = (offset as usize + len).min(data.len());
                    let got = if i % 2 == 0 {
                        reader.read_at(offset, len).await.unwrap().to_vec()
                    } else {
                        joined(reader.read_chunks_at(offset, len).await.unwrap())
                    };
                    assert!(
                        got == data[offset as usize..end],
                        "{replication}: {offset}+{len}"
                    );
                }
            })
        })
        .collect();
    // A sequential reader of the same reader runs alongside.
    let whole = collect(&reader, 0, data.len() as u64).await.unwrap();
    assert!(whole == *data, "{replication}: sequential");
    for task in tasks {
        task.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_reading_random_ranges_of_one_ec_reader_get_the_right_bytes() {
    random_ranges_from_many_tasks(rs(3, 2), 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_reading_random_ranges_of_one_replicated_reader_get_the_right_bytes() {
    random_ranges_from_many_tasks(ReplicationConfig::REPLICATED_3, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_datanode_is_rebuilt_around_then_skipped() {
    let cluster = Cluster::start(5).await;
    // A short deadline: past it, the stalled cell is rebuilt.
    let client = cluster.client(reader_config(Duration::from_millis(300)));
    let data = random_bytes(5 * 3 * CELL as usize + 777, 5);
    let record = cluster
        .put_with(&client, "deadline", rs(3, 2), &data, 50_000)
        .await;
    let cell0 = &record.groups[0]
        .replicas
        .iter()
        .find(|r| r.index == 0)
        .unwrap()
        .addr;
    let proxy = StallProxy::start(cell0).await;
    let reader = Arc::new(client.reader(&redirect(&record, cell0, proxy.addr())));
    proxy.stall();

    assert!(reader.read_at(0, data.len()).await.unwrap() == data);
    assert!(client.suspects().is_suspect(proxy.addr()));
    // From now on the stalled datanode is skipped: no request reaches it.
    let asked = proxy.received();
    for (offset, len) in [(0, CELL as usize), (0, data.len()), (100, 40_000)] {
        let got = reader.read_chunks_at(offset, len).await.unwrap();
        assert!(joined(got) == data[offset as usize..offset as usize + len]);
    }
    assert!(collect(&reader, 0, data.len() as u64).await.unwrap() == data);
    assert_eq!(proxy.received(), asked, "suspect datanode was asked again");
    assert_eq!(proxy.forwarded(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_replica_moves_the_read_to_the_next_one() {
    let cluster = Cluster::start(3).await;
    let client = cluster.client(reader_config(Duration::from_millis(300)));
    let data = random_bytes(3 * 1024 * 1024 + 5, 6);
    let record = cluster
        .put_with(
            &client,
            "replicas",
            ReplicationConfig::REPLICATED_3,
            &data,
            50_000,
        )
        .await;
    let first = record.groups[0].replicas[0].addr.clone();
    let proxy = StallProxy::start(&first).await;
    let reader = client.reader(&redirect(&record, &first, proxy.addr()));
    proxy.stall();
    assert!(reader.read_at(0, data.len()).await.unwrap() == data);
    assert!(client.suspects().is_suspect(proxy.addr()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_in_a_cell_is_read_around_and_reported_to_meta() {
    let cluster = Cluster::start(5).await;
    let client = cluster.client(reader_config(PATIENT));
    let data = random_bytes(2 * 3 * CELL as usize, 7);
    let record = cluster
        .put_with(&client, "corrupt", rs(3, 2), &data, 50_000)
        .await;
    let (key, replica) = record.groups[0]
        .block_keys()
        .find(|(k, _)| k.index == 1)
        .unwrap();
    cluster.flip_block_byte(cluster.datanode_at(&replica.addr), key, 100, 0x5a);

    let reader = client.reader(&record);
    assert!(reader.read_at(0, data.len()).await.unwrap() == data);
    // A checksum failure says nothing about the host: it is not skipped.
    assert!(!client.suspects().is_suspect(&replica.addr));
    let service = cluster.service.clone();
    eventually("meta received the bad-replica report", || {
        !service.bad_replicas().unwrap().is_empty()
    })
    .await;
    let reports = cluster.service.bad_replicas().unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0].block, key);
    assert_eq!(reports[0].datanode, replica.datanode);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_and_sequential_reads_copy_nothing_on_the_healthy_path() {
    let cluster = Cluster::start(5).await;
    let client = cluster.client(reader_config(PATIENT));
    for (i, replication) in [rs(3, 2), ReplicationConfig::REPLICATED_3]
        .into_iter()
        .enumerate()
    {
        let data = random_bytes(2 * 1024 * 1024 + 99, 8 + i as u64);
        let record = cluster
            .put_with(&client, &format!("copies/{i}"), replication, &data, 50_000)
            .await;
        let reader = Arc::new(client.reader(&record));
        let chunks = reader.read_chunks_at(5, data.len()).await.unwrap();
        assert!(chunks.len() > 1, "{replication}: several segments");
        assert!(joined(chunks) == data[5..]);
        assert!(collect(&reader, 0, data.len() as u64).await.unwrap() == data);
        assert_eq!(reader.copied_bytes(), 0, "{replication}");
        // read_at joins several segments into one buffer: that is a copy.
        let joined_read = reader.read_at(5, data.len()).await.unwrap();
        assert_eq!(joined_read.len(), data.len() - 5);
        assert_eq!(
            reader.copied_bytes(),
            (data.len() - 5) as u64,
            "{replication}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_reads_stream_every_byte_with_any_window() {
    let cluster = Cluster::start(5).await;
    let data = random_bytes(5 * 3 * CELL as usize + 1234, 9);
    for window in [1, u64::from(CELL), 64 * 1024 * 1024] {
        let client = cluster.client(block_client::ClientConfig {
            read_window: window,
            ..reader_config(PATIENT)
        });
        let record = cluster
            .put_with(
                &client,
                &format!("window/{window}"),
                rs(3, 2),
                &data,
                50_000,
            )
            .await;
        let reader = Arc::new(client.reader(&record));
        for (start, end) in [
            (0, data.len()),
            (17, data.len() - 3),
            (CELL as usize, CELL as usize + 1),
        ] {
            let got = collect(&reader, start as u64, end as u64).await.unwrap();
            assert!(got == data[start..end], "window {window}: {start}..{end}");
        }
        // Past the end is clamped; an empty range yields nothing.
        let tail = collect(&reader, data.len() as u64 - 5, u64::MAX)
            .await
            .unwrap();
        assert_eq!(tail, &data[data.len() - 5..]);
        assert!(collect(&reader, 10, 10).await.unwrap().is_empty());
        assert_eq!(reader.copied_bytes(), 0);
    }
}

/// A stripe whose cell sits on a failed datanode is read once: its other
/// data cells and one parity cell, the missing cell rebuilt from them. Cell
/// by cell, the same bytes take two more block reads per stripe (the
/// rebuild reads the other cells again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_degraded_stripe_is_read_once_for_its_missing_cell() {
    let cluster = Cluster::start(5).await;
    let client = cluster.client(reader_config(Duration::from_millis(300)));
    // Four whole stripes: one group (four cells per block file).
    let data = random_bytes(4 * 3 * CELL as usize, 10);
    let record = cluster
        .put_with(&client, "rows", rs(3, 2), &data, 50_000)
        .await;
    assert_eq!(record.groups.len(), 1);
    let mut redirected = record.clone();
    let mut proxies = Vec::new();
    for replica in &record.groups[0].replicas {
        let proxy = StallProxy::start(&replica.addr).await;
        redirected = redirect(&redirected, &replica.addr, proxy.addr());
        proxies.push((replica.index, proxy));
    }
    let reader = Arc::new(client.reader(&redirected));
    let (_, cell0) = proxies.iter().find(|(i, _)| *i == 0).unwrap();
    cell0.stall();
    // The first read finds it stalled past the deadline: suspect from now on.
    assert!(reader.read_at(0, CELL as usize).await.unwrap() == data[..CELL as usize]);
    assert!(client.suspects().is_suspect(cell0.addr()));
    let asked_healthy = || -> u64 {
        proxies
            .iter()
            .filter(|(i, _)| *i != 0)
            .map(|(_, p)| p.received())
            .sum()
    };

    let before = asked_healthy();
    assert!(collect(&reader, 0, data.len() as u64).await.unwrap() == data);
    let by_rows = asked_healthy() - before;

    let before = asked_healthy();
    for offset in (0..data.len()).step_by(CELL as usize) {
        let got = reader.read_at(offset as u64, CELL as usize).await.unwrap();
        assert!(got == data[offset..offset + CELL as usize]);
    }
    let by_cells = asked_healthy() - before;
    // 3 block reads per stripe against 5: requests are alike in size.
    assert!(
        by_rows * 10 < by_cells * 7,
        "request bytes by rows {by_rows}, cell by cell {by_cells}"
    );
    assert_eq!(cell0.forwarded(), 0, "the failed datanode was asked again");
}
