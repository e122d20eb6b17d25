//! The lifecycle worker: applies each bucket's lifecycle rules
//! (`meta_api::lifecycle`) to its keys and incomplete uploads.
//!
//! A pass walks every bucket that has rules, in name order: first its keys
//! (every version of one key at a time, through both version tables), then
//! its uploads. It goes in batches of at most `LifecycleSettings::batch`
//! keys or uploads, each one write transaction that also stores where the
//! pass is, so a meta that restarts goes on from the last batch it
//! committed and never applies a rule twice or skips a key. Between
//! batches the worker pauses as long as the batch took, leaving at least
//! half of the store's write time to requests. A pass starts one lifecycle
//! day after the previous one started.

use crate::ops::uploads::abort_upload;
use crate::state::MetaState;
use crate::store::db::{decode, get_json, prefix_end, StoreError};
use crate::store::lifecycle_passes::{self, Cursor, Stage, StoredPass};
use crate::store::tables::{bucket_prefix_len, object_key, BUCKETS, UPLOADS, UPLOAD_ORDER};
use crate::store::upload_index::split_entry;
use crate::store::versions::{KeyVersions, Unlock};
use meta_api::lifecycle::{
    current_expiry, noncurrent_due, removes_lone_marker, upload_abort, LifecycleDay, LifecyclePass,
    LifecycleRule, Noncurrent,
};
use meta_api::naming::VersionRef;
use meta_api::{BucketRecord, MetaError, UnixMillis, UploadRecord};
use redb::{ReadableTable, WriteTransaction};
use std::ops::Bound;
use std::time::{Duration, Instant};

/// Longest the worker sleeps before it looks again whether a pass is due.
const MAX_IDLE: Duration = Duration::from_secs(60);

impl MetaState {
    /// One step of the lifecycle worker at `now`: a batch of the pass under
    /// way, or the start of a pass when one is due (or `force`d). Answers
    /// how long to wait before the next step.
    pub(crate) fn lifecycle_step(
        &self,
        now: UnixMillis,
        force: bool,
    ) -> Result<Duration, MetaError> {
        let day = i64::try_from(self.config.lifecycle.day.length().as_millis()).unwrap_or(i64::MAX);
        let next_start = |last: &Option<LifecyclePass>| {
            last.as_ref()
                .map_or(now, |last| last.started.saturating_add(day))
        };
        // Most steps find nothing to do: they need no write transaction.
        let (running, last) = lifecycle_passes::load(&self.store)?;
        if running.is_none() && !force && next_start(&last) > now {
            let idle = Duration::from_millis((next_start(&last) - now) as u64);
            return Ok(idle.min(MAX_IDLE));
        }
        let started = Instant::now();
        self.store.write(|txn| {
            // Read again inside the transaction: another step may have run.
            let (running, last) = lifecycle_passes::load_for_write(txn)?;
            let pass = match running {
                Some(pass) => pass,
                None if force || next_start(&last) <= now => {
                    tracing::info!("lifecycle pass starts");
                    StoredPass {
                        progress: LifecyclePass {
                            started: now,
                            ..LifecyclePass::default()
                        },
                        cursor: next_bucket(txn, None)?.map(|bucket| Cursor {
                            bucket,
                            stage: Stage::Keys(None),
                        }),
                    }
                }
                None => return Ok(()),
            };
            self.lifecycle_batch(txn, pass, now)
        })?;
        Ok(started.elapsed().max(Duration::from_millis(1)))
    }

    /// Ends the pass under way, if any, then runs a whole new pass at once
    /// and answers what it did (tests and tools; the worker keeps its own
    /// schedule). Blocking.
    pub(crate) fn run_lifecycle_pass(&self) -> Result<LifecyclePass, MetaError> {
        while lifecycle_passes::load(&self.store)?.0.is_some() {
            self.lifecycle_step(self.config.clock.now(), false)?;
        }
        self.lifecycle_step(self.config.clock.now(), true)?;
        loop {
            let (running, last) = lifecycle_passes::load(&self.store)?;
            match (running, last) {
                (None, Some(last)) => return Ok(last),
                (None, None) => return Err(MetaError::Store("no lifecycle pass ran".into())),
                (Some(_), _) => {
                    self.lifecycle_step(self.config.clock.now(), false)?;
                }
            }
        }
    }

    /// Runs up to one batch of `pass` in `txn` and stores where it stopped.
    fn lifecycle_batch(
        &self,
        txn: &WriteTransaction,
        mut pass: StoredPass,
        now: UnixMillis,
    ) -> Result<(), StoreError> {
        let settings = self.config.lifecycle;
        let mut budget = settings.batch.max(1);
        while budget > 0 {
            let Some(cursor) = pass.cursor.take() else {
                break;
            };
            let bucket: Option<BucketRecord> =
                get_json(&txn.open_table(BUCKETS)?, &*cursor.bucket)?;
            let Some(bucket) = bucket.filter(|b| !b.lifecycle.is_empty()) else {
                pass.cursor = next_bucket(txn, Some(&cursor.bucket))?.map(|bucket| Cursor {
                    bucket,
                    stage: Stage::Keys(None),
                });
                continue;
            };
            let walk = Walk {
                state: self,
                bucket: &bucket,
                day: settings.day,
                now,
            };
            let stage = match cursor.stage {
                Stage::Keys(after) => walk.keys(txn, after, &mut budget, &mut pass.progress)?,
                Stage::Uploads(after) => {
                    walk.uploads(txn, after, &mut budget, &mut pass.progress)?
                }
            };
            pass.cursor = match stage {
                Some(stage) => Some(Cursor {
                    bucket: cursor.bucket,
                    stage,
                }),
                None => next_bucket(txn, Some(&cursor.bucket))?.map(|bucket| Cursor {
                    bucket,
                    stage: Stage::Keys(None),
                }),
            };
        }
        pass.progress.bucket = pass.cursor.as_ref().map(|c| c.bucket.clone());
        if pass.cursor.is_none() {
            pass.progress.finished = Some(now);
            let p = &pass.progress;
            tracing::info!(
                examined = p.examined,
                expired = p.expired,
                removed = p.removed,
                aborted = p.aborted,
                locked = p.locked,
                "lifecycle pass ended"
            );
        }
        lifecycle_passes::save(txn, &pass)
    }
}

/// The key prefixes a bucket's rules about keys apply under, sorted, none
/// under another (an empty prefix: the whole bucket); None when no enabled
/// rule acts on keys.
fn key_prefixes(rules: &[LifecycleRule]) -> Option<Vec<String>> {
    let mut prefixes: Vec<String> = rules
        .iter()
        .filter(|r| r.enabled && (r.expiration.is_some() || r.noncurrent_expiration.is_some()))
        .map(|r| r.filter.prefix.clone().unwrap_or_default())
        .collect();
    prefixes.sort();
    let mut kept: Vec<String> = Vec::with_capacity(prefixes.len());
    for prefix in prefixes {
        if !kept
            .last()
            .is_some_and(|outer| prefix.starts_with(outer.as_str()))
        {
            kept.push(prefix);
        }
    }
    (!kept.is_empty()).then_some(kept)
}

/// The first bucket after `after` (from the first when None) with rules.
fn next_bucket(txn: &WriteTransaction, after: Option<&str>) -> Result<Option<String>, StoreError> {
    let buckets = txn.open_table(BUCKETS)?;
    let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
    for entry in buckets.range::<&str>((lower, Bound::Unbounded))? {
        let (name, value) = entry?;
        let record: BucketRecord = decode(value.value())?;
        if !record.lifecycle.is_empty() {
            return Ok(Some(name.value().to_string()));
        }
    }
    Ok(None)
}

/// One batch's walk through one bucket.
struct Walk<'a> {
    state: &'a MetaState,
    bucket: &'a BucketRecord,
    day: LifecycleDay,
    now: UnixMillis,
}

impl Walk<'_> {
    /// Applies the rules to the keys after `after` until the budget is
    /// spent; answers where the bucket's walk goes on. Keys under no
    /// enabled rule's prefix are skipped over, not looked at.
    fn keys(
        &self,
        txn: &WriteTransaction,
        mut after: Option<String>,
        budget: &mut usize,
        progress: &mut LifecyclePass,
    ) -> Result<Option<Stage>, StoreError> {
        let Some(prefixes) = key_prefixes(&self.bucket.lifecycle) else {
            return Ok(Some(Stage::Uploads(None)));
        };
        let mut versions = KeyVersions::open(txn)?;
        let mut next = Some(Stage::Keys(after.clone()));
        let mut from = after
            .as_deref()
            .map_or(Bound::Unbounded, Bound::Excluded)
            .map(str::to_string);
        while *budget > 0 {
            let found = versions.next_key(&self.bucket.name, from.as_ref().map(String::as_str))?;
            let Some(key) = found else {
                next = Some(Stage::Uploads(None));
                break;
            };
            if !prefixes.iter().any(|p| key.starts_with(p.as_str())) {
                // On to the first prefix past the key, if any.
                match prefixes.iter().find(|p| p.as_str() > key.as_str()) {
                    Some(prefix) => from = Bound::Included(prefix.clone()),
                    None => {
                        next = Some(Stage::Uploads(None));
                        break;
                    }
                }
                continue;
            }
            *budget -= 1;
            progress.examined += 1;
            self.apply_to_key(&mut versions, &key, progress)?;
            from = Bound::Excluded(key.clone());
            after = Some(key);
            next = Some(Stage::Keys(after.clone()));
        }
        versions.free_removed(txn, self.state.deletion_not_before(self.now))?;
        Ok(next)
    }

    /// The rules applied to every version of `key`: the current version
    /// expired, noncurrent versions due removed (unless locked), and a
    /// delete marker left alone removed.
    fn apply_to_key(
        &self,
        versions: &mut KeyVersions<'_>,
        key: &str,
        progress: &mut LifecyclePass,
    ) -> Result<(), StoreError> {
        let (bucket, rules, now) = (&self.bucket.name, &self.bucket.lifecycle, self.now);
        let mut all = versions.all_versions(bucket, key)?;
        let expired = all.first().is_some_and(|latest| {
            current_expiry(rules, latest.lifecycle_subject(), self.day)
                .is_some_and(|(at, _)| at <= now)
        });
        if expired {
            versions.delete_latest(self.bucket.versioning, bucket, key, now, None)?;
            progress.expired += 1;
            all = versions.all_versions(bucket, key)?;
        }
        let unlock = Unlock {
            now,
            bypass_governance: false,
        };
        let mut newer = 0u32;
        let mut removed_any = false;
        for pair in all.windows(2) {
            let (successor, record) = (&pair[0], &pair[1]);
            let version = Noncurrent {
                record: record.lifecycle_subject(),
                since: successor.created,
                newer,
            };
            newer = newer.saturating_add(1);
            if !noncurrent_due(rules, version, self.day, now) {
                continue;
            }
            if record.attributes.locked(now, false) {
                progress.locked += 1;
                continue;
            }
            versions.delete_version(bucket, key, &VersionRef::of(&record.version), unlock)?;
            progress.removed += 1;
            removed_any = true;
        }
        // Read again only when this pass changed the key's versions.
        let remaining = if removed_any {
            versions.all_versions(bucket, key)?
        } else {
            all
        };
        if let [marker] = remaining.as_slice() {
            if marker.version.delete_marker
                && removes_lone_marker(rules, marker.lifecycle_subject(), self.day, now)
            {
                versions.delete_version(bucket, key, &VersionRef::of(&marker.version), unlock)?;
                progress.removed += 1;
            }
        }
        Ok(())
    }

    /// Aborts the uploads after `after` that are due, until the budget is
    /// spent; answers where the bucket's walk goes on (None: it is done).
    fn uploads(
        &self,
        txn: &WriteTransaction,
        after: Option<Vec<u8>>,
        budget: &mut usize,
        progress: &mut LifecyclePass,
    ) -> Result<Option<Stage>, StoreError> {
        let rules = &self.bucket.lifecycle;
        if rules
            .iter()
            .all(|r| r.abort_incomplete_upload_days.is_none())
        {
            return Ok(None);
        }
        let start = object_key(&self.bucket.name, b"");
        let end = prefix_end(&start)
            .ok_or_else(|| StoreError::Corrupt("bucket range has no upper bound".into()))?;
        let batch: Vec<Vec<u8>> = {
            let order = txn.open_table(UPLOAD_ORDER)?;
            let lower = match &after {
                Some(at) => Bound::Excluded(at.as_slice()),
                None => Bound::Included(start.as_slice()),
            };
            let entries = order.range::<&[u8]>((lower, Bound::Excluded(end.as_slice())))?;
            entries
                .take(*budget)
                .map(|entry| entry.map(|(k, _)| k.value().to_vec()))
                .collect::<Result<_, _>>()?
        };
        let Some(last) = batch.last().cloned() else {
            return Ok(None);
        };
        for entry in &batch {
            *budget -= 1;
            progress.examined += 1;
            let (_, id) = split_entry(&entry[bucket_prefix_len(&self.bucket.name)..])?;
            let upload: Option<UploadRecord> = get_json(&txn.open_table(UPLOADS)?, id)?;
            let Some(upload) = upload else {
                continue;
            };
            let due = upload_abort(rules, &upload.key, upload.created, self.day)
                .is_some_and(|(at, _)| at <= self.now);
            if due {
                abort_upload(txn, &upload, self.state.deletion_not_before(self.now))?;
                progress.aborted += 1;
            }
        }
        Ok(Some(Stage::Uploads(Some(last))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meta_api::lifecycle::{Expiration, LifecycleFilter};

    fn rule(prefix: Option<&str>, enabled: bool, expires: bool) -> LifecycleRule {
        LifecycleRule {
            id: "r".into(),
            enabled,
            filter: LifecycleFilter {
                prefix: prefix.map(str::to_string),
                ..LifecycleFilter::everything()
            },
            expiration: expires.then_some(Expiration::Days(1)),
            noncurrent_expiration: None,
            abort_incomplete_upload_days: (!expires).then_some(1),
        }
    }

    #[test]
    fn only_the_prefixes_of_rules_about_keys_are_walked() {
        let rules = [
            rule(Some("d/x/"), true, true),
            rule(Some("b/"), true, true),
            rule(Some("d/"), true, true),
            rule(Some("off/"), false, true),
            rule(Some("uploads/"), true, false),
        ];
        assert_eq!(key_prefixes(&rules), Some(vec!["b/".into(), "d/".into()]));
        let everything = [rule(Some("b/"), true, true), rule(None, true, true)];
        assert_eq!(key_prefixes(&everything), Some(vec![String::new()]));
        assert_eq!(key_prefixes(&rules[3..]), None);
    }
}
