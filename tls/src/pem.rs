//! Certificates and private keys from PEM files, with errors that name the
//! file and what is wrong with it.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};

/// Why certificates or keys could not be used.
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
    /// rustls refused the certificates or key (a key that does not match the
    /// certificate, say).
    #[error("certificate and key: {0}")]
    Config(#[from] rustls::Error),
    /// The CA file holds nothing rustls can verify peers against.
    #[error("{}: not a usable CA certificate: {reason}", path.display())]
    Authority {
        /// The CA file.
        path: PathBuf,
        /// What rustls said.
        reason: String,
    },
}

fn file_error(path: &Path, reason: impl ToString) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// Every certificate of a PEM file, in order; at least one.
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(path, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_error(path, e))?;
    if certs.is_empty() {
        return Err(file_error(path, "no certificate in the file"));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| file_error(path, e))
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
        for path in [&garbage, &missing] {
            let err = read_certs(path).unwrap_err();
            assert!(
                err.to_string().contains(&path.display().to_string()),
                "{err}"
            );
            let err = read_key(path).unwrap_err();
            assert!(
                err.to_string().contains(&path.display().to_string()),
                "{err}"
            );
        }
        assert!(read_certs(&garbage)
            .unwrap_err()
            .to_string()
            .contains("no certificate"));
    }
}
