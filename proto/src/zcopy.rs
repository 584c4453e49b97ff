//! Zero-copy send completions (`MSG_ZEROCOPY`, which C offers over RDS/TCP only): the
//! cookies of the sends whose pages the kernel is done with, which a socket reports to its
//! owner in `struct rds_zcopy_cookies` batches (`RDS_CMSG_ZCOPY_COMPLETION`).
//!
//! C keeps a list entry per completed send and never bounds it; here a socket's completions
//! live in a ring of fixed size, and a send takes its place in it before it is queued
//! ([`ZcRing::reserve`]), so a completion always has room and a socket that does not read
//! its completions stops sending zero-copy rather than have the kernel hold more for it.

/// `RDS_MAX_ZCOOKIES`: the cookies of one `struct rds_zcopy_cookies`.
pub const ZCOOKIES_MAX: usize = 8;

/// The size of `struct rds_zcopy_cookies`: `__u32 num; __u32 cookies[8];`.
pub const ZCOOKIES_LEN: usize = 4 + 4 * ZCOOKIES_MAX;

/// The state of a socket's completion ring; the caller keeps the ring's storage, a `[u32]`
/// that does not change size while the ring is in use.
///
/// Invariant: `len + reserved <= buf.len()` for the storage the calls are given; the cookies
/// are `buf[(head + i) % buf.len()]` for `i < len`, oldest first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZcRing {
    head: usize,
    len: usize,
    reserved: usize,
}

impl ZcRing {
    /// An empty ring.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            head: 0,
            len: 0,
            reserved: 0,
        }
    }

    /// Takes a place for one send's completion in a ring of `cap` places: false when every
    /// place is taken (by completions not yet read, or by sends not yet complete).
    pub fn reserve(&mut self, cap: usize) -> bool {
        let used = self.len.saturating_add(self.reserved);
        if used >= cap {
            return false;
        }
        self.reserved = self.reserved.saturating_add(1);
        true
    }

    /// Gives back a place a send took and will not use (it failed before it was queued).
    pub fn unreserve(&mut self) {
        self.reserved = self.reserved.saturating_sub(1);
    }

    /// A send that took a place completed with `cookie`: it is stored in `buf`. A completion
    /// without a place (not possible when every send reserves) is dropped; returns whether
    /// it was stored.
    pub fn complete(&mut self, buf: &mut [u32], cookie: u32) -> bool {
        if self.reserved == 0 || self.len >= buf.len() {
            return false;
        }
        let at = self
            .head
            .checked_add(self.len)
            .and_then(|i| i.checked_rem(buf.len()));
        match at.and_then(|i| buf.get_mut(i)) {
            Some(slot) => {
                *slot = cookie;
                self.reserved = self.reserved.saturating_sub(1);
                self.len = self.len.saturating_add(1);
                true
            }
            None => false,
        }
    }

    /// The number of completions to report.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.len
    }

    /// The oldest completions, at most [`ZCOOKIES_MAX`], as the `struct rds_zcopy_cookies`
    /// of a control message (native byte order), and how many they are; `None` when there
    /// are none. They stay in the ring until [`ZcRing::consume`].
    #[must_use]
    pub fn peek(&self, buf: &[u32]) -> Option<([u8; ZCOOKIES_LEN], usize)> {
        if self.len == 0 || buf.is_empty() {
            return None;
        }
        let n = self.len.min(ZCOOKIES_MAX);
        let mut out = [0u8; ZCOOKIES_LEN];
        let (num, cookies) = out.split_at_mut(4);
        // At most 8.
        num.copy_from_slice(&u32::try_from(n).unwrap_or(0).to_ne_bytes());
        for (i, dst) in cookies.chunks_exact_mut(4).take(n).enumerate() {
            let at = self.head.saturating_add(i).checked_rem(buf.len());
            let c = at.and_then(|a| buf.get(a)).copied().unwrap_or(0);
            dst.copy_from_slice(&c.to_ne_bytes());
        }
        Some((out, n))
    }

    /// Drops the `n` oldest completions (reported).
    pub fn consume(&mut self, n: usize, cap: usize) {
        let n = n.min(self.len);
        if let Some(h) = self.head.saturating_add(n).checked_rem(cap) {
            self.head = h;
        }
        self.len = self.len.saturating_sub(n);
    }
}
