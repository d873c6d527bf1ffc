//! The few system calls the stores share beyond reading and writing: free space (statvfs),
//! block allocation (fallocate), dropping written pages from the page cache (fadvise) and the
//! kernel's boot id; and the one cache prefetch hint the in-memory tables share.

use std::fs::{self, File};
use std::io;
use std::path::Path;

/// Percent of the file system holding `dir` that is free for unprivileged users (statvfs);
/// `None` for a file system that reports no blocks.
pub fn free_percent(dir: &Path) -> io::Result<Option<f64>> {
    let st = rustix::fs::statvfs(dir)?;
    if st.f_blocks == 0 {
        return Ok(None);
    }
    Ok(Some(st.f_bavail as f64 * 100.0 / st.f_blocks as f64))
}

/// Allocates the blocks of `len` bytes at `offset` of `file` (fallocate(2), through rustix's
/// safe wrapper). A file system without fallocate gets what glibc's posix_fallocate did for it:
/// a zero byte written into each block that reads as zero, which allocates it without changing
/// the contents. False when the file system cannot allocate at all.
pub fn allocate(file: &File, offset: u64, len: u64) -> io::Result<bool> {
    use rustix::fs::FallocateFlags;
    use rustix::io::Errno;
    match rustix::fs::fallocate(file, FallocateFlags::empty(), offset, len) {
        Ok(()) => Ok(true),
        Err(Errno::OPNOTSUPP) if len > 0 => {
            write_blocks(file, offset, len)?;
            Ok(true)
        }
        Err(Errno::OPNOTSUPP | Errno::INVAL) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Drops the whole pages of `file` below `end` from the page cache, those that are clean
/// (posix_fadvise DONTNEED; dirty pages stay). For bytes made durable and not
/// read again soon: their pages go back to the kernel's free lists for the next writes instead
/// of the cache growing into memory never touched before, which costs a virtual machine's
/// host a fault a page (the first write of a gigabyte ran at 470 MB/s on the machine of
/// docs/performance.md, rewrites of freed pages at 4.1 GB/s). A hint: a failure changes
/// nothing but speed, and is ignored.
pub fn drop_cached(file: &File, end: u64) {
    // The kernel drops whole pages of the range only (the page holding `end` stays). Its
    // length is signed: an `end` past that is the whole file (no length), and no length is
    // the whole file for 0 too, which drops nothing.
    let Some(len) = std::num::NonZeroU64::new(end) else {
        return;
    };
    let len = Some(len).filter(|l| l.get() <= i64::MAX as u64);
    let _ = rustix::fs::fadvise(file, 0, len, rustix::fs::Advice::DontNeed);
}

/// Allocates the blocks under `[offset, offset + len)` of `file` without changing its size
/// (fallocate KEEP_SIZE), so that appending there needs no room from the file system. A file
/// system that cannot allocate ahead gives no guarantee and no error: appending will tell.
pub fn allocate_ahead(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use rustix::fs::FallocateFlags;
    match rustix::fs::fallocate(file, FallocateFlags::KEEP_SIZE, offset, len) {
        Err(rustix::io::Errno::OPNOTSUPP) => Ok(()),
        r => r.map_err(io::Error::from),
    }
}

/// Allocates the blocks under `[offset, offset + len)` by writing a zero byte into each block
/// (of the file's preferred I/O size) whose last byte in the range reads as zero: the contents
/// stay as they were.
pub fn write_blocks(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let block = match file.metadata()?.blksize() {
        0 => 4096,
        b => b,
    };
    let Some(last) = offset.checked_add(len).and_then(|end| end.checked_sub(1)) else {
        return Ok(());
    };
    let mut at = offset - offset % block + block - 1;
    loop {
        let byte = at.min(last);
        let mut b = [0u8];
        if file.read_at(&mut b, byte)? == 0 || b[0] == 0 {
            file.write_all_at(&[0], byte)?;
        }
        if at >= last {
            return Ok(());
        }
        at += block;
    }
}

/// The running kernel's boot id (Linux), or `None` where there is none: then live slots are
/// never trusted and a restart always resumes from the last sync.
pub fn boot_id() -> Option<[u8; 16]> {
    let text = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let hex: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    if hex.len() != 32 {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        id[i] = u8::from_str_radix(s, 16).ok()?;
    }
    (id != [0; 16]).then_some(id)
}

/// Asks the CPU to bring the cache line holding `p` into the cache (x86_64 `prefetcht0`; nothing
/// elsewhere): a hint for a table whose places are known before they are read, so that several
/// waits for memory overlap. `p` need not be valid: a prefetch never faults and changes nothing
/// the program can observe.
#[inline]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults, whatever the address, and changes nothing
    // the program can observe; every x86_64 CPU has SSE.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_of_a_real_directory_is_a_percentage() {
        let dir = tempfile::TempDir::with_prefix("crawlfleet-sys-").unwrap();
        if let Some(p) = free_percent(dir.path()).unwrap() {
            assert!((0.0..=100.0).contains(&p), "{p}");
        }
        assert!(free_percent(&dir.path().join("absent")).is_err());
    }

    #[test]
    fn the_boot_id_is_stable_and_never_zero() {
        let id = boot_id();
        assert_eq!(id, boot_id());
        assert_ne!(id, Some([0; 16]));
    }
}
