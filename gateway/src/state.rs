//! What every request handler shares: the meta handle, the block store
//! client and the gateway settings.

use crate::GatewayConfig;
use blockstore::client::StoreClient;
use blockstore::meta::MetaClient;

/// State shared by all requests of one gateway (behind an `Arc`).
pub struct AppState {
    pub meta: MetaClient,
    pub store: StoreClient,
    pub config: GatewayConfig,
}
