//! A connection's send queue: two priorities (MS-FSCMT 2.2.1) and coalesced writes.
//!
//! A high-priority send goes after the send being written (its bytes are already partly on the
//! wire, and cutting it would corrupt the stream) but ahead of every queued normal-priority send.
//! High sends keep their order among themselves, as do normal ones. One `writev` carries as many
//! queued sends as fit in [`MAX_IOV`] slices and [`MAX_WRITE`] bytes.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};

use crawlfleet_core::frame::Priority;

use crate::event::Unsent;
use crate::io_util::{interrupted, would_block};

/// Most slices given to one `writev` (Linux allows 1024).
pub(crate) const MAX_IOV: usize = 256;
/// Most bytes offered to one `writev`; the kernel takes what fits in the socket buffer anyway.
pub(crate) const MAX_WRITE: usize = 4 << 20;

/// Where a flush stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flushed {
    /// Everything queued is written.
    Empty,
    /// The socket is full; wait for the next writable event.
    Blocked,
}

/// The queue. `head` is the send being written, with how much of it is written already.
#[derive(Debug, Default)]
pub(crate) struct SendQueue {
    head: Option<(Vec<u8>, usize)>,
    high: VecDeque<Vec<u8>>,
    normal: VecDeque<Vec<u8>>,
    /// Unwritten bytes in the whole queue.
    bytes: usize,
}

impl SendQueue {
    /// Queues one send (the bytes of one or more whole messages). Empty sends are ignored.
    pub(crate) fn push(&mut self, priority: Priority, bytes: Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        self.bytes += bytes.len();
        match priority {
            Priority::High => self.high.push_back(bytes),
            Priority::Normal => self.normal.push_back(bytes),
        }
    }

    /// True when nothing is left to write.
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// What is still queued: used for the Closed event, and when the queue is dropped.
    pub(crate) fn unsent(&self) -> Unsent {
        Unsent {
            sends: self.high.len() + self.normal.len(),
            bytes: self.bytes,
        }
    }

    /// Writes until the queue is empty or the writer would block. `Ok(0)` from the writer is an
    /// error (`WriteZero`): the peer cannot take more.
    pub(crate) fn flush_to<W: Write>(&mut self, w: &mut W) -> io::Result<Flushed> {
        while !self.is_empty() {
            let written = {
                let mut iov = [IoSlice::new(&[]); MAX_IOV];
                let n = self.gather(&mut iov);
                match w.write_vectored(&iov[..n]) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(written) => written,
                    Err(e) if would_block(&e) => return Ok(Flushed::Blocked),
                    Err(e) if interrupted(&e) => continue,
                    Err(e) => return Err(e),
                }
            };
            self.advance(written);
        }
        Ok(Flushed::Empty)
    }

    /// Fills `iov` in write order (head, high, normal); returns how many slices it used.
    fn gather<'a>(&'a self, iov: &mut [IoSlice<'a>; MAX_IOV]) -> usize {
        let head = self
            .head
            .iter()
            .map(|(b, done)| b.get(*done..).unwrap_or(&[]));
        let rest = self
            .high
            .iter()
            .chain(self.normal.iter())
            .map(Vec::as_slice);
        let mut n = 0;
        let mut total = 0;
        for chunk in head.chain(rest) {
            if n == MAX_IOV || (total >= MAX_WRITE && n > 0) {
                break;
            }
            iov[n] = IoSlice::new(chunk);
            total += chunk.len();
            n += 1;
        }
        n
    }

    /// Drops `n` written bytes from the front, in the order [`SendQueue::gather`] used. A send
    /// written only in part becomes the head.
    fn advance(&mut self, mut n: usize) {
        self.bytes = self.bytes.saturating_sub(n);
        if let Some((buf, done)) = &mut self.head {
            let left = buf.len() - *done;
            if n < left {
                *done += n;
                return;
            }
            n -= left;
            self.head = None;
        }
        while n > 0 {
            let Some(buf) = self.high.pop_front().or_else(|| self.normal.pop_front()) else {
                // The writer claimed more than we offered; nothing left to drop.
                break;
            };
            if n < buf.len() {
                self.head = Some((buf, n));
                return;
            }
            n -= buf.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that takes at most `cap` bytes per call, then blocks after `calls_left` calls.
    struct Sink {
        out: Vec<u8>,
        cap: usize,
        calls_left: usize,
        calls: usize,
    }

    impl Sink {
        fn new(cap: usize, calls_left: usize) -> Self {
            Sink {
                out: Vec::new(),
                cap,
                calls_left,
                calls: 0,
            }
        }
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.write_vectored(&[IoSlice::new(buf)])
        }

        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            if self.calls_left == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.calls_left -= 1;
            self.calls += 1;
            let mut room = self.cap;
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(room);
                self.out.extend_from_slice(&b[..take]);
                room -= take;
                n += take;
            }
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn many_small_sends_go_out_in_one_write() {
        let mut q = SendQueue::default();
        let mut expect = Vec::new();
        for i in 0..200u32 {
            let b = i.to_be_bytes().to_vec();
            expect.extend_from_slice(&b);
            q.push(Priority::Normal, b);
        }
        let mut sink = Sink::new(usize::MAX, usize::MAX);
        assert_eq!(q.flush_to(&mut sink).unwrap(), Flushed::Empty);
        assert_eq!(sink.calls, 1, "200 sends should share one writev");
        assert_eq!(sink.out, expect);
    }

    #[test]
    fn more_sends_than_iov_slots_take_few_writes() {
        let mut q = SendQueue::default();
        for i in 0..(MAX_IOV * 3) {
            q.push(Priority::Normal, vec![i as u8; 3]);
        }
        let mut sink = Sink::new(usize::MAX, usize::MAX);
        q.flush_to(&mut sink).unwrap();
        assert_eq!(sink.calls, 3);
        assert_eq!(sink.out.len(), MAX_IOV * 9);
    }

    #[test]
    fn high_goes_after_the_partial_head_and_before_queued_normals() {
        let mut q = SendQueue::default();
        q.push(Priority::Normal, b"AAAA".to_vec());
        q.push(Priority::Normal, b"BBBB".to_vec());
        q.push(Priority::Normal, b"CCCC".to_vec());
        // The socket takes 6 bytes, then blocks: AAAA written, BB of BBBB written.
        let mut sink = Sink::new(6, 1);
        assert_eq!(q.flush_to(&mut sink).unwrap(), Flushed::Blocked);
        q.push(Priority::High, b"hh".to_vec());
        q.push(Priority::High, b"HH".to_vec());
        assert_eq!(
            q.unsent(),
            Unsent {
                sends: 3,
                bytes: 10
            }
        );
        sink.calls_left = usize::MAX;
        sink.cap = usize::MAX;
        assert_eq!(q.flush_to(&mut sink).unwrap(), Flushed::Empty);
        assert_eq!(sink.out, b"AAAABBBBhhHHCCCC");
        assert!(q.is_empty());
    }

    #[test]
    fn byte_at_a_time_writer_keeps_the_stream_intact() {
        let mut q = SendQueue::default();
        let mut expect = Vec::new();
        for i in 0..20u8 {
            let b = vec![i; usize::from(i) + 1];
            if i % 3 == 0 {
                q.push(Priority::High, b);
            } else {
                expect.extend_from_slice(&b);
                q.push(Priority::Normal, b);
            }
        }
        let mut sink = Sink::new(1, usize::MAX);
        q.flush_to(&mut sink).unwrap();
        let high: Vec<u8> = (0..20u8)
            .filter(|i| i % 3 == 0)
            .flat_map(|i| vec![i; usize::from(i) + 1])
            .collect();
        assert_eq!(sink.out[..high.len()], high[..]);
        assert_eq!(sink.out[high.len()..], expect[..]);
    }

    #[test]
    fn zero_write_is_an_error() {
        let mut q = SendQueue::default();
        q.push(Priority::Normal, b"x".to_vec());
        let mut sink = Sink::new(0, usize::MAX);
        assert_eq!(
            q.flush_to(&mut sink).unwrap_err().kind(),
            io::ErrorKind::WriteZero
        );
    }
}
