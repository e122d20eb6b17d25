//! What only the RPC has: the handshake and its roles, frames that are too
//! large or garbled, unreachable servers, and broken idle connections, over
//! real TCP on 127.0.0.1:0.

use meta_api::frame::{decode, encode_frame, read_frame, Handshake, MAX_FRAME};
use meta_api::*;
use test_support::meta::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test]
async fn concurrent_calls_share_the_pool_without_mixing_replies() {
    let meta = MetaUnderTest::open(Transport::Remote).await;
    let calls = (0..20).map(|i| {
        let client = meta.meta.clone();
        async move {
            let name = format!("bucket-{i:02}");
            let create = CreateBucket {
                name: name.clone(),
                owner: "root".into(),
                replication: None,
            };
            client.call(create).await.unwrap();
            let got = client.call(GetBucket { name: name.clone() }).await.unwrap();
            got.unwrap().name == name
        }
    });
    assert!(futures::future::join_all(calls)
        .await
        .into_iter()
        .all(|ok| ok));
}

#[tokio::test]
async fn unreachable_meta_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let client = MetaClient::remote(&addr, "token");
    let err = client
        .call(GetBucket { name: "b".into() })
        .await
        .unwrap_err();
    assert!(matches!(err, MetaError::Transport(_)), "{err:?}");
    assert!(err.may_have_applied());
}

#[tokio::test]
async fn a_broken_idle_connection_is_replaced() {
    let meta = MetaUnderTest::open(Transport::Local).await;
    let server = RpcServer::start(meta.service.clone()).await;
    let addr = server.addr().to_string();
    let remote = RemoteMeta::new(&addr, meta.service.cluster_token());
    remote
        .call(&ListBuckets { owner: None }.into_any())
        .await
        .unwrap();
    assert_eq!(remote.idle_connections(), 1);
    // Shutdown closes the idle connection the client still holds.
    server.stop().await;
    let server = RpcServer::start_at(meta.service.clone(), &addr).await;
    let reply = remote.call(&ListBuckets { owner: None }.into_any()).await;
    assert!(
        matches!(reply, Ok(AnyResponse::ListBuckets(_))),
        "{reply:?}"
    );
    server.stop().await;
}

/// Reads one reply frame.
async fn reply(stream: &mut TcpStream) -> Result<AnyResponse, MetaError> {
    let payload = read_frame(stream, MAX_FRAME).await.unwrap();
    decode(&payload).unwrap()
}

/// A raw connection that passed the handshake with `token`, and the role it got.
async fn authenticated(addr: &str, token: &str) -> (TcpStream, Role) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let hello = encode_frame(&Handshake {
        token: token.to_string(),
        version: meta_api::frame::RPC_VERSION,
    })
    .unwrap();
    stream.write_all(&hello).await.unwrap();
    let payload = read_frame(&mut stream, MAX_FRAME).await.unwrap();
    let granted: Result<Role, MetaError> = decode(&payload).unwrap();
    (stream, granted.expect("handshake accepted"))
}

#[tokio::test]
async fn oversized_and_garbled_frames_are_refused() {
    let meta = MetaUnderTest::open(Transport::Remote).await;
    let addr = meta.rpc_addr().unwrap();
    let (mut stream, _) = authenticated(addr, meta.service.cluster_token()).await;
    stream.write_all(b"\x00\x00\x00\x05hello").await.unwrap();
    let garbled = reply(&mut stream).await;
    assert!(
        matches!(garbled, Err(MetaError::Protocol(_))),
        "{garbled:?}"
    );
    // The connection is still usable after a garbled payload.
    let frame = encode_frame(&GetBucket { name: "x".into() }.into_any()).unwrap();
    stream.write_all(&frame).await.unwrap();
    let answer = reply(&mut stream).await;
    assert!(
        matches!(answer, Ok(AnyResponse::GetBucket(None))),
        "{answer:?}"
    );

    let (mut stream, _) = authenticated(addr, meta.service.cluster_token()).await;
    stream.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
    let oversized = reply(&mut stream).await;
    assert!(
        matches!(oversized, Err(MetaError::Protocol(_))),
        "{oversized:?}"
    );
    let mut rest = Vec::new();
    assert_eq!(
        stream.read_to_end(&mut rest).await.unwrap(),
        0,
        "closed after refusal"
    );
}

#[tokio::test]
async fn the_handshake_token_sets_the_role() {
    let meta = MetaUnderTest::open(Transport::Remote).await;
    let addr = meta.rpc_addr().unwrap();
    let service = &meta.service;
    let ask = |token: &str| {
        let client = MetaClient::remote(addr, token);
        async move { client.call(ListBuckets { owner: None }).await }
    };

    let none = ask("").await.unwrap_err();
    assert!(
        matches!(&none, MetaError::Unauthenticated(m) if m.contains("no cluster token")),
        "{none:?}"
    );
    assert!(!none.may_have_applied());
    assert_eq!(
        ask("not-the-token").await.unwrap_err(),
        MetaError::Unauthenticated("wrong cluster token".into())
    );
    // A prefix of the right token is as wrong as any other.
    let prefix = &service.cluster_token()[..8];
    assert!(matches!(
        ask(prefix).await,
        Err(MetaError::Unauthenticated(_))
    ));
    assert!(ask(service.cluster_token()).await.is_ok());
    assert!(ask(service.admin_token()).await.is_ok());

    let (_, cluster) = authenticated(addr, service.cluster_token()).await;
    let (_, admin) = authenticated(addr, service.admin_token()).await;
    assert_eq!((cluster, admin), (Role::Cluster, Role::Admin));
    let as_cluster = MetaClient::remote(addr, service.cluster_token());
    assert_eq!(
        as_cluster.call(ListUsers).await.unwrap_err(),
        MetaError::Unauthorized
    );
    let as_admin = MetaClient::remote(addr, service.admin_token());
    assert!(as_admin.call(ListUsers).await.is_ok());

    // A client that sends a request without any handshake gets a clear
    // refusal, and the connection is closed before the request is served.
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let create = CreateBucket {
        name: "sneaky".into(),
        owner: "root".into(),
        replication: None,
    };
    stream
        .write_all(&encode_frame(&create.into_any()).unwrap())
        .await
        .unwrap();
    let payload = read_frame(&mut stream, MAX_FRAME).await.unwrap();
    let refused: Result<Role, MetaError> = decode(&payload).unwrap();
    assert!(
        matches!(&refused, Err(MetaError::Unauthenticated(m)) if m.contains("handshake")),
        "{refused:?}"
    );
    let mut rest = Vec::new();
    assert_eq!(stream.read_to_end(&mut rest).await.unwrap(), 0);
    let sneaky = meta.call(GetBucket {
        name: "sneaky".into(),
    });
    assert_eq!(sneaky.await.unwrap(), None);
}

#[tokio::test]
async fn a_client_of_another_rpc_version_is_refused_clearly() {
    let meta = MetaUnderTest::open(Transport::Remote).await;
    let addr = meta.rpc_addr().unwrap();
    // A handshake of the first version has no version field.
    let old = format!(r#"{{"token":"{}"}}"#, meta.service.cluster_token());
    let mut frame = (old.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(old.as_bytes());
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(&frame).await.unwrap();
    let payload = read_frame(&mut stream, MAX_FRAME).await.unwrap();
    let refused: Result<Role, MetaError> = decode(&payload).unwrap();
    assert!(
        matches!(&refused, Err(MetaError::Unauthenticated(m)) if m.contains("older meta RPC version")),
        "{refused:?}"
    );
}

#[tokio::test]
async fn tokens_grant_roles_only_on_an_exact_match() {
    let meta = MetaUnderTest::open(Transport::Local).await;
    let service = &meta.service;
    let cluster = service.cluster_token().to_string();
    let admin = service.admin_token().to_string();
    assert_eq!(service.role_of(&cluster), Some(Role::Cluster));
    assert_eq!(service.role_of(&admin), Some(Role::Admin));
    assert_eq!(service.role_of(&cluster[..cluster.len() - 1]), None);
    assert_eq!(service.role_of(&format!("{cluster}x")), None);
    assert_eq!(service.role_of(""), None);
}
