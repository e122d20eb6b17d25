//! What every request handler shares: the meta handle, the block store
//! client and the gateway settings.

use crate::readers::ReaderCache;
use crate::upload_slots::UploadSlots;
use crate::GatewayConfig;
use blockstore::client::StoreClient;
use blockstore::meta::MetaClient;

/// State shared by all requests of one gateway (behind an `Arc`).
pub struct AppState {
    /// Metadata service handle.
    pub meta: MetaClient,
    /// Block store client for object data.
    pub store: StoreClient,
    /// Gateway settings.
    pub config: GatewayConfig,
    /// Readers shared by concurrent GETs of the same object version.
    pub readers: ReaderCache,
    /// The bound on object bodies streamed at once.
    pub uploads: UploadSlots,
}
