//! A full disk is an answer, not an exit: how the stores and the node scheduler tell a full
//! file system from other I/O failures. Room can come back, so a store without it keeps what it
//! could not write queued and the node pauses the collection instead of stopping.
//!
//! A write that fails half-way (ENOSPC after some bytes went in) leaves a partial record at the
//! end of the file; appending the next record after it would put a good record behind garbage,
//! which a reader stops at (and everything after it is lost) or misreads. The logs therefore
//! write through [`crate::recordlog::LogWriter`], which cuts a failed write back off the file,
//! keeps the records queued in memory, in order, until a later write finds room, and reserves
//! room ahead where a record must never wait for it ([`crate::recordlog::LogWriter::reserve`]);
//! its [`crate::recordlog::LogError::is_no_space`] is [`is_full`].
//!
//! ```
//! use crawlfleet_core::diskfull::is_full;
//! let e = std::io::Error::from_raw_os_error(28); // ENOSPC
//! assert!(is_full(&e));
//! assert!(!is_full(&std::io::Error::from(std::io::ErrorKind::PermissionDenied)));
//! ```

use std::io;

/// True when `e` says the file system (or the process's quota or file size limit) has no room:
/// ENOSPC, EDQUOT, EFBIG. Room can come back; every other error is something else.
pub fn is_full(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded | io::ErrorKind::FileTooLarge
    ) || matches!(
        e.raw_os_error(),
        Some(c) if c == rustix::io::Errno::NOSPC.raw_os_error()
            || c == rustix::io::Errno::DQUOT.raw_os_error()
            || c == rustix::io::Errno::FBIG.raw_os_error()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_disk_errors_are_told_apart() {
        for code in [28, 122, 27] {
            assert!(is_full(&io::Error::from_raw_os_error(code)), "{code}");
        }
        assert!(!is_full(&io::Error::from_raw_os_error(5))); // EIO
        assert!(is_full(&io::Error::from(io::ErrorKind::StorageFull)));
    }
}
