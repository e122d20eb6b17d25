//! The group's requests have no handler over the store: the service serves
//! them from the group layer (`crate::group`) before any dispatch. These
//! implementations only complete the dispatch table.

use crate::state::MetaState;
use meta_api::{
    AddGroupMember, GetGroupSecrets, GetGroupStatus, Handle, MetaError, MetaRequest, RaftMessage,
    RemoveGroupMember, TakeGroupSnapshot, UnixMillis,
};

macro_rules! served_by_the_group {
    ($($request:ty),*) => {$(
        impl Handle<$request> for MetaState {
            fn handle(
                &self,
                _request: $request,
                _now: UnixMillis,
            ) -> Result<<$request as MetaRequest>::Response, MetaError> {
                Err(MetaError::Protocol(format!(
                    "{} is served by the group layer",
                    <$request as MetaRequest>::NAME
                )))
            }
        }
    )*};
}

served_by_the_group!(
    RaftMessage,
    GetGroupStatus,
    AddGroupMember,
    RemoveGroupMember,
    GetGroupSecrets,
    TakeGroupSnapshot
);
