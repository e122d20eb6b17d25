use super::*;
use proto::BlockId;

const BPC: u32 = 1024;

/// Shard folders synced after a removal, in order (fsync is invisible otherwise).
pub(super) static SYNCED_SHARDS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn key(n: u64) -> BlockKey {
    BlockKey::new(BlockId(n), (n % 5) as u8)
}

fn data(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect::<Vec<_>>()
        .into()
}

async fn open(dir: &Path) -> Arc<BlockStore> {
    BlockStore::open(dir, BPC, false).await.unwrap()
}

async fn write(
    store: &BlockStore,
    key: BlockKey,
    offset: u64,
    data: &Bytes,
) -> Result<(), StoreError> {
    let crcs = checksum::compute(data, BPC);
    store
        .write_chunks(key, offset, BPC, crcs, data.clone())
        .await
}

async fn read_all(store: &BlockStore, key: BlockKey, offset: u64, len: u64) -> (ReadData, Vec<u8>) {
    let range = store.open_range(key, offset, len).await.unwrap();
    let mut buf = vec![0u8; range.header.length as usize];
    range
        .file
        .read_exact_at(&mut buf, range.header.offset)
        .unwrap();
    (range.header, buf)
}

fn tmp_files(dir: &Path) -> usize {
    fs::read_dir(dir.join("tmp")).unwrap().count()
}

#[tokio::test]
async fn written_block_reads_back_aligned_with_its_crcs() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let body = data(3 * 1024 + 100, 1);
    write(&store, key(1), 0, &body.slice(..2048)).await.unwrap();
    write(&store, key(1), 2048, &body.slice(2048..))
        .await
        .unwrap();
    assert!(
        store.open_range(key(1), 0, 1).await.is_err(),
        "not visible before commit"
    );
    store.commit(key(1), body.len() as u64).await.unwrap();
    assert_eq!(tmp_files(dir.path()), 0);
    assert_eq!(
        store.stats(),
        StoreStats {
            blocks: 1,
            used: body.len() as u64
        }
    );

    let (header, bytes) = read_all(&store, key(1), 1500, 1000).await;
    assert_eq!((header.offset, header.length), (1024, 2048));
    assert_eq!(bytes, &body[1024..3072]);
    checksum::verify(&bytes, header.offset, BPC, &header.crcs).unwrap();

    let (header, bytes) = read_all(&store, key(1), 3100, 24).await;
    assert_eq!((header.offset, header.length), (3072, 100));
    assert_eq!(bytes, &body[3072..]);
    checksum::verify(&bytes, header.offset, BPC, &header.crcs).unwrap();
}

#[tokio::test]
async fn reads_past_the_end_are_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    write(&store, key(2), 0, &data(10, 0)).await.unwrap();
    store.commit(key(2), 10).await.unwrap();
    for (offset, len) in [(0, 11), (10, 1), (11, 0), (u64::MAX, 2)] {
        assert!(matches!(
            store.open_range(key(2), offset, len).await,
            Err(StoreError::OutOfRange { .. })
        ));
    }
    let (header, bytes) = read_all(&store, key(2), 10, 0).await;
    assert_eq!((header.offset, bytes.len()), (0, 10));
    assert!(matches!(
        store.open_range(key(3), 0, 0).await,
        Err(StoreError::NotFound(_))
    ));
}

#[tokio::test]
async fn bad_checksum_discards_the_upload() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    write(&store, key(4), 0, &data(1024, 0)).await.unwrap();
    let body = data(3000, 9);
    let mut crcs = checksum::compute(&body, BPC);
    crcs[1] ^= 1;
    let err = store
        .write_chunks(key(4), 1024, BPC, crcs, body)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::ChecksumMismatch { offset: 2048, .. }),
        "{err:?}"
    );
    assert_eq!(err.code(), proto::wire::ErrorCode::ChecksumMismatch);
    assert_eq!(store.open_uploads(), 0);
    assert_eq!(tmp_files(dir.path()), 0);
    assert!(matches!(
        store.commit(key(4), 1024).await,
        Err(StoreError::NotFound(_))
    ));
}

#[tokio::test]
async fn writes_must_be_contiguous_and_chunk_aligned() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    assert!(matches!(
        write(&store, key(5), 1024, &data(10, 0)).await,
        Err(StoreError::BadOffset {
            expected: 0,
            got: 1024,
            ..
        })
    ));
    write(&store, key(5), 0, &data(1024, 0)).await.unwrap();
    assert!(matches!(
        write(&store, key(5), 2048, &data(10, 0)).await,
        Err(StoreError::BadOffset { expected: 1024, .. })
    ));
    write(&store, key(5), 1024, &data(10, 0)).await.unwrap();
    // The last write ended inside a chunk: nothing may follow it.
    assert!(matches!(
        write(&store, key(5), 1034, &data(10, 0)).await,
        Err(StoreError::BadOffset { .. })
    ));
    assert!(matches!(
        store
            .write_chunks(key(5), 1034, 2048, vec![], Bytes::new())
            .await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store.commit(key(5), 1000).await,
        Err(StoreError::Invalid(_))
    ));
    store.commit(key(5), 1034).await.unwrap();
    assert!(matches!(
        write(&store, key(5), 0, &data(1, 0)).await,
        Err(StoreError::Invalid(_))
    ));
}

#[tokio::test]
async fn commit_is_idempotent_and_empty_blocks_need_no_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    write(&store, key(6), 0, &data(100, 0)).await.unwrap();
    store.commit(key(6), 100).await.unwrap();
    store.commit(key(6), 100).await.unwrap();
    assert!(store.commit(key(6), 99).await.is_err());
    assert!(matches!(
        store.commit(key(7), 5).await,
        Err(StoreError::NotFound(_))
    ));
    store.commit(key(7), 0).await.unwrap();
    assert_eq!(store.block(key(7)).unwrap().length, 0);
    let (header, bytes) = read_all(&store, key(7), 0, 0).await;
    assert_eq!((header.length, bytes.len(), header.crcs.len()), (0, 0, 0));
}

#[tokio::test]
async fn delete_removes_committed_and_open_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    write(&store, key(8), 0, &data(100, 0)).await.unwrap();
    store.commit(key(8), 100).await.unwrap();
    write(&store, key(9), 0, &data(100, 0)).await.unwrap();
    assert!(store.delete(key(8)).await.unwrap());
    assert!(store.delete(key(9)).await.unwrap());
    assert!(!store.delete(key(8)).await.unwrap());
    assert!(!store.delete(key(10)).await.unwrap());
    assert!(!store.data_path(key(8)).exists());
    assert!(!store.sidecar_path(key(8)).exists());
    assert_eq!(tmp_files(dir.path()), 0);
    assert_eq!(store.stats(), StoreStats::default());
    // A deleted upload can start over.
    write(&store, key(9), 0, &data(5, 0)).await.unwrap();
    store.commit(key(9), 5).await.unwrap();
}

#[tokio::test]
async fn reopening_keeps_committed_blocks_and_identity_and_drops_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let (id, body) = {
        let store = BlockStore::open(dir.path(), BPC, true).await.unwrap();
        let body = data(5000, 3);
        write(&store, key(11), 0, &body).await.unwrap();
        store.commit(key(11), 5000).await.unwrap();
        write(&store, key(12), 0, &data(2048, 0)).await.unwrap();
        assert_eq!(tmp_files(dir.path()), 1);
        (store.id().clone(), body)
    };
    let store = open(dir.path()).await;
    assert_eq!(store.id(), &id);
    assert_eq!(tmp_files(dir.path()), 0);
    assert_eq!(store.committed_blocks(), vec![key(11)]);
    assert_eq!(
        store.stats(),
        StoreStats {
            blocks: 1,
            used: 5000
        }
    );
    let (_, bytes) = read_all(&store, key(11), 0, 5000).await;
    assert_eq!(bytes, &body[..]);
    assert!(matches!(
        write(&store, key(12), 2048, &data(10, 0)).await,
        Err(StoreError::BadOffset { expected: 0, .. })
    ));
}

#[tokio::test]
async fn a_block_whose_length_disagrees_with_its_sidecar_is_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path()).await;
        for n in [13, 14, 15] {
            write(&store, key(n), 0, &data(3000, 0)).await.unwrap();
            store.commit(key(n), 3000).await.unwrap();
        }
        let file = OpenOptions::new()
            .append(true)
            .open(store.data_path(key(13)))
            .unwrap();
        file.set_len(2999).unwrap();
        fs::write(store.sidecar_path(key(14)), b"garbage").unwrap();
        fs::remove_file(store.sidecar_path(key(15))).unwrap();
    }
    let store = open(dir.path()).await;
    assert!(store.committed_blocks().is_empty());
    let quarantined = fs::read_dir(dir.path().join("quarantine")).unwrap().count();
    assert_eq!(quarantined, 5);
    assert!(matches!(
        store.open_range(key(13), 0, 1).await,
        Err(StoreError::NotFound(_))
    ));
}

#[tokio::test]
async fn a_corrupt_identity_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("datanode.id"), "not-a-uuid").unwrap();
    assert!(matches!(
        BlockStore::open(dir.path(), BPC, false).await,
        Err(StoreError::Corrupt { .. })
    ));
    assert!(BlockStore::open(dir.path(), 7, false).await.is_err());
}

#[tokio::test]
async fn a_fresh_folder_takes_its_credentials_id_and_another_datanodes_folder_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("dn");
    assert_eq!(BlockStore::identity_in(&folder).unwrap(), None);
    let id = DatanodeId("3F0C6A1E-8D4B-4C59-9A57-2B8F4F2D7E10".into());
    let store = BlockStore::open_as(&folder, BPC, false, Some(id))
        .await
        .unwrap();
    // Kept in the canonical (lower case) form a restart reads back.
    let canonical = DatanodeId("3f0c6a1e-8d4b-4c59-9a57-2b8f4f2d7e10".into());
    assert_eq!(store.id(), &canonical);
    drop(store);
    assert_eq!(
        BlockStore::identity_in(&folder).unwrap(),
        Some(canonical.clone())
    );
    let again = BlockStore::open_as(&folder, BPC, false, Some(canonical.clone()));
    assert_eq!(again.await.unwrap().id(), &canonical);
    assert_eq!(open(&folder).await.id(), &canonical);

    let other = DatanodeId(uuid::Uuid::new_v4().to_string());
    let refused = BlockStore::open_as(&folder, BPC, false, Some(other)).await;
    assert!(matches!(refused, Err(StoreError::Invalid(_))));
    let not_a_uuid = Some(DatanodeId("dn-1".into()));
    let refused = BlockStore::open_as(dir.path().join("new"), BPC, false, not_a_uuid).await;
    assert!(matches!(refused, Err(StoreError::Invalid(_))));
    assert_eq!(
        BlockStore::identity_in(dir.path().join("new")).unwrap(),
        None
    );
}

#[tokio::test]
async fn idle_uploads_are_discarded() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    write(&store, key(16), 0, &data(10, 0)).await.unwrap();
    assert_eq!(store.discard_idle_uploads(Duration::from_secs(60)).await, 0);
    assert_eq!(store.discard_idle_uploads(Duration::ZERO).await, 1);
    assert_eq!(store.open_uploads(), 0);
    assert_eq!(tmp_files(dir.path()), 0);
}

#[tokio::test]
async fn delete_syncs_the_shard_folder_only_when_fsync_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let syncs = |shard: &Path| SYNCED_SHARDS.lock().iter().filter(|p| *p == shard).count();
    let store = BlockStore::open(dir.path().join("durable"), BPC, true)
        .await
        .unwrap();
    let k = key(11);
    write(&store, k, 0, &data(3000, 1)).await.unwrap();
    store.commit(k, 3000).await.unwrap();
    let shard = store.paths.shard_dir(k);
    assert_eq!(syncs(&shard), 0);
    assert!(store.delete(k).await.unwrap());
    assert!(!store.data_path(k).exists() && !store.sidecar_path(k).exists());
    assert_eq!(syncs(&shard), 1);
    // Deleting an absent block has nothing to make durable.
    assert!(!store.delete(k).await.unwrap());
    assert_eq!(syncs(&shard), 1);

    let scratch = open(&dir.path().join("scratch")).await;
    write(&scratch, k, 0, &data(3000, 1)).await.unwrap();
    scratch.commit(k, 3000).await.unwrap();
    assert!(scratch.delete(k).await.unwrap());
    assert_eq!(syncs(&scratch.paths.shard_dir(k)), 0);
}

/// Whole cells go direct, unaligned pieces through the page cache, in one
/// file: the committed block holds exactly the bytes written, either way.
#[tokio::test]
async fn direct_and_buffered_writes_mix_in_one_block() {
    for direct_writes in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        store.set_direct_writes(direct_writes);
        let cell = 64 * 1024;
        let body = data(3 * cell + 3 * BPC as usize + 10, 9);
        // Aligned in offset and length, in an aligned buffer: direct.
        let mut first = direct::aligned_buffer(cell);
        first.extend_from_slice(&body[..cell]);
        write(&store, key(3), 0, &first.freeze()).await.unwrap();
        // Aligned offset and length, unaligned memory: direct via the bounce buffer.
        write(&store, key(3), cell as u64, &body.slice(cell..2 * cell))
            .await
            .unwrap();
        // A chunk-aligned but not page-aligned length: buffered, and so is
        // everything after it (its offset is no longer page-aligned).
        let uneven = 2 * cell + BPC as usize;
        write(
            &store,
            key(3),
            2 * cell as u64,
            &body.slice(2 * cell..uneven),
        )
        .await
        .unwrap();
        write(&store, key(3), uneven as u64, &body.slice(uneven..))
            .await
            .unwrap();
        store.commit(key(3), body.len() as u64).await.unwrap();
        let (header, bytes) = read_all(&store, key(3), 0, body.len() as u64).await;
        assert_eq!(bytes, &body[..], "direct writes {direct_writes}");
        checksum::verify(&bytes, header.offset, BPC, &header.crcs).unwrap();
    }
}

#[tokio::test]
async fn the_disk_write_bound_can_be_raised_and_lowered_even_while_writes_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    assert_eq!(store.disk_writes.available_permits(), DEFAULT_DISK_WRITES);
    store.set_max_disk_writes(7);
    assert_eq!(store.disk_writes.available_permits(), 7);
    store.set_max_disk_writes(0);
    assert_eq!(store.disk_writes.available_permits(), 1, "never below one");
    // Lowered while three writes hold their turns: the bound holds once they end.
    store.set_max_disk_writes(3);
    let running = store
        .disk_writes
        .clone()
        .acquire_many_owned(3)
        .await
        .unwrap();
    store.set_max_disk_writes(1);
    drop(running);
    tokio::time::timeout(Duration::from_secs(5), async {
        while store.disk_writes.available_permits() != 1 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the surplus turns were taken back");
    // And writes still complete under it.
    let body = data(10_000, 3);
    write(&store, key(1), 0, &body).await.unwrap();
    store.commit(key(1), body.len() as u64).await.unwrap();
    let (header, bytes) = read_all(&store, key(1), 0, 10_000).await;
    assert_eq!(header.length, 10_000);
    assert_eq!(bytes, &body[..]);
}

#[test]
fn removing_an_absent_file_is_done_and_a_failed_removal_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, b"x").unwrap();
    remove_if_present(&file).unwrap();
    assert!(!file.exists());
    remove_if_present(&file).unwrap();
    // A folder in its place cannot be removed as a file.
    std::fs::create_dir(&file).unwrap();
    assert!(matches!(
        remove_if_present(&file),
        Err(StoreError::Io { .. })
    ));
}

#[tokio::test]
async fn direct_writes_can_be_turned_off_and_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    store.set_direct_writes(false);
    assert!(!store.direct_writes());
    store.set_direct_writes(true);
    assert!(store.direct_writes());
}

/// Files changed behind the store's back: a data file gone reads as a
/// missing block; a sidecar whose chunk size or length differs from what the
/// store loaded is corruption, whichever of the two changed.
#[tokio::test]
async fn files_changed_behind_the_store_are_caught_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let body = data(3000, 4);
    for n in [11, 12, 13] {
        write(&store, key(n), 0, &body).await.unwrap();
        store.commit(key(n), body.len() as u64).await.unwrap();
    }
    fs::remove_file(store.data_path(key(11))).unwrap();
    assert!(matches!(
        store.open_range(key(11), 0, 10).await,
        Err(StoreError::NotFound(_))
    ));
    let crcs = checksum::compute(&body, BPC);
    let other_chunk = sidecar::SidecarHeader {
        bytes_per_checksum: 2 * BPC,
        length: body.len() as u64,
    };
    let other_length = sidecar::SidecarHeader {
        bytes_per_checksum: BPC,
        length: body.len() as u64 - 1,
    };
    for (n, header) in [(12, other_chunk), (13, other_length)] {
        fs::write(store.sidecar_path(key(n)), header.encode_with(&crcs)).unwrap();
        assert!(
            matches!(
                store.open_range(key(n), 0, 10).await,
                Err(StoreError::Corrupt { .. })
            ),
            "{header:?}"
        );
    }
}

/// Lowering the bound while writes hold permits takes the rest as they
/// return, no more.
#[tokio::test]
async fn lowering_the_disk_write_bound_takes_effect_as_writes_finish() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    store.set_max_disk_writes(4);
    assert_eq!(store.disk_writes.available_permits(), 4);
    let running = store
        .disk_writes
        .clone()
        .acquire_many_owned(3)
        .await
        .unwrap();
    store.set_max_disk_writes(1);
    assert_eq!(store.disk_writes.available_permits(), 0);
    drop(running);
    for _ in 0..100 {
        if store.disk_writes.available_permits() == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(store.disk_writes.available_permits(), 1);
    store.set_max_disk_writes(3);
    assert_eq!(store.disk_writes.available_permits(), 3);
}

/// The gauges follow commits and deletions.
#[tokio::test]
async fn store_gauges_follow_commits_and_deletions() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let gauge = |name: &str| {
        let series = format!("{name}{{id=\"{}\"}} ", store.id().0);
        handle
            .render()
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str()).map(str::to_string))
    };
    write(&store, key(21), 0, &data(700, 2)).await.unwrap();
    store.commit(key(21), 700).await.unwrap();
    assert_eq!(gauge("tessera_datanode_store_blocks").as_deref(), Some("1"));
    assert_eq!(
        gauge("tessera_datanode_store_used_bytes").as_deref(),
        Some("700")
    );
    store.delete(key(21)).await.unwrap();
    assert_eq!(gauge("tessera_datanode_store_blocks").as_deref(), Some("0"));
}

/// One read reply carries at most MAX_PAYLOAD_LEN bytes: exactly that much
/// is served, a byte more is refused.
#[tokio::test]
async fn one_read_is_bounded_by_the_largest_payload() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let max = u64::from(MAX_PAYLOAD_LEN);
    let body = Bytes::from(vec![7u8; max as usize + 1024]);
    write(&store, key(31), 0, &body).await.unwrap();
    store.commit(key(31), body.len() as u64).await.unwrap();
    let whole = store.open_range(key(31), 0, max).await.unwrap();
    assert_eq!(whole.header.length, max);
    let tail = store.open_range(key(31), max, 1024).await.unwrap();
    assert_eq!((tail.header.offset, tail.header.length), (max, 1024));
    assert!(matches!(
        store.open_range(key(31), 0, max + 1).await,
        Err(StoreError::Invalid(_))
    ));
}

#[tokio::test]
async fn the_local_socket_and_open_uploads_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    assert_eq!(store.local_socket(), None);
    store.set_local_socket(Some(PathBuf::from("/run/dn.sock")));
    assert_eq!(store.local_socket(), Some(PathBuf::from("/run/dn.sock")));
    assert_eq!(store.open_uploads(), 0);
    write(&store, key(32), 0, &data(10, 1)).await.unwrap();
    assert_eq!(store.open_uploads(), 1);
}

#[test]
fn an_identity_that_cannot_be_read_is_an_error_not_a_new_datanode() {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::new(dir.path().to_path_buf());
    assert_eq!(recovery::read_identity(&paths).unwrap(), None);
    // A folder where the file should be: reading it fails (EISDIR), which
    // must not pass for "no identity yet" and make the datanode a new one.
    std::fs::create_dir_all(&paths.identity).unwrap();
    assert!(recovery::read_identity(&paths).is_err());
}

#[test]
fn folders_are_made_once_and_failures_to_make_or_sync_them_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let made = dir.path().join("made");
    recovery::create_if_missing(&made).unwrap();
    assert!(made.is_dir());
    recovery::create_if_missing(&made).unwrap();
    assert!(recovery::create_if_missing(&dir.path().join("missing").join("child")).is_err());
    recovery::sync_dir(&made).unwrap();
    assert!(recovery::sync_dir(&dir.path().join("missing")).is_err());
}

#[tokio::test]
async fn a_first_write_past_the_start_is_refused_and_opens_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let body = data(BPC as usize, 3);
    let refused = write(&store, key(7), BPC as u64, &body).await;
    assert!(matches!(refused, Err(StoreError::BadOffset { got, .. }) if got == BPC as u64));
    assert_eq!(tmp_files(dir.path()), 0, "no upload was opened for it");
    assert_eq!(store.open_uploads(), 0);
    // The block starts from its beginning all the same.
    write(&store, key(7), 0, &body).await.unwrap();
    store.commit(key(7), body.len() as u64).await.unwrap();
}

#[tokio::test]
async fn writing_a_block_leaves_direct_writes_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    assert!(
        store.direct_writes(),
        "{} refuses O_DIRECT: point TMPDIR at a disk file system to run this test",
        dir.path().display()
    );
    let body = data(2 * BPC as usize, 4);
    write(&store, key(8), 0, &body).await.unwrap();
    store.commit(key(8), body.len() as u64).await.unwrap();
    assert!(store.direct_writes());
}

#[tokio::test]
async fn a_shard_folder_removed_behind_the_store_is_made_again_at_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let shard = Paths::new(dir.path().to_path_buf()).shard_dir(key(9));
    fs::remove_dir(&shard).unwrap();
    let body = data(1000, 5);
    write(&store, key(9), 0, &body).await.unwrap();
    store.commit(key(9), body.len() as u64).await.unwrap();
    assert!(shard.is_dir());
    let (_, read) = read_all(&store, key(9), 0, body.len() as u64).await;
    assert_eq!(read, body.to_vec());
}
