//! The cluster's certificate authority and the certificates it issues
//! (rcgen, ECDSA P-256): one CA per cluster, one certificate per process,
//! each valid both as a TLS server (it names the hosts peers dial) and as a
//! TLS client, so the same pair serves every link a process opens or accepts.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use std::time::Duration;
use time::OffsetDateTime;

/// How far back a new certificate's validity starts, for clocks a little
/// behind the one that issued it.
const BACKDATE: Duration = Duration::from_secs(3600);
/// Organisation named in every certificate Tessera issues.
const ORGANISATION: &str = "Tessera cluster";

/// Why a certificate could not be made or the CA could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen refused (a host that is neither an IP address nor a DNS name,
    /// a PEM file that is not a certificate or key, ...).
    #[error("{0}")]
    Rcgen(#[from] rcgen::Error),
    /// The validity asked for does not fit a certificate's dates.
    #[error("validity of {0:?} is out of range")]
    Validity(Duration),
    /// A certificate must name at least one host to be dialled at.
    #[error("certificate {0:?} names no host")]
    NoHost(String),
    /// A host that no client could dial: neither an IP address nor a DNS name.
    #[error("{0:?} is neither an IP address nor a DNS name")]
    BadHost(String),
}

/// A certificate and its private key, both PEM.
pub struct Issued {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key (PKCS#8): keep it 0600.
    pub key_pem: String,
}

/// A cluster CA able to sign node certificates.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

fn validity(params: &mut CertificateParams, valid_for: Duration) -> Result<(), CertError> {
    let now = OffsetDateTime::now_utc();
    let span = time::Duration::try_from(valid_for).map_err(|_| CertError::Validity(valid_for))?;
    params.not_before = now - BACKDATE;
    params.not_after = now
        .checked_add(span)
        .ok_or(CertError::Validity(valid_for))?;
    Ok(())
}

fn names(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, ORGANISATION);
    dn.push(DnType::CommonName, common_name);
    dn
}

impl Authority {
    /// A new CA called `name`, valid for `valid_for` from now.
    pub fn create(name: &str, valid_for: Duration) -> Result<Self, CertError> {
        let mut params = CertificateParams::default();
        params.distinguished_name = names(name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        validity(&mut params, valid_for)?;
        let key = KeyPair::generate()?;
        let cert_pem = params.self_signed(&key)?.pem();
        Ok(Self {
            issuer: Issuer::new(params, key),
            cert_pem,
        })
    }

    /// The CA of a certificate and its key, both PEM (as written by
    /// [`Authority::create`]), to issue more certificates with.
    pub fn load(cert_pem: &str, key_pem: &str) -> Result<Self, CertError> {
        let key = KeyPair::from_pem(key_pem)?;
        Ok(Self {
            issuer: Issuer::from_ca_cert_pem(cert_pem, key)?,
            cert_pem: cert_pem.to_string(),
        })
    }

    /// The CA certificate every process trusts.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA's private key: whoever holds it can admit processes to the
    /// cluster, so it stays with the operator, not on the nodes.
    pub fn key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
    }

    /// A certificate for the process `name` reached at `hosts` (DNS names or
    /// IP addresses), valid for `valid_for` from now.
    pub fn issue(
        &self,
        name: &str,
        hosts: &[String],
        valid_for: Duration,
    ) -> Result<Issued, CertError> {
        if hosts.is_empty() {
            return Err(CertError::NoHost(name.to_string()));
        }
        // What a client will check the certificate against, parsed the same way.
        if let Some(bad) = hosts
            .iter()
            .find(|h| rustls::pki_types::ServerName::try_from(h.as_str()).is_err())
        {
            return Err(CertError::BadHost(bad.clone()));
        }
        let mut params = CertificateParams::new(hosts.to_vec())?;
        params.distinguished_name = names(name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        validity(&mut params, valid_for)?;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn a_loaded_ca_issues_like_the_one_created() {
        let ca = Authority::create("test CA", DAY).unwrap();
        let again = Authority::load(ca.cert_pem(), &ca.key_pem()).unwrap();
        assert_eq!(again.cert_pem(), ca.cert_pem());
        let issued = again
            .issue("dn1", &["127.0.0.1".into(), "dn1".into()], DAY)
            .unwrap();
        assert!(issued.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(issued.key_pem.contains("PRIVATE KEY"));
    }

    #[test]
    fn a_certificate_names_a_host() {
        let ca = Authority::create("test CA", DAY).unwrap();
        assert!(matches!(ca.issue("x", &[], DAY), Err(CertError::NoHost(_))));
        assert!(matches!(
            ca.issue("x", &["ok".into(), "not a host!".into()], DAY),
            Err(CertError::BadHost(h)) if h == "not a host!"
        ));
        assert!(matches!(
            Authority::create("far", Duration::MAX),
            Err(CertError::Validity(_))
        ));
    }
}
