//! A provided-buffer ring (Linux >= 5.19): the kernel picks a free buffer for each receive,
//! so no buffer is tied to an idle connection, and a buffer goes back by a store to the
//! ring's tail (no system call).

use io_uring::types::BufRingEntry;
use io_uring::Submitter;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

/// Buffer group id of the receive buffers (one group per ring).
pub const BGID: u16 = 7;

/// `count` buffers of `size` bytes, registered as buffer group `BGID` of one ring.
pub struct BufRing {
    entries: *mut BufRingEntry,
    layout: Layout,
    count: u16,
    /// Local tail: buffers handed back; published to the kernel by `publish`.
    tail: u16,
    data: Vec<u8>,
    size: usize,
}

// SAFETY: the ring is moved to its thread before use and used by that thread only; the raw
// pointer is owned memory like a Box.
unsafe impl Send for BufRing {}

impl BufRing {
    /// Allocate and register the ring. `count` must be a power of two (<= 32768).
    pub fn new(submitter: &Submitter<'_>, count: u16, size: usize) -> io::Result<BufRing> {
        assert!(count.is_power_of_two());
        let bytes = count as usize * std::mem::size_of::<BufRingEntry>();
        let layout = Layout::from_size_align(bytes, 4096).map_err(io::Error::other)?;
        // SAFETY: the layout has a non-zero size.
        let entries = unsafe { alloc_zeroed(layout) } as *mut BufRingEntry;
        if entries.is_null() {
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        }
        let mut ring = BufRing {
            entries,
            layout,
            count,
            tail: 0,
            data: vec![0u8; count as usize * size],
            size,
        };
        // SAFETY: the entries stay allocated until `self` is dropped, which the owner does only
        // after the io_uring is gone (or never, when it could not drain it).
        unsafe { submitter.register_buf_ring_with_flags(entries as u64, count, BGID, 0)? };
        for bid in 0..count {
            ring.recycle(bid);
        }
        ring.publish();
        Ok(ring)
    }

    /// Bytes per buffer.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The first `len` bytes of buffer `bid`, as filled by the kernel.
    ///
    /// # Safety
    /// The caller must not keep the slice past `recycle(bid)` or past the ring itself. (The
    /// kernel does not write into a buffer that is not in the ring, and `data` never moves, so
    /// the slice may outlive the borrow of `self`.)
    pub unsafe fn filled<'a>(&self, bid: u16, len: usize) -> &'a [u8] {
        let start = bid as usize * self.size;
        let len = len.min(self.size);
        std::slice::from_raw_parts(self.data.as_ptr().add(start), len)
    }

    /// Hand buffer `bid` back to the kernel (visible after the next `publish`).
    pub fn recycle(&mut self, bid: u16) {
        let slot = (self.tail & (self.count - 1)) as usize;
        // SAFETY: slot < count, inside the allocation.
        let e = unsafe { &mut *self.entries.add(slot) };
        e.set_addr(self.data.as_ptr() as u64 + (bid as usize * self.size) as u64);
        e.set_len(self.size as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Make the recycled buffers visible to the kernel (one release store).
    pub fn publish(&mut self) {
        // SAFETY: the tail field lives in the first entry and is only written by us.
        unsafe {
            let tail = BufRingEntry::tail(self.entries) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.entries as *mut u8, self.layout) };
    }
}
