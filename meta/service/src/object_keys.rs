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
use crate::store::db::{Store, StoreError};
use crate::store::tables::KEY_CHECKS;
use meta_api::{Encryption, EncryptionMode, MetaError, ObjectAttributes};
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
    if check.is_some() && !file.exists() {
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
    match check {
        Some(sealed) => {
            key.open(&sealed, CHECK_CONTEXT).map_err(|_| {
                StoreError::Corrupt(format!(
                    "{} is not the master key this store's data keys are sealed under",
                    file.display()
                ))
            })?;
        }
        None => {
            let value = DataKey::random().map_err(|e| MetaError::Store(e.to_string()))?;
            let sealed = key
                .seal(&value, CHECK_CONTEXT)
                .map_err(|e| MetaError::Store(e.to_string()))?;
            store.write(|txn| {
                txn.open_table(KEY_CHECKS)?
                    .insert(MASTER_CHECK, sealed.as_slice())?;
                Ok(())
            })?;
        }
    }
    Ok(key)
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

/// Seals the data key a commit carries, so that only the sealed key is
/// stored.
pub(crate) fn seal_for_store(
    master: &KeyEncryptionKey,
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
    let sealed = master
        .seal(&key, CONTEXT)
        .map_err(|e| MetaError::Store(format!("sealing a data key: {e}")))?;
    encryption.sealed_key = hex::encode(sealed);
    encryption.data_key = None;
    Ok(())
}

/// Opens the stored data key for a gateway's read.
pub(crate) fn open_for_reading(
    master: &KeyEncryptionKey,
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
    let key = master.open(&sealed, CONTEXT).map_err(|_| {
        StoreError::Corrupt("a data key does not open with this meta's master key".into())
    })?;
    encryption.data_key = Some(hex::encode(key.as_bytes()));
    Ok(())
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
                data_key: Some(hex::encode(key.as_bytes())),
            }),
            ..Default::default()
        };
        seal_for_store(&master, &mut attributes).unwrap();
        let stored = serde_json::to_string(&attributes).unwrap();
        assert!(!stored.contains(&hex::encode(key.as_bytes())));
        assert!(!stored.contains("data_key"));
        open_for_reading(&master, &mut attributes).unwrap();
        let opened = attributes.encryption.as_ref().unwrap().data_key.clone();
        assert_eq!(opened, Some(hex::encode(key.as_bytes())));
        let other = KeyEncryptionKey::random().unwrap();
        assert!(open_for_reading(&other, &mut attributes).is_err());
        let mut keyless = ObjectAttributes {
            encryption: Some(Encryption {
                mode: EncryptionMode::S3,
                sealed_key: String::new(),
                customer_key_md5: None,
                data_key: None,
            }),
            ..Default::default()
        };
        assert!(seal_for_store(&master, &mut keyless).is_err());
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
    fn a_missing_or_other_master_key_is_refused_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::open(&dir.path().join("meta.redb")).unwrap();
        let file = dir.path().join(MASTER_KEY_FILE);
        let master = load_master_key(dir.path(), &store).unwrap();
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
    }
}
