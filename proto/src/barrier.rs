//! The RDMA barrier of rds-rs: operation ids and their high-water mark,
//! and the user ABI of the barrier socket option and the id control
//! message. This is an rds-rs extension, from RDS's founding design; Linux
//! C RDS no longer has it (`include/uapi/linux/rds.h` keeps only the
//! comment "deprecated: RDS_BARRIER 4").
//!
//! Every RDMA or atomic operation a socket sends to a destination gets an
//! id, increasing per (socket, destination) and starting at 1 (by one,
//! until the socket forgets idle destinations: [`SocketIds`]), which
//! `sendmsg` hands to the caller when it accepts the operation (see
//! [`RDS_CMSG_RDMA_ID`]). The core keeps the high-water mark: the largest
//! id `H` such that every operation with an id up to `H` has completed
//! locally, whatever the outcome (success, failure, cancel or drop all
//! count). The barrier socket option ([`RDS_BARRIER`]) returns the mark,
//! waiting (on a blocking socket) until it reaches a requested id.
//!
//! [`OpTracker`] is the id and mark bookkeeping of one (socket,
//! destination).
//!
//! `struct rds_barrier_args` ([`BarrierArgs`], [`BARRIER_ARGS_LEN`] =
//! 152), native-endian:
//!
//! | offset | field                                              |
//! |--------|----------------------------------------------------|
//! | 0      | `struct __kernel_sockaddr_storage dest` (128 bytes) |
//! | 128    | `__u64 wait_id`                                    |
//! | 136    | `__u64 mark_addr`                                  |
//! | 144    | `__u64 flags`                                      |

use super::rdma::{RDS_RDMA_DONTWAIT, SOCKADDR_STORAGE_LEN};

/// `RDS_BARRIER` (`SOL_RDS` socket option, rds-rs): `setsockopt(fd,
/// SOL_RDS, RDS_BARRIER, &args, sizeof(struct rds_barrier_args))` with a
/// [`BarrierArgs`]. The kernel writes the high-water mark of the socket's
/// operations to `dest` to `mark_addr`, after waiting until it reaches
/// `wait_id` unless the socket is non-blocking or `flags` has
/// [`RDS_RDMA_DONTWAIT`]. C RDS reserves option 4 for its deprecated
/// barrier.
pub const RDS_BARRIER: i32 = 4;

/// `RDS_CMSG_RDMA_ID` (`SOL_RDS` `sendmsg` control message, rds-rs): the
/// data is a `__u64` user address where the kernel writes (a `__u64`) the
/// id it gave the message's RDMA or atomic operation, when `sendmsg`
/// accepts the message.
pub const RDS_CMSG_RDMA_ID: i32 = 64;

/// The data length of an [`RDS_CMSG_RDMA_ID`] control message: one
/// `__u64`.
pub const RDMA_ID_CMSG_LEN: usize = 8;

/// `sizeof(struct rds_barrier_args)`.
pub const BARRIER_ARGS_LEN: usize = 152;

/// The [`BarrierArgs::flags`] bits the kernel knows: only
/// [`RDS_RDMA_DONTWAIT`] (the flag C documented as "Don't wait in
/// SET_BARRIER"). Others are reserved.
pub const BARRIER_FLAGS: u64 = RDS_RDMA_DONTWAIT;

/// `struct rds_barrier_args`: the argument of [`RDS_BARRIER`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BarrierArgs {
    /// The destination whose operations are meant: the bytes of a
    /// `struct __kernel_sockaddr_storage` holding a `sockaddr_in` or
    /// `sockaddr_in6`.
    pub dest: [u8; SOCKADDR_STORAGE_LEN],
    /// Wait until the mark reaches this id; 0 never waits.
    pub wait_id: u64,
    /// Where the kernel writes the mark (`__u64`); 0 for nowhere.
    pub mark_addr: u64,
    /// [`RDS_RDMA_DONTWAIT`]; see [`BARRIER_FLAGS`].
    pub flags: u64,
}

impl Default for BarrierArgs {
    fn default() -> Self {
        BarrierArgs {
            dest: [0; SOCKADDR_STORAGE_LEN],
            wait_id: 0,
            mark_addr: 0,
            flags: 0,
        }
    }
}

impl BarrierArgs {
    /// Reads the first [`BARRIER_ARGS_LEN`] bytes of `b`; `None` if
    /// shorter.
    #[must_use]
    pub fn decode(b: &[u8]) -> Option<Self> {
        let (dest, rest) = b.split_first_chunk::<SOCKADDR_STORAGE_LEN>()?;
        let (w, rest) = rest.split_first_chunk::<8>()?;
        let (m, rest) = rest.split_first_chunk::<8>()?;
        let f = rest.first_chunk::<8>()?;
        Some(BarrierArgs {
            dest: *dest,
            wait_id: u64::from_ne_bytes(*w),
            mark_addr: u64::from_ne_bytes(*m),
            flags: u64::from_ne_bytes(*f),
        })
    }

    /// The 152 bytes of the struct.
    #[must_use]
    pub fn encode(&self) -> [u8; BARRIER_ARGS_LEN] {
        let mut out = [0u8; BARRIER_ARGS_LEN];
        if let Some((dest, rest)) = out.split_first_chunk_mut::<SOCKADDR_STORAGE_LEN>() {
            *dest = self.dest;
            if let Some((w, rest)) = rest.split_first_chunk_mut::<8>() {
                *w = self.wait_id.to_ne_bytes();
                if let Some((m, rest)) = rest.split_first_chunk_mut::<8>() {
                    *m = self.mark_addr.to_ne_bytes();
                    if let Some(f) = rest.first_chunk_mut::<8>() {
                        *f = self.flags.to_ne_bytes();
                    }
                }
            }
        }
        out
    }
}

/// Where a barrier waiting for an id stands; see [`OpTracker::barrier`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarrierState {
    /// The mark is at or past the id (always for id 0).
    Reached,
    /// The id was issued and the mark has not reached it yet.
    Pending,
    /// The id was never issued, so the mark cannot reach it before more
    /// operations are sent.
    NeverIssued,
}

/// The operation ids of one (socket, destination) and their completion,
/// with a completion window of `W * 64` ids past the mark, held in a
/// fixed bitmap (no allocation).
///
/// Ids are issued in order from 1 (or [`OpTracker::starting_at`]). At most `W * 64` ids past the mark can
/// be outstanding or completed out of order ([`OpTracker::can_issue`]);
/// the caller holds further operations back (or fails them) until the mark
/// moves. Ids are `u64` and never wrap: the tracker stops issuing at
/// `u64::MAX`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpTracker<const W: usize> {
    /// The id the next operation gets.
    next: u64,
    /// The high-water mark; `mark < next`.
    mark: u64,
    /// Completion bits of ids in `(mark, next)`, id `i` at bit
    /// `i % (W * 64)`; every other bit is clear.
    done: [u64; W],
}

impl<const W: usize> OpTracker<W> {
    /// A tracker with nothing issued: next id 1, mark 0.
    #[must_use]
    pub const fn new() -> Self {
        Self::starting_at(1)
    }

    /// A tracker whose first id is `first` (at least 1) and whose mark is
    /// `first - 1`: for a destination every earlier operation of which (if
    /// any) completed with an id below `first`.
    #[must_use]
    pub const fn starting_at(first: u64) -> Self {
        let first = if first == 0 { 1 } else { first };
        OpTracker {
            next: first,
            mark: first.saturating_sub(1),
            done: [0; W],
        }
    }

    /// Whether every id issued has completed (the mark is just below the
    /// next id).
    #[must_use]
    pub const fn is_idle(&self) -> bool {
        self.mark.saturating_add(1) == self.next
    }

    /// The window size, `W * 64` ids (saturating).
    fn window() -> u64 {
        u64::try_from(W).unwrap_or(u64::MAX).saturating_mul(64)
    }

    /// The word index and bit mask of `id` in `done`.
    fn slot(id: u64) -> Option<(usize, u64)> {
        let pos = id.checked_rem(Self::window())?;
        let word = usize::try_from(pos.checked_div(64)?).ok()?;
        let bit = 1u64.checked_shl(u32::try_from(pos.checked_rem(64)?).ok()?)?;
        Some((word, bit))
    }

    /// Whether `id`'s completion bit is set.
    fn is_done(&self, id: u64) -> bool {
        match Self::slot(id) {
            Some((w, b)) => self.done.get(w).is_some_and(|x| x & b != 0),
            None => false,
        }
    }

    /// Sets (`on`) or clears `id`'s completion bit.
    fn set_done(&mut self, id: u64, on: bool) {
        if let Some((w, b)) = Self::slot(id) {
            if let Some(x) = self.done.get_mut(w) {
                if on {
                    *x |= b;
                } else {
                    *x &= !b;
                }
            }
        }
    }

    /// Whether another operation can be issued without its id falling
    /// outside the window: `next_id() - mark() <= W * 64` (and
    /// `next_id() < u64::MAX`). Always false with `W == 0`.
    #[must_use]
    pub fn can_issue(&self) -> bool {
        self.next < u64::MAX && self.next.saturating_sub(self.mark) <= Self::window()
    }

    /// Assigns the next id; `None` when not [`OpTracker::can_issue`].
    pub fn issue(&mut self) -> Option<u64> {
        if !self.can_issue() {
            return None;
        }
        let id = self.next;
        self.next = id.checked_add(1)?;
        Some(id)
    }

    /// Marks `id` complete and advances the mark over every contiguous
    /// completed id; returns whether the mark moved. Ids already complete,
    /// at or below the mark, or never issued are ignored (and return
    /// false).
    pub fn complete(&mut self, id: u64) -> bool {
        if id <= self.mark || id >= self.next || self.is_done(id) {
            return false;
        }
        self.set_done(id, true);
        let mut moved = false;
        while let Some(n) = self.mark.checked_add(1) {
            if n >= self.next || !self.is_done(n) {
                break;
            }
            self.set_done(n, false);
            self.mark = n;
            moved = true;
        }
        moved
    }

    /// The high-water mark: every id up to it has completed (0 before the
    /// first completion).
    #[must_use]
    pub const fn mark(&self) -> u64 {
        self.mark
    }

    /// The id the next operation will get.
    #[must_use]
    pub const fn next_id(&self) -> u64 {
        self.next
    }

    /// The number of ids issued and not yet complete.
    #[must_use]
    pub fn outstanding(&self) -> u64 {
        let span = self.next.saturating_sub(self.mark).saturating_sub(1);
        let done = self
            .done
            .iter()
            .fold(0u64, |acc, w| acc.saturating_add(u64::from(w.count_ones())));
        span.saturating_sub(done)
    }

    /// Whether a barrier waiting for `id` is satisfied: [`Reached`] when
    /// `mark() >= id`, [`NeverIssued`] when `id >= next_id()`, else
    /// [`Pending`].
    ///
    /// [`Reached`]: BarrierState::Reached
    /// [`Pending`]: BarrierState::Pending
    /// [`NeverIssued`]: BarrierState::NeverIssued
    #[must_use]
    pub const fn barrier(&self, id: u64) -> BarrierState {
        if id <= self.mark {
            BarrierState::Reached
        } else if id >= self.next {
            BarrierState::NeverIssued
        } else {
            BarrierState::Pending
        }
    }
}

impl<const W: usize> Default for OpTracker<W> {
    fn default() -> Self {
        Self::new()
    }
}

/// The socket-wide part of the id bookkeeping, which lets a socket forget
/// the [`OpTracker`] of a destination that has nothing outstanding (so the
/// trackers a socket keeps are bounded by its busy destinations, not by
/// every destination it ever sent an operation to).
///
/// - A destination without a tracker has no operation outstanding.
/// - Once any tracker was forgotten, a new tracker starts above every id
///   the socket has issued ([`SocketIds::first_id`]), so each
///   destination's ids keep increasing; until then it starts at 1.
/// - A barrier on a destination without a tracker ([`SocketIds::untracked`])
///   reports the mark `floor`, the largest id issued when a tracker was last
///   forgotten: every operation to that destination up to it has completed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SocketIds {
    /// The largest id issued to any destination.
    max_issued: u64,
    /// [`SocketIds::max_issued`] when a tracker was last forgotten; 0 while
    /// none was.
    floor: u64,
}

impl SocketIds {
    /// Nothing issued, nothing forgotten.
    #[must_use]
    pub const fn new() -> Self {
        SocketIds {
            max_issued: 0,
            floor: 0,
        }
    }

    /// The first id of a new tracker.
    #[must_use]
    pub const fn first_id(&self) -> u64 {
        if self.floor == 0 {
            1
        } else {
            self.max_issued.saturating_add(1)
        }
    }

    /// Records an id issued by any tracker.
    pub fn issued(&mut self, id: u64) {
        if id > self.max_issued {
            self.max_issued = id;
        }
    }

    /// Records that an idle tracker is forgotten.
    pub fn forgot(&mut self) {
        self.floor = self.max_issued;
    }

    /// The mark and barrier state of a destination without a tracker, for
    /// a barrier waiting for `id`: [`BarrierState::Reached`] for 0 and for
    /// ids up to the floor, else [`BarrierState::NeverIssued`].
    #[must_use]
    pub const fn untracked(&self, id: u64) -> (u64, BarrierState) {
        if id <= self.floor {
            (self.floor, BarrierState::Reached)
        } else {
            (self.floor, BarrierState::NeverIssued)
        }
    }
}
