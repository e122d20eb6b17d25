//! The short-circuit server: a Unix socket on which clients on this host get
//! committed blocks' open data files (SCM_RIGHTS) with their CRCs, and watch
//! for the blocks this datanode deletes, so that they drop those descriptors.
//! Messages are those of [`proto::wire::local`].
//!
//! Only committed blocks are served (the store's index holds nothing else;
//! uploads in progress and quarantined files are not in it). A client still
//! verifies every CRC, exactly as on the TCP path.

use crate::access::TokenGate;
use crate::error::StoreError;
use crate::store::BlockStore;
use proto::token::Modes;
use proto::wire::local::{self, LocalReply, LocalRequest, ReplicaInfo, MAX_REVOKED_PER_FRAME};
use proto::wire::{ErrorCode, ErrorReply, LocalInfo, ProtocolError, Reply};
use proto::BlockKey;
use std::fs::File;
use std::future::Future;
use std::io::ErrorKind;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinSet;

/// Binds the short-circuit socket at `path`, first removing a socket file a
/// previous run left behind (a socket something still answers on, or any
/// other file, is an error and stays), and lets only its owner connect.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(std::io::Error::new(
                    ErrorKind::AddrInUse,
                    format!("{} is served by a running process", path.display()),
                ));
            }
            std::fs::remove_file(path)?
        }
        Ok(_) => {
            return Err(std::io::Error::new(
                ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    // Whoever may connect gets block files: the owner only (and each peer's
    // uid is checked again on accept, whatever the file's mode).
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Whether a peer running as `peer_uid` may have block files: processes of
/// this datanode's own user, and root, which can read the files anyway.
fn peer_allowed(peer_uid: u32, own_uid: u32) -> bool {
    peer_uid == own_uid || peer_uid == 0
}

/// Serves short-circuit requests on `listener`, each block's token checked
/// by `gate`, until `shutdown` completes; then closes every connection
/// (watchers see the end of their stream and drop their descriptors) and
/// removes the socket file at `path`.
pub async fn serve(
    listener: UnixListener,
    path: PathBuf,
    store: Arc<BlockStore>,
    gate: Arc<TokenGate>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let own_uid = rustix::process::getuid().as_raw();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let peer = stream.peer_cred().map(|c| c.uid());
                    if !peer.as_ref().is_ok_and(|&uid| peer_allowed(uid, own_uid)) {
                        crate::telemetry::local_peer_refused();
                        tracing::warn!(peer_uid = ?peer.ok(), "short-circuit peer of another user refused");
                        continue;
                    }
                    connections.spawn(serve_connection(stream, store.clone(), gate.clone(), stop_rx.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "short-circuit accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    store.set_local_socket(None);
    drop(listener);
    let _ = stop_tx.send(true);
    while connections.join_next().await.is_some() {}
    if let Err(e) = std::fs::remove_file(&path) {
        tracing::debug!(path = %path.display(), error = %e, "could not remove the short-circuit socket");
    }
}

async fn serve_connection(
    stream: UnixStream,
    store: Arc<BlockStore>,
    gate: Arc<TokenGate>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let request = tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => return,
            request = local::read_local_request(&stream) => request,
        };
        let outcome = match request {
            Ok(LocalRequest::OpenBlock(key, token)) => {
                match gate.check(Some(&token), key, Modes::READ) {
                    Ok(()) => send_replica(&stream, &store, key).await,
                    Err(denied) => {
                        let refusal = LocalReply::Refused(denied.to_string()).encode();
                        local::send_with_fd(&stream, &refusal, None).await
                    }
                }
            }
            Ok(LocalRequest::Watch) => {
                watch_removals(&stream, &store, &mut stop).await;
                return;
            }
            Err(ProtocolError::Closed) => return,
            Err(e) => {
                tracing::debug!(error = %e, "bad short-circuit request; closing");
                let refusal = LocalReply::Refused(e.to_string()).encode();
                let _ = local::send_with_fd(&stream, &refusal, None).await;
                return;
            }
        };
        if let Err(e) = outcome {
            tracing::debug!(error = %e, "short-circuit client went away");
            return;
        }
    }
}

async fn send_replica(
    stream: &UnixStream,
    store: &Arc<BlockStore>,
    key: BlockKey,
) -> std::io::Result<()> {
    match open_replica(store, key).await {
        Ok((info, file)) => {
            crate::telemetry::request("short_circuit_open", "ok");
            let frame = LocalReply::Replica(info).encode();
            local::send_with_fd(stream, &frame, Some(file.as_fd())).await
        }
        Err(e) => {
            crate::telemetry::request("short_circuit_open", "refused");
            if e.is_local_failure() {
                tracing::error!(block = %key, error = %e, "short-circuit open failed");
            }
            let frame = LocalReply::Refused(e.to_string()).encode();
            local::send_with_fd(stream, &frame, None).await
        }
    }
}

/// Opens committed block `key`'s file (its data file, or the volume holding
/// it: the peer runs as the datanode's user, who can read every volume
/// anyway) and reads all its CRCs, checked against the store's index.
async fn open_replica(
    store: &Arc<BlockStore>,
    key: BlockKey,
) -> Result<(ReplicaInfo, Arc<File>), StoreError> {
    let opened = store.open_whole(key).await?;
    // Deleted while the files were being opened: do not hand it out.
    if store.block(key).is_none() {
        return Err(StoreError::NotFound(key));
    }
    let info = ReplicaInfo {
        offset: opened.base,
        length: opened.meta.length,
        bytes_per_checksum: opened.meta.bytes_per_checksum,
        crcs: opened.crcs,
    };
    Ok((info, opened.file))
}

/// Pushes the keys of deleted blocks to a watching client until it goes
/// away or the datanode stops. A watcher that falls too far behind is
/// disconnected, which makes it drop every descriptor of this datanode.
async fn watch_removals(
    stream: &UnixStream,
    store: &Arc<BlockStore>,
    stop: &mut watch::Receiver<bool>,
) {
    // Subscribed before the acknowledgement: no deletion after it is missed.
    let mut removals = store.subscribe_removals();
    let ack = LocalReply::Watching {
        datanode_id: store.id().0.clone(),
    };
    if local::send_with_fd(stream, &ack.encode(), None)
        .await
        .is_err()
    {
        return;
    }
    let mut probe = [0u8; 1];
    loop {
        let first = tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => return,
            // A watcher never sends after Watch: readable means it closed.
            _ = stream.readable() => match stream.try_read(&mut probe) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                _ => return,
            },
            key = removals.recv() => key,
        };
        let mut keys = match first {
            Ok(key) => vec![key],
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "a short-circuit watcher fell behind; disconnecting it"
                );
                return;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        while keys.len() < MAX_REVOKED_PER_FRAME {
            match removals.try_recv() {
                Ok(key) => keys.push(key),
                Err(broadcast::error::TryRecvError::Lagged(_)) => return,
                Err(_) => break,
            }
        }
        let frame = LocalReply::Revoked(keys).encode();
        if local::send_with_fd(stream, &frame, None).await.is_err() {
            return;
        }
    }
}

/// The answer to a TCP `LocalInfo` request: where this datanode's socket is
/// and which host it runs on, or a refusal when it serves no socket.
pub(crate) fn info_reply(store: &BlockStore) -> Reply {
    match (store.local_socket(), local::host_token()) {
        (Some(path), Some(host_token)) => Reply::LocalInfo(LocalInfo {
            host_token,
            datanode_id: store.id().0.clone(),
            socket_path: path.display().to_string(),
        }),
        _ => Reply::Error(ErrorReply {
            code: ErrorCode::Invalid,
            offset: None,
            message: "this datanode serves no short-circuit reads".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_and_root_are_peers() {
        assert!(peer_allowed(1000, 1000));
        assert!(peer_allowed(0, 1000));
        assert!(!peer_allowed(1001, 1000));
        assert!(!peer_allowed(65534, 0));
    }
}
