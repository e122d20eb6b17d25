//! RPC tests over real TCP on 127.0.0.1:0.

use super::*;
use crate::meta::api::MetaClient;
use crate::meta::test_support::open;
use tokio::sync::oneshot;

struct Server {
    addr: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start(service: Arc<MetaService>, bind: &str) -> Server {
        let listener = TcpListener::bind(bind).await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, service, async move {
            let _ = stopped.await;
        }));
        Server {
            addr,
            stop: Some(stop),
            task,
        }
    }

    async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let finished = tokio::time::timeout(Duration::from_secs(10), self.task).await;
        assert!(
            matches!(finished, Ok(Ok(Ok(())))),
            "server did not stop cleanly"
        );
    }
}

#[tokio::test]
async fn round_trip_over_tcp_including_errors() {
    let dir = tempfile::tempdir().unwrap();
    let service = open(dir.path());
    let server = Server::start(service.clone(), "127.0.0.1:0").await;
    let client = MetaClient::Remote(Arc::new(RemoteMeta::connect_with_token(
        &server.addr,
        service.cluster_token(),
    )));

    client.create_bucket("photos", "root", None).await.unwrap();
    let bucket = client.get_bucket("photos").await.unwrap().unwrap();
    assert_eq!(bucket.owner, "root");
    assert_eq!(
        client
            .create_bucket("photos", "root", None)
            .await
            .unwrap_err(),
        MetaError::BucketAlreadyOwnedByYou("photos".into())
    );
    assert_eq!(
        client.get_object("nope", "k").await.unwrap_err(),
        MetaError::NoSuchBucket("nope".into())
    );
    let token = service.admin_token().to_string();
    assert!(matches!(
        client.admin(&token, crate::meta::AdminOp::ListUsers).await,
        Ok(MetaResponse::Users(u)) if u.len() == 1
    ));

    // Concurrent calls share the pool without mixing replies.
    let calls = (0..20).map(|i| {
        let client = client.clone();
        async move {
            let name = format!("bucket-{i:02}");
            client.create_bucket(&name, "root", None).await.unwrap();
            client.get_bucket(&name).await.unwrap().unwrap().name == name
        }
    });
    assert!(futures::future::join_all(calls)
        .await
        .into_iter()
        .all(|ok| ok));
    server.shutdown().await;
}

#[tokio::test]
async fn unreachable_meta_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let remote = RemoteMeta::connect(&addr);
    let err = remote
        .call(MetaRequest::GetBucket { name: "b".into() })
        .await
        .unwrap_err();
    assert!(matches!(err, MetaError::Transport(_)), "{err:?}");
}

#[tokio::test]
async fn a_broken_idle_connection_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let service = open(dir.path());
    let server = Server::start(service.clone(), "127.0.0.1:0").await;
    let addr = server.addr.clone();
    let remote = RemoteMeta::connect_with_token(&addr, service.cluster_token());
    remote
        .call(MetaRequest::ListBuckets { owner: None })
        .await
        .unwrap();
    assert_eq!(remote.idle.lock().len(), 1);
    // Shutdown closes the idle connection the client still holds.
    server.shutdown().await;
    let server = Server::start(service, &addr).await;
    let reply = remote.call(MetaRequest::ListBuckets { owner: None }).await;
    assert!(matches!(reply, Ok(MetaResponse::Buckets(_))), "{reply:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn oversized_and_garbled_frames_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let service = open(dir.path());
    let server = Server::start(service.clone(), "127.0.0.1:0").await;

    let mut stream = authenticated(&server.addr, service.cluster_token()).await;
    stream.write_all(b"\x00\x00\x00\x05hello").await.unwrap();
    let len = stream.read_u32().await.unwrap();
    let payload = read_payload(&mut stream, len).await.unwrap();
    let reply: Result<MetaResponse, MetaError> = decode(&payload).unwrap();
    assert!(matches!(reply, Err(MetaError::Protocol(_))), "{reply:?}");
    // The connection is still usable after a garbled payload.
    let frame = encode_frame(&MetaRequest::GetBucket { name: "x".into() }).unwrap();
    stream.write_all(&frame).await.unwrap();
    let len = stream.read_u32().await.unwrap();
    let payload = read_payload(&mut stream, len).await.unwrap();
    let reply: Result<MetaResponse, MetaError> = decode(&payload).unwrap();
    assert!(matches!(reply, Ok(MetaResponse::Bucket(None))));

    let mut stream = authenticated(&server.addr, service.cluster_token()).await;
    stream.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
    let len = stream.read_u32().await.unwrap();
    let payload = read_payload(&mut stream, len).await.unwrap();
    let reply: Result<MetaResponse, MetaError> = decode(&payload).unwrap();
    assert!(matches!(reply, Err(MetaError::Protocol(_))), "{reply:?}");
    let mut rest = Vec::new();
    assert_eq!(
        stream.read_to_end(&mut rest).await.unwrap(),
        0,
        "closed after refusal"
    );
    server.shutdown().await;
}

/// A raw connection that passed the handshake with `token`.
async fn authenticated(addr: &str, token: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let hello = encode_frame(&Handshake {
        token: token.to_string(),
    })
    .unwrap();
    stream.write_all(&hello).await.unwrap();
    let len = stream.read_u32().await.unwrap();
    let payload = read_payload(&mut stream, len).await.unwrap();
    let reply: Result<MetaResponse, MetaError> = decode(&payload).unwrap();
    assert!(matches!(reply, Ok(MetaResponse::Done)), "{reply:?}");
    stream
}

#[tokio::test]
async fn connections_without_the_cluster_token_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let service = open(dir.path());
    let server = Server::start(service.clone(), "127.0.0.1:0").await;
    let ask = |remote: RemoteMeta| async move {
        remote.call(MetaRequest::ListBuckets { owner: None }).await
    };

    let none = ask(RemoteMeta::connect(&server.addr)).await.unwrap_err();
    assert!(
        matches!(&none, MetaError::Unauthenticated(m) if m.contains("no cluster token")),
        "{none:?}"
    );
    assert!(!none.may_have_applied());
    let wrong = ask(RemoteMeta::connect_with_token(
        &server.addr,
        "not-the-token",
    ))
    .await
    .unwrap_err();
    assert_eq!(
        wrong,
        MetaError::Unauthenticated("wrong cluster token".into())
    );
    // A prefix of the right token is as wrong as any other.
    let prefix = &service.cluster_token()[..8];
    let short = ask(RemoteMeta::connect_with_token(&server.addr, prefix)).await;
    assert!(
        matches!(short, Err(MetaError::Unauthenticated(_))),
        "{short:?}"
    );

    let right = ask(RemoteMeta::connect_with_token(
        &server.addr,
        service.cluster_token(),
    ))
    .await;
    assert!(matches!(right, Ok(MetaResponse::Buckets(_))), "{right:?}");
    // The admin token opens connections too (`tessera admin` has only it).
    let admin = ask(RemoteMeta::connect_with_token(
        &server.addr,
        service.admin_token(),
    ))
    .await;
    assert!(matches!(admin, Ok(MetaResponse::Buckets(_))), "{admin:?}");

    // A client that sends a request without any handshake gets a clear
    // refusal, and the connection is closed before the request is served.
    let mut stream = TcpStream::connect(&server.addr).await.unwrap();
    let frame = encode_frame(&MetaRequest::CreateBucket {
        name: "sneaky".into(),
        owner: "root".into(),
        replication: None,
    })
    .unwrap();
    stream.write_all(&frame).await.unwrap();
    let len = stream.read_u32().await.unwrap();
    let payload = read_payload(&mut stream, len).await.unwrap();
    let reply: Result<MetaResponse, MetaError> = decode(&payload).unwrap();
    assert!(
        matches!(&reply, Err(MetaError::Unauthenticated(m)) if m.contains("handshake")),
        "{reply:?}"
    );
    let mut rest = Vec::new();
    assert_eq!(stream.read_to_end(&mut rest).await.unwrap(), 0);
    let client = MetaClient::Local(service.clone());
    assert_eq!(client.get_bucket("sneaky").await.unwrap(), None);
    server.shutdown().await;
}

#[test]
fn token_comparison_accepts_only_exact_matches() {
    assert!(token_accepted("abc", &["xyz", "abc"]));
    assert!(!token_accepted("ab", &["abc"]));
    assert!(!token_accepted("abcd", &["abc"]));
    assert!(!token_accepted("", &["abc"]));
}
