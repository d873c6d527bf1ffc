//! Small helpers for the error kinds the loop treats specially.

use std::io;

/// The call would block: stop and wait for the next readiness event.
pub(crate) fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

/// The call was interrupted by a signal: retry it.
pub(crate) fn interrupted(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Interrupted
}
