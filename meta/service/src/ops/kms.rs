//! The built-in key service's requests: keys made and listed by the admin,
//! and the key a write names resolved for a gateway (see `crate::kms`).

use crate::state::MetaState;
use meta_api::{
    CreateKmsKey, Handle, KmsKeyRecord, ListKmsKeys, MetaError, ResolveKmsKey, UnixMillis,
};

impl Handle<CreateKmsKey> for MetaState {
    fn handle(&self, request: CreateKmsKey, now: UnixMillis) -> Result<KmsKeyRecord, MetaError> {
        let keys = &self.object_keys;
        keys.kms
            .create(&self.store, &keys.master, &request.alias, now)
    }
}

impl Handle<ListKmsKeys> for MetaState {
    fn handle(&self, _: ListKmsKeys, _now: UnixMillis) -> Result<Vec<KmsKeyRecord>, MetaError> {
        Ok(self.object_keys.kms.list())
    }
}

impl Handle<ResolveKmsKey> for MetaState {
    fn handle(&self, request: ResolveKmsKey, now: UnixMillis) -> Result<String, MetaError> {
        let keys = &self.object_keys;
        keys.kms
            .resolve(&self.store, &keys.master, request.key.as_deref(), now)
    }
}
