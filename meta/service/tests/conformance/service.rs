//! Tests of the service as a whole: objects, deletions, liveness and
//! placement, buckets, persistence, credentials and admin operations.

use meta::{MetaConfig, MetaService, ADMIN_TOKEN_FILE, ROOT_CREDENTIALS_FILE, ROOT_USER};
use meta_api::*;
use proto::{BlockKey, ReplicationConfig};
use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use test_support::meta::*;

async fn allocate(
    meta: &MetaUnderTest,
    config: ReplicationConfig,
    exclude: &[&str],
    at: UnixMillis,
) -> Result<BlockGroup, MetaError> {
    let exclude = exclude.iter().map(|d| dn(d)).collect();
    let mut group = meta.call_at(AllocateBlock { config, exclude }, at).await?;
    take_token(&mut group, proto::token::Modes::WRITE);
    Ok(group)
}

async fn commit_then_get_returns_the_record(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.register(3).await;
    meta.create_bucket("photos", ROOT_USER).await;
    let mut allocated = allocate(&meta, ReplicationConfig::REPLICATED_3, &[], T0)
        .await
        .unwrap();
    allocated.length = 100;
    let record = object("photos", "a/ü.jpg", vec![allocated]);
    meta.commit(record.clone()).await;
    assert_eq!(meta.get("photos", "a/ü.jpg").await, Some(record));
    assert_eq!(meta.get("photos", "a/other").await, None);
    let missing = meta
        .call(GetObject {
            version: None,
            bucket: "nope".into(),
            key: "k".into(),
        })
        .await;
    assert_eq!(missing.unwrap_err(), MetaError::NoSuchBucket("nope".into()));
    let refused = meta
        .call(CommitObject {
            record: object("nope", "k", vec![]),
            condition: None,
        })
        .await;
    assert_eq!(refused.unwrap_err(), MetaError::NoSuchBucket("nope".into()));
}

async fn overwrite_queues_old_blocks_on_their_datanodes_until_acknowledged(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.register(3).await;
    meta.create_bucket("bk1", ROOT_USER).await;
    meta.commit(object("bk1", "k", vec![group(7, &["dn0", "dn1"])]))
        .await;
    meta.commit(object("bk1", "k", vec![group(8, &["dn2"])]))
        .await;

    assert_eq!(meta.queued_for("dn0").await, vec![key(7)]);
    assert_eq!(meta.queued_for("dn1").await, vec![key(7)]);
    assert_eq!(meta.queued_for("dn2").await, Vec::<BlockKey>::new());
    // Unacknowledged deletions are handed out again.
    assert_eq!(meta.queued_for("dn0").await, vec![key(7)]);

    let mut ack = report("dn0", ROOMY, 0);
    ack.deleted = vec![key(7)];
    assert!(meta.heartbeat_at(ack, T0).await.is_empty());
    assert!(meta.queued_for("dn0").await.is_empty());
    assert_eq!(meta.queued_for("dn1").await, vec![key(7)]);

    // Delete queues the current blocks and returns the removed record.
    let removed = meta
        .call(DeleteObject {
            marker_owner: None,
            bypass_governance: false,
            version: None,
            bucket: "bk1".into(),
            key: "k".into(),
        })
        .await
        .unwrap();
    assert!(matches!(removed.removed, Some(r) if r.groups[0].block.0 == 8));
    assert_eq!(removed.version, None);
    assert_eq!(meta.queued_for("dn2").await, vec![key(8)]);
    assert_eq!(meta.get("bk1", "k").await, None);
    let again = meta
        .call(DeleteObject {
            marker_owner: None,
            bypass_governance: false,
            version: None,
            bucket: "bk1".into(),
            key: "k".into(),
        })
        .await;
    assert_eq!(again, Ok(Deleted::default()));

    meta.call(DiscardBlocks {
        groups: vec![group(9, &["dn1"])],
    })
    .await
    .unwrap();
    assert_eq!(meta.queued_for("dn1").await, vec![key(7), key(9)]);
}

async fn heartbeat_hands_out_at_most_a_thousand_deletions(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.register(1).await;
    let groups = (1..=1500).map(|b| group(b, &["dn0"])).collect();
    meta.call(DiscardBlocks { groups }).await.unwrap();
    let first = meta.queued_for("dn0").await;
    assert_eq!(first.len(), 1000);
    let mut ack = report("dn0", ROOMY, 0);
    ack.deleted = first;
    assert_eq!(meta.heartbeat_at(ack, T0).await.len(), 500);
}

async fn released_blocks_wait_out_the_deletion_delay(transport: Transport) {
    assert_eq!(
        MetaConfig::new("unused").deletion_delay,
        std::time::Duration::from_secs(60)
    );
    let meta = MetaUnderTest::open_with(transport, |c| {
        c.deletion_delay = std::time::Duration::from_secs(60)
    })
    .await;
    meta.register(1).await;
    meta.create_bucket("bk1", ROOT_USER).await;
    meta.commit(object("bk1", "k", vec![group(7, &["dn0"])]))
        .await;
    // Overwritten at T0 + 10 s (block 7 may go at T0 + 70 s), then deleted at
    // T0 + 20 s (block 8 at T0 + 80 s), then a discarded write at T0 + 5 s.
    let record = object("bk1", "k", vec![group(8, &["dn0"])]);
    let commit = CommitObject {
        record,
        condition: None,
    };
    meta.call_at(commit, T0 + 10_000).await.unwrap();
    let delete = DeleteObject {
        marker_owner: None,
        bypass_governance: false,
        version: None,
        bucket: "bk1".into(),
        key: "k".into(),
    };
    meta.call_at(delete, T0 + 20_000).await.unwrap();
    let groups = vec![group(9, &["dn0"])];
    meta.call_at(DiscardBlocks { groups }, T0 + 5_000)
        .await
        .unwrap();

    let Ok(status) = meta.call(GetClusterStatus).await else {
        panic!("status")
    };
    assert_eq!(status.pending_deletions, 3, "pending counts undue ones too");
    let beat = |t| meta.heartbeat_at(report("dn0", ROOMY, 0), t);
    // A GET streaming the old object meanwhile still finds its blocks.
    assert_eq!(beat(T0 + 10_000).await, Vec::<BlockKey>::new());
    assert_eq!(beat(T0 + 64_999).await, Vec::<BlockKey>::new());
    assert_eq!(beat(T0 + 65_000).await, vec![key(9)]);
    assert_eq!(beat(T0 + 79_999).await, vec![key(9), key(7)]);
    let mut ack = report("dn0", ROOMY, 0);
    ack.deleted = vec![key(9), key(7)];
    assert_eq!(meta.heartbeat_at(ack, T0 + 80_000).await, vec![key(8)]);
}

async fn get_object_uses_the_datanodes_current_address(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.register(1).await;
    meta.create_bucket("bk1", ROOT_USER).await;
    meta.commit(object("bk1", "k", vec![group(1, &["dn0"])]))
        .await;
    let mut moved = report("dn0", ROOMY, 0);
    moved.addr = "10.0.0.9:7777".into();
    meta.heartbeat_at(moved, T0 + 1).await;
    let record = meta.get("bk1", "k").await.unwrap();
    assert_eq!(record.groups[0].replicas[0].addr, "10.0.0.9:7777");
}

async fn allocation_picks_distinct_healthy_nodes_with_space(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    for i in 0..4 {
        meta.heartbeat_at(report(&format!("dn{i}"), ROOMY, 0), T0)
            .await;
    }
    meta.heartbeat_at(report("stale", ROOMY, 0), T0 - 15_000)
        .await;
    meta.heartbeat_at(report("dead", ROOMY, 0), T0 - 40_000)
        .await;
    meta.heartbeat_at(report("full", 2 * BLOCK, BLOCK + 1), T0)
        .await;
    // Capacity 0 (a datanode that could not measure its disk) is full, not unlimited.
    meta.heartbeat_at(report("unmeasured", 0, 0), T0).await;

    // Four healthy datanodes for five cells: a short group, data cells
    // first, one parity; three are too few to keep a spare.
    let short = allocate(&meta, ReplicationConfig::RS_3_2, &[], T0)
        .await
        .unwrap();
    let indexes: Vec<u8> = short.replicas.iter().map(|r| r.index).collect();
    assert_eq!(indexes, vec![0, 1, 2, 3]);
    let err = allocate(&meta, ReplicationConfig::RS_3_2, &["dn0"], T0)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        MetaError::NotEnoughDatanodes {
            needed: 4,
            available: 3
        }
    );
    let mut ids = HashSet::new();
    for _ in 0..20 {
        let g = allocate(&meta, ReplicationConfig::REPLICATED_3, &[], T0)
            .await
            .unwrap();
        assert!(ids.insert(g.block), "block ids are fresh");
        let nodes: HashSet<_> = g.replicas.iter().map(|r| r.datanode.0.clone()).collect();
        assert_eq!(nodes.len(), 3);
        assert!(nodes.iter().all(|n| n.starts_with("dn")), "{nodes:?}");
        assert!(g.replicas.iter().all(|r| r.index == 0));
        assert!(g
            .replicas
            .iter()
            .all(|r| r.addr == format!("{}.test:7000", r.datanode)));
    }
    // Two left: a short replicated block of two replicas; one is too few.
    let short = allocate(&meta, ReplicationConfig::REPLICATED_3, &["dn0", "dn1"], T0)
        .await
        .unwrap();
    assert_eq!(short.replicas.len(), 2);
    let err = allocate(
        &meta,
        ReplicationConfig::REPLICATED_3,
        &["dn0", "dn1", "dn2"],
        T0,
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        MetaError::NotEnoughDatanodes {
            needed: 2,
            available: 1
        }
    );

    // The stale node heartbeats again: five healthy nodes take an EC group.
    meta.heartbeat_at(report("stale", ROOMY, 0), T0).await;
    let g = allocate(&meta, ReplicationConfig::RS_3_2, &[], T0)
        .await
        .unwrap();
    let indexes: Vec<u8> = g.replicas.iter().map(|r| r.index).collect();
    assert_eq!(indexes, [0, 1, 2, 3, 4]);
    let nodes: HashSet<_> = g.replicas.iter().map(|r| r.datanode.0.clone()).collect();
    assert_eq!(nodes.len(), 5);
    assert!(!nodes.contains("dead") && !nodes.contains("full"));

    // Twenty seconds on, nobody heartbeated: everyone is stale.
    let err = allocate(&meta, ReplicationConfig::REPLICATED_1, &[], T0 + 20_000)
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        MetaError::NotEnoughDatanodes { available: 0, .. }
    ));
}

async fn allocation_prefers_the_least_used_and_spreads_load(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.heartbeat_at(report("busy", ROOMY, 100 * BLOCK), T0)
        .await;
    for i in 0..4 {
        meta.heartbeat_at(report(&format!("dn{i}"), ROOMY, 0), T0)
            .await;
    }
    let mut counts = std::collections::HashMap::new();
    for _ in 0..40 {
        let g = allocate(&meta, ReplicationConfig::REPLICATED_1, &[], T0)
            .await
            .unwrap();
        *counts.entry(g.replicas[0].datanode.0.clone()).or_insert(0) += 1;
    }
    assert!(!counts.contains_key("busy"), "{counts:?}");
    // Allocations since the last heartbeat count as load: 40 blocks over 4 nodes.
    assert!(counts.values().all(|&c| c == 10), "{counts:?}");
}

async fn allocation_spreads_groups_over_the_hosts_of_their_locations(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    let hosts = ["h1", "h1", "h1", "h2", "h2", "h2", "h3", "h3"];
    for (i, host) in hosts.iter().enumerate() {
        let mut beat = report(&format!("dn{i}"), ROOMY, 0);
        beat.location = Some(Location::parse(&format!("/zone/rack/{host}")).unwrap());
        meta.heartbeat_at(beat, T0).await;
    }
    // One without a location stands on its advertised host.
    meta.heartbeat_at(report("bare", ROOMY, 0), T0).await;
    let status = meta.call(GetClusterStatus).await.unwrap();
    let located: Vec<(&str, &str)> = status
        .datanodes
        .iter()
        .map(|d| (d.id.0.as_str(), d.location.as_str()))
        .collect();
    assert!(located.contains(&("dn0", "/zone/rack/h1")), "{located:?}");
    assert!(located.contains(&("bare", "/bare.test")), "{located:?}");
    let host_of = |id: &proto::DatanodeId| {
        let at = status.datanodes.iter().find(|d| d.id == *id).unwrap();
        at.location.as_str().to_string()
    };
    for _ in 0..40 {
        for (config, most) in [
            (ReplicationConfig::RS_3_2, 2),
            (ReplicationConfig::REPLICATED_3, 1),
        ] {
            let g = allocate(&meta, config, &[], T0).await.unwrap();
            let mut per_host = std::collections::HashMap::new();
            for r in &g.replicas {
                *per_host.entry(host_of(&r.datanode)).or_insert(0) += 1;
            }
            assert!(
                per_host.values().all(|&n| n <= most),
                "{config}: {per_host:?}"
            );
        }
    }
}

async fn the_balancer_is_started_and_stopped_by_the_admin(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    let status = meta.call(GetClusterStatus).await.unwrap().balance;
    assert!(status.enabled, "on by default");
    assert_eq!(status.threshold_percent, 10);
    let stop = SetBalancer {
        enabled: false,
        threshold_percent: Some(4),
        bandwidth: Some(1 << 20),
    };
    meta.call(stop).await.unwrap();
    let status = meta.call(GetClusterStatus).await.unwrap().balance;
    assert_eq!(
        (
            status.enabled,
            status.state,
            status.threshold_percent,
            status.bandwidth
        ),
        (false, BalanceState::Off, 4, 1 << 20)
    );
    let bad = SetBalancer {
        enabled: true,
        threshold_percent: Some(0),
        bandwidth: None,
    };
    assert!(matches!(
        meta.call(bad).await,
        Err(MetaError::InvalidRequest(_))
    ));
    let start = SetBalancer {
        enabled: true,
        threshold_percent: None,
        bandwidth: None,
    };
    meta.call(start).await.unwrap();
    let status = meta.call(GetClusterStatus).await.unwrap().balance;
    assert_eq!((status.enabled, status.threshold_percent), (true, 4));
}

async fn status_reports_states_and_counts(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.heartbeat_at(report("a", ROOMY, 0), T0).await;
    meta.heartbeat_at(report("b", ROOMY, 0), T0 - 15_000).await;
    meta.heartbeat_at(report("c", ROOMY, 0), T0 - 40_000).await;
    meta.create_bucket("bk1", ROOT_USER).await;
    meta.commit(object("bk1", "x", vec![group(1, &["a"])]))
        .await;
    meta.commit(object("bk1", "x", vec![group(2, &["a"])]))
        .await;
    let Ok(status) = meta.call(GetClusterStatus).await else {
        panic!("status")
    };
    let states: Vec<_> = status.datanodes.iter().map(|d| d.state).collect();
    use DatanodeState::*;
    assert_eq!(states, [Healthy, Stale, Dead]);
    assert_eq!(
        (status.buckets, status.objects, status.pending_deletions),
        (1, 1, 1)
    );
}

async fn bucket_rules(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.call(CreateUser {
        name: "alice".into(),
    })
    .await
    .unwrap();
    let create = |name: &str, owner: &str| CreateBucket {
        object_lock: false,
        name: name.into(),
        owner: owner.into(),
        replication: None,
        access: Default::default(),
    };
    let bad = meta.call(create("Bad_Name", ROOT_USER)).await.unwrap_err();
    assert!(matches!(bad, MetaError::InvalidRequest(_)), "{bad:?}");
    assert_eq!(
        meta.call(create("bk1", "nobody")).await.unwrap_err(),
        MetaError::NoSuchUser("nobody".into())
    );
    meta.create_bucket("zeta", ROOT_USER).await;
    meta.create_bucket("alpha", "alice").await;
    meta.create_bucket("beta", ROOT_USER).await;
    assert_eq!(
        meta.call(create("zeta", ROOT_USER)).await.unwrap_err(),
        MetaError::BucketAlreadyOwnedByYou("zeta".into())
    );
    assert_eq!(
        meta.call(create("zeta", "alice")).await.unwrap_err(),
        MetaError::BucketAlreadyExists("zeta".into())
    );
    let Ok(all) = meta.call(ListBuckets { owner: None }).await else {
        panic!()
    };
    let names: Vec<_> = all.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["alpha", "beta", "zeta"]);
    let Ok(mine) = meta
        .call(ListBuckets {
            owner: Some(ROOT_USER.into()),
        })
        .await
    else {
        panic!()
    };
    let names: Vec<_> = mine.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["beta", "zeta"]);

    meta.commit(object("zeta", "k", vec![])).await;
    let delete = |name: &str| DeleteBucket { name: name.into() };
    assert_eq!(
        meta.call(delete("zeta")).await.unwrap_err(),
        MetaError::BucketNotEmpty("zeta".into())
    );
    // A bucket whose name extends another's is not its content.
    meta.create_bucket("zeta2", ROOT_USER).await;
    assert!(meta.call(delete("zeta2")).await.is_ok());
    meta.call(DeleteObject {
        marker_owner: None,
        bypass_governance: false,
        version: None,
        bucket: "zeta".into(),
        key: "k".into(),
    })
    .await
    .unwrap();
    assert!(meta.call(delete("zeta")).await.is_ok());
    assert_eq!(
        meta.call(delete("zeta")).await.unwrap_err(),
        MetaError::NoSuchBucket("zeta".into())
    );
    let Ok(None) = meta
        .call(GetBucket {
            name: "zeta".into(),
        })
        .await
    else {
        panic!()
    };
}

async fn default_replication_follows_bucket_then_cluster(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    let ask = |bucket: &str| DefaultReplication {
        bucket: bucket.into(),
    };
    meta.create_bucket("plain", ROOT_USER).await;
    meta.call(CreateBucket {
        object_lock: false,
        name: "six".into(),
        owner: ROOT_USER.into(),
        replication: Some(ReplicationConfig::RS_6_3),
        access: Default::default(),
    })
    .await
    .unwrap();
    meta.register(3).await;
    let replication = |r| match r {
        Ok(c) => c,
        other => panic!("{other:?}"),
    };
    let three = replication(meta.call(ask("plain")).await);
    assert_eq!(three, ReplicationConfig::REPLICATED_3);
    meta.register(5).await;
    let five = replication(meta.call(ask("plain")).await);
    assert_eq!(five, ReplicationConfig::RS_3_2);
    let six = replication(meta.call(ask("six")).await);
    assert_eq!(six, ReplicationConfig::RS_6_3);
    assert_eq!(
        meta.call(ask("none")).await.unwrap_err(),
        MetaError::NoSuchBucket("none".into())
    );
}

async fn state_survives_reopen(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    let (record, first_block) = {
        meta.register(2).await;
        meta.create_bucket("bk1", ROOT_USER).await;
        let g = allocate(&meta, ReplicationConfig::REPLICATED_1, &[], T0)
            .await
            .unwrap();
        let record = object("bk1", "k", vec![group(50, &["dn0"])]);
        meta.commit(record.clone()).await;
        meta.commit(object("bk1", "k2", vec![group(51, &["dn1"])]))
            .await;
        meta.call(DeleteObject {
            marker_owner: None,
            bypass_governance: false,
            version: None,
            bucket: "bk1".into(),
            key: "k2".into(),
        })
        .await
        .unwrap();
        (record, g.block)
    };
    let meta = meta.reopen().await;
    assert_eq!(meta.get("bk1", "k").await, Some(record));
    assert_eq!(meta.queued_for("dn1").await, vec![key(51)]);
    // The registry came back: allocation works before any new heartbeat.
    let g = allocate(&meta, ReplicationConfig::REPLICATED_1, &[], T0 + 1)
        .await
        .unwrap();
    assert!(g.block > first_block);
}

#[tokio::test]
async fn root_credentials_are_generated_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.admin_token = None;
    let first = MetaService::open(cfg.clone()).unwrap();
    let creds = first
        .root_credentials()
        .expect("a lone meta has root credentials");
    let token = first.admin_token().to_string();
    assert!(creds.generated);
    assert_eq!(creds.access_key.len(), 20);
    assert_eq!(creds.secret_key.len(), 40);
    assert!(token.len() >= 32);
    for file in [ROOT_CREDENTIALS_FILE, ADMIN_TOKEN_FILE] {
        let mode = std::fs::metadata(dir.path().join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }
    let lookup = GetAccessKey {
        access_key: creds.access_key.clone(),
    };
    let key = first.call(lookup, &Principal::Admin).await;
    assert!(matches!(key, Ok(Some(k)) if k.user == ROOT_USER && k.secret_key == creds.secret_key));
    let lookup = GetUser {
        name: ROOT_USER.into(),
    };
    let Ok(Some(root)) = first.call(lookup, &Principal::Admin).await else {
        panic!()
    };
    assert!(root.is_root);
    drop(first);

    let again = MetaService::open(cfg).unwrap();
    let reopened = again
        .root_credentials()
        .expect("a lone meta has root credentials");
    assert!(!reopened.generated);
    assert_eq!(
        (reopened.access_key, reopened.secret_key),
        (creds.access_key, creds.secret_key)
    );
    assert_eq!(again.admin_token(), token);
}

#[tokio::test]
async fn configured_root_credentials_win() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.root_access_key = Some("ROOTACCESSKEY".into());
    cfg.root_secret_key = Some("root/secret+key".into());
    let meta = MetaService::open(cfg.clone()).unwrap();
    let creds = meta
        .root_credentials()
        .expect("a lone meta has root credentials");
    assert!(!creds.generated);
    assert_eq!(creds.access_key, "ROOTACCESSKEY");
    assert!(!dir.path().join(ROOT_CREDENTIALS_FILE).exists());
    let lookup = || GetAccessKey {
        access_key: "ROOTACCESSKEY".into(),
    };
    let key = meta.call(lookup(), &Principal::Admin).await;
    assert!(matches!(key, Ok(Some(k)) if k.secret_key == "root/secret+key" && k.user == ROOT_USER));
    drop(meta);

    cfg.root_secret_key = Some("rotated".into());
    let meta = MetaService::open(cfg.clone()).unwrap();
    let lookup = || GetAccessKey {
        access_key: "ROOTACCESSKEY".into(),
    };
    let key = meta.call(lookup(), &Principal::Admin).await;
    assert!(matches!(key, Ok(Some(k)) if k.secret_key == "rotated"));
    drop(meta);

    cfg.root_secret_key = None;
    assert!(matches!(
        MetaService::open(cfg).err(),
        Some(MetaError::InvalidRequest(_))
    ));
}

async fn admin_operations_need_the_admin_role(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    // The cluster role (datanodes, gateways) may not administer.
    let cluster = meta.gateway_client();
    let refused = cluster.call(ListUsers).await;
    assert_eq!(refused.unwrap_err(), MetaError::Unauthorized);
    let refused = cluster.call(CreateUser { name: "x".into() }).await;
    assert_eq!(refused.unwrap_err(), MetaError::Unauthorized);
    assert!(cluster.call(ListBuckets { owner: None }).await.is_ok());

    meta.call(CreateUser { name: "bob".into() }).await.unwrap();
    assert_eq!(
        meta.call(CreateUser { name: "bob".into() })
            .await
            .unwrap_err(),
        MetaError::UserExists("bob".into())
    );
    let Ok(key) = meta.call(CreateKey { user: "bob".into() }).await else {
        panic!()
    };
    assert_eq!(key.user, "bob");
    assert_eq!(
        meta.call(CreateKey { user: "eve".into() })
            .await
            .unwrap_err(),
        MetaError::NoSuchUser("eve".into())
    );
    let Ok(keys) = meta
        .call(ListKeys {
            user: Some("bob".into()),
        })
        .await
    else {
        panic!()
    };
    assert_eq!(keys, vec![key.clone()]);
    let Ok(users) = meta.call(ListUsers).await else {
        panic!()
    };
    let names: Vec<_> = users.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["bob", ROOT_USER]);

    meta.call(CreateBucket {
        object_lock: false,
        name: "bobs".into(),
        owner: "bob".into(),
        replication: None,
        access: Default::default(),
    })
    .await
    .unwrap();
    assert_eq!(
        meta.call(DeleteUser { name: "bob".into() })
            .await
            .unwrap_err(),
        MetaError::UserHasBuckets("bob".into())
    );
    assert!(matches!(
        meta.call(DeleteUser {
            name: ROOT_USER.into()
        })
        .await,
        Err(MetaError::InvalidRequest(_))
    ));
    meta.call(DeleteBucket {
        name: "bobs".into(),
    })
    .await
    .unwrap();
    meta.call(DeleteUser { name: "bob".into() }).await.unwrap();
    let gone = meta
        .call(GetAccessKey {
            access_key: key.access_key.clone(),
        })
        .await;
    assert!(matches!(gone, Ok(None)));
    assert_eq!(
        meta.call(DeleteKey {
            access_key: key.access_key.clone()
        })
        .await
        .unwrap_err(),
        MetaError::NoSuchAccessKey(key.access_key)
    );
}

async fn shared_object(meta: &MetaUnderTest, bucket: &str, key: &str) -> Option<Arc<ObjectRecord>> {
    let request = GetObject {
        version: None,
        bucket: bucket.into(),
        key: key.into(),
    };
    match meta.call(request).await {
        Ok(o) => o,
        other => panic!("get object: {other:?}"),
    }
}

async fn shared_bucket(meta: &MetaUnderTest, name: &str) -> Arc<BucketRecord> {
    match meta.call(GetBucket { name: name.into() }).await {
        Ok(Some(b)) => b,
        other => panic!("get bucket: {other:?}"),
    }
}

#[tokio::test]
async fn reads_share_one_decoded_record_until_it_changes() {
    // In process only: a remote client decodes its own copy of each answer.
    let meta = MetaUnderTest::open(Transport::Local).await;
    meta.register(1).await;
    meta.create_bucket("bk1", ROOT_USER).await;
    meta.commit(object("bk1", "k", vec![group(1, &["dn0"])]))
        .await;

    let first = shared_object(&meta, "bk1", "k").await.unwrap();
    let again = shared_object(&meta, "bk1", "k").await.unwrap();
    assert!(
        Arc::ptr_eq(&first, &again),
        "an unchanged record is decoded once"
    );

    // A datanode that moved: the record is refreshed, not served stale.
    let mut moved = report("dn0", ROOMY, 0);
    moved.addr = "10.0.0.9:7777".into();
    meta.heartbeat_at(moved, T0 + 1).await;
    let refreshed = shared_object(&meta, "bk1", "k").await.unwrap();
    assert!(!Arc::ptr_eq(&first, &refreshed));
    assert_eq!(refreshed.groups[0].replicas[0].addr, "10.0.0.9:7777");

    // An overwrite of the same size: the new record at once.
    let mut replacement = object("bk1", "k", vec![group(2, &["dn0"])]);
    replacement.etag = refreshed.etag.chars().rev().collect();
    meta.commit(replacement.clone()).await;
    let replaced = shared_object(&meta, "bk1", "k").await.unwrap();
    assert_eq!(replaced.id, replacement.id);
    assert_eq!(replaced.groups[0].block.0, 2);

    // Deleted: gone, whatever was cached.
    meta.call(DeleteObject {
        marker_owner: None,
        bypass_governance: false,
        version: None,
        bucket: "bk1".into(),
        key: "k".into(),
    })
    .await
    .unwrap();
    assert!(shared_object(&meta, "bk1", "k").await.is_none());

    // Buckets likewise: shared while unchanged, fresh after a change.
    let bucket = shared_bucket(&meta, "bk1").await;
    assert!(Arc::ptr_eq(&bucket, &shared_bucket(&meta, "bk1").await));
    let tags: std::collections::BTreeMap<String, String> =
        [("team".to_string(), "storage".to_string())].into();
    meta.call(SetBucketTags {
        name: "bk1".into(),
        tags: tags.clone(),
    })
    .await
    .unwrap();
    assert_eq!(shared_bucket(&meta, "bk1").await.tags, tags);
}

/// An inline record of `len` stored bytes at `photos`/`key`.
fn inline_object(key: &str, size: u64, stored: usize) -> ObjectRecord {
    let mut record = object("photos", key, vec![]);
    record.size = size;
    record.inline = Some(InlineBody((0..stored).map(|i| i as u8).collect()));
    record
}

async fn inline_bodies_are_kept_whole_and_checked(transport: Transport) {
    let meta = MetaUnderTest::open(transport).await;
    meta.register(1).await;
    meta.create_bucket("photos", ROOT_USER).await;
    // Kept and answered whole, through the RPC's JSON as in process.
    let small = inline_object("small", 1000, 1000);
    meta.commit(small.clone()).await;
    let largest = inline_object("largest", MAX_INLINE_BODY as u64, MAX_INLINE_BODY);
    meta.commit(largest.clone()).await;
    // An encrypted body is kept sealed, longer than the object.
    let mut sealed = inline_object("sealed", 100, sse::sealed_len(100) as usize);
    sealed.attributes.encryption = Some(Encryption {
        mode: EncryptionMode::Customer,
        sealed_key: "00".repeat(32),
        customer_key_md5: Some("md5".into()),
        kms_key_id: None,
        kms_context: None,
        data_key: None,
    });
    meta.commit(sealed.clone()).await;
    assert_eq!(meta.get("photos", "small").await, Some(small.clone()));
    assert_eq!(meta.get("photos", "largest").await, Some(largest));
    assert_eq!(meta.get("photos", "sealed").await, Some(sealed));

    let refused = |record: ObjectRecord| {
        let meta = &meta;
        async move {
            let answer = meta
                .call(CommitObject {
                    record,
                    condition: None,
                })
                .await;
            match answer {
                Err(MetaError::InvalidRequest(why)) => why,
                other => panic!("not refused: {other:?}"),
            }
        }
    };
    let mut with_blocks = inline_object("both", 10, 10);
    with_blocks.groups = vec![group(7, &["dn0"])];
    assert!(refused(with_blocks).await.contains("no block groups"));
    let over = MAX_INLINE_BODY + 1;
    let too_long = inline_object("long", over as u64, over);
    assert!(refused(too_long).await.contains("over the"));
    let short = inline_object("short", 11, 10);
    assert!(refused(short).await.contains("stored in 11"));
    let unsealed = {
        let mut record = inline_object("unsealed", 100, 100);
        record.attributes.encryption = meta
            .get("photos", "sealed")
            .await
            .unwrap()
            .attributes
            .encryption;
        record
    };
    assert!(refused(unsealed).await.contains("stored in"));
    // Bytes with nowhere to be (an RPC peer that dropped the body).
    let mut bodiless = object("photos", "bodiless", vec![]);
    bodiless.size = 1;
    assert!(refused(bodiless).await.contains("neither block groups nor"));
    // An empty object needs neither.
    let empty = object("photos", "empty", vec![]);
    meta.commit(empty.clone()).await;
    assert_eq!(meta.get("photos", "empty").await, Some(empty));
    // Nothing refused was kept.
    for key in ["both", "long", "short", "unsealed", "bodiless"] {
        assert_eq!(meta.get("photos", key).await, None, "{key}");
    }
    // On disk in the record: back after a restart.
    let meta = meta.reopen().await;
    assert_eq!(meta.get("photos", "small").await, Some(small));
}

test_support::conformance!(
    commit_then_get_returns_the_record,
    inline_bodies_are_kept_whole_and_checked,
    overwrite_queues_old_blocks_on_their_datanodes_until_acknowledged,
    heartbeat_hands_out_at_most_a_thousand_deletions,
    released_blocks_wait_out_the_deletion_delay,
    get_object_uses_the_datanodes_current_address,
    allocation_picks_distinct_healthy_nodes_with_space,
    allocation_prefers_the_least_used_and_spreads_load,
    allocation_spreads_groups_over_the_hosts_of_their_locations,
    the_balancer_is_started_and_stopped_by_the_admin,
    status_reports_states_and_counts,
    bucket_rules,
    default_replication_follows_bucket_then_cluster,
    admin_operations_need_the_admin_role,
    state_survives_reopen,
);
