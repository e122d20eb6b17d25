//! Cluster CAs for tests of mutual TLS: each [`TestCa`] is a CA of its own
//! in a temporary folder, issuing certificates for 127.0.0.1 and localhost
//! as `tessera admin certs` would. Two `TestCa`s are two clusters. And the
//! host's own non-loopback address, where clear text must be refused.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;
use tls::certs::Authority;
use tls::{ClusterTls, ClusterTlsFiles};

const DAY: Duration = Duration::from_secs(86_400);

/// This host's address on its default route: not a loopback one, so that a
/// connection to it from this host is, by its addresses, from another host.
pub fn address_off_loopback() -> std::net::IpAddr {
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    // No packet is sent: connecting a UDP socket only picks its route.
    probe
        .connect("198.51.100.1:9")
        .expect("this test needs an interface besides loopback");
    let ip = probe.local_addr().unwrap().ip();
    assert!(!ip.is_loopback(), "{ip}");
    ip
}

/// A cluster CA and the folder its files are written to.
pub struct TestCa {
    dir: TempDir,
    authority: Authority,
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}

impl TestCa {
    /// A new CA, its certificate written to `ca.pem`.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let authority = Authority::create("test cluster CA", DAY).unwrap();
        std::fs::write(dir.path().join("ca.pem"), authority.cert_pem()).unwrap();
        Self { dir, authority }
    }

    /// The files of process `name`, with a certificate for `hosts`.
    pub fn files_for(&self, name: &str, hosts: &[&str]) -> ClusterTlsFiles {
        let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
        let issued = self.authority.issue(name, &hosts, DAY).unwrap();
        let path = |ext: &str| self.dir.path().join(format!("{name}.{ext}"));
        std::fs::write(path("pem"), issued.cert_pem).unwrap();
        std::fs::write(path("key"), issued.key_pem).unwrap();
        ClusterTlsFiles {
            ca: self.ca_file(),
            cert: path("pem"),
            key: path("key"),
        }
    }

    /// The files of process `name`, dialled at 127.0.0.1 or localhost.
    pub fn files(&self, name: &str) -> ClusterTlsFiles {
        self.files_for(name, &["127.0.0.1", "localhost"])
    }

    /// The loaded TLS settings of process `name` (see [`TestCa::files`]).
    pub fn tls(&self, name: &str) -> Arc<ClusterTls> {
        ClusterTls::load(&self.files(name)).unwrap()
    }

    /// The CA certificate every process of this cluster trusts.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }
}
