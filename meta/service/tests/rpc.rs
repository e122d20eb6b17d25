//! What only the RPC has: the handshake and its principals, frames that are too
//! large or garbled, unreachable servers, and broken idle connections, over
//! real TCP on 127.0.0.1:0.

use meta::Refusal;
use meta_api::frame::{decode, encode_frame, read_frame, Handshake, MAX_FRAME};
use meta_api::*;
use proto::{DatanodeId, ReplicationConfig};
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
                object_lock: false,
                name: name.clone(),
                owner: "root".into(),
                replication: None,
                access: Default::default(),
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
    let client = MetaClient::remote(&addr, "token", None);
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
    let remote = RemoteMeta::new(&addr, &gateway_credential(&meta));
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

#[tokio::test]
async fn an_idle_connection_meta_closed_is_not_used_even_for_a_write() {
    let meta = MetaUnderTest::open(Transport::Local).await;
    let server = RpcServer::start(meta.service.clone()).await;
    let addr = server.addr().to_string();
    let remote = RemoteMeta::new(&addr, meta.service.admin_token());
    remote.call(&ListUsers.into_any()).await.unwrap();
    assert_eq!(remote.idle_connections(), 1);
    server.stop().await;
    let server = RpcServer::start_at(meta.service.clone(), &addr).await;
    // A write is never sent again after a connection broke mid-request, so
    // the closed idle connection must be seen as closed before it is used.
    let created = remote
        .call(
            &CreateUser {
                name: "after".into(),
            }
            .into_any(),
        )
        .await;
    assert!(
        matches!(created, Ok(AnyResponse::CreateUser(()))),
        "{created:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_client_of_several_metas_goes_past_one_that_is_down() {
    let meta = MetaUnderTest::open(Transport::Remote).await;
    let addr = meta.rpc_addr().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down = listener.local_addr().unwrap().to_string();
    drop(listener);
    let client = MetaClient::remote(&format!("{down}, {addr}"), meta.service.admin_token(), None);
    // A write goes on too: it never reached the member that is down.
    client.call(CreateUser { name: "u".into() }).await.unwrap();
    let users = client.call(ListUsers).await.unwrap();
    assert!(users.iter().any(|u| u.name == "u"), "{users:?}");
    // With every address down, the error is the transport's, after a wait.
    let alone = MetaClient::remote(&format!("{down},{down}"), meta.service.admin_token(), None);
    let started = std::time::Instant::now();
    let err = alone.call(ListUsers).await.unwrap_err();
    assert!(matches!(err, MetaError::Transport(_)), "{err:?}");
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(1),
        "gave up at once"
    );
}

/// Reads one reply frame.
async fn reply(stream: &mut TcpStream) -> Result<AnyResponse, MetaError> {
    let payload = read_frame(stream, MAX_FRAME).await.unwrap();
    decode(&payload).unwrap()
}

/// A credential of the tests' gateway.
fn gateway_credential(meta: &MetaUnderTest) -> String {
    meta.service
        .mint_credential(Principal::Gateway(TEST_GATEWAY.into()))
        .unwrap()
}

/// A raw connection that passed the handshake with `token`, and the
/// principal it acts as.
async fn authenticated(addr: &str, token: &str) -> (TcpStream, Principal) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let hello = encode_frame(&Handshake {
        token: token.to_string(),
        version: meta_api::frame::RPC_VERSION,
    })
    .unwrap();
    stream.write_all(&hello).await.unwrap();
    let payload = read_frame(&mut stream, MAX_FRAME).await.unwrap();
    let granted: Result<Principal, MetaError> = decode(&payload).unwrap();
    (stream, granted.expect("handshake accepted"))
}

#[tokio::test]
async fn oversized_and_garbled_frames_are_refused() {
    let meta = MetaUnderTest::open(Transport::Remote).await;
    let addr = meta.rpc_addr().unwrap();
    let (mut stream, _) = authenticated(addr, &gateway_credential(&meta)).await;
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

    let (mut stream, _) = authenticated(addr, &gateway_credential(&meta)).await;
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
async fn the_handshake_secret_sets_the_principal() {
    let meta = MetaUnderTest::open(Transport::Remote).await;
    let addr = meta.rpc_addr().unwrap();
    let service = &meta.service;
    let ask = |token: &str| {
        let client = MetaClient::remote(addr, token, None);
        async move { client.call(ListBuckets { owner: None }).await }
    };

    let none = ask("").await.unwrap_err();
    assert!(
        matches!(&none, MetaError::Unauthenticated(m) if m.contains("no credential")),
        "{none:?}"
    );
    assert!(!none.may_have_applied());
    let wrong = ask("not-the-token").await.unwrap_err();
    assert!(
        matches!(&wrong, MetaError::Unauthenticated(m) if m.contains("wrong token")),
        "{wrong:?}"
    );
    // A prefix of the admin token is as wrong as any other.
    let prefix = &service.admin_token()[..4];
    assert!(matches!(
        ask(prefix).await,
        Err(MetaError::Unauthenticated(_))
    ));
    let gateway = gateway_credential(&meta);
    assert!(ask(&gateway).await.is_ok());
    assert!(ask(service.admin_token()).await.is_ok());

    let (_, as_gateway) = authenticated(addr, &gateway).await;
    let (_, admin) = authenticated(addr, service.admin_token()).await;
    assert_eq!(
        (as_gateway, admin),
        (Principal::Gateway(TEST_GATEWAY.into()), Principal::Admin)
    );
    let as_gateway = MetaClient::remote(addr, &gateway, None);
    assert_eq!(
        as_gateway.call(ListUsers).await.unwrap_err(),
        MetaError::Unauthorized
    );
    let as_admin = MetaClient::remote(addr, service.admin_token(), None);
    assert!(as_admin.call(ListUsers).await.is_ok());

    // A client that sends a request without any handshake gets a clear
    // refusal, and the connection is closed before the request is served.
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let create = CreateBucket {
        object_lock: false,
        name: "sneaky".into(),
        owner: "root".into(),
        replication: None,
        access: Default::default(),
    };
    stream
        .write_all(&encode_frame(&create.into_any()).unwrap())
        .await
        .unwrap();
    let payload = read_frame(&mut stream, MAX_FRAME).await.unwrap();
    let refused: Result<Principal, MetaError> = decode(&payload).unwrap();
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
    let old = format!(r#"{{"token":"{}"}}"#, gateway_credential(&meta));
    let mut frame = (old.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(old.as_bytes());
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(&frame).await.unwrap();
    let payload = read_frame(&mut stream, MAX_FRAME).await.unwrap();
    let refused: Result<Principal, MetaError> = decode(&payload).unwrap();
    assert!(
        matches!(&refused, Err(MetaError::Unauthenticated(m)) if m.contains("older meta RPC version")),
        "{refused:?}"
    );
}

#[tokio::test]
async fn secrets_prove_a_principal_only_on_an_exact_match() {
    let meta = MetaUnderTest::open(Transport::Local).await;
    let service = &meta.service;
    let gateway = gateway_credential(&meta);
    let admin = service.admin_token().to_string();
    let proves = |secret: &str| service.authenticate(secret).unwrap();
    assert_eq!(
        proves(&gateway),
        Ok(Principal::Gateway(TEST_GATEWAY.into()))
    );
    assert_eq!(proves(&admin), Ok(Principal::Admin));
    for wrong in [
        &gateway[..gateway.len() - 1],
        &format!("{gateway}x"),
        &admin[..admin.len() - 1],
        &format!("{admin}x"),
        "",
    ] {
        assert_eq!(proves(wrong), Err(Refusal::Unknown), "{wrong:?}");
    }
    // A credential minted with another meta's key proves nothing here.
    let other = MetaUnderTest::open(Transport::Local).await;
    assert_eq!(proves(&gateway_credential(&other)), Err(Refusal::Unknown));
}

/// A datanode's credential over real TCP: its own heartbeats only, no
/// namespace, no S3 secrets, no other datanode's identity.
#[tokio::test]
async fn a_datanode_credential_speaks_for_that_datanode_only() {
    let meta = MetaUnderTest::open(Transport::Remote).await;
    let id = dn("dn-a");
    let other = dn("dn-b");
    let datanode = meta.client_as(Principal::Datanode(id.clone()));
    let heartbeat = |id: &DatanodeId| Heartbeat {
        report: report(&id.0, ROOMY, 0),
    };

    let reply = datanode.call(heartbeat(&id)).await.unwrap();
    assert!(
        !reply.token_keys.is_empty(),
        "a datanode gets the token keys"
    );
    let refused = [
        datanode.call(heartbeat(&other)).await.unwrap_err(),
        datanode
            .call(BlockReport {
                datanode: other.clone(),
                blocks: Vec::new(),
            })
            .await
            .unwrap_err(),
        datanode
            .call(GetAccessKey {
                access_key: meta
                    .service
                    .root_credentials()
                    .expect("a lone meta has root credentials")
                    .access_key,
            })
            .await
            .unwrap_err(),
        datanode
            .call(ListBuckets { owner: None })
            .await
            .unwrap_err(),
        datanode
            .call(AllocateBlock {
                config: ReplicationConfig::Replicated { replicas: 1 },
                exclude: Vec::new(),
            })
            .await
            .unwrap_err(),
        datanode
            .call(MintCredential {
                principal: Principal::Datanode(other.clone()),
                rotate: false,
            })
            .await
            .unwrap_err(),
    ];
    for refusal in refused {
        assert_eq!(refusal, MetaError::Unauthorized);
    }
    datanode
        .call(BlockReport {
            datanode: id.clone(),
            blocks: Vec::new(),
        })
        .await
        .unwrap();
    // The other datanode's address was never taken over.
    let status = meta.call(GetClusterStatus).await.unwrap();
    let ids: Vec<&DatanodeId> = status.datanodes.iter().map(|d| &d.id).collect();
    assert_eq!(ids, vec![&id]);

    // A gateway cannot speak for datanodes either.
    let gateway = meta.gateway_client();
    assert_eq!(
        gateway.call(heartbeat(&id)).await.unwrap_err(),
        MetaError::Unauthorized
    );
}

#[tokio::test]
async fn rotating_a_credential_refuses_the_older_ones() {
    let meta = MetaUnderTest::open(Transport::Remote).await;
    let addr = meta.rpc_addr().unwrap();
    let principal = Principal::Gateway(TEST_GATEWAY.into());
    let first = gateway_credential(&meta);
    let mint = |rotate| MintCredential {
        principal: principal.clone(),
        rotate,
    };
    assert_eq!(meta.call(mint(false)).await.unwrap(), first);
    let second = meta.call(mint(true)).await.unwrap();
    assert_ne!(second, first);
    let ask = |token: &str| {
        let client = MetaClient::remote(addr, token, None);
        async move { client.call(ListBuckets { owner: None }).await }
    };
    let old = ask(&first).await.unwrap_err();
    assert!(
        matches!(&old, MetaError::Unauthenticated(m) if m.contains("rotated")),
        "{old:?}"
    );
    assert!(ask(&second).await.is_ok());
    // Rotation outlives a restart; another gateway is untouched.
    let other = meta
        .call(MintCredential {
            principal: Principal::Gateway("other".into()),
            rotate: false,
        })
        .await
        .unwrap();
    let meta = meta.reopen().await;
    let addr = meta.rpc_addr().unwrap();
    assert_eq!(meta.call(mint(false)).await.unwrap(), second);
    for (secret, accepted) in [(&first, false), (&second, true), (&other, true)] {
        let client = MetaClient::remote(addr, secret, None);
        let answer = client.call(ListBuckets { owner: None }).await;
        assert_eq!(answer.is_ok(), accepted, "{answer:?}");
    }
    // The admin has no credential to mint.
    let admin = meta
        .call(MintCredential {
            principal: Principal::Admin,
            rotate: true,
        })
        .await
        .unwrap_err();
    assert!(matches!(admin, MetaError::InvalidRequest(_)), "{admin:?}");
}

#[tokio::test]
async fn over_mutual_tls_only_members_of_the_cluster_get_to_the_handshake() {
    use test_support::certs::TestCa;
    let meta = MetaUnderTest::open(Transport::Local).await;
    let ca = TestCa::new();
    let server = RpcServer::start_tls(meta.service.clone(), ca.tls("meta")).await;
    let credential = gateway_credential(&meta);
    let list = || ListBuckets { owner: None };

    let member = MetaClient::remote(server.addr(), &credential, Some(ca.tls("gateway")));
    member.call(list()).await.unwrap();
    // Its credential still decides what it may do: a gateway is no admin.
    let refused = member.call(GetClusterStatus).await.unwrap_err();
    assert!(matches!(refused, MetaError::Unauthorized), "{refused:?}");

    let stranger_ca = TestCa::new();
    let strangers = [
        ("clear text", None),
        ("another CA", Some(stranger_ca.tls("gateway"))),
    ];
    for (who, tls) in strangers {
        // Even with a valid credential.
        let client = MetaClient::remote(server.addr(), &credential, tls);
        let err = client.call(list()).await.unwrap_err();
        assert!(matches!(err, MetaError::Transport(_)), "{who}: {err:?}");
        if who == "clear text" {
            assert!(err.to_string().contains("--cluster-ca"), "{err}");
        }
    }
    // A meta of another CA is not trusted by a member either.
    let impostor = RpcServer::start_tls(meta.service.clone(), stranger_ca.tls("meta")).await;
    let fooled = MetaClient::remote(impostor.addr(), &credential, Some(ca.tls("gateway")));
    let err = fooled.call(list()).await.unwrap_err();
    assert!(
        matches!(&err, MetaError::Transport(m) if m.contains("invalid peer certificate")),
        "{err:?}"
    );
    impostor.stop().await;
    server.stop().await;
}
