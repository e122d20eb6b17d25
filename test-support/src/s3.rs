//! An in-process S3 cluster: the shared meta + datanodes test cluster
//! ([`crate::cluster`]) and the S3 router on 127.0.0.1:0, driven over real
//! HTTP with requests signed by aws-sigv4.

use crate::cluster::{TestCluster, TestClusterConfig};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity as SdkIdentity;
use block_client::ClientConfig;
use bytes::Bytes;
use gateway::GatewayConfig;
use http::{HeaderMap, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use meta_api::{CreateKey, CreateUser, MetaClient};
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

/// The root user's access key.
pub const ROOT_KEY: &str = "ROOTACCESSKEY";
/// The root user's secret.
pub const ROOT_SECRET: &str = "root-secret-key";
/// Meta's admin token.
pub const ADMIN_TOKEN: &str = "admin-token";
/// Meta's block size.
pub const BLOCK_SIZE: u64 = 4 * 1024 * 1024;

/// Meta, five datanodes and the S3 router on 127.0.0.1:0.
pub struct Cluster {
    /// Where the S3 router listens.
    pub addr: SocketAddr,
    /// A client of meta with the cluster role, as the gateway has.
    pub meta: MetaClient,
    /// Meta and the datanodes.
    pub cluster: TestCluster,
}

/// An HTTP reply, read whole.
pub struct Reply {
    /// Its status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body.
    pub body: Bytes,
}

impl Reply {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The value of header `name`, which must be there.
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap())
            .unwrap_or_else(|| panic!("no {name} header in {:?}", self.headers))
    }
}

/// Access key and secret to sign with; None sends the request unsigned.
pub type Creds<'a> = Option<(&'a str, &'a str)>;
/// The root user's credentials.
pub const ROOT: Creds<'static> = Some((ROOT_KEY, ROOT_SECRET));

impl Cluster {
    /// Starts the cluster, its datanodes heartbeating every `heartbeat`.
    pub async fn start(heartbeat: Duration) -> Self {
        Self::start_with(heartbeat, GatewayConfig::new("us-east-1")).await
    }

    /// [`start`](Self::start) with the gateway settings `gateway`.
    pub async fn start_with(heartbeat: Duration, gateway: GatewayConfig) -> Self {
        let bytes_per_checksum = datanode::DatanodeConfig::default().bytes_per_checksum;
        let mut config = TestClusterConfig::new(BLOCK_SIZE, bytes_per_checksum).meta(|meta| {
            meta.admin_token = Some(ADMIN_TOKEN.into());
            meta.root_access_key = Some(ROOT_KEY.into());
            meta.root_secret_key = Some(ROOT_SECRET.into());
        });
        config.datanode.heartbeat_interval = heartbeat;
        config.datanode.capacity = Some(64 * 1024 * 1024 * 1024);
        let cluster = TestCluster::start(5, config).await;
        let meta = cluster.meta.clone();
        let store = cluster.client(ClientConfig {
            block_size: BLOCK_SIZE,
            ..ClientConfig::default()
        });
        let app = gateway::router(meta.clone(), store, gateway);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            addr,
            meta,
            cluster,
        }
    }

    /// Shuts the datanodes down.
    pub async fn stop(self) {
        self.cluster.shutdown().await;
    }

    /// A new user with its own access key.
    pub async fn user(&self, name: &str) -> (String, String) {
        let create = CreateUser { name: name.into() };
        self.cluster.admin.call(create).await.unwrap();
        self.user_key(name).await
    }

    /// Another access key of an existing user.
    pub async fn user_key(&self, name: &str) -> (String, String) {
        let create = CreateKey { user: name.into() };
        let key = self.cluster.admin.call(create).await.unwrap();
        (key.access_key, key.secret_key)
    }

    /// Sends one request signed with `creds` (unsigned when None) and reads the reply.
    pub async fn send(
        &self,
        creds: Creds<'_>,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        self.send_as(creds, method, path, headers, body, false)
            .await
    }

    /// `send`, with the body signed as STREAMING-UNSIGNED-PAYLOAD-TRAILER when
    /// `unsigned_trailer` (the body is then already aws-chunked framed).
    pub async fn send_as(
        &self,
        creds: Creds<'_>,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        unsigned_trailer: bool,
    ) -> Reply {
        let uri = format!("http://{}{path}", self.addr);
        let mut builder = http::Request::builder().method(method).uri(&uri);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let mut request = builder.body(()).unwrap();
        if let Some((access_key, secret)) = creds {
            sign_request(
                &mut request,
                access_key,
                secret,
                headers,
                body,
                unsigned_trailer,
            );
        }
        let (mut parts, ()) = request.into_parts();
        parts.uri = parts
            .uri
            .path_and_query()
            .unwrap()
            .as_str()
            .parse()
            .unwrap();
        parts
            .headers
            .insert(http::header::HOST, self.addr.to_string().parse().unwrap());
        if matches!(method, "PUT" | "POST") {
            // hyper leaves Content-Length out of empty bodies; S3 clients send it.
            parts
                .headers
                .insert(http::header::CONTENT_LENGTH, body.len().into());
        }
        let request = http::Request::from_parts(parts, Full::new(Bytes::copy_from_slice(body)));
        let stream = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(connection);
        let response = sender.send_request(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        Reply {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }
}

/// Signs `request` with SigV4 as `access_key`: the body's SHA-256, or
/// STREAMING-UNSIGNED-PAYLOAD-TRAILER when `unsigned_trailer`.
pub fn sign_request(
    request: &mut http::Request<()>,
    access_key: &str,
    secret: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    unsigned_trailer: bool,
) {
    let identity: SdkIdentity = Credentials::new(access_key, secret, None, None, "test").into();
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("s3")
        .time(SystemTime::now())
        .settings(settings)
        .build()
        .unwrap()
        .into();
    let uri = request.uri().to_string();
    let signable = SignableRequest::new(
        request.method().as_str(),
        uri,
        headers.iter().copied(),
        if unsigned_trailer {
            SignableBody::StreamingUnsignedPayloadTrailer
        } else {
            SignableBody::Bytes(body)
        },
    )
    .unwrap();
    let (instructions, _) = sign(signable, &params).unwrap().into_parts();
    instructions.apply_to_request_http1x(request);
}
