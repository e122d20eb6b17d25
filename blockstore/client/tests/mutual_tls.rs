//! Client streams over mutual TLS, against real datanodes on 127.0.0.1:0
//! whose block ports demand a certificate of the cluster CA: a client of that
//! CA writes and reads an EC object whole; a clear-text client and a client
//! of another CA can do neither.

use block_client::ClientConfig;
use bytes::Bytes;
use test_support::certs::TestCa;
use test_support::cluster::{write_key, TestCluster, TestClusterConfig};
use test_support::data::random_bytes;
use test_support::streams::{client_config, rs, BLOCK_SIZE, BUCKET, BYTES_PER_CHECKSUM, CELL};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_run_over_mutual_tls_and_strangers_are_turned_away() {
    let ca = TestCa::new();
    let mut config = TestClusterConfig::new(BLOCK_SIZE, BYTES_PER_CHECKSUM);
    config.datanode.tls = Some(ca.tls("datanode"));
    let cluster = TestCluster::start(5, config).await;
    cluster.create_bucket(BUCKET).await;
    let member = cluster.client(ClientConfig {
        tls: Some(ca.tls("gateway")),
        ..client_config()
    });
    let data = random_bytes(7 * 3 * CELL as usize + 1234, 41);
    let written = write_key(&member, rs(3, 2), &data, 10_000).await;
    let record = cluster.commit(BUCKET, "over-tls", written).await;
    let got = member.reader(&record).read_at(0, data.len()).await.unwrap();
    assert!(got[..] == data[..], "the object read over TLS differs");

    let stranger_ca = TestCa::new();
    let strangers = [
        ("clear text", client_config()),
        (
            "another CA",
            ClientConfig {
                tls: Some(stranger_ca.tls("gateway")),
                ..client_config()
            },
        ),
    ];
    for (who, config) in strangers {
        let client = cluster.client(config);
        let read = client.reader(&record).read_at(0, 100).await;
        assert!(read.is_err(), "{who}: read {} bytes", read.unwrap().len());
        let mut writer = client.writer(rs(3, 2));
        let wrote = match writer.write(Bytes::from(vec![7u8; 100_000])).await {
            Ok(()) => writer.finish().await.map(|_| ()),
            Err(e) => Err(e),
        };
        assert!(wrote.is_err(), "{who}: a write got through");
    }
    // The member still reads after the strangers were turned away.
    let again = member.reader(&record).read_at(0, data.len()).await.unwrap();
    assert!(again[..] == data[..]);
    cluster.shutdown().await;
}
