//! A full disk is an answer, not an exit: what the stores and the node scheduler share to tell a
//! full file system from other I/O failures, to cut a partly written record back off a file,
//! and to keep appending in memory while the disk has no room.
//!
//! A write that fails half-way (ENOSPC after some bytes went in) leaves a partial record at the
//! end of the file. Appending the next record after it would put a good record behind garbage,
//! which a reader stops at (and everything after it is lost) or misreads. [`append_or_cut`]
//! therefore truncates the file back to the end of the last whole record when a write fails, and
//! [`Appender`] keeps the records that could not be written queued in memory, in order, until a
//! later write finds room.
//!
//! ```
//! use crawlfleet_core::diskfull::is_full;
//! let e = std::io::Error::from_raw_os_error(28); // ENOSPC
//! assert!(is_full(&e));
//! assert!(!is_full(&std::io::Error::from(std::io::ErrorKind::PermissionDenied)));
//! ```

use std::fs::File;
use std::io::{self, Write};

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

/// A file that can be cut back to a length and made durable (a [`File`]; a test's fake).
pub trait LogFile: Write {
    /// Truncates the file to `len` bytes.
    fn cut_back(&mut self, len: u64) -> io::Result<()>;
    /// Makes the file's data durable (fdatasync).
    fn sync_data(&mut self) -> io::Result<()>;
    /// Allocates the blocks under `[offset, offset + len)` without changing the file's size,
    /// so that appending there needs no room from the file system.
    fn allocate(&mut self, offset: u64, len: u64) -> io::Result<()>;
}

impl LogFile for File {
    fn cut_back(&mut self, len: u64) -> io::Result<()> {
        self.set_len(len)
    }
    fn sync_data(&mut self) -> io::Result<()> {
        File::sync_data(self)
    }
    fn allocate(&mut self, offset: u64, len: u64) -> io::Result<()> {
        use rustix::fs::{fallocate, FallocateFlags};
        match fallocate(&*self, FallocateFlags::KEEP_SIZE, offset, len) {
            // A file system that cannot allocate ahead gives no guarantee; appending will tell.
            Err(rustix::io::Errno::OPNOTSUPP) => Ok(()),
            r => r.map_err(io::Error::from),
        }
    }
}

/// Appends `bytes` (whole records) to `file`, whose length is `*len`, opened for appending. On
/// success `*len` grows by `bytes.len()`. On failure the file is cut back to `*len`, so no part
/// of `bytes` stays behind to be followed by later records; if even the cut fails, the error
/// says so (the caller must not append again before the file is cut).
pub fn append_or_cut<F: LogFile>(file: &mut F, len: &mut u64, bytes: &[u8]) -> io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    match file.write_all(bytes).and_then(|()| file.flush()) {
        Ok(()) => {
            *len += bytes.len() as u64;
            Ok(())
        }
        Err(e) => match file.cut_back(*len) {
            Ok(()) => Err(e),
            Err(cut) => Err(io::Error::new(
                e.kind(),
                format!("{e}; cutting the partial record off failed too: {cut}"),
            )),
        },
    }
}

/// An append-only file of whole records with a write buffer that never loses a record: a
/// record is queued in memory ([`Appender::push`]), written when the queue reaches its capacity
/// or at [`Appender::sync`], and a failed write is cut back off the file and stays queued. While
/// the disk is full, pushes keep queueing (nothing is refused) and only `sync` reports the error.
pub struct Appender<F: LogFile = File> {
    file: F,
    /// Bytes of whole records in the file.
    len: u64,
    /// Records queued and not yet written.
    pending: Vec<u8>,
    /// Queued bytes written at once without waiting for a sync.
    cap: usize,
    /// Bytes written since the last fdatasync.
    dirty: bool,
    /// The file's blocks are allocated up to here ([`Appender::reserve`]).
    reserved_to: u64,
}

impl<F: LogFile> Appender<F> {
    /// Appends to `file`, which holds `len` bytes of whole records; writes whenever `cap`
    /// bytes are queued.
    pub fn new(file: F, len: u64, cap: usize) -> Self {
        Appender {
            file,
            len,
            pending: Vec::new(),
            cap,
            dirty: false,
            reserved_to: 0,
        }
    }

    /// Makes sure `need` more bytes (past what is queued) can be appended without room from
    /// the file system, allocating at least `chunk` bytes ahead when it must: a full disk then
    /// fails here, before the caller does what the record must be journaled for.
    pub fn reserve(&mut self, need: u64, chunk: u64) -> io::Result<()> {
        let end = self.len() + need;
        if end <= self.reserved_to {
            return Ok(());
        }
        let to = end.max(self.len() + chunk);
        self.file.allocate(self.len, to - self.len)?;
        self.reserved_to = to;
        Ok(())
    }

    /// Queues one whole record. Writes the queue when it reached the capacity; a full disk
    /// leaves it queued (reported by the next [`Appender::sync`]), any other failure is returned
    /// with the record still queued.
    pub fn push(&mut self, record: &[u8]) -> io::Result<()> {
        self.pending.extend_from_slice(record);
        if self.pending.len() < self.cap {
            return Ok(());
        }
        match self.write() {
            Err(e) if is_full(&e) => Ok(()),
            r => r,
        }
    }

    /// Writes the queued records (no waiting for the disk); on failure they stay queued and the
    /// file is cut back to its last whole record.
    pub fn write(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        if let Err(e) = append_or_cut(&mut self.file, &mut self.len, &self.pending) {
            // The cut may have released the blocks allocated ahead.
            self.reserved_to = self.len;
            return Err(e);
        }
        self.pending.clear();
        self.dirty = true;
        Ok(())
    }

    /// Writes the queued records and makes the file durable.
    pub fn sync(&mut self) -> io::Result<()> {
        self.write()?;
        if self.dirty {
            self.file.sync_data()?;
            self.dirty = false;
        }
        Ok(())
    }

    /// Empties the file and the queue, durably.
    pub fn clear(&mut self) -> io::Result<()> {
        self.pending.clear();
        self.file.cut_back(0)?;
        self.len = 0;
        self.reserved_to = 0;
        self.file.sync_data()?;
        self.dirty = false;
        Ok(())
    }

    /// Bytes of whole records in the file and queued.
    pub fn len(&self) -> u64 {
        self.len + self.pending.len() as u64
    }

    /// True when nothing is in the file or queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes queued and not written.
    pub fn queued(&self) -> usize {
        self.pending.len()
    }

    /// The file.
    pub fn file(&self) -> &F {
        &self.file
    }
}

impl<F: LogFile> Drop for Appender<F> {
    /// A clean close writes what is queued (no fdatasync); a failure leaves it unwritten, as
    /// a crash would.
    fn drop(&mut self) {
        let _ = self.write();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file on a disk with `room` bytes left: a write takes what fits and then fails with
    /// ENOSPC, as write(2) does.
    struct SmallDisk {
        data: Vec<u8>,
        room: usize,
        syncs: usize,
    }

    impl SmallDisk {
        fn new(room: usize) -> Self {
            SmallDisk {
                data: Vec::new(),
                room,
                syncs: 0,
            }
        }
    }

    impl Write for SmallDisk {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let free = self.room.saturating_sub(self.data.len());
            if free == 0 {
                return Err(io::Error::from_raw_os_error(28));
            }
            let n = buf.len().min(free);
            self.data.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl LogFile for SmallDisk {
        fn cut_back(&mut self, len: u64) -> io::Result<()> {
            self.data.truncate(len as usize);
            Ok(())
        }
        fn sync_data(&mut self) -> io::Result<()> {
            self.syncs += 1;
            Ok(())
        }
        fn allocate(&mut self, offset: u64, len: u64) -> io::Result<()> {
            if (offset + len) as usize > self.room {
                return Err(io::Error::from_raw_os_error(28));
            }
            Ok(())
        }
    }

    #[test]
    fn a_partial_write_is_cut_back_to_the_last_whole_record() {
        let mut disk = SmallDisk::new(10);
        let mut len = 0;
        append_or_cut(&mut disk, &mut len, b"aaaa").unwrap();
        let e = append_or_cut(&mut disk, &mut len, b"bbbbbbbb").unwrap_err();
        assert!(is_full(&e), "{e}");
        // Six bytes of the record went in before the disk was full; they are gone again.
        assert_eq!(disk.data, b"aaaa");
        assert_eq!(len, 4);
        disk.room = 100;
        append_or_cut(&mut disk, &mut len, b"cc").unwrap();
        assert_eq!(disk.data, b"aaaacc");
        assert_eq!(len, 6);
    }

    #[test]
    fn records_wait_in_memory_while_the_disk_is_full_and_go_out_in_order() {
        let mut a = Appender::new(SmallDisk::new(6), 0, 4);
        a.push(b"11").unwrap();
        a.push(b"22").unwrap(); // the capacity: written
        assert_eq!(a.file().data, b"1122");
        a.push(b"333").unwrap(); // the capacity again: 2 bytes fit, cut back, kept queued
        assert_eq!(a.file().data, b"1122");
        a.push(b"44").unwrap();
        assert_eq!(a.queued(), 5);
        assert_eq!(a.len(), 9);
        let e = a.sync().unwrap_err();
        assert!(is_full(&e));
        assert_eq!(a.file().data, b"1122");
        assert_eq!(a.file().syncs, 0);
        a.file.room = 100;
        a.sync().unwrap();
        assert_eq!(a.file().data, b"112233344");
        assert_eq!(a.file().syncs, 1);
        a.sync().unwrap();
        assert_eq!(a.file().syncs, 1, "nothing new: no fdatasync");
    }

    #[test]
    fn room_reserved_ahead_is_asked_for_once_per_chunk_and_refused_when_full() {
        let mut a = Appender::new(SmallDisk::new(20), 0, 1 << 10);
        a.reserve(4, 8).unwrap(); // blocks up to 8
        a.push(b"1234").unwrap();
        a.reserve(4, 8).unwrap(); // 4 queued + 4 needed: within the 8 reserved
        a.push(b"5678").unwrap();
        a.reserve(4, 8).unwrap(); // past 8: up to 16
        a.sync().unwrap();
        assert_eq!(a.reserved_to, 16);
        a.push(b"abcdefgh").unwrap();
        let e = a.reserve(8, 8).unwrap_err(); // 24 > 20
        assert!(is_full(&e));
        a.sync().unwrap();
        assert_eq!(a.file().data, b"12345678abcdefgh");
    }

    #[test]
    fn other_errors_are_returned_with_the_record_kept() {
        struct Broken(Vec<u8>);
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::from(io::ErrorKind::PermissionDenied))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        impl LogFile for Broken {
            fn cut_back(&mut self, len: u64) -> io::Result<()> {
                self.0.truncate(len as usize);
                Ok(())
            }
            fn sync_data(&mut self) -> io::Result<()> {
                Ok(())
            }
            fn allocate(&mut self, _: u64, _: u64) -> io::Result<()> {
                Ok(())
            }
        }
        let mut a = Appender::new(Broken(Vec::new()), 0, 1);
        let e = a.push(b"x").unwrap_err();
        assert!(!is_full(&e));
        assert_eq!(a.queued(), 1);
    }

    #[test]
    fn full_disk_errors_are_told_apart() {
        for code in [28, 122, 27] {
            assert!(is_full(&io::Error::from_raw_os_error(code)), "{code}");
        }
        assert!(!is_full(&io::Error::from_raw_os_error(5))); // EIO
        assert!(is_full(&io::Error::from(io::ErrorKind::StorageFull)));
    }
}
