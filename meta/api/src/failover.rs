//! A client of a meta group: one [`RemoteMeta`] per member, the request
//! sent to the member believed to lead, and on to the next when that one is
//! down or answers [`MetaError::NotLeader`], for as long as an election may
//! take.
//!
//! A request that reached a member and lost its answer is sent again only
//! when it changes nothing ([`Access::Write`] requests are not): the write
//! may have been applied, and its caller must treat it so.

use crate::error::MetaError;
use crate::remote::{Failure, RemoteMeta};
use crate::requests::{Access, AnyRequest, AnyResponse};
use crate::transport::MetaTransport;
use futures::future::BoxFuture;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tls::ClusterTls;

/// How long a request to a group keeps looking for a leader: longer than an
/// election takes (a few hundred milliseconds), with room for a restart.
const LEADER_WAIT: Duration = Duration::from_secs(20);
/// First pause after every member failed once; doubled up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_millis(800);

/// A client of the meta group whose members are at the given addresses.
pub struct GroupClient {
    /// How long a request looks for a leader: [`LEADER_WAIT`] for a group,
    /// nothing more than one pass for a single address.
    leader_wait: Duration,
    token: String,
    tls: Option<Arc<ClusterTls>>,
    members: RwLock<Vec<Arc<RemoteMeta>>>,
    /// Index in `members` of the member believed to lead.
    leader: AtomicUsize,
}

impl std::fmt::Debug for GroupClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addrs: Vec<String> = self
            .members
            .read()
            .iter()
            .map(|m| m.addr().to_string())
            .collect();
        f.debug_struct("GroupClient")
            .field("members", &addrs)
            .finish()
    }
}

impl GroupClient {
    /// A client of the members at `addrs`, presenting `token`, over mutual
    /// TLS when `tls` is set. No I/O until the first call.
    pub fn new(addrs: &[&str], token: &str, tls: Option<Arc<ClusterTls>>) -> GroupClient {
        let client = GroupClient {
            leader_wait: if addrs.len() > 1 {
                LEADER_WAIT
            } else {
                Duration::ZERO
            },
            token: token.to_string(),
            tls,
            members: RwLock::new(Vec::new()),
            leader: AtomicUsize::new(0),
        };
        for addr in addrs {
            client.member(addr);
        }
        client
    }

    /// The index of the member at `addr`, added when the client did not know it.
    fn member(&self, addr: &str) -> usize {
        if let Some(i) = self.members.read().iter().position(|m| m.addr() == addr) {
            return i;
        }
        let mut members = self.members.write();
        if let Some(i) = members.iter().position(|m| m.addr() == addr) {
            return i;
        }
        members.push(Arc::new(
            RemoteMeta::new(addr, &self.token).with_tls(self.tls.clone()),
        ));
        members.len() - 1
    }

    /// Sends `request` to the leader, looking for it as needed.
    pub async fn call(&self, request: &AnyRequest) -> Result<AnyResponse, MetaError> {
        let resend_lost = request.access() != Access::Write;
        let deadline = tokio::time::Instant::now() + self.leader_wait;
        let mut pause = FIRST_PAUSE;
        loop {
            let mut last = None;
            // One pass over the members, starting at the believed leader,
            // with one more try for a leader a member named.
            let mut next = self.leader.load(Ordering::Relaxed);
            let mut tried = 0;
            while tried <= self.members.read().len() {
                tried += 1;
                let Some(member) = self.members.read().get(next).cloned() else {
                    next = 0;
                    continue;
                };
                match member.attempt(request).await {
                    Ok(answer) => {
                        self.leader.store(next, Ordering::Relaxed);
                        return Ok(answer);
                    }
                    Err(Failure::Answered(MetaError::NotLeader { leader: Some(addr) }))
                        if addr != member.addr() =>
                    {
                        next = self.member(&addr);
                        last = Some(MetaError::NotLeader { leader: Some(addr) });
                        continue;
                    }
                    Err(Failure::Answered(e @ MetaError::NotLeader { .. })) => last = Some(e),
                    Err(Failure::Unreached(e @ MetaError::Transport(_))) => last = Some(e),
                    Err(Failure::Lost(e)) if resend_lost => last = Some(e),
                    Err(failure) => return Err(failure.into_error()),
                }
                next = (next + 1) % self.members.read().len();
            }
            let last = last.unwrap_or_else(|| MetaError::Transport("no meta address".into()));
            if tokio::time::Instant::now() + pause > deadline {
                return Err(last);
            }
            tracing::debug!(error = %last, "no meta leader answered, trying again");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }
}

impl MetaTransport for GroupClient {
    fn send(&self, request: AnyRequest) -> BoxFuture<'_, Result<AnyResponse, MetaError>> {
        Box::pin(async move { self.call(&request).await })
    }
}
