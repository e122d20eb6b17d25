//! TLS for Tessera: reading PEM certificates and keys ([`pem`]), the
//! cluster's own certificate authority and the certificates it issues to
//! each process ([`certs`]), and the mutual-TLS links that meta, datanodes,
//! gateways and the admin tool open to each other ([`cluster`], [`link`]).
//!
//! Every process of a cluster holds the CA certificate and a certificate of
//! its own signed by it. A link is accepted only when both ends present such
//! a certificate, and the dialling end checks that the certificate names the
//! host it dialled. What a peer may do once connected is decided above the
//! link, by its credential (meta RPC) or block token (datanode).

pub mod certs;
pub mod cluster;
pub mod link;
pub mod pem;
pub mod trust;

pub use cluster::{AcceptedTls, ClusterTls, ClusterTlsFiles};
pub use link::Link;
pub use pem::TlsError;

/// The crypto provider of every TLS config Tessera builds: rustls with ring.
pub fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}
