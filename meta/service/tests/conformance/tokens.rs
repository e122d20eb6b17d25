//! Block tokens: the capabilities meta signs when it hands out block
//! locations, checked as a datanode checks them, with the keys a datanode
//! gets from its heartbeat answer; and the rotation of those keys.

use meta::ROOT_USER;
use meta_api::*;
use proto::token::{BlockToken, Modes, TokenError, TokenKey, TokenKeys};
use proto::{BlockKey, ReplicationConfig};
use std::time::Duration;
use test_support::meta::*;
use test_support::streams::rs;

const MINUTE: UnixMillis = 60_000;
const HOUR: UnixMillis = 60 * MINUTE;
/// The test config's staleness: how far ahead of its use a key is made.
const LEAD: UnixMillis = 10_000;

async fn open(transport: Transport) -> MetaUnderTest {
    MetaUnderTest::open_with(transport, |config| {
        config.token_rotation = Duration::from_secs(3600);
        config.token_lifetime = Duration::from_secs(30 * 60);
    })
    .await
}

/// The keys a datanode heartbeating at `at` is given.
async fn keys_at(meta: &MetaUnderTest, at: UnixMillis) -> Vec<TokenKey> {
    let reply = meta
        .call_at(
            Heartbeat {
                report: report("dn0", ROOMY, 0),
            },
            at,
        )
        .await
        .unwrap();
    reply.token_keys
}

/// A group allocated at `at`, on datanodes that heartbeat just before.
async fn allocate_at(
    meta: &MetaUnderTest,
    config: ReplicationConfig,
    at: UnixMillis,
) -> BlockGroup {
    keys_at(meta, at).await;
    let request = AllocateBlock {
        config,
        exclude: Vec::new(),
    };
    meta.call_at(request, at).await.unwrap()
}

/// Object tokens/k as a reader gets it, with its read tokens.
async fn read_tokens_k(meta: &MetaUnderTest) -> std::sync::Arc<ObjectRecord> {
    let lookup = GetObject {
        version: None,
        bucket: "tokens".into(),
        key: "k".into(),
    };
    meta.call(lookup).await.unwrap().expect("the object exists")
}

fn ms(at: UnixMillis) -> u64 {
    u64::try_from(at).unwrap()
}

/// Checks `token` on every block file of `group` as a datanode holding
/// `keys` does at `at`.
fn check_all(
    keys: &[TokenKey],
    group: &BlockGroup,
    token: &BlockToken,
    mode: Modes,
    at: UnixMillis,
) -> Result<(), TokenError> {
    let keys = TokenKeys::new(keys.to_vec());
    group
        .block_keys()
        .try_for_each(|(key, _)| keys.check(Some(token), key, mode, ms(at)))
}

async fn writers_get_write_tokens_and_readers_read_tokens(transport: Transport) {
    let meta = open(transport).await;
    meta.register(5).await;
    meta.create_bucket("tokens", ROOT_USER).await;
    let keys = keys_at(&meta, T0).await;
    assert_eq!(keys.len(), 1, "{keys:?}");

    let mut group = allocate_at(&meta, rs(3, 2), T0).await;
    let write = group.token.expect("allocation signs a token");
    assert_eq!(write.modes, Modes::WRITE);
    assert_eq!(write.expires, ms(T0 + 30 * MINUTE));
    assert_eq!(check_all(&keys, &group, &write, Modes::WRITE, T0), Ok(()));
    assert_eq!(
        check_all(&keys, &group, &write, Modes::READ, T0),
        Err(TokenError::WrongMode(Modes::READ))
    );
    assert_eq!(
        check_all(&keys, &group, &write, Modes::WRITE, T0 + 30 * MINUTE + 1),
        Err(TokenError::Expired)
    );
    // It opens this group's block files and no other block's.
    let other = BlockKey::new(proto::BlockId(group.block.0 + 1), 0);
    assert_eq!(
        TokenKeys::new(keys.clone()).check(Some(&write), other, Modes::WRITE, ms(T0)),
        Err(TokenError::WrongBlock)
    );

    // The writer sends its token back with the record: meta stores none,
    // and a reader gets a read token.
    group.length = 10;
    meta.commit(object("tokens", "k", vec![group])).await;
    let at = T0 + MINUTE;
    meta.clock.set(at);
    let record = read_tokens_k(&meta).await;
    let group = &record.groups[0];
    let read = group.token.expect("lookups sign a token");
    assert_eq!(read.modes, Modes::READ);
    assert!(read.expires >= ms(at + 22 * MINUTE), "{read:?}");
    assert_eq!(check_all(&keys, group, &read, Modes::READ, at), Ok(()));
    assert_eq!(
        check_all(&keys, group, &read, Modes::DELETE, at),
        Err(TokenError::WrongMode(Modes::DELETE))
    );
    // The record stays cached while unchanged, but a lookup in a later
    // token period gets a token of its own time.
    let later = at + 20 * MINUTE;
    meta.clock.set(later);
    let again = read_tokens_k(&meta).await;
    let fresh = again.groups[0].token.expect("lookups sign a token");
    assert!(fresh.expires >= ms(later + 22 * MINUTE), "{fresh:?}");
    // A meta restart keeps the keys: tokens handed out before stay good.
    let meta = meta.reopen().await;
    assert_eq!(keys_at(&meta, at).await, keys);
    assert!(meta.get("tokens", "k").await.is_some());
}

async fn keys_rotate_ahead_of_use_and_retire_after_their_last_token(transport: Transport) {
    let meta = open(transport).await;
    meta.register(1).await;
    let first = keys_at(&meta, T0).await;
    assert_eq!(first.len(), 1);
    let k1 = first[0].clone();
    assert_eq!(k1.retire_at, ms(T0 + HOUR + 30 * MINUTE));

    // Before the rotation is near, no new key.
    assert_eq!(keys_at(&meta, T0 + HOUR - LEAD - 1).await, first);
    // Within a staleness of it, the next key reaches the datanodes, but
    // tokens are still signed with the current one.
    let keys = keys_at(&meta, T0 + HOUR - LEAD).await;
    assert_eq!(keys.len(), 2, "{keys:?}");
    let k2 = keys[1].clone();
    assert_eq!(k2.id, k1.id + 1);
    assert_ne!(k2.secret, k1.secret);
    assert_eq!(k2.retire_at, ms(T0 + 2 * HOUR + 30 * MINUTE));
    let late = allocate_at(&meta, ReplicationConfig::REPLICATED_1, T0 + HOUR - 1).await;
    let late = late.token.unwrap();
    assert_eq!(late.key_id, k1.id);
    assert!(late.expires <= k1.retire_at);
    let fresh = allocate_at(&meta, ReplicationConfig::REPLICATED_1, T0 + HOUR).await;
    assert_eq!(fresh.token.unwrap().key_id, k2.id);

    // Once every token it signed has expired, the old key is dropped.
    let keys = keys_at(&meta, T0 + HOUR + 30 * MINUTE).await;
    assert!(keys.contains(&k1), "{keys:?}");
    let keys = keys_at(&meta, T0 + HOUR + 30 * MINUTE + 1).await;
    assert_eq!(keys, vec![k2.clone()]);
    let meta = meta.reopen().await;
    assert_eq!(keys_at(&meta, T0 + HOUR + 30 * MINUTE + 2).await, vec![k2]);
}

test_support::conformance!(
    writers_get_write_tokens_and_readers_read_tokens,
    keys_rotate_ahead_of_use_and_retire_after_their_last_token,
);
