//! How members reach each other: Raft's messages as meta requests
//! ([`RaftMessage`]) over the meta port, presenting the admin token, over
//! mutual TLS when the cluster has a CA.

use super::TypeConfig;
use meta_api::remote::Failure;
use meta_api::{AnyRequest, AnyResponse, MetaError, RaftMessage, RaftMessageKind, RemoteMeta};
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::sync::Arc;
use tls::ClusterTls;

/// Makes a connection to each peer.
pub(crate) struct Network {
    token: String,
    tls: Option<Arc<ClusterTls>>,
}

impl Network {
    /// Peers are reached presenting `token` (the group's admin token).
    pub(crate) fn new(token: String, tls: Option<Arc<ClusterTls>>) -> Network {
        Network { token, tls }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Peer {
        Peer {
            target,
            meta: RemoteMeta::new(&node.addr, &self.token).with_tls(self.tls.clone()),
        }
    }
}

/// One peer, reached over its meta port.
pub(crate) struct Peer {
    target: u64,
    meta: RemoteMeta,
}

/// A meta error as Raft's network error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Failed(MetaError);

impl Peer {
    /// Sends one message and decodes the peer's reply, within Raft's time limit.
    async fn send<Req, Resp, E>(
        &self,
        kind: RaftMessageKind,
        message: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<u64, BasicNode, RaftError<u64, E>>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let network = |e: MetaError| RPCError::Network(NetworkError::new(&Failed(e)));
        let body = serde_json::value::to_raw_value(message)
            .map_err(|e| network(MetaError::Protocol(e.to_string())))?;
        let request = AnyRequest::RaftMessage(RaftMessage { kind, body });
        let sent = tokio::time::timeout(option.hard_ttl(), self.meta.attempt(&request)).await;
        let answer = match sent {
            Err(_) => return Err(network(MetaError::Transport("timed out".into()))),
            Ok(Err(Failure::Unreached(e))) => {
                return Err(RPCError::Unreachable(Unreachable::new(&Failed(e))))
            }
            Ok(Err(failure)) => return Err(network(failure.into_error())),
            Ok(Ok(AnyResponse::RaftMessage(value))) => value,
            Ok(Ok(other)) => {
                return Err(network(MetaError::Protocol(format!(
                    "a raft message answered as {}",
                    other.name()
                ))))
            }
        };
        let reply: Result<Resp, RaftError<u64, E>> = serde_json::from_str(answer.get())
            .map_err(|e| network(MetaError::Protocol(e.to_string())))?;
        reply.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        self.send(RaftMessageKind::AppendEntries, &rpc, &option)
            .await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>,
    > {
        self.send(RaftMessageKind::InstallSnapshot, &rpc, &option)
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        self.send(RaftMessageKind::Vote, &rpc, &option).await
    }
}
