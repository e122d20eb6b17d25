//! Faults planted on purpose, so that the consistency checker
//! (`tessera check`) can show that it catches them. Only test builds (with
//! debug assertions) read `TESSERA_PLANTED_FAULT`; in a release build every
//! question here is answered `false` at compile time.

use std::sync::OnceLock;

/// The faults there are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// `early-ack`: a PUT is answered before meta commits it, so a read
    /// that follows the answer may miss the write.
    EarlyAck,
}

fn planted() -> Option<Fault> {
    static PLANTED: OnceLock<Option<Fault>> = OnceLock::new();
    if !cfg!(debug_assertions) {
        return None;
    }
    *PLANTED.get_or_init(
        || match std::env::var("TESSERA_PLANTED_FAULT").ok()?.as_str() {
            "early-ack" => {
                tracing::warn!("planted fault: PUTs are answered before meta commits them");
                Some(Fault::EarlyAck)
            }
            other => {
                tracing::warn!(fault = other, "unknown planted fault ignored");
                None
            }
        },
    )
}

/// Whether PUTs are answered before their commit (a planted fault).
pub fn early_ack() -> bool {
    planted() == Some(Fault::EarlyAck)
}
