//! The assumption the group rests on: the same commands applied to two
//! members' stores leave the same records and give the same answers, random
//! choices included.

use super::machine::{apply_from_store, apply_one};
use super::{Action, Applied, Command};
use crate::config::MetaConfig;
use crate::state::MetaState;
use crate::store::db::APPLIED;
use crate::store::tables::*;
use meta_api::*;
use proto::ReplicationConfig;
use redb::{ReadableTable, TableDefinition};
use std::sync::Arc;

const T0: UnixMillis = 1_780_000_000_000;

fn member(dir: &std::path::Path) -> MetaState {
    let config = MetaConfig::new(dir);
    let store = crate::store::open_replicated(&dir.join(crate::store::DATABASE_FILE)).unwrap();
    MetaState::load(config, Arc::new(store)).unwrap()
}

fn commands() -> Vec<Command> {
    let requests: Vec<AnyRequest> = vec![
        Heartbeat {
            report: test_support::meta::report("a", 1 << 40, 0),
        }
        .into(),
        Heartbeat {
            report: test_support::meta::report("b", 1 << 40, 0),
        }
        .into(),
        Heartbeat {
            report: test_support::meta::report("c", 1 << 40, 0),
        }
        .into(),
        CreateBucket {
            name: "photos".into(),
            owner: "root".into(),
            replication: None,
            access: Default::default(),
            object_lock: false,
        }
        .into(),
        SetBucketVersioning {
            bucket: "photos".into(),
            versioning: Versioning::Enabled,
        }
        .into(),
        AllocateBlock {
            config: ReplicationConfig::Replicated { replicas: 2 },
            exclude: Vec::new(),
        }
        .into(),
        AllocateBlock {
            config: ReplicationConfig::Replicated { replicas: 2 },
            exclude: Vec::new(),
        }
        .into(),
        CreateKey {
            user: "root".into(),
        }
        .into(),
        CreateKmsKey {
            alias: "app".into(),
        }
        .into(),
    ];
    let mut commands: Vec<Command> = std::iter::once(Action::Startup)
        .chain(requests.into_iter().map(|r| Action::Requests(vec![r])))
        .enumerate()
        .map(|(i, action)| Command {
            now: T0 + i as i64 * 1000,
            seed: crate::entropy::new_seed(),
            action,
        })
        .collect();
    // Three writes that reached the leader together: one entry.
    let mut together = Vec::new();
    for key in ["a.jpg", "a.jpg", "b.jpg"] {
        let mut record = ObjectRecord::new(
            "photos",
            key,
            "0cc175b9c0f1b6a831c399e269772661",
            ReplicationConfig::REPLICATED_1,
            Vec::new(),
        );
        record.size = 1;
        record.inline = Some(InlineBody(bytes::Bytes::from_static(b"a")));
        together.push(
            CommitObject {
                record,
                condition: None,
            }
            .into(),
        );
    }
    commands.push(Command {
        now: T0 + 100_000,
        seed: crate::entropy::new_seed(),
        action: Action::Requests(together),
    });
    commands.push(Command {
        now: T0 + 200_000,
        seed: crate::entropy::new_seed(),
        action: Action::Requests(vec![DeleteObject {
            bucket: "photos".into(),
            key: "b.jpg".into(),
            version: None,
            bypass_governance: false,
            marker_owner: None,
        }
        .into()]),
    });
    let mut upload = test_support::meta::upload("photos", "c.jpg", "u1");
    upload.created = T0;
    let part = PartRecord {
        upload_id: "u1".into(),
        number: 1,
        size: 0,
        etag: "d41d8cd98f00b204e9800998ecf8427e".into(),
        created: T0,
        groups: Vec::new(),
        checksum: None,
        key_salt: None,
    };
    let complete = CompleteUpload {
        bucket: "photos".into(),
        key: "c.jpg".into(),
        upload_id: "u1".into(),
        parts: vec![CompletedPart::new(1, "d41d8cd98f00b204e9800998ecf8427e")],
        condition: None,
    };
    for (i, request) in [
        AnyRequest::from(CreateUpload { record: upload }),
        CommitPart { part }.into(),
        complete.into(),
    ]
    .into_iter()
    .enumerate()
    {
        commands.push(Command {
            now: T0 + 250_000 + i as i64,
            seed: crate::entropy::new_seed(),
            action: Action::Requests(vec![request]),
        });
    }
    for action in [Action::RedundancyScan, Action::Redundancy] {
        commands.push(Command {
            now: T0 + 300_000,
            seed: crate::entropy::new_seed(),
            action,
        });
    }
    for i in 0..3 {
        commands.push(Command {
            now: RESERVED_AT + i * 1000,
            seed: crate::entropy::new_seed(),
            action: Action::ReserveBlockIds,
        });
    }
    commands
}

/// When the commands reserve ranges of block ids.
const RESERVED_AT: UnixMillis = T0 + 400_000;

/// Every row of a table, as bytes.
fn rows<K: redb::Key + 'static, V: redb::Value + 'static>(
    state: &MetaState,
    table: TableDefinition<K, V>,
) -> Vec<(String, String)> {
    state
        .store
        .read(|txn| {
            let mut out = Vec::new();
            for row in txn.open_table(table)?.iter()? {
                let (k, v) = row?;
                out.push((
                    String::from_utf8_lossy(K::as_bytes(&k.value()).as_ref()).into_owned(),
                    String::from_utf8_lossy(V::as_bytes(&v.value()).as_ref()).into_owned(),
                ));
            }
            Ok(out)
        })
        .unwrap()
}

#[test]
fn members_applying_the_same_commands_hold_the_same_records() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = member(one.path());
    // The group's members share their secret files.
    for name in [crate::CREDENTIAL_KEY_FILE, crate::MASTER_KEY_FILE] {
        std::fs::copy(one.path().join(name), two.path().join(name)).unwrap();
    }
    let second = member(two.path());
    for (index, command) in commands().into_iter().enumerate() {
        let log_id = openraft::LogId::new(openraft::CommittedLeaderId::new(1, 1), index as u64 + 1);
        let a = apply_one(&first, log_id, command.clone()).unwrap();
        let b = apply_one(&second, log_id, command.clone()).unwrap();
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap(),
            "answers to {command}"
        );
        assert!(
            !matches!(&a, super::Applied::Answers(answers) if answers.iter().any(Result::is_err))
                && !matches!(
                    &a,
                    super::Applied::Done(Err(_)) | super::Applied::Reserved(Err(_))
                ),
            "{command} failed: {a:?}"
        );
    }
    macro_rules! same {
        ($($table:expr),*) => {$(
            let (a, b) = (rows(&first, $table), rows(&second, $table));
            assert!(!a.is_empty(), "{} is empty", stringify!($table));
            assert_eq!(a, b, "{} differs", stringify!($table));
        )*};
    }
    same!(
        BUCKETS,
        OBJECTS,
        VERSIONS,
        USERS,
        ACCESS_KEYS,
        DATANODES,
        COUNTERS,
        BLOCK_ID_RESERVATIONS,
        TOKEN_KEYS,
        APPLIED
    );
    // A member that loads its store again dates block ids as the others do.
    let reloaded = MetaState::load(first.config.clone(), first.store.clone()).unwrap();
    let grace = first.config.orphan_grace.as_millis() as i64;
    for at in [RESERVED_AT, RESERVED_AT + 1000, RESERVED_AT + 5000].map(|t| t + grace) {
        let horizon = first.orphans.clock.horizon(at);
        assert_eq!(horizon, second.orphans.clock.horizon(at), "at {at}");
        assert_eq!(horizon, reloaded.orphans.clock.horizon(at), "at {at}");
    }
    // Sealed values carry random nonces: their bytes differ, their keys do not.
    assert_eq!(
        rows(&first, KMS_KEYS)
            .into_iter()
            .map(|(k, _)| k)
            .collect::<Vec<_>>(),
        rows(&second, KMS_KEYS)
            .into_iter()
            .map(|(k, _)| k)
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_members_store_is_written_only_by_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let state = member(dir.path());
    let outside = state.startup_writes(T0);
    assert!(matches!(outside, Err(MetaError::Store(_))), "{outside:?}");
}

#[test]
fn an_entry_applied_part_way_before_a_crash_is_finished_not_repeated() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let whole = member(one.path());
    for name in [crate::CREDENTIAL_KEY_FILE, crate::MASTER_KEY_FILE] {
        std::fs::copy(one.path().join(name), two.path().join(name)).unwrap();
    }
    let resumed = member(two.path());
    let startup = Command {
        now: T0,
        seed: crate::entropy::new_seed(),
        action: Action::Startup,
    };
    let first = openraft::LogId::new(openraft::CommittedLeaderId::new(1, 1), 1);
    let entry = openraft::LogId::new(openraft::CommittedLeaderId::new(1, 1), 2);
    for state in [&whole, &resumed] {
        apply_one(state, first, startup.clone()).unwrap();
    }
    let bucket = |name: &str| -> AnyRequest {
        CreateBucket {
            name: name.into(),
            owner: "root".into(),
            replication: None,
            access: Default::default(),
            object_lock: false,
        }
        .into()
    };
    let seed = crate::entropy::new_seed();
    let command = |requests| Command {
        now: T0 + 1000,
        seed,
        action: Action::Requests(requests),
    };
    let three = || {
        command(vec![
            bucket("one"),
            bucket("two"),
            CreateKey {
                user: "root".into(),
            }
            .into(),
        ])
    };
    let all = apply_from_store(&whole, entry, three()).unwrap();
    // The member stopped after its first request: the store says so.
    apply_from_store(&resumed, entry, command(vec![bucket("one")])).unwrap();
    let again = apply_from_store(&resumed, entry, three()).unwrap();
    let (Applied::Answers(all), Applied::Answers(again)) = (all, again) else {
        panic!("requests answered as something else");
    };
    assert!(all.iter().all(Result::is_ok), "{all:?}");
    assert!(
        matches!(again[0], Err(MetaError::Transport(_))),
        "{again:?}"
    );
    assert_eq!(
        serde_json::to_string(&all[1..]).unwrap(),
        serde_json::to_string(&again[1..]).unwrap()
    );
    for table in [BUCKETS, ACCESS_KEYS] {
        assert_eq!(rows(&whole, table), rows(&resumed, table));
    }
}
