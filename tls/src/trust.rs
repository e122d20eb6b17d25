//! Clients that trust what an operator handed them: the certificates of a
//! PEM file as roots, and each of them also as itself (pinned). A
//! self-signed server certificate made by `openssl req -x509` says it is a
//! CA, which path validation refuses for a server; pinned, it is accepted
//! when the server presents exactly that certificate, and only then.

use crate::pem::{read_certs, TlsError};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use std::path::Path;
use std::sync::Arc;

/// Accepts a server certificate that is one of the pinned ones, else one
/// that chains to the roots and names the server.
#[derive(Debug)]
struct PinnedOrChained {
    pinned: Vec<CertificateDer<'static>>,
    chained: Arc<WebPkiServerVerifier>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinnedOrChained {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self
            .pinned
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            return Ok(ServerCertVerified::assertion());
        }
        self.chained
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

fn verifier_trusting(path: &Path) -> Result<PinnedOrChained, TlsError> {
    let pinned = read_certs(path)?;
    let authority = |e: &dyn std::fmt::Display| TlsError::Authority {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in &pinned {
        roots.add(cert.clone()).map_err(|e| authority(&e))?;
    }
    let provider = crate::provider();
    let chained = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| authority(&e))?;
    Ok(PinnedOrChained {
        pinned,
        chained,
        provider,
    })
}

/// A client config trusting the certificates of the PEM file at `path`:
/// as roots, and each as a pinned server certificate.
pub fn client_config_trusting(path: &Path) -> Result<ClientConfig, TlsError> {
    let verifier = verifier_trusting(path)?;
    Ok(
        ClientConfig::builder_with_provider(verifier.provider.clone())
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::Authority;
    use rustls::pki_types::pem::PemObject;
    use std::time::Duration;

    const DAY: Duration = Duration::from_secs(86_400);

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    fn trusting(pem: &str) -> PinnedOrChained {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trust.pem");
        std::fs::write(&path, pem).unwrap();
        verifier_trusting(&path).unwrap()
    }

    fn accepts(verifier: &PinnedOrChained, cert: &CertificateDer<'_>, name: &str) -> bool {
        let name = ServerName::try_from(name.to_string()).unwrap();
        verifier
            .verify_server_cert(cert, &[], &name, &[], UnixTime::now())
            .is_ok()
    }

    #[test]
    fn a_certificate_chained_to_the_roots_must_name_the_server() {
        let ca = Authority::create("test ca", DAY).unwrap();
        let node = ca.issue("gw", &["gateway".into()], DAY).unwrap();
        let verifier = trusting(ca.cert_pem());
        assert!(accepts(&verifier, &der(&node.cert_pem), "gateway"));
        assert!(!accepts(&verifier, &der(&node.cert_pem), "elsewhere"));
        let stranger = Authority::create("other ca", DAY).unwrap();
        let foreign = stranger.issue("gw", &["gateway".into()], DAY).unwrap();
        assert!(!accepts(&verifier, &der(&foreign.cert_pem), "gateway"));
    }

    #[test]
    fn a_pinned_certificate_is_accepted_as_itself_and_no_other() {
        // A CA certificate presented by a server, as `openssl req -x509`
        // makes them: path validation refuses it, the pin accepts it.
        let ca = Authority::create("self-signed", DAY).unwrap();
        let verifier = trusting(ca.cert_pem());
        assert!(accepts(&verifier, &der(ca.cert_pem()), "anything"));
        let other = Authority::create("self-signed", DAY).unwrap();
        assert!(!accepts(&verifier, &der(other.cert_pem()), "anything"));
        // A pinned server certificate that names other hosts.
        let node = ca.issue("gw", &["gateway".into()], DAY).unwrap();
        let pinned = trusting(&node.cert_pem);
        assert!(accepts(&pinned, &der(&node.cert_pem), "127.0.0.1"));
        let sibling = ca.issue("gw", &["gateway".into()], DAY).unwrap();
        assert!(!accepts(&pinned, &der(&sibling.cert_pem), "gateway"));
    }
}
