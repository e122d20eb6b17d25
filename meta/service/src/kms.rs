//! The built-in key service of SSE-KMS: keys made by `tessera admin kms key
//! create NAME` (and the default key `aws/s3`, made at its first use), each
//! 32 random bytes stored sealed under meta's master key and held opened in
//! memory. The data key of an SSE-KMS body is sealed under the key its
//! writer named, bound to that key's id and the writer's encryption context.
//!
//! Everything else sees only key ids: the gateway asks meta to resolve the
//! key a write names ([`KmsKeys::resolve`]) and hands over the data key
//! with the commit, as for SSE-S3; [`crate::object_keys`] seals and opens
//! it here. An external KMS would take this module's place behind the same
//! three operations: resolve a key, seal a data key, open one.

use crate::store::db::{decode, encode, Store, StoreError};
use crate::store::tables::KMS_KEYS;
use meta_api::{KmsKeyRecord, MetaError, UnixMillis};
use redb::ReadableTable;
use serde::{Deserialize, Serialize};
use sse::{DataKey, KeyEncryptionKey};
use std::collections::BTreeMap;
use std::sync::{Mutex, RwLock};

/// The alias of the key writes get when they name none.
pub(crate) const DEFAULT_ALIAS: &str = "aws/s3";
/// Longest alias, as in AWS KMS (with `alias/`).
const MAX_ALIAS: usize = 250;
/// Binds a key's sealed material to its use and id.
const MATERIAL_CONTEXT: &str = "tessera kms key v1";
/// Binds a data key sealed under a KMS key to its use, the key and the
/// writer's encryption context.
const DATA_KEY_CONTEXT: &str = "tessera sse-kms v1";

/// A key as stored: its record and its material sealed under the master key.
#[derive(Serialize, Deserialize)]
struct StoredKmsKey {
    record: KmsKeyRecord,
    /// Hex of the material sealed under meta's master key.
    material: String,
}

fn material_context(id: &str) -> Vec<u8> {
    format!("{MATERIAL_CONTEXT}\0{id}").into_bytes()
}

fn data_key_context(id: &str, encryption_context: Option<&str>) -> Vec<u8> {
    format!(
        "{DATA_KEY_CONTEXT}\0{id}\0{}",
        encryption_context.unwrap_or("")
    )
    .into_bytes()
}

/// How a write names a key.
#[derive(Debug, PartialEq, Eq)]
enum KeyName<'a> {
    Id(&'a str),
    Alias(&'a str),
}

/// The key `text` names: `alias/NAME`, an alias ARN, a key ARN or an id.
fn key_name(text: &str) -> KeyName<'_> {
    let text = text.trim();
    let resource = match text.strip_prefix("arn:") {
        // arn:PARTITION:kms:REGION:ACCOUNT:RESOURCE
        Some(arn) => arn.splitn(5, ':').nth(4).unwrap_or(""),
        None => text,
    };
    match resource.strip_prefix("alias/") {
        Some(alias) => KeyName::Alias(alias),
        None => KeyName::Id(resource.strip_prefix("key/").unwrap_or(resource)),
    }
}

/// The alias `name` names (with or without `alias/`), checked as AWS KMS
/// checks it; names under `aws/` are kept for keys meta makes itself.
fn checked_alias(name: &str) -> Result<&str, MetaError> {
    let alias = name.strip_prefix("alias/").unwrap_or(name);
    let valid = !alias.is_empty()
        && alias.len() <= MAX_ALIAS
        && alias
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/_-".contains(&b));
    if !valid {
        return Err(MetaError::InvalidRequest(format!(
            "a key alias is 1 to {MAX_ALIAS} letters, digits, '/', '_' or '-', not {name:?}"
        )));
    }
    if alias.starts_with("aws/") {
        return Err(MetaError::InvalidRequest(format!(
            "aliases beginning with aws/ are reserved: {name:?}"
        )));
    }
    Ok(alias)
}

/// The keys of the built-in key service, opened.
pub(crate) struct KmsKeys {
    keys: RwLock<BTreeMap<String, (KmsKeyRecord, KeyEncryptionKey)>>,
    /// Held while the default key is made, so that racing writes make one.
    making_default: Mutex<()>,
}

impl KmsKeys {
    /// Every key `store` holds, opened with `master`.
    pub(crate) fn load(store: &Store, master: &KeyEncryptionKey) -> Result<Self, MetaError> {
        let stored = store.read(|txn| {
            let table = txn.open_table(KMS_KEYS)?;
            let mut keys = Vec::new();
            for entry in table.iter()? {
                let (_, value) = entry?;
                keys.push(decode::<StoredKmsKey>(value.value())?);
            }
            Ok(keys)
        })?;
        let mut keys = BTreeMap::new();
        for key in stored {
            let opened = open_material(master, &key)?;
            keys.insert(key.record.id.clone(), (key.record, opened));
        }
        Ok(Self {
            keys: RwLock::new(keys),
            making_default: Mutex::new(()),
        })
    }

    /// Every key, by id.
    pub(crate) fn list(&self) -> Vec<KmsKeyRecord> {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        keys.values().map(|(record, _)| record.clone()).collect()
    }

    /// A new key aliased `name`; refused when the alias is taken or not
    /// one AWS KMS would accept.
    pub(crate) fn create(
        &self,
        store: &Store,
        master: &KeyEncryptionKey,
        name: &str,
        now: UnixMillis,
    ) -> Result<KmsKeyRecord, MetaError> {
        self.add(store, master, checked_alias(name)?, now)
    }

    fn add(
        &self,
        store: &Store,
        master: &KeyEncryptionKey,
        alias: &str,
        now: UnixMillis,
    ) -> Result<KmsKeyRecord, MetaError> {
        let record = KmsKeyRecord {
            id: crate::entropy::uuid().to_string(),
            alias: alias.to_string(),
            created: now,
        };
        let failed = |e: sse::KeyError| MetaError::Store(format!("making a KMS key: {e}"));
        let material = DataKey::from_bytes(&crate::entropy::bytes::<32>()).map_err(failed)?;
        let sealed = master
            .seal(&material, &material_context(&record.id))
            .map_err(failed)?;
        let stored = StoredKmsKey {
            record: record.clone(),
            material: hex::encode(sealed),
        };
        store.write(|txn| {
            let mut table = txn.open_table(KMS_KEYS)?;
            for entry in table.iter()? {
                let (_, value) = entry?;
                if decode::<StoredKmsKey>(value.value())?.record.alias == alias {
                    return Err(MetaError::InvalidRequest(format!(
                        "a KMS key is already aliased {alias}"
                    ))
                    .into());
                }
            }
            table.insert(record.id.as_str(), encode(&stored)?.as_slice())?;
            Ok(())
        })?;
        let opened = KeyEncryptionKey::from_bytes(material.as_bytes()).map_err(failed)?;
        let mut keys = self.keys.write().unwrap_or_else(|e| e.into_inner());
        keys.insert(record.id.clone(), (record.clone(), opened));
        tracing::info!(id = %record.id, alias, "KMS key created");
        Ok(record)
    }

    /// The id of the key `named` (an id, a key ARN, `alias/NAME` or an
    /// alias ARN), or of the default key when None; the default key is made
    /// at its first use.
    pub(crate) fn resolve(
        &self,
        store: &Store,
        master: &KeyEncryptionKey,
        named: Option<&str>,
        now: UnixMillis,
    ) -> Result<String, MetaError> {
        let name = named.map_or(KeyName::Alias(DEFAULT_ALIAS), key_name);
        if let Some(id) = self.find(&name) {
            return Ok(id);
        }
        if name != KeyName::Alias(DEFAULT_ALIAS) {
            return Err(MetaError::KmsKeyNotFound(
                named.unwrap_or(DEFAULT_ALIAS).to_string(),
            ));
        }
        let _making = self
            .making_default
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match self.find(&name) {
            Some(id) => Ok(id),
            None => Ok(self.add(store, master, DEFAULT_ALIAS, now)?.id),
        }
    }

    /// The id of the key `name` names, if there is one.
    fn find(&self, name: &KeyName<'_>) -> Option<String> {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        keys.values()
            .find(|(record, _)| match *name {
                KeyName::Id(id) => record.id == id,
                KeyName::Alias(alias) => record.alias == alias,
            })
            .map(|(record, _)| record.id.clone())
    }

    /// The key a record names by id or key ARN, and its id.
    fn key<'a>(&self, named: &'a str) -> Result<(&'a str, KeyEncryptionKey), StoreError> {
        let KeyName::Id(id) = key_name(named) else {
            return Err(StoreError::Corrupt(format!(
                "a record names KMS key {named} by alias, not by id"
            )));
        };
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        keys.get(id)
            .map(|(_, key)| (id, key.clone()))
            .ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "a data key is sealed under KMS key {id}, which this meta does not have"
                ))
            })
    }

    /// `data_key` sealed under the key `named` (by id or key ARN), bound
    /// to it and to `context`.
    pub(crate) fn seal(
        &self,
        named: &str,
        data_key: &DataKey,
        context: Option<&str>,
    ) -> Result<Vec<u8>, MetaError> {
        let (id, key) = self.key(named)?;
        key.seal(data_key, &data_key_context(id, context))
            .map_err(|e| MetaError::Store(format!("sealing a data key: {e}")))
    }

    /// The data key `sealed` holds under the key `named` with `context`.
    pub(crate) fn open(
        &self,
        named: &str,
        sealed: &[u8],
        context: Option<&str>,
    ) -> Result<DataKey, StoreError> {
        let (id, key) = self.key(named)?;
        key.open(sealed, &data_key_context(id, context))
            .map_err(|_| StoreError::Corrupt(format!("a data key does not open with KMS key {id}")))
    }
}

fn open_material(
    master: &KeyEncryptionKey,
    key: &StoredKmsKey,
) -> Result<KeyEncryptionKey, MetaError> {
    let corrupt = || {
        StoreError::Corrupt(format!(
            "KMS key {} does not open with this meta's master key",
            key.record.id
        ))
    };
    let sealed = hex::decode(&key.material).map_err(|_| corrupt())?;
    let material = master
        .open(&sealed, &material_context(&key.record.id))
        .map_err(|_| corrupt())?;
    Ok(KeyEncryptionKey::from_bytes(material.as_bytes()).map_err(|_| corrupt())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_named_by_id_arn_or_alias() {
        assert_eq!(key_name("1234-ab"), KeyName::Id("1234-ab"));
        assert_eq!(
            key_name("arn:aws:kms:us-east-1:000000000000:key/1234-ab"),
            KeyName::Id("1234-ab")
        );
        assert_eq!(key_name("alias/app"), KeyName::Alias("app"));
        assert_eq!(
            key_name("arn:aws:kms:eu-west-1:111122223333:alias/team/app"),
            KeyName::Alias("team/app")
        );
        assert_eq!(checked_alias("alias/team/app-1_x").unwrap(), "team/app-1_x");
        for bad in ["", "alias/", "aws/s3", "alias/aws/mine", "sp ace", "é"] {
            assert!(checked_alias(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn keys_seal_for_their_id_and_context_and_survive_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::open(&dir.path().join("meta.redb")).unwrap();
        let master = KeyEncryptionKey::random().unwrap();
        let kms = KmsKeys::load(&store, &master).unwrap();
        let app = kms.create(&store, &master, "app", 1).unwrap();
        assert!(
            kms.create(&store, &master, "alias/app", 2).is_err(),
            "alias taken"
        );
        let default = kms.resolve(&store, &master, None, 3).unwrap();
        assert_ne!(default, app.id);
        assert_eq!(
            kms.resolve(&store, &master, None, 4).unwrap(),
            default,
            "made once"
        );
        for named in [
            app.id.clone(),
            format!("alias/{}", app.alias),
            format!("arn:aws:kms:r:a:key/{}", app.id),
        ] {
            assert_eq!(
                kms.resolve(&store, &master, Some(&named), 5).unwrap(),
                app.id
            );
        }
        assert!(matches!(
            kms.resolve(&store, &master, Some("alias/nope"), 6),
            Err(MetaError::KmsKeyNotFound(_))
        ));
        let data = DataKey::random().unwrap();
        let sealed = kms.seal(&app.id, &data, Some("ctx")).unwrap();
        assert_eq!(
            kms.open(&app.id, &sealed, Some("ctx")).unwrap().as_bytes(),
            data.as_bytes()
        );
        assert!(kms.open(&app.id, &sealed, None).is_err(), "another context");
        assert!(
            kms.open(&default, &sealed, Some("ctx")).is_err(),
            "another key"
        );
        let again = KmsKeys::load(&store, &master).unwrap();
        assert_eq!(again.list().len(), 2);
        assert_eq!(
            again
                .open(&app.id, &sealed, Some("ctx"))
                .unwrap()
                .as_bytes(),
            data.as_bytes()
        );
        let other_master = KeyEncryptionKey::random().unwrap();
        assert!(KmsKeys::load(&store, &other_master).is_err());
    }
}
