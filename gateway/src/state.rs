//! What every request handler shares: the meta handle, the block store
//! client, the credential caches and the gateway settings.

use crate::auth::cache::Credentials;
use crate::download::GetMemory;
use crate::readers::ReaderCache;
use crate::upload_slots::UploadSlots;
use crate::GatewayConfig;
use block_client::StoreClient;
use meta_api::MetaClient;

/// State shared by all requests of one gateway (behind an `Arc`).
pub struct AppState {
    /// Metadata service handle.
    pub meta: MetaClient,
    /// Access keys and signing keys, cached in front of meta.
    pub credentials: Credentials,
    /// Block store client for object data.
    pub store: StoreClient,
    /// Gateway settings.
    pub config: GatewayConfig,
    /// Readers shared by concurrent GETs of the same object version.
    pub readers: ReaderCache,
    /// The bound on object bodies streamed at once.
    pub uploads: UploadSlots,
    /// The bound on the bytes GET bodies hold at once.
    pub get_memory: GetMemory,
    /// Bucket policies, parsed.
    pub bucket_policies: crate::policies::PolicyCache,
    /// User policies, parsed.
    pub user_policies: crate::policies::PolicyCache,
    /// The policies of limited access keys, built from their limits.
    pub key_policies: crate::policies::PolicyCache,
}
