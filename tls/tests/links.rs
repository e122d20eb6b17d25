//! Mutual TLS links over real sockets: a peer of the cluster CA gets through
//! both ways; a peer of another CA, one without a certificate, one speaking
//! clear text and a server whose certificate names another host do not.

use std::sync::Arc;
use std::time::Duration;
use test_support::certs::{address_off_loopback, TestCa};
use tls::link::{DialError, Link};
use tls::ClusterTls;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

const TIMEOUT: Duration = Duration::from_secs(5);

/// A server accepting one connection: it echoes the first 5 bytes, and
/// returns how the accept went.
async fn echo_once(tls: Option<Arc<ClusterTls>>) -> (String, JoinHandle<Result<(), String>>) {
    echo_once_at("127.0.0.1", tls).await
}

/// [`echo_once`] listening on `ip`.
async fn echo_once_at(
    ip: &str,
    tls: Option<Arc<ClusterTls>>,
) -> (String, JoinHandle<Result<(), String>>) {
    let listener = TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut link = Link::accept(tcp, tls.as_deref(), TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        let mut buf = [0u8; 5];
        link.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
        link.write_all(&buf).await.map_err(|e| e.to_string())?;
        link.flush().await.map_err(|e| e.to_string())?;
        Ok(())
    });
    (addr, task)
}

/// Dials `addr` and sends "hello"; the echo, or why there was none.
async fn hello(addr: &str, tls: Option<&ClusterTls>) -> Result<Vec<u8>, String> {
    let mut link = Link::dial(addr, tls, TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    link.write_all(b"hello").await.map_err(|e| e.to_string())?;
    link.flush().await.map_err(|e| e.to_string())?;
    let mut buf = [0u8; 5];
    link.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
    Ok(buf.to_vec())
}

#[tokio::test]
async fn peers_of_one_ca_talk_both_ways() {
    let ca = TestCa::new();
    let (addr, server) = echo_once(Some(ca.tls("meta"))).await;
    let client = ca.tls("gateway");
    assert_eq!(hello(&addr, Some(&client)).await.unwrap(), b"hello");
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_client_of_another_ca_is_refused() {
    let (ours, theirs) = (TestCa::new(), TestCa::new());
    let (addr, server) = echo_once(Some(ours.tls("meta"))).await;
    // It trusts our CA, so it accepts our server; ours does not accept it.
    let files = tls::ClusterTlsFiles {
        ca: ours.ca_file(),
        ..theirs.files("intruder")
    };
    let intruder = ClusterTls::load(&files).unwrap();
    assert!(hello(&addr, Some(&intruder)).await.is_err());
    let refused = server.await.unwrap().unwrap_err();
    assert!(refused.contains("TLS handshake"), "{refused}");
}

#[tokio::test]
async fn a_server_of_another_ca_is_refused() {
    let (ours, theirs) = (TestCa::new(), TestCa::new());
    let (addr, server) = echo_once(Some(theirs.tls("meta"))).await;
    let err = hello(&addr, Some(&ours.tls("gateway"))).await.unwrap_err();
    assert!(
        err.contains("TLS handshake: invalid peer certificate"),
        "{err}"
    );
    assert!(server.await.unwrap().is_err());
}

#[tokio::test]
async fn a_server_certificate_must_name_the_host_dialled() {
    let ca = TestCa::new();
    let elsewhere = ClusterTls::load(&ca.files_for("meta", &["meta.example"])).unwrap();
    let (addr, server) = echo_once(Some(elsewhere)).await;
    let err = hello(&addr, Some(&ca.tls("gateway"))).await.unwrap_err();
    assert!(err.contains("not valid for name \"127.0.0.1\""), "{err}");
    assert!(server.await.unwrap().is_err());
}

#[tokio::test]
async fn clear_text_meets_tls_on_neither_side() {
    let ca = TestCa::new();
    let (addr, server) = echo_once(Some(ca.tls("meta"))).await;
    // The server may answer with an alert record before it hangs up: never the echo.
    assert_ne!(hello(&addr, None).await.ok(), Some(b"hello".to_vec()));
    assert!(server.await.unwrap().is_err());

    let (addr, server) = echo_once(None).await;
    let err = Link::dial(&addr, Some(&ca.tls("gateway")), TIMEOUT)
        .await
        .unwrap_err();
    assert!(matches!(err, DialError::Handshake(_)), "{err}");
    // The clear-text server echoed 5 bytes of the client hello, or saw it go.
    let _ = server.await.unwrap();
}

#[tokio::test]
async fn a_client_without_a_certificate_is_refused() {
    let ca = TestCa::new();
    let (addr, server) = echo_once(Some(ca.tls("meta"))).await;
    let mut roots = rustls::RootCertStore::empty();
    for cert in tls::pem::read_certs(&ca.ca_file()).unwrap() {
        roots.add(cert).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let exchange = async {
        let mut stream = connector.connect(name, tcp).await?;
        stream.write_all(b"hello").await?;
        stream.flush().await?;
        let mut buf = [0u8; 5];
        stream.read_exact(&mut buf).await
    };
    assert!(exchange.await.is_err());
    let refused = server.await.unwrap().unwrap_err();
    assert!(refused.contains("TLS handshake"), "{refused}");
}

#[tokio::test]
async fn clear_text_stays_on_loopback_and_tls_goes_anywhere() {
    let ip = address_off_loopback();
    let listener = TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    // Both ends refuse: the dialler before it sends a byte, the server for
    // dialers that would.
    let err = Link::dial(&addr, None, TIMEOUT).await.unwrap_err();
    assert!(matches!(err, DialError::ClearTextOffHost(_)), "{err}");
    assert!(err.to_string().contains("--cluster-ca"), "{err}");
    let (tcp, _) = listener.accept().await.unwrap();
    drop(tcp);
    let raw = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (tcp, _) = listener.accept().await.unwrap();
    let refused = Link::accept(tcp, None, TIMEOUT).await.unwrap_err();
    assert!(
        matches!(refused, DialError::ClearTextOffHost(_)),
        "{refused}"
    );
    drop(raw);

    let ca = TestCa::new();
    let ip = ip.to_string();
    let server_tls = ClusterTls::load(&ca.files_for("meta", &[ip.as_str()])).unwrap();
    let (tls_addr, server) = echo_once_at(&ip, Some(server_tls)).await;
    assert_eq!(
        hello(&tls_addr, Some(&ca.tls("gateway"))).await.unwrap(),
        b"hello"
    );
    server.await.unwrap().unwrap();
}

#[test]
fn loopback_is_loopback_in_every_spelling() {
    use tls::link::clear_text_allowed;
    for on_host in [
        "127.0.0.1:1",
        "127.9.9.9:1",
        "[::1]:1",
        "[::ffff:127.0.0.1]:1",
    ] {
        assert!(clear_text_allowed(&on_host.parse().unwrap()), "{on_host}");
    }
    for off_host in [
        "10.0.0.1:1",
        "192.0.2.2:1",
        "[::ffff:10.0.0.1]:1",
        "[2001:db8::1]:1",
        "0.0.0.0:1",
    ] {
        assert!(
            !clear_text_allowed(&off_host.parse().unwrap()),
            "{off_host}"
        );
    }
}
