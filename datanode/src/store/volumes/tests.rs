use super::*;
use bytes::Bytes;
use proto::{checksum, BlockId, BlockKey};
use std::collections::HashMap;

const BPC: u32 = 512;

fn key(n: u64) -> BlockKey {
    BlockKey::new(BlockId(n), (n % 5) as u8)
}

fn body(n: u64) -> Vec<u8> {
    let len = (n * 977 % 5000) as usize;
    (0..len).map(|i| (i as u64 * 31 + n) as u8).collect()
}

async fn append(volumes: &Volumes, n: u64) -> Packed {
    let data = body(n);
    let crcs = checksum::compute(&data, BPC);
    let pieces = data.chunks(1024).map(Bytes::copy_from_slice).collect();
    volumes
        .append(NewCell {
            key: key(n),
            bytes_per_checksum: BPC,
            length: data.len() as u64,
            crcs,
            pieces,
        })
        .await
        .unwrap()
}

/// Reads a packed cell back through its record and checks it whole.
fn read_back(volumes: &Volumes, packed: &Packed) -> Vec<u8> {
    let (file, crcs) = volumes.open_record(packed).unwrap();
    let mut data = vec![0u8; packed.head.length as usize];
    file.read_exact_at(&mut data, packed.data_offset()).unwrap();
    checksum::verify(&data, 0, BPC, &crcs).unwrap();
    data
}

fn open(dir: &Path) -> (Volumes, HashMap<BlockKey, Packed>) {
    let (volumes, live) = Volumes::open(dir.to_path_buf(), true).unwrap();
    let live = live.into_iter().map(|p| (p.head.key, p)).collect();
    (volumes, live)
}

fn check_all(volumes: &Volumes, live: &HashMap<BlockKey, Packed>, expected: &[u64]) {
    assert_eq!(live.len(), expected.len());
    for &n in expected {
        let packed = live.get(&key(n)).unwrap_or_else(|| panic!("cell {n} lost"));
        assert_eq!(read_back(volumes, packed), body(n), "cell {n}");
    }
}

#[tokio::test]
async fn concurrent_appends_read_back_and_survive_a_restart_and_a_lost_index() {
    let dir = tempfile::tempdir().unwrap();
    let (volumes, _) = open(dir.path());
    volumes.set_volume_max(64 * 1024);
    let volumes = Arc::new(volumes);
    // Four waves of 50 writers: each wave fills more than a volume.
    for wave in 0..4u64 {
        let numbers: Vec<u64> = (1 + 50 * wave..=50 * (wave + 1)).collect();
        let tasks: Vec<_> = numbers
            .iter()
            .map(|&n| {
                let volumes = volumes.clone();
                tokio::spawn(async move { append(&volumes, n).await })
            })
            .collect();
        for (&n, task) in numbers.iter().zip(tasks) {
            let packed = task.await.unwrap();
            assert_eq!(read_back(&volumes, &packed), body(n));
        }
    }
    let usage = volumes.usage();
    assert!(usage.len() >= 2, "small volumes roll over: {usage:?}");
    assert!(usage.iter().all(|u| u.live == u.bytes));
    drop(volumes);

    let all: Vec<u64> = (1..=200).collect();
    let (volumes, live) = open(dir.path());
    check_all(&volumes, &live, &all);
    drop(volumes);
    // Without any index the volumes alone tell the same.
    for volume in &usage {
        std::fs::remove_file(dir.path().join(format!("{:08}.idx", volume.volume))).unwrap();
    }
    let (volumes, live) = open(dir.path());
    check_all(&volumes, &live, &all);
}

#[tokio::test]
async fn a_torn_tail_is_cut_and_appends_go_on_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (volumes, _) = open(dir.path());
    for n in 1..=5 {
        append(&volumes, n).await;
    }
    let last = append(&volumes, 6).await;
    drop(volumes);
    // The last record half written, as a power cut leaves an unsynced one,
    // and its index entry never written.
    let path = dir.path().join(format!("{:08}.vol", last.volume));
    let file = File::options().write(true).open(&path).unwrap();
    file.set_len(last.offset + last.head.header_len() + 10)
        .unwrap();
    let index = dir.path().join(format!("{:08}.idx", last.volume));
    let index_len = std::fs::metadata(&index).unwrap().len();
    File::options()
        .write(true)
        .open(&index)
        .unwrap()
        .set_len(index_len - record::INDEX_ENTRY_LEN as u64 - 7)
        .unwrap();

    let (volumes, live) = open(dir.path());
    check_all(&volumes, &live, &[1, 2, 3, 4, 5]);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), last.offset);
    let again = append(&volumes, 6).await;
    assert_eq!(again.offset, last.offset);
    drop(volumes);
    let (volumes, live) = open(dir.path());
    check_all(&volumes, &live, &[1, 2, 3, 4, 5, 6]);
}

#[tokio::test]
async fn a_damaged_record_mid_volume_costs_only_itself_when_the_index_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let (volumes, _) = open(dir.path());
    let mut placed = Vec::new();
    for n in 1..=6 {
        placed.push(append(&volumes, n).await);
    }
    drop(volumes);
    let third = placed[2];
    let path = dir.path().join(format!("{:08}.vol", third.volume));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[third.offset as usize + 9] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    std::fs::remove_file(dir.path().join(format!("{:08}.idx", third.volume))).unwrap();
    let (volumes, live) = open(dir.path());
    check_all(&volumes, &live, &[1, 2, 4, 5, 6]);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), bytes.len() as u64);
}

#[tokio::test]
async fn deletes_hold_across_restarts_and_a_torn_tombstone_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (volumes, _) = open(dir.path());
    let mut placed = Vec::new();
    for n in 1..=4 {
        placed.push(append(&volumes, n).await);
    }
    volumes.delete(placed[1]).await.unwrap();
    assert_eq!(volumes.garbage(), placed[1].head.record_len());
    drop(volumes);
    let tombstones = dir.path().join(format!("{:08}.del", placed[0].volume));
    // A delete torn by a power cut: never acknowledged.
    let mut file = File::options().append(true).open(&tombstones).unwrap();
    std::io::Write::write_all(&mut file, &[7; 10]).unwrap();
    drop(file);

    let (volumes, live) = open(dir.path());
    check_all(&volumes, &live, &[1, 3, 4]);
    assert_eq!(volumes.garbage(), placed[1].head.record_len());
    volumes.delete(live[&key(3)]).await.unwrap();
    drop(volumes);
    let (volumes, live) = open(dir.path());
    check_all(&volumes, &live, &[1, 4]);
    // The same cell written again after its delete is live again.
    append(&volumes, 2).await;
    drop(volumes);
    let (volumes, live) = open(dir.path());
    check_all(&volumes, &live, &[1, 2, 4]);
}
