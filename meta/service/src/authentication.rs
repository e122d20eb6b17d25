//! Who a meta RPC connection is ([`meta_api::principal`]): the admin token,
//! or a datanode's or gateway's credential minted with meta's credential
//! key and not older than its holder's current generation.

use crate::store::tables::CREDENTIAL_GENERATIONS;
use crate::store::Store;
use meta_api::principal::{Credential, CredentialKey, Principal};
use meta_api::MetaError;
use redb::ReadableTable;
use subtle::ConstantTimeEq;

/// Checks handshake secrets and mints credentials.
pub(crate) struct Authenticator {
    admin_token: String,
    key: CredentialKey,
}

/// Why a handshake secret was refused (said to the peer and in meta's log).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Neither the admin token nor a credential this meta minted.
    #[error("wrong token: neither the admin token nor a credential minted by this meta")]
    Unknown,
    /// A genuine credential of a generation its holder has rotated past.
    #[error("this credential was rotated: ask the operator for the current one")]
    Rotated,
}

impl Authenticator {
    pub(crate) fn new(admin_token: String, key: CredentialKey) -> Authenticator {
        Authenticator { admin_token, key }
    }

    /// The admin token (the [`Principal::Admin`] secret).
    pub(crate) fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// The principal `secret` proves. The admin token is compared in constant
    /// time; a credential's MAC is checked before the store is read.
    pub(crate) fn authenticate(
        &self,
        store: &Store,
        secret: &str,
    ) -> Result<Result<Principal, Refusal>, MetaError> {
        if !secret.is_empty() && bool::from(secret.as_bytes().ct_eq(self.admin_token.as_bytes())) {
            return Ok(Ok(Principal::Admin));
        }
        let Some(credential) = Credential::parse(secret).filter(|c| c.verify(&self.key)) else {
            return Ok(Err(Refusal::Unknown));
        };
        // Credentials minted offline with the key (docker-compose's) may be
        // ahead of the stored generation; only older ones are refused.
        if credential.generation < self.generation(store, &credential.principal)? {
            return Ok(Err(Refusal::Rotated));
        }
        Ok(Ok(credential.principal))
    }

    /// The credential of `principal` at its current generation, or at the
    /// next one with `rotate` (from then on the older ones are refused).
    pub(crate) fn mint(
        &self,
        store: &Store,
        principal: Principal,
        rotate: bool,
    ) -> Result<Credential, MetaError> {
        let key = generation_key(&principal)?;
        let generation = if rotate {
            store.write(|txn| {
                let mut table = txn.open_table(CREDENTIAL_GENERATIONS)?;
                let next = table
                    .get(key.as_str())?
                    .map_or(0, |g| g.value())
                    .saturating_add(1);
                table.insert(key.as_str(), next)?;
                Ok(next)
            })?
        } else {
            self.generation(store, &principal)?
        };
        let credential = Credential::mint(&self.key, principal, generation)
            .map_err(|e| MetaError::InvalidRequest(e.to_string()))?;
        tracing::info!(principal = %credential.principal, generation, rotate, "credential minted");
        Ok(credential)
    }

    fn generation(&self, store: &Store, principal: &Principal) -> Result<u64, MetaError> {
        let key = generation_key(principal)?;
        store.read(|txn| {
            let table = txn.open_table(CREDENTIAL_GENERATIONS)?;
            Ok(table.get(key.as_str())?.map_or(0, |g| g.value()))
        })
    }
}

fn generation_key(principal: &Principal) -> Result<String, MetaError> {
    principal
        .generation_key()
        .ok_or_else(|| MetaError::InvalidRequest("the admin has a token, not a credential".into()))
}
