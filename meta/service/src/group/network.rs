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
use openraft::{BasicNode, Vote};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tls::ClusterTls;

/// When each peer last took this member for its leader: the time the
/// append (or heartbeat) it accepted was *sent*, and the vote it was sent
/// under. A peer that accepts a leader's append votes for no one else for
/// openraft's leader lease after it arrives, so the leader's reads may
/// lean on a majority of these (see [`Acks::quorum_within`]). Kept here
/// rather than read from openraft's metrics, whose time since the last
/// majority's answer is computed when the metrics are reported, and so
/// reads as fresh while its core waits for a long log sync.
#[derive(Default)]
pub(crate) struct Acks(Mutex<HashMap<u64, (Vote<u64>, Instant)>>);

impl Acks {
    fn record(&self, peer: u64, vote: Vote<u64>, sent: Instant) {
        let mut acks = self.0.lock();
        let ack = acks.entry(peer).or_insert((vote, sent));
        if (ack.0, ack.1) <= (vote, sent) {
            *ack = (vote, sent);
        }
    }

    /// Whether a majority of each of `configs` (the voters; more than one
    /// while the membership changes) took `me` for leader under `vote`
    /// within `lease` of `now`, counting `me` itself.
    pub(crate) fn quorum_within(
        &self,
        configs: &[BTreeSet<u64>],
        me: u64,
        vote: &Vote<u64>,
        now: Instant,
        lease: Duration,
    ) -> bool {
        let acks = self.0.lock();
        let fresh = |id: &u64| {
            *id == me
                || acks.get(id).is_some_and(|(acked, sent)| {
                    acked == vote && now.saturating_duration_since(*sent) < lease
                })
        };
        configs
            .iter()
            .all(|voters| voters.iter().filter(|id| fresh(id)).count() * 2 > voters.len())
    }
}

/// Makes a connection to each peer.
pub(crate) struct Network {
    token: String,
    tls: Option<Arc<ClusterTls>>,
    acks: Arc<Acks>,
}

impl Network {
    /// Peers are reached presenting `token` (the group's admin token);
    /// their answers to appends are noted in `acks`.
    pub(crate) fn new(token: String, tls: Option<Arc<ClusterTls>>, acks: Arc<Acks>) -> Network {
        Network { token, tls, acks }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Peer {
        Peer {
            target,
            meta: RemoteMeta::new(&node.addr, &self.token).with_tls(self.tls.clone()),
            acks: self.acks.clone(),
        }
    }
}

/// One peer, reached over its meta port.
pub(crate) struct Peer {
    target: u64,
    meta: RemoteMeta,
    acks: Arc<Acks>,
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
            // A peer short of space refuses entries until it is freed:
            // sending them again at once would only load both sides.
            Ok(Err(Failure::Unreached(e) | Failure::Answered(e @ MetaError::OutOfSpace(_)))) => {
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
        let (sent, vote) = (Instant::now(), rpc.vote);
        let answer = self
            .send(RaftMessageKind::AppendEntries, &rpc, &option)
            .await;
        // Any answer but a higher vote means the peer took the sender for
        // its leader (a conflict is about the log, after the vote was taken).
        if answer
            .as_ref()
            .is_ok_and(|a| !matches!(a, AppendEntriesResponse::HigherVote(_)))
        {
            self.acks.record(self.target, vote, sent);
        }
        answer
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

#[cfg(test)]
mod tests {
    use super::*;

    fn vote(term: u64) -> Vote<u64> {
        Vote::new_committed(term, 1)
    }

    #[test]
    fn a_lease_needs_a_fresh_majority_under_the_current_vote() {
        let acks = Acks::default();
        let start = Instant::now();
        let lease = Duration::from_millis(250);
        let three = [BTreeSet::from([1, 2, 3])];
        // Alone among three: no majority.
        assert!(!acks.quorum_within(&three, 1, &vote(2), start, lease));
        acks.record(2, vote(2), start);
        assert!(acks.quorum_within(&three, 1, &vote(2), start, lease));
        // An ack as old as the lease no longer counts.
        assert!(!acks.quorum_within(&three, 1, &vote(2), start + lease, lease));
        // An ack under another vote (an earlier term) does not count.
        assert!(!acks.quorum_within(&three, 1, &vote(3), start, lease));
        // A late answer to an older append does not move the time back.
        acks.record(3, vote(2), start + lease);
        acks.record(3, vote(2), start);
        assert!(acks.quorum_within(&three, 1, &vote(2), start + lease, lease));
        // While the membership changes, each configuration needs its majority.
        let joint = [BTreeSet::from([1, 2, 3]), BTreeSet::from([4, 5, 6])];
        assert!(!acks.quorum_within(&joint, 1, &vote(2), start + lease, lease));
        acks.record(4, vote(2), start + lease);
        acks.record(5, vote(2), start + lease);
        assert!(acks.quorum_within(&joint, 1, &vote(2), start + lease, lease));
    }
}
