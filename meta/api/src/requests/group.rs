//! Requests of the meta group: the Raft messages its members send each
//! other over the meta port, and `tessera admin meta`'s view and changes of
//! its membership.
//!
//! Raft's own messages travel as JSON text embedded in the frame as it is,
//! so that this crate (which every client of meta links) does not depend on
//! the Raft library, and a message is encoded and decoded once; meta
//! decodes it into the library's types.

use serde::{Deserialize, Serialize};

/// One Raft message between members (append entries, vote, a snapshot
/// chunk), encoded by meta's Raft layer; answered with the reply's encoding.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RaftMessage {
    /// Which message it is.
    pub kind: RaftMessageKind,
    /// The message, as the Raft layer encodes it.
    pub body: Box<serde_json::value::RawValue>,
}

/// The kinds of [`RaftMessage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RaftMessageKind {
    /// Log entries (or a heartbeat) from the leader.
    AppendEntries,
    /// A candidate asks for a vote.
    Vote,
    /// One chunk of a snapshot for a member too far behind the log.
    InstallSnapshot,
}

/// The group's members, leader and progress, as this member sees them.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GetGroupStatus;

/// What [`GetGroupStatus`] answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStatus {
    /// The member that answered.
    pub node_id: u64,
    /// Its role now: leader, follower, candidate or learner ("alone" for a
    /// meta that runs without a group).
    pub role: String,
    /// The leader it knows of.
    pub leader: Option<u64>,
    /// The current Raft term.
    pub term: u64,
    /// Index of the last log entry it holds.
    pub last_log_index: Option<u64>,
    /// Index of the last entry applied to its store.
    pub last_applied: Option<u64>,
    /// Index the latest snapshot covers.
    pub snapshot: Option<u64>,
    /// Every member: voters and learners with their addresses.
    pub members: Vec<GroupMember>,
}

impl GroupStatus {
    /// The status of a meta that runs without a group.
    pub fn alone() -> GroupStatus {
        GroupStatus {
            node_id: 0,
            role: "alone".into(),
            leader: None,
            term: 0,
            last_log_index: None,
            last_applied: None,
            snapshot: None,
            members: Vec::new(),
        }
    }
}

/// One member of the group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupMember {
    /// Its `--node-id`.
    pub id: u64,
    /// Its meta address (Raft shares it).
    pub addr: String,
    /// Whether it votes (a learner only receives the log).
    pub voter: bool,
}

/// Adds a member: it first receives the log (or a snapshot) as a learner,
/// then becomes a voter. Served by the leader.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AddGroupMember {
    /// The new member's `--node-id`.
    pub id: u64,
    /// Its meta address.
    pub addr: String,
}

/// Removes a member from the group. Served by the leader.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RemoveGroupMember {
    /// The member's `--node-id`.
    pub id: u64,
}

/// Takes a snapshot of the answering member's store now and drops the log
/// entries it covers (a member that is added later, or that fell behind
/// them, receives the snapshot). Answers the index it covers.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TakeGroupSnapshot;

/// The secrets every member of a group shares (the credential key and the
/// master key), for a member starting on an empty data folder. Admin only.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GetGroupSecrets;

/// What [`GetGroupSecrets`] answers: each secret file's name and text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupSecrets {
    /// File name in the data folder -> its contents.
    pub files: Vec<(String, String)>,
}
