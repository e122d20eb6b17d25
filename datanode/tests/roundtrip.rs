//! Blocks written, committed and read back through `DatanodePool` over real TCP.

use block_client::ClientError;
use test_support::node::{data, key, pool, token, TestNode, BPC};

/// Writes `body` as block `k` in pieces of `piece` bytes (a multiple of BPC) and commits it.
async fn put(
    pool: &block_client::DatanodePool,
    addr: &str,
    k: proto::BlockKey,
    body: &bytes::Bytes,
    piece: usize,
) {
    let mut offset = 0;
    loop {
        let end = (offset + piece).min(body.len());
        pool.write_chunks(
            addr,
            k,
            token(k).as_ref(),
            offset as u64,
            body.slice(offset..end),
        )
        .await
        .unwrap();
        offset = end;
        if offset >= body.len() {
            break;
        }
    }
    pool.commit_block(addr, k, token(k).as_ref(), body.len() as u64)
        .await
        .unwrap();
}

#[tokio::test]
async fn blocks_of_every_size_round_trip_with_arbitrary_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::start(dir.path()).await;
    let pool = pool();
    let bpc = BPC as usize;
    let sizes = [0, 1, bpc - 1, bpc, 3 * bpc + 5, (1 << 20) + 7];
    for (n, &size) in sizes.iter().enumerate() {
        let k = key(100 + n as u64, n as u8);
        let body = data(size, n as u64);
        put(&pool, &node.addr, k, &body, 4 * bpc).await;

        let whole = pool
            .read_block(&node.addr, k, token(k).as_ref(), 0, size as u64)
            .await
            .unwrap();
        assert_eq!(whole, body, "size {size}");

        let mut ranges = vec![(0, 0), (size, 0)];
        if size > 0 {
            ranges.extend([(0, 1), (size - 1, 1), (size / 2, size - size / 2)]);
        }
        if size > bpc {
            ranges.extend([(bpc - 1, 2), (bpc, bpc), (bpc + 1, bpc - 2), (1, size - 2)]);
        }
        // A fixed pseudo-random walk over the block.
        let mut x = 0x2545_f491_4f6c_dd1d_u64 ^ size as u64;
        for _ in 0..20 {
            if size == 0 {
                break;
            }
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let start = (x % size as u64) as usize;
            let len = ((x >> 32) % (size - start + 1) as u64) as usize;
            ranges.push((start, len));
        }
        for (start, len) in ranges {
            let got = pool
                .read_block(&node.addr, k, token(k).as_ref(), start as u64, len as u64)
                .await
                .unwrap();
            assert_eq!(
                got,
                body.slice(start..start + len),
                "size {size} range {start}+{len}"
            );
        }

        // Every request so far went over one connection, reused.
        assert_eq!(pool.idle_connections(&node.addr), 1);
        // A refusal drops the connection it came over.
        let past_end = pool
            .read_block(&node.addr, k, token(k).as_ref(), size as u64, 1)
            .await;
        assert!(
            matches!(past_end, Err(ClientError::Remote { .. })),
            "{past_end:?}"
        );
        assert_eq!(pool.idle_connections(&node.addr), 0);
    }
    assert_eq!(node.store.stats().blocks, sizes.len() as u64);
    node.stop().await;
}

#[tokio::test]
async fn large_blocks_are_split_into_several_frames_each_way() {
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::start(dir.path()).await;
    let pool = pool();
    let size = (40 << 20) + 3;
    let body = data(size, 77);
    let k = key(7, 0);
    // One call, more than one frame's worth.
    put(&pool, &node.addr, k, &body, size).await;
    let got = pool
        .read_block(&node.addr, k, token(k).as_ref(), 5, size as u64 - 6)
        .await
        .unwrap();
    assert_eq!(got, body.slice(5..size - 1));
    node.stop().await;
}

#[tokio::test]
async fn concurrent_streams_share_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::start(dir.path()).await;
    let pool = std::sync::Arc::new(pool());
    let mut tasks = Vec::new();
    for n in 0..8u64 {
        let (pool, addr) = (pool.clone(), node.addr.clone());
        tasks.push(tokio::spawn(async move {
            let body = data(100_000 + n as usize, n);
            let k = key(1000 + n, 0);
            put(&pool, &addr, k, &body, 2 * BPC as usize).await;
            let got = pool
                .read_block(&addr, k, token(k).as_ref(), 0, body.len() as u64)
                .await
                .unwrap();
            assert_eq!(got, body);
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let idle = pool.idle_connections(&node.addr);
    assert!((1..=8).contains(&idle), "{idle} idle connections");
    node.stop().await;
}

#[tokio::test]
async fn misaligned_write_offsets_are_refused_locally() {
    let pool = pool();
    let err = pool
        .write_chunks(
            "127.0.0.1:1",
            key(1, 0),
            token(key(1, 0)).as_ref(),
            5,
            data(10, 0),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Protocol { .. }), "{err:?}");
}
