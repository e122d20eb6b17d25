//! HTTPS on the S3 port: rustls (with ring) serving the certificate chain
//! and key of two PEM files, read again on [`Tls::reload`] (the binary calls
//! it on SIGHUP) so that a renewed certificate takes effect without a
//! restart. Connections already open keep the certificate they began with;
//! a reload that fails keeps the one in use.

use parking_lot::RwLock;
use rustls::ServerConfig;
use std::path::PathBuf;
use std::sync::Arc;
pub use tls::TlsError;
use tokio_rustls::TlsAcceptor;

/// Where the certificate chain and its key are.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// PEM certificate chain, the server's certificate first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// The S3 port's TLS settings, replaceable while it serves.
pub struct Tls {
    files: TlsFiles,
    acceptor: RwLock<TlsAcceptor>,
}

impl Tls {
    /// Reads `files`; an error names the file and what is wrong.
    pub fn load(files: TlsFiles) -> Result<Arc<Self>, TlsError> {
        let acceptor = acceptor(&files)?;
        Ok(Arc::new(Self {
            files,
            acceptor: RwLock::new(acceptor),
        }))
    }

    /// Reads the files again; new connections get the new certificate. On
    /// error the one in use stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let acceptor = acceptor(&self.files)?;
        *self.acceptor.write() = acceptor;
        Ok(())
    }

    /// What new connections are accepted with.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.acceptor.read().clone()
    }

    /// The files it serves.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }
}

fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, TlsError> {
    let certs = tls::pem::read_certs(&files.cert)?;
    let key = tls::pem::read_key(&files.key)?;
    let mut config = ServerConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
