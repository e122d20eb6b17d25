//! Keys small enough for their record (`StoreClient::small_object_writer`):
//! kept in memory by the writer and read from the record with no datanode
//! running; a key that outgrows the limit goes to blocks whole, and a limit
//! of 0 keeps nothing.

use block_client::ClientError;
use bytes::Bytes;
use futures::StreamExt;
use meta_api::InlineBody;
use proto::ReplicationConfig;
use std::sync::Arc;
use test_support::data::random_bytes;
use test_support::meta::group;
use test_support::streams::{rs, StreamCluster as Cluster, BUCKET, CELL};

fn joined(chunks: Vec<Bytes>) -> Vec<u8> {
    chunks.iter().flat_map(|c| c.iter().copied()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_within_the_limit_is_kept_for_its_record_and_read_from_it() {
    let mut cluster = Cluster::start(5).await;
    let data = random_bytes(1000, 7);
    // Exactly the limit, in several writes.
    let mut writer = cluster.client.small_object_writer(rs(3, 2), data.len());
    Cluster::feed(&mut writer, &data, 300).await;
    let written = writer.finish().await.unwrap();
    assert!(written.groups.is_empty(), "{:?}", written.groups);
    assert_eq!(written.size, 1000);
    assert_eq!(written.inline.as_deref(), Some(&data[..]));
    let record = cluster.commit(BUCKET, "small", written).await;
    assert_eq!(record.inline.as_ref().map(|b| &b.0[..]), Some(&data[..]));

    // No datanode is asked for any of it.
    for i in 0..5 {
        cluster.stop(i).await;
    }
    let reader = Arc::new(cluster.client.reader(&record));
    assert_eq!(reader.len(), 1000);
    assert_eq!(reader.read_at(0, 5000).await.unwrap(), data[..]);
    assert_eq!(reader.read_at(990, 100).await.unwrap(), data[990..]);
    assert!(reader.read_at(1000, 5).await.unwrap().is_empty());
    let chunks = reader.read_chunks_at(10, 20).await.unwrap();
    assert_eq!(chunks.len(), 1);
    assert_eq!(joined(chunks), data[10..30]);
    assert!(reader.read_chunks_at(1000, 1).await.unwrap().is_empty());
    let mut streamed = Vec::new();
    let mut sequential = reader.sequential(5, 995);
    while let Some(piece) = sequential.next().await {
        streamed.extend_from_slice(&piece.unwrap());
    }
    assert_eq!(streamed, data[5..995]);
    reader.close();
    assert!(matches!(
        reader.read_at(0, 10).await,
        Err(ClientError::Closed)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_past_the_limit_goes_to_blocks_whole() {
    let cluster = Cluster::start(5).await;
    let cases: [(&str, ReplicationConfig, usize, usize, usize); 4] = [
        // One byte over, in one write: nothing is held first.
        ("over-by-one", rs(3, 2), 1001, 1000, 1001),
        // Held bytes, then a write that does not fit: both go, in order.
        (
            "held-then-spilled",
            rs(3, 2),
            3 * CELL as usize + 5,
            1000,
            700,
        ),
        (
            "replicated",
            ReplicationConfig::REPLICATED_3,
            5000,
            1000,
            600,
        ),
        // A limit of 0 keeps nothing, however small.
        ("no-limit", rs(3, 2), 10, 0, 10),
    ];
    for (seed, (key, replication, len, limit, piece)) in cases.into_iter().enumerate() {
        let data = random_bytes(len, seed as u64);
        let mut writer = cluster.client.small_object_writer(replication, limit);
        Cluster::feed(&mut writer, &data, piece).await;
        let written = writer.finish().await.unwrap();
        assert_eq!(written.inline, None, "{key}");
        let in_groups: u64 = written.groups.iter().map(|g| g.length).sum();
        assert_eq!(in_groups, len as u64, "{key}");
        let record = cluster.commit(BUCKET, key, written).await;
        assert_eq!(record.inline, None, "{key}");
        cluster.check_reads(&record, &data).await;
    }
}

#[tokio::test]
async fn a_record_with_both_an_inline_body_and_blocks_is_unreadable() {
    let cluster = Cluster::start(1).await;
    let mut record = test_support::meta::object(BUCKET, "both", vec![group(1, &["dn0"])]);
    record.inline = Some(InlineBody(Bytes::from_static(b"0123456789")));
    record.size = 110;
    let reader = cluster.client.reader(&record);
    let error = reader.read_at(0, 10).await.unwrap_err().to_string();
    assert!(
        error.contains("both an inline body and block groups"),
        "{error}"
    );
}
