//! HTTPS on the S3 port: rustls (with ring) serving the certificate chain
//! and key of two PEM files, read again on [`Tls::reload`] (the binary calls
//! it on SIGHUP) so that a renewed certificate takes effect without a
//! restart. Connections already open keep the certificate they began with;
//! a reload that fails keeps the one in use.

use parking_lot::RwLock;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// Where the certificate chain and its key are.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// PEM certificate chain, the server's certificate first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Why the certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no usable PEM object.
    #[error("{}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the pair (a key that does not match the certificate, say).
    #[error("certificate and key: {0}")]
    Config(#[from] rustls::Error),
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

fn file_error(path: &Path, reason: impl ToString) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| file_error(&files.cert, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_error(&files.cert, e))?;
    if certs.is_empty() {
        return Err(file_error(&files.cert, "no certificate in the file"));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| file_error(&files.key, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unusable_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not a certificate").unwrap();
        let missing = dir.path().join("missing.pem");
        for (cert, key, named) in [
            (&missing, &garbage, &missing),
            (&garbage, &garbage, &garbage),
        ] {
            let files = TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            };
            let err = Tls::load(files).err().expect("refused");
            assert!(
                err.to_string().contains(&named.display().to_string()),
                "{err}"
            );
        }
    }
}
