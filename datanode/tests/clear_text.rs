//! A datanode without cluster TLS serves clear text to its own host only:
//! the same frame on the same port is answered when it comes from a loopback
//! address and refused, unanswered and counted, when it comes from the
//! host's network address.

use datanode::access::TokenGate;
use datanode::{server, BlockStore};
use proto::wire::{self, ProtocolError, Request};
use test_support::certs::address_off_loopback;
use test_support::node::{key, token, token_key, BPC};
use tokio::net::{TcpListener, TcpStream};

/// Sends a read of a missing block; the reply, or why none came.
async fn read_missing(addr: String) -> Result<wire::Incoming<wire::Reply>, ProtocolError> {
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let k = key(77, 0);
    let read = Request::ReadBlock {
        key: k,
        offset: 0,
        length: 10,
    };
    wire::write_request(&mut stream, 5, &read, token(k).as_ref(), &[])
        .await
        .unwrap();
    wire::read_reply(&mut stream).await
}

#[tokio::test]
async fn clear_text_is_answered_on_loopback_only() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = BlockStore::open(dir.path(), BPC, false).await.unwrap();
    let listener = TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let gate = TokenGate::with_keys(vec![token_key()]);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server::serve(listener, store, gate, async move {
        let _ = stopped.await;
    }));

    let on_host = read_missing(format!("127.0.0.1:{port}")).await.unwrap();
    assert_eq!(on_host.request_id, 5, "{on_host:?}");
    let off_host = read_missing(format!("{}:{port}", address_off_loopback())).await;
    assert!(
        matches!(off_host, Err(ProtocolError::Closed | ProtocolError::Io(_))),
        "{off_host:?}"
    );
    let refusals = handle.render();
    assert!(
        refusals.contains("tessera_datanode_tls_refusals_total 1"),
        "{refusals}"
    );
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}
