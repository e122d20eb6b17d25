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

/// A store giving every block files of its own, the layout most of these
/// tests look at; `open_packing` packs small ones.
async fn open(dir: &Path) -> Arc<BlockStore> {
    let store = BlockStore::open(dir, BPC, false).await.unwrap();
    store.set_pack_max(0);
    store
}

async fn open_packing(dir: &Path) -> Arc<BlockStore> {
    BlockStore::open(dir, BPC, false).await.unwrap()
}

async fn put(store: &BlockStore, key: BlockKey, body: &Bytes) {
    let mut at = 0;
    for piece in body.chunks(4 * BPC as usize) {
        write(
            store,
            key,
            at,
            &body.slice(at as usize..at as usize + piece.len()),
        )
        .await
        .unwrap();
        at += piece.len() as u64;
    }
    store.commit(key, body.len() as u64).await.unwrap();
}

/// Every byte of committed block `key`, checked against its CRCs.
async fn get(store: &BlockStore, key: BlockKey) -> Vec<u8> {
    let len = store.block(key).unwrap().length;
    let opened = store.open_whole(key).await.unwrap();
    let mut buf = vec![0u8; len as usize];
    opened.file.read_exact_at(&mut buf, opened.base).unwrap();
    checksum::verify(&buf, 0, BPC, &opened.crcs).unwrap();
    buf
}

/// Block files under `blocks/`.
fn block_files(dir: &Path) -> usize {
    fs::read_dir(dir.join("blocks"))
        .unwrap()
        .map(|shard| fs::read_dir(shard.unwrap().path()).unwrap().count())
        .sum()
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
        .read_exact_at(&mut buf, range.base + range.header.offset)
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
            used: body.len() as u64,
            ..StoreStats::default()
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
        store.set_pack_max(0);
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
            used: 5000,
            ..StoreStats::default()
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
    let store = BlockStore::open_disks(vec![PathBuf::from(&folder)], BPC, false, Some(id))
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
    let again = BlockStore::open_disks(
        vec![PathBuf::from(&folder)],
        BPC,
        false,
        Some(canonical.clone()),
    );
    assert_eq!(again.await.unwrap().id(), &canonical);
    assert_eq!(open(&folder).await.id(), &canonical);

    let other = DatanodeId(uuid::Uuid::new_v4().to_string());
    let refused =
        BlockStore::open_disks(vec![PathBuf::from(&folder)], BPC, false, Some(other)).await;
    assert!(matches!(refused, Err(StoreError::Invalid(_))));
    let not_a_uuid = Some(DatanodeId("dn-1".into()));
    let refused =
        BlockStore::open_disks(vec![dir.path().join("new")], BPC, false, not_a_uuid).await;
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
    store.set_pack_max(0);
    let k = key(11);
    write(&store, k, 0, &data(3000, 1)).await.unwrap();
    store.commit(k, 3000).await.unwrap();
    let shard = store.disks[0].paths.shard_dir(k);
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
    assert_eq!(syncs(&scratch.disks[0].paths.shard_dir(k)), 0);
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

#[tokio::test]
async fn small_blocks_are_packed_read_back_and_deleted_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_packing(dir.path()).await;
    let bodies: Vec<Bytes> = (0..20).map(|n| data(n * 1000 + 1, n as u8)).collect();
    for (n, body) in bodies.iter().enumerate() {
        put(&store, key(n as u64), body).await;
    }
    // An empty block, committed without a write.
    store.commit(key(99), 0).await.unwrap();
    assert_eq!(block_files(dir.path()), 0);
    assert_eq!(tmp_files(dir.path()), 0);
    assert_eq!(store.stats().packed, 21);
    for (n, body) in bodies.iter().enumerate() {
        assert_eq!(get(&store, key(n as u64)).await, body.to_vec());
        let (header, bytes) = read_all(&store, key(n as u64), 0, body.len() as u64).await;
        assert_eq!(header.length, body.len() as u64);
        assert_eq!(bytes, body.to_vec());
    }
    let age = store.committed_at(key(3)).unwrap().elapsed().unwrap();
    assert!(age < Duration::from_secs(60), "{age:?}");
    assert!(store.delete(key(3)).await.unwrap());
    assert!(!store.delete(key(3)).await.unwrap());
    assert!(store.stats().garbage > 3000);
    drop(store);

    let store = open_packing(dir.path()).await;
    assert_eq!(store.block(key(3)), None);
    assert_eq!(store.block(key(99)).unwrap().length, 0);
    for (n, body) in bodies.iter().enumerate().filter(|(n, _)| *n != 3) {
        assert_eq!(get(&store, key(n as u64)).await, body.to_vec());
    }
    assert_eq!(
        store.stats().used,
        bodies.iter().map(|b| b.len() as u64).sum::<u64>() - 3001
    );
}

#[tokio::test]
async fn an_upload_that_outgrows_the_pack_limit_gets_its_own_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_packing(dir.path()).await;
    store.set_pack_max(6 * 1024);
    let body = data(10 * 1024 + 5, 3);
    put(&store, key(1), &body).await;
    let small = data(6 * 1024, 4);
    put(&store, key(2), &small).await;
    assert_eq!(block_files(dir.path()), 2, "one data file and its sidecar");
    assert_eq!(
        store.stored_at(key(1)).unwrap(),
        (store.data_path(key(1)), 0)
    );
    assert!(store
        .stored_at(key(2))
        .unwrap()
        .0
        .ends_with("volumes/00000001.vol"));
    assert_eq!(get(&store, key(1)).await, body.to_vec());
    assert_eq!(get(&store, key(2)).await, small.to_vec());
}

#[tokio::test]
async fn a_folder_of_block_files_takes_packed_blocks_beside_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let old: Vec<Bytes> = (0..5).map(|n| data(2000 + n, n as u8)).collect();
    for (n, body) in old.iter().enumerate() {
        put(&store, key(n as u64), body).await;
    }
    drop(store);
    // The same folder opened with packing on, as after an upgrade.
    let store = open_packing(dir.path()).await;
    let new: Vec<Bytes> = (0..5).map(|n| data(3000 + n, n as u8)).collect();
    for (n, body) in new.iter().enumerate() {
        put(&store, key(10 + n as u64), body).await;
    }
    assert_eq!(store.stats().blocks, 10);
    assert_eq!(store.stats().packed, 5);
    assert!(store.delete(key(0)).await.unwrap());
    assert!(store.delete(key(10)).await.unwrap());
    drop(store);
    let store = open_packing(dir.path()).await;
    for (n, body) in old.iter().enumerate().skip(1) {
        assert_eq!(get(&store, key(n as u64)).await, body.to_vec());
    }
    for (n, body) in new.iter().enumerate().skip(1) {
        assert_eq!(get(&store, key(10 + n as u64)).await, body.to_vec());
    }
    assert_eq!(store.stats().blocks, 8);
}

#[tokio::test]
async fn a_damaged_packed_block_is_found_quarantined_and_stays_out() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_packing(dir.path()).await;
    let bodies: Vec<Bytes> = (0..3).map(|n| data(5000, n as u8)).collect();
    for (n, body) in bodies.iter().enumerate() {
        put(&store, key(n as u64), body).await;
    }
    let (volume, at) = store.stored_at(key(1)).unwrap();
    let mut bytes = fs::read(&volume).unwrap();
    bytes[at as usize + 4000] ^= 1;
    fs::write(&volume, &bytes).unwrap();
    let pacer = block_client::Pacer::new(0);
    assert_eq!(
        store.verify_block(key(0), &pacer).await.unwrap().0,
        Verified::Whole
    );
    let (verified, _) = store.verify_block(key(1), &pacer).await.unwrap();
    assert!(matches!(verified, Verified::Corrupt(_)), "{verified:?}");
    assert!(store.quarantine_block(key(1), "test").await.unwrap());
    assert_eq!(store.quarantined_blocks(), vec![key(1)]);
    drop(store);
    let store = open_packing(dir.path()).await;
    assert_eq!(store.block(key(1)), None);
    assert_eq!(get(&store, key(2)).await, bodies[2].to_vec());
}

/// A packing store with volumes of `volume_max` bytes holding `count`
/// blocks of a few KiB each, and their bodies.
async fn packed_store(dir: &Path, count: u64, volume_max: u64) -> (Arc<BlockStore>, Vec<Bytes>) {
    let store = open_packing(dir).await;
    store.set_volume_max(volume_max);
    let bodies: Vec<Bytes> = (0..count)
        .map(|n| data(1000 + (n as usize * 37) % 3000, n as u8))
        .collect();
    for (n, body) in bodies.iter().enumerate() {
        put(&store, key(n as u64), body).await;
    }
    (store, bodies)
}

/// Checks that `store` holds exactly the blocks `live`, each whole.
async fn check_live(store: &BlockStore, live: &[u64], bodies: &[Bytes]) {
    assert_eq!(store.stats().blocks, live.len() as u64);
    for &n in live {
        assert_eq!(
            get(store, key(n)).await,
            bodies[n as usize].to_vec(),
            "block {n}"
        );
    }
}

#[tokio::test]
async fn compaction_keeps_every_live_block_while_reads_and_deletes_race_it() {
    let dir = tempfile::tempdir().unwrap();
    let (store, bodies) = packed_store(dir.path(), 120, 32 * 1024).await;
    let first = store.volume_usage()[0].1.volume;
    // Two of every three blocks of the first volumes deleted.
    let mut live: Vec<u64> = Vec::new();
    for n in 0..120u64 {
        let (path, _) = store.stored_at(key(n)).unwrap();
        let early = path.ends_with(format!("{first:08}.vol"))
            || path.ends_with(format!("{:08}.vol", first + 1));
        if early && n % 3 != 0 {
            assert!(store.delete(key(n)).await.unwrap());
        } else {
            live.push(n);
        }
    }
    let candidate = store.compaction_candidate(0.5).unwrap();
    assert!(candidate.1.volume == first || candidate.1.volume == first + 1);
    assert!(store.compaction_candidate(0.99).is_none());
    // Readers check every live block while the volume is rewritten, and a
    // deleter takes some of the blocks being moved.
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (store, bodies, live, stop) =
                (store.clone(), bodies.clone(), live.clone(), stop.clone());
            tokio::spawn(async move {
                let mut reads = 0;
                while !stop.load(Ordering::Relaxed) || reads == 0 {
                    for &n in live.iter().skip(r).step_by(2) {
                        if store.block(key(n)).is_some() {
                            let got = get(&store, key(n)).await;
                            assert_eq!(got, bodies[n as usize].to_vec(), "block {n}");
                            reads += 1;
                        }
                    }
                    tokio::task::yield_now().await;
                }
                reads
            })
        })
        .collect();
    let deleter = {
        let store = store.clone();
        tokio::spawn(async move {
            for n in [0u64, 3, 6] {
                tokio::task::yield_now().await;
                store.delete(key(n)).await.unwrap();
            }
        })
    };
    let pacer = block_client::Pacer::new(64 * 1024);
    let done = store
        .compact_volume(candidate.0, candidate.1.volume, &pacer)
        .await
        .unwrap();
    deleter.await.unwrap();
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        assert!(reader.await.unwrap() > 0);
    }
    assert!(done.records > 0 && done.freed > done.bytes, "{done:?}");
    assert!(!store.volume_path(candidate.0, candidate.1.volume).exists());
    let live: Vec<u64> = live
        .into_iter()
        .filter(|n| ![0, 3, 6].contains(n))
        .collect();
    check_live(&store, &live, &bodies).await;
    drop(store);
    let reopened = open_packing(dir.path()).await;
    check_live(&reopened, &live, &bodies).await;
}

#[tokio::test]
async fn a_compaction_cut_off_part_way_loses_nothing_and_the_next_one_finishes_it() {
    let dir = tempfile::tempdir().unwrap();
    let (store, bodies) = packed_store(dir.path(), 60, 64 * 1024).await;
    let first = store.volume_usage()[0].1.volume;
    let in_first: Vec<u64> = (0..60)
        .filter(|&n| store.stored_at(key(n)).unwrap().0 == store.volume_path(0, first))
        .collect();
    for &n in in_first.iter().filter(|n| *n % 2 == 1) {
        store.delete(key(n)).await.unwrap();
    }
    let live: Vec<u64> = (0..60)
        .filter(|n| !(in_first.contains(n) && n % 2 == 1))
        .collect();
    // Paced so that the compaction is stopped with some records copied.
    let pacer = block_client::Pacer::new(8 * 1024);
    let cut = tokio::time::timeout(
        Duration::from_millis(1500),
        store.compact_volume(0, first, &pacer),
    )
    .await;
    assert!(cut.is_err(), "the compaction ended before it was cut off");
    assert!(store.volume_path(0, first).exists());
    drop(store);

    let store = open_packing(dir.path()).await;
    assert_eq!(store.stats().blocks, live.len() as u64);
    for &n in &live {
        assert_eq!(
            get(&store, key(n)).await,
            bodies[n as usize].to_vec(),
            "block {n}"
        );
    }
    // The copies made before the cut are the blocks now; the first volume
    // holds only garbage for them.
    let live_in_first: Vec<u64> = in_first.iter().copied().filter(|n| n % 2 == 0).collect();
    let moved = live_in_first
        .iter()
        .filter(|&&n| store.stored_at(key(n)).unwrap().0 != store.volume_path(0, first))
        .count();
    assert!(moved > 0, "nothing was copied before the cut");
    let done = store
        .compact_volume(0, first, &block_client::Pacer::new(0))
        .await
        .unwrap();
    assert_eq!(
        done.records as usize,
        live_in_first.len() - moved,
        "{done:?}"
    );
    assert!(!store.volume_path(0, first).exists());
    drop(store);
    let store = open_packing(dir.path()).await;
    for &n in &live {
        assert_eq!(
            get(&store, key(n)).await,
            bodies[n as usize].to_vec(),
            "block {n}"
        );
    }
}

async fn open_disks(dirs: &[PathBuf]) -> Arc<BlockStore> {
    BlockStore::open_disks(dirs.to_vec(), BPC, false, None)
        .await
        .unwrap()
}

/// Which disk (by folder) holds committed block `key`.
fn disk_of(store: &BlockStore, dirs: &[PathBuf], key: BlockKey) -> usize {
    let (path, _) = store.stored_at(key).unwrap();
    dirs.iter().position(|d| path.starts_with(d)).unwrap()
}

#[tokio::test]
async fn blocks_spread_over_every_disk_and_come_back_from_each_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("d{i}"))).collect();
    let store = open_disks(&dirs).await;
    let bodies: Vec<Bytes> = (0..30).map(|n| data(8 * BPC as usize, n as u8)).collect();
    for (n, body) in bodies.iter().enumerate() {
        put(&store, key(n as u64), body).await;
    }
    // One block past the pack limit: a file of its own, on some disk.
    store.set_pack_max(4 * BPC as u64);
    let big = data(16 * BPC as usize, 99);
    put(&store, key(100), &big).await;
    let mut per_disk = [0; 3];
    for n in 0..30 {
        per_disk[disk_of(&store, &dirs, key(n))] += 1;
    }
    assert!(per_disk.iter().all(|&n| n > 0), "{per_disk:?}");
    let id = store.id().clone();
    let statuses = store.disks();
    assert_eq!(statuses.iter().map(|d| d.blocks).sum::<u64>(), 31);
    assert!(statuses
        .iter()
        .all(|d| d.failed.is_none() && d.available > 0));
    drop(store);

    let again = open_disks(&dirs).await;
    assert_eq!(again.id(), &id, "every disk holds the same identity");
    for (n, body) in bodies.iter().enumerate() {
        assert_eq!(get(&again, key(n as u64)).await, body.to_vec());
    }
    assert_eq!(get(&again, key(100)).await, big.to_vec());
    assert!(again.delete(key(100)).await.unwrap());
    assert_eq!(again.stats().blocks, 30);
}

#[tokio::test]
async fn disks_of_two_datanodes_are_refused_together() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    drop(open_disks(std::slice::from_ref(&a)).await);
    drop(open_disks(std::slice::from_ref(&b)).await);
    let refused = BlockStore::open_disks(vec![a, b], BPC, false, None).await;
    assert!(
        matches!(&refused, Err(StoreError::Invalid(m)) if m.contains("holds datanode")),
        "{:?}",
        refused.err()
    );
}

#[tokio::test]
async fn a_failed_disk_leaves_service_with_its_blocks_reported_lost_and_writes_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("d{i}"))).collect();
    let store = open_disks(&dirs).await;
    store.set_failed_disks_tolerated(1);
    let bodies: Vec<Bytes> = (0..30).map(|n| data(4 * BPC as usize, n as u8)).collect();
    for (n, body) in bodies.iter().enumerate() {
        put(&store, key(n as u64), body).await;
    }
    let on_failing: Vec<u64> = (0..30)
        .filter(|&n| disk_of(&store, &dirs, key(n)) == 1)
        .collect();
    assert!(!on_failing.is_empty());
    let mut watchers = store.subscribe_removals();
    let lost_signal = store.disks_lost();

    // The disk's mount vanishes: its identity is gone, the probe fails.
    fs::remove_file(dirs[1].join("datanode.id")).unwrap();
    store.check_disks();

    let statuses = store.disks();
    let reason = statuses[1].failed.as_deref().unwrap();
    assert!(reason.contains("identity"), "{reason}");
    assert!(statuses[0].failed.is_none() && statuses[2].failed.is_none());
    let mut lost: Vec<u64> = store.take_lost().iter().map(|(k, _)| k.block.0).collect();
    lost.sort();
    assert_eq!(
        lost, on_failing,
        "every block of the failed disk is reported lost"
    );
    assert!(store.take_lost().is_empty(), "and only once");
    let mut dropped = Vec::new();
    while let Ok(k) = watchers.try_recv() {
        dropped.push(k.block.0);
    }
    dropped.sort();
    assert_eq!(dropped, on_failing, "short-circuit readers drop them");
    for &n in &on_failing {
        assert!(store.block(key(n)).is_none());
    }
    for n in (0..30).filter(|n| !on_failing.contains(n)) {
        assert_eq!(get(&store, key(n)).await, bodies[n as usize].to_vec());
    }
    // New blocks go to the disks still serving.
    for n in 30..45 {
        put(&store, key(n), &data(4 * BPC as usize, n as u8)).await;
        assert_ne!(disk_of(&store, &dirs, key(n)), 1);
    }
    assert!(!*lost_signal.borrow(), "one failed disk is tolerated");
    fs::remove_file(dirs[2].join("datanode.id")).unwrap();
    store.check_disks();
    assert!(*lost_signal.borrow(), "a second one is not");
}

#[tokio::test]
async fn an_eio_fails_the_disk_only_when_its_probe_fails_and_a_vanished_device_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("d{i}"))).collect();
    let store = open_disks(&dirs).await;
    let errno = |e: rustix::io::Errno| {
        StoreError::io("read", std::io::Error::from_raw_os_error(e.raw_os_error()))
    };
    let serving = |n: usize| store.disks()[n].failed.is_none();

    // One unreadable sector: the operation fails, the disk serves on.
    let eio = store
        .on_disk(&store.disks[0], Err::<(), _>(errno(rustix::io::Errno::IO)))
        .await;
    assert!(eio.is_err());
    assert!(serving(0));
    // The same error once the disk cannot write and sync a file: out.
    fs::remove_file(dirs[0].join("datanode.id")).unwrap();
    let _ = store
        .on_disk(&store.disks[0], Err::<(), _>(errno(rustix::io::Errno::IO)))
        .await;
    assert!(!serving(0));
    // A read-only or vanished device leaves at once, probe or not.
    let _ = store
        .on_disk(
            &store.disks[1],
            Err::<(), _>(errno(rustix::io::Errno::ROFS)),
        )
        .await;
    assert!(!serving(1));
    // Errors that say nothing of the disk leave it alone.
    let _ = store
        .on_disk(&store.disks[2], Err::<(), _>(StoreError::NotFound(key(1))))
        .await;
    let _ = store
        .on_disk(
            &store.disks[2],
            Err::<(), _>(errno(rustix::io::Errno::NOSPC)),
        )
        .await;
    assert!(serving(2));
}
