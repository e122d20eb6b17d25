//! Mutual TLS between the processes of one cluster: a server config that
//! demands a client certificate from the cluster CA, and a client config
//! that presents the process's own certificate and trusts only that CA.
//! TLS 1.3 only: every peer is Tessera of the same release line.

use crate::pem::{read_certs, read_key, TlsError};
use rustls::pki_types::ServerName;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio_rustls::{client, server, TlsAcceptor, TlsConnector};

/// A connection accepted with mutual TLS.
pub type AcceptedTls = server::TlsStream<TcpStream>;

/// The three PEM files of a process of a TLS cluster.
#[derive(Clone, Debug)]
pub struct ClusterTlsFiles {
    /// The cluster CA's certificate: the only issuer trusted on either end.
    pub ca: PathBuf,
    /// This process's certificate (chain), issued by the cluster CA; it names
    /// the hosts others dial this process at.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

/// What a process of a TLS cluster accepts and dials links with.
pub struct ClusterTls {
    acceptor: TlsAcceptor,
    connector: TlsConnector,
}

impl std::fmt::Debug for ClusterTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterTls").finish_non_exhaustive()
    }
}

impl ClusterTls {
    /// Reads `files`; an error names the file and what is wrong with it.
    pub fn load(files: &ClusterTlsFiles) -> Result<Arc<Self>, TlsError> {
        let mut roots = RootCertStore::empty();
        for ca in read_certs(&files.ca)? {
            roots.add(ca).map_err(|e| TlsError::Authority {
                path: files.ca.clone(),
                reason: e.to_string(),
            })?;
        }
        let roots = Arc::new(roots);
        let chain = read_certs(&files.cert)?;
        let key = read_key(&files.key)?;
        let versions = &[&rustls::version::TLS13];
        let verifier =
            WebPkiClientVerifier::builder_with_provider(roots.clone(), crate::provider())
                .build()
                .map_err(|e| TlsError::Authority {
                    path: files.ca.clone(),
                    reason: e.to_string(),
                })?;
        let server = ServerConfig::builder_with_provider(crate::provider())
            .with_protocol_versions(versions)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())?;
        let client = ClientConfig::builder_with_provider(crate::provider())
            .with_protocol_versions(versions)?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)?;
        Ok(Arc::new(Self {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            connector: TlsConnector::from(Arc::new(client)),
        }))
    }

    /// Opens TLS on `tcp`, dialled at `addr` (`host:port`): the peer must
    /// prove a certificate of the cluster CA that names `host`.
    pub async fn connect(
        &self,
        tcp: TcpStream,
        addr: &str,
    ) -> io::Result<client::TlsStream<TcpStream>> {
        let name = server_name(addr)?;
        self.connector.connect(name, tcp).await
    }

    /// Accepts TLS on `tcp`: the peer must present a certificate of the
    /// cluster CA.
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<AcceptedTls> {
        self.acceptor.accept(tcp).await
    }
}

/// The name a peer dialled at `addr` must prove: the host part of
/// `host:port`, an IP address (IPv6 in brackets) or a DNS name.
fn server_name(addr: &str) -> io::Result<ServerName<'static>> {
    let host = match addr.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host,
        _ => addr,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{addr:?} names no host a certificate can prove: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dialled_host_is_the_name_to_prove() {
        let name = |addr: &str| server_name(addr).map(|n| n.to_str().into_owned());
        assert_eq!(name("127.0.0.1:7000").unwrap(), "127.0.0.1");
        assert_eq!(name("[::1]:7000").unwrap(), "::1");
        assert_eq!(name("dn1:7000").unwrap(), "dn1");
        assert_eq!(name("meta.example").unwrap(), "meta.example");
        assert!(name("bad host!:1").is_err());
    }
}
