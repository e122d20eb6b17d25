//! The data keys of encrypted bodies (SSE-S3): a gateway's commit (of an
//! object, or of a multipart upload's creation) hands meta the data key,
//! which meta seals under its master key before the record is stored; meta
//! opens it again for every read it answers (and for every part upload).
//! The master key lives in a file of its own in meta's data folder (mode
//! 0600), generated at first start; losing it loses every encrypted body.
//! So the store keeps a check value sealed under the key: a meta whose key
//! file is missing or is another key refuses to start, rather than start
//! with a new key and leave every encrypted body unreadable.

use crate::credentials::saved_secret;
use crate::kms::KmsKeys;
use crate::store::db::{decode, Store, StoreError};
use crate::store::tables::{KEY_CHECKS, OBJECTS, UPLOADS, VERSIONS};
use meta_api::{
    Encryption, EncryptionMode, MetaError, ObjectAttributes, ObjectRecord, UploadRecord,
};
use redb::ReadableTable;
use sse::{DataKey, KeyEncryptionKey};
use std::path::Path;

/// The master key's file in meta's data folder.
pub const MASTER_KEY_FILE: &str = "sse-master-key";

/// Binds a sealed key to its use.
const CONTEXT: &[u8] = b"tessera sse-s3 v1";

/// The master key's entry in `KEY_CHECKS`.
const MASTER_CHECK: &str = "sse-master-key";
/// Binds the check value to its use.
const CHECK_CONTEXT: &[u8] = b"tessera master key check v1";

/// The master key saved in `dir`, else a new one saved there now, checked
/// against the value `store` holds sealed under it (stored at first start).
pub(crate) fn load_master_key(dir: &Path, store: &Store) -> Result<KeyEncryptionKey, MetaError> {
    let file = dir.join(MASTER_KEY_FILE);
    let check = store.read(|txn| {
        let table = txn.open_table(KEY_CHECKS)?;
        let value = table.get(MASTER_CHECK)?.map(|v| v.value().to_vec());
        Ok(value)
    })?;
    // A store from before the check value existed has none: it is refused
    // too when its key file is gone and it holds encrypted records.
    if !file.exists() && (check.is_some() || holds_encrypted_records(store)?) {
        return Err(StoreError::Corrupt(format!(
            "the encryption master key {} is missing, and this store's data keys are sealed \
             under it: restore the file from a backup (a new key would open no encrypted body)",
            file.display()
        ))
        .into());
    }
    let text = saved_secret(&file, "encryption master key", || {
        let key = KeyEncryptionKey::random().expect("the system has random bytes");
        key.to_hex().to_string()
    })?;
    let key = KeyEncryptionKey::from_hex(&text).map_err(|_| {
        StoreError::Corrupt(format!(
            "{} does not hold a master key (64 hex digits)",
            file.display()
        ))
    })?;
    // Without one, the start-up writes store it (`record_master_check`).
    if let Some(sealed) = check {
        key.open(&sealed, CHECK_CONTEXT).map_err(|_| {
            StoreError::Corrupt(format!(
                "{} is not the master key this store's data keys are sealed under",
                file.display()
            ))
        })?;
    }
    Ok(key)
}

/// Stores a value sealed under `key` when the store holds none yet, so that
/// a later start with another key file is refused.
pub(crate) fn record_master_check(store: &Store, key: &KeyEncryptionKey) -> Result<(), MetaError> {
    let present = store.read(|txn| Ok(txn.open_table(KEY_CHECKS)?.get(MASTER_CHECK)?.is_some()))?;
    if present {
        return Ok(());
    }
    let value = DataKey::from_bytes(&crate::entropy::bytes::<32>())
        .map_err(|e| MetaError::Store(e.to_string()))?;
    let sealed = key
        .seal(&value, CHECK_CONTEXT)
        .map_err(|e| MetaError::Store(e.to_string()))?;
    store.write(|txn| {
        // Read again inside the transaction: writes are serialised.
        let mut checks = txn.open_table(KEY_CHECKS)?;
        if checks.get(MASTER_CHECK)?.is_none() {
            checks.insert(MASTER_CHECK, sealed.as_slice())?;
        }
        Ok(())
    })
}

/// Whether any object, version or upload record is encrypted (read once,
/// only when a store without a check value has lost its key file).
fn holds_encrypted_records(store: &Store) -> Result<bool, MetaError> {
    store.read(|txn| {
        for table in [OBJECTS, VERSIONS] {
            for entry in txn.open_table(table)?.iter()? {
                let record: ObjectRecord = decode(entry?.1.value())?;
                if record.attributes.encryption.is_some() {
                    return Ok(true);
                }
            }
        }
        for entry in txn.open_table(UPLOADS)?.iter()? {
            let upload: UploadRecord = decode(entry?.1.value())?;
            if upload.attributes.encryption.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    })
}

fn data_key(encryption: &Encryption) -> Result<DataKey, MetaError> {
    let hex = encryption
        .data_key
        .as_deref()
        .ok_or_else(|| MetaError::InvalidRequest("an encrypted body needs its data key".into()))?;
    let bytes = hex::decode(hex)
        .map_err(|_| MetaError::InvalidRequest("a data key is 64 hex digits".into()))?;
    DataKey::from_bytes(&bytes)
        .map_err(|_| MetaError::InvalidRequest("a data key is 32 bytes".into()))
}

/// The keys that seal the data keys of encrypted bodies: meta's master key
/// (SSE-S3) and the keys of the key service (SSE-KMS).
pub(crate) struct ObjectKeys {
    /// Meta's master key.
    pub(crate) master: KeyEncryptionKey,
    /// The built-in key service.
    pub(crate) kms: KmsKeys,
}

impl ObjectKeys {
    /// The master key saved in `dir` (see [`load_master_key`]) and the KMS
    /// keys `store` holds sealed under it.
    pub(crate) fn load(dir: &Path, store: &Store) -> Result<Self, MetaError> {
        let master = load_master_key(dir, store)?;
        let kms = KmsKeys::load(store, &master)?;
        Ok(Self { master, kms })
    }

    /// Seals the data key a commit carries, so that only the sealed key is
    /// stored.
    pub(crate) fn seal_for_store(
        &self,
        attributes: &mut ObjectAttributes,
    ) -> Result<(), MetaError> {
        let Some(encryption) = attributes.encryption.as_mut() else {
            return Ok(());
        };
        if encryption.mode == EncryptionMode::Customer {
            // The gateway sealed it under the client's key, which meta never sees.
            if encryption.data_key.is_some() || encryption.sealed_key.is_empty() {
                return Err(MetaError::InvalidRequest(
                    "an SSE-C body comes with its data key sealed, and only sealed".into(),
                ));
            }
            return Ok(());
        }
        let key = data_key(encryption)?;
        let sealed = match (encryption.mode, &encryption.kms_key_id) {
            (EncryptionMode::Kms, Some(id)) => {
                self.kms.seal(id, &key, encryption.kms_context.as_deref())?
            }
            (EncryptionMode::Kms, None) => {
                return Err(MetaError::InvalidRequest(
                    "an SSE-KMS body names its KMS key".into(),
                ))
            }
            _ => self
                .master
                .seal(&key, CONTEXT)
                .map_err(|e| MetaError::Store(format!("sealing a data key: {e}")))?,
        };
        encryption.sealed_key = hex::encode(sealed);
        encryption.data_key = None;
        Ok(())
    }

    /// Opens the stored data key for a gateway's read.
    pub(crate) fn open_for_reading(
        &self,
        attributes: &mut ObjectAttributes,
    ) -> Result<(), StoreError> {
        let Some(encryption) = attributes.encryption.as_mut() else {
            return Ok(());
        };
        if encryption.mode == EncryptionMode::Customer {
            return Ok(());
        }
        let sealed = hex::decode(&encryption.sealed_key)
            .map_err(|_| StoreError::Corrupt("a sealed data key is not hex".into()))?;
        let key = match (encryption.mode, &encryption.kms_key_id) {
            (EncryptionMode::Kms, Some(id)) => {
                self.kms
                    .open(id, &sealed, encryption.kms_context.as_deref())?
            }
            _ => self.master.open(&sealed, CONTEXT).map_err(|_| {
                StoreError::Corrupt("a data key does not open with this meta's master key".into())
            })?,
        };
        encryption.data_key = Some(hex::encode(key.as_bytes()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sealed_key_is_stored_and_it_opens_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::open(&dir.path().join("meta.redb")).unwrap();
        let master = load_master_key(dir.path(), &store).unwrap();
        let again = load_master_key(dir.path(), &store).unwrap();
        assert_eq!(master.to_hex(), again.to_hex(), "saved once, read back");
        let key = DataKey::random().unwrap();
        let mut attributes = ObjectAttributes {
            encryption: Some(Encryption {
                mode: EncryptionMode::S3,
                sealed_key: String::new(),
                customer_key_md5: None,
                kms_key_id: None,
                kms_context: None,
                data_key: Some(hex::encode(key.as_bytes())),
            }),
            ..Default::default()
        };
        let keys = ObjectKeys {
            kms: KmsKeys::load(&store, &master).unwrap(),
            master,
        };
        keys.seal_for_store(&mut attributes).unwrap();
        let stored = serde_json::to_string(&attributes).unwrap();
        assert!(!stored.contains(&hex::encode(key.as_bytes())));
        assert!(!stored.contains("data_key"));
        keys.open_for_reading(&mut attributes).unwrap();
        let opened = attributes.encryption.as_ref().unwrap().data_key.clone();
        assert_eq!(opened, Some(hex::encode(key.as_bytes())));
        let other = ObjectKeys {
            master: KeyEncryptionKey::random().unwrap(),
            kms: KmsKeys::load(&store, &keys.master).unwrap(),
        };
        assert!(other.open_for_reading(&mut attributes).is_err());
        let mut keyless = ObjectAttributes {
            encryption: Some(Encryption {
                mode: EncryptionMode::S3,
                sealed_key: String::new(),
                customer_key_md5: None,
                kms_key_id: None,
                kms_context: None,
                data_key: None,
            }),
            ..Default::default()
        };
        assert!(keys.seal_for_store(&mut keyless).is_err());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(MASTER_KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "the master key file is private");
        }
    }

    #[test]
    fn kms_bodies_are_sealed_under_their_key_and_context() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::open(&dir.path().join("meta.redb")).unwrap();
        let keys = ObjectKeys::load(dir.path(), &store).unwrap();
        let app = keys.kms.create(&store, &keys.master, "app", 1).unwrap();
        let data = DataKey::random().unwrap();
        let kms = |key: &str, context: Option<&str>| ObjectAttributes {
            encryption: Some(Encryption {
                mode: EncryptionMode::Kms,
                sealed_key: String::new(),
                customer_key_md5: None,
                kms_key_id: Some(key.to_string()),
                kms_context: context.map(str::to_string),
                data_key: Some(hex::encode(data.as_bytes())),
            }),
            ..Default::default()
        };
        let arn = format!("arn:aws:kms:us-east-1:000000000000:key/{}", app.id);
        let mut attributes = kms(&arn, Some("e30="));
        keys.seal_for_store(&mut attributes).unwrap();
        let sealed = attributes.encryption.clone().unwrap();
        assert!(sealed.data_key.is_none() && !sealed.sealed_key.is_empty());
        keys.open_for_reading(&mut attributes).unwrap();
        let opened = attributes.encryption.as_ref().unwrap().data_key.clone();
        assert_eq!(opened, Some(hex::encode(data.as_bytes())));
        let mut other_context = ObjectAttributes {
            encryption: Some(Encryption {
                kms_context: Some("e30K".into()),
                ..sealed.clone()
            }),
            ..Default::default()
        };
        assert!(keys.open_for_reading(&mut other_context).is_err());
        let master_only = ObjectKeys {
            master: keys.master.clone(),
            kms: KmsKeys::load(&store, &keys.master).unwrap(),
        };
        let mut as_s3 = ObjectAttributes {
            encryption: Some(Encryption {
                mode: EncryptionMode::S3,
                ..sealed
            }),
            ..Default::default()
        };
        assert!(
            master_only.open_for_reading(&mut as_s3).is_err(),
            "a KMS-sealed key does not open as SSE-S3"
        );
        assert!(keys.seal_for_store(&mut kms("no-such-key", None)).is_err());
        assert!(keys.seal_for_store(&mut kms("alias/app", None)).is_err());
    }

    #[test]
    fn a_missing_or_other_master_key_is_refused_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::open(&dir.path().join("meta.redb")).unwrap();
        let file = dir.path().join(MASTER_KEY_FILE);
        let master = load_master_key(dir.path(), &store).unwrap();
        record_master_check(&store, &master).unwrap();
        std::fs::remove_file(&file).unwrap();
        let missing = load_master_key(dir.path(), &store).unwrap_err();
        assert!(missing.to_string().contains("missing"), "{missing}");
        assert!(!file.exists(), "no new key was made in its place");
        let other = KeyEncryptionKey::random().unwrap();
        std::fs::write(&file, other.to_hex().as_bytes()).unwrap();
        let wrong = load_master_key(dir.path(), &store).unwrap_err();
        assert!(wrong.to_string().contains("not the master key"), "{wrong}");
        std::fs::write(&file, master.to_hex().as_bytes()).unwrap();
        assert_eq!(
            load_master_key(dir.path(), &store).unwrap().to_hex(),
            master.to_hex(),
            "the right key is taken back"
        );
        // A store from before the check value: refused only when it holds
        // encrypted records.
        let older = tempfile::tempdir().unwrap();
        let store = crate::store::open(&older.path().join("meta.redb")).unwrap();
        let put = |key: &str, encryption: Option<Encryption>| {
            let mut record = ObjectRecord::new(
                "b",
                key,
                "e",
                proto::ReplicationConfig::Replicated { replicas: 1 },
                Vec::new(),
            );
            // A tag and user metadata named like the field prove nothing.
            record
                .attributes
                .tags
                .insert("encryption".into(), "x".into());
            record.user_metadata.insert("encryption".into(), "x".into());
            record.attributes.encryption = encryption;
            store
                .write(|txn| {
                    let mut objects = txn.open_table(OBJECTS)?;
                    let bytes = crate::store::db::encode(&record)?;
                    objects.insert(format!("b/{key}").as_bytes(), bytes.as_slice())?;
                    Ok(())
                })
                .unwrap();
        };
        put("clear", None);
        let clear = tempfile::tempdir().unwrap();
        std::fs::copy(
            older.path().join("meta.redb"),
            clear.path().join("meta.redb"),
        )
        .unwrap();
        put(
            "k",
            Some(Encryption {
                mode: EncryptionMode::S3,
                sealed_key: "00".into(),
                customer_key_md5: None,
                kms_key_id: None,
                kms_context: None,
                data_key: None,
            }),
        );
        let refused = load_master_key(older.path(), &store).unwrap_err();
        assert!(refused.to_string().contains("missing"), "{refused}");
        let clear_store = crate::store::open(&clear.path().join("meta.redb")).unwrap();
        assert!(
            load_master_key(clear.path(), &clear_store).is_ok(),
            "nothing encrypted"
        );
    }
}
