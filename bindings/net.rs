// SPDX-License-Identifier: GPL-2.0

//! Socket families implemented in Rust.
//!
//! C headers: [`include/linux/net.h`](srctree/include/linux/net.h),
//! [`include/net/sock.h`](srctree/include/net/sock.h).
//!
//! A socket family gives the kernel three tables: a `struct proto` (the memory of each socket,
//! here a [`SockMem`]), a `struct net_proto_family` (whose `create` is called by `socket(2)`),
//! and the `struct proto_ops` every socket of the family uses. A [`Family`] implementation
//! supplies the per-socket state and the policy; [`Registration`] installs the tables and the
//! `extern "C"` callbacks that connect the C socket layer to the implementation.

use super::mm::{UserPage, UserPages};
use super::raw;
use super::sync::ProcessCtx;
use core::{
    marker::PhantomData,
    mem::{offset_of, size_of},
    ptr::{self, NonNull},
    sync::atomic::{AtomicBool, AtomicPtr, Ordering},
};
use kernel::{
    error::{from_result, to_result},
    ffi::{self, c_char, c_int, c_void},
    page::Page,
    prelude::*,
    sync::{Arc, ArcBorrow},
    types::{ForeignOwnable, Opaque},
    uaccess::{UserPtr, UserSlice},
    ThisModule,
};

/// `SOCK_SEQPACKET`, the only socket type RDS accepts.
pub(crate) const SOCK_SEQPACKET: i32 = raw::sock_type_SOCK_SEQPACKET as i32;

/// Identifies a network namespace (the address of its `struct net`).
///
/// Only compared, never dereferenced. A user socket holds a reference on its namespace for its
/// whole life, so the identity of a live socket's namespace cannot be reused; a kernel socket
/// (`kern`) holds none, and, as for every kernel socket, its creator must release it before
/// its namespace exits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct NetId(usize);

/// The size of the address buffer `getname` fills: a `struct sockaddr_in6`, the largest
/// address an inet-style family returns (callers pass a `struct sockaddr_storage`).
pub(crate) const GETNAME_LEN: usize = 28;

impl NetId {
    /// The identity of the namespace at `net`.
    pub(super) fn from_raw(net: *mut raw::net) -> Self {
        NetId(net as usize)
    }

    /// The namespace's `struct net`, for the bindings that make kernel sockets in it (the
    /// namespace must be alive: see the type's documentation).
    pub(super) fn as_raw(self) -> *mut raw::net {
        self.0 as *mut raw::net
    }

    /// A number that identifies the namespace while it exists (for hashing).
    pub(crate) fn id(self) -> usize {
        self.0
    }

    /// The initial network namespace.
    pub(crate) fn init() -> Self {
        // Taking the address of a static reads nothing.
        NetId(ptr::addr_of!(raw::init_net) as usize)
    }
}

/// The value of a `setsockopt(2)` call: user memory, or kernel memory for in-kernel callers
/// (a `sockptr_t`), and its length.
///
/// # Invariants
///
/// `ptr` is the `optval` of the current `setsockopt` call: user memory (which the copy helpers
/// check), or kernel memory valid for reads of `len` bytes for the duration of the call.
pub(crate) struct OptVal {
    ptr: raw::sockptr_t,
    len: u32,
}

impl OptVal {
    /// The length the caller passed (`optlen`).
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// Reads an `int` from the start of the value. As in C, the caller checks the length
    /// first; this fails only with `EFAULT` when the memory cannot be read.
    pub(crate) fn read_int(&self) -> Result<i32> {
        if self.len() < size_of::<c_int>() {
            return Err(EFAULT);
        }
        let mut v: c_int = 0;
        // The helper checks user memory (`copy_from_user`); for kernel memory the check above
        // keeps the read within the `optlen` bytes the type invariant vouches for.
        // SAFETY: `v` is valid for writes of `size_of::<c_int>()` bytes, all the helper copies;
        // the source is readable for as much (see above).
        to_result(unsafe {
            raw::rds_rs_copy_from_sockptr(ptr::addr_of_mut!(v).cast(), self.ptr, size_of::<c_int>())
        })?;
        Ok(v)
    }

    /// Reads the first `dst.len()` bytes of the value; `EFAULT` when they cannot be read.
    /// The caller checks the length first.
    pub(crate) fn read_bytes(&self, dst: &mut [u8]) -> Result {
        if dst.len() > self.len() {
            return Err(EFAULT);
        }
        // SAFETY: `dst` is valid for writes of its length, the most the helper copies; the
        // helper checks the source as in `read_int`, and the check above keeps the read
        // within `optlen` bytes.
        to_result(unsafe {
            raw::rds_rs_copy_from_sockptr(dst.as_mut_ptr().cast(), self.ptr, dst.len())
        })
    }
}

/// Whether `len` bytes at user address `addr` are mapped, writable user memory (faulted in,
/// not written).
pub(crate) fn user_writable(addr: u64, len: usize) -> bool {
    let Ok(addr) = usize::try_from(addr) else {
        return false;
    };
    // SAFETY: The helper only probes (and faults in) the user range; it accepts any address,
    // reporting unmapped, read-only or kernel memory as not writable.
    unsafe { raw::rds_rs_user_writable(addr as *mut c_void, len) }
}

/// The buffer and length pointer of a `getsockopt(2)` call, both in user memory.
pub(crate) struct OptOut {
    val: UserPtr,
    len: UserPtr,
}

impl OptOut {
    /// Reads the caller's buffer length (`*optlen`); `EFAULT` if it cannot be read.
    pub(crate) fn len(&self) -> Result<i32> {
        UserSlice::new(self.len, size_of::<i32>())
            .reader()
            .read::<i32>()
    }

    /// Sets `*optlen`; `EFAULT` if it cannot be written.
    pub(crate) fn set_len(&self, len: i32) -> Result {
        UserSlice::new(self.len, size_of::<i32>())
            .writer()
            .write(&len)
    }

    /// Writes `data` to the start of the caller's buffer (not `*optlen`); `EFAULT` if it
    /// cannot be written.
    pub(crate) fn write(&self, data: &[u8]) -> Result {
        UserSlice::new(self.val, data.len())
            .writer()
            .write_slice(data)
    }

    /// Whether the first `len` bytes of the caller's buffer are mapped, writable user memory
    /// (faulted in without being written).
    pub(crate) fn writable(&self, len: usize) -> bool {
        user_writable(self.val as u64, len)
    }

    /// The user address of the caller's buffer.
    pub(crate) fn addr(&self) -> usize {
        self.val
    }

    /// Writes an `int` value and sets `*optlen` to its size; `EFAULT` if either write fails.
    pub(crate) fn put_int(&self, v: i32) -> Result {
        UserSlice::new(self.val, size_of::<i32>())
            .writer()
            .write(&v)?;
        UserSlice::new(self.len, size_of::<i32>())
            .writer()
            .write(&(size_of::<i32>() as i32))
    }
}

/// A socket family implemented in Rust.
pub(crate) trait Family: Sized + 'static {
    /// State shared by all sockets of the family (for RDS: the table of bound ports), owned by
    /// the [`Registration`] and handed to every `create`.
    type Shared: Send + Sync;

    /// The state of one socket, owned by the socket from `create` until its memory is freed.
    type Socket: Send + Sync;

    /// The address family number (`AF_*`).
    const FAMILY: u16;

    /// The protocol name shown in `/proc/net/protocols` (at most 31 bytes).
    const NAME: &'static CStr;

    /// The tables this family registers; each family owns one `static` [`FamilyTables`].
    fn tables() -> &'static FamilyTables;

    /// Checks the type and protocol of a new socket and builds its state.
    ///
    /// An error is returned to `socket(2)` and no socket is created.
    fn create(
        shared: ArcBorrow<'_, Self::Shared>,
        net: NetId,
        sock_type: i32,
        protocol: i32,
        kern: bool,
        ctx: &ProcessCtx,
    ) -> Result<Pin<KBox<Self::Socket>>>;

    /// Called once the socket is complete (its state is reachable through [`Sock::state`]),
    /// before `socket(2)` returns. It cannot fail: anything fallible belongs in `create`.
    fn created(sock: &Sock<Self>, ctx: &ProcessCtx);

    /// Called when the socket is closed: the last file reference to it is gone.
    ///
    /// The state itself is dropped later, when the last reference to the `struct sock` goes
    /// (see [`SockRef`]). That happens in process context, but possibly inside another socket's
    /// system call, so `Self::Socket`'s `Drop` must not take locks of other sockets.
    fn release(sock: &Sock<Self>, ctx: &ProcessCtx);

    /// `bind(2)`: `addr` is the socket address user space passed (already copied into the
    /// kernel; its length is the `addrlen` argument).
    fn bind(sock: &Sock<Self>, addr: &[u8], ctx: &ProcessCtx) -> Result;

    /// `connect(2)`: `addr` as for [`Family::bind`].
    fn connect(sock: &Sock<Self>, addr: &[u8], ctx: &ProcessCtx) -> Result;

    /// `getsockname(2)` (`peer` false) and `getpeername(2)` (`peer` true): writes the address
    /// into `out` and returns its length.
    fn getname(sock: &Sock<Self>, peer: bool, out: &mut [u8; GETNAME_LEN]) -> Result<usize>;

    /// `setsockopt(2)` for levels other than `SOL_SOCKET` (which the socket layer handles).
    fn setsockopt(
        sock: &Sock<Self>,
        level: i32,
        optname: i32,
        val: &OptVal,
        ctx: &ProcessCtx,
    ) -> Result;

    /// `getsockopt(2)` for levels other than `SOL_SOCKET`. The value returned on success is
    /// what the system call returns (0 for ordinary options).
    fn getsockopt(
        sock: &Sock<Self>,
        level: i32,
        optname: i32,
        out: &OptOut,
        ctx: &ProcessCtx,
    ) -> Result<i32>;

    /// `ioctl(2)` on the socket; `ENOIOCTLCMD` for commands the family does not know (the
    /// socket layer then answers `ENOTTY`). `arg` is the user-space argument.
    fn ioctl(sock: &Sock<Self>, cmd: u32, arg: UserPtr, ctx: &ProcessCtx) -> Result;

    /// `sendmsg(2)`: `len` is the payload length (the sum of the iovecs). Returns the number of
    /// bytes sent.
    fn sendmsg(
        sock: &Sock<Self>,
        msg: &mut MsgHdr<'_>,
        len: usize,
        ctx: &ProcessCtx,
    ) -> Result<usize>;

    /// `recvmsg(2)` with the caller's `flags`; `len` is the room in the iovecs. Returns what the
    /// system call returns.
    fn recvmsg(
        sock: &Sock<Self>,
        msg: &mut MsgHdr<'_>,
        len: usize,
        flags: i32,
        ctx: &ProcessCtx,
    ) -> Result<usize>;

    /// `poll(2)`: registers the wait queues through `poll` and returns the ready events
    /// (`EPOLL*` bits).
    fn poll(sock: &Sock<Self>, poll: &PollCtx<'_>) -> u32;
}

/// A `struct sock` of family `F`, as the socket layer hands it to the family's callbacks.
///
/// A `&Sock<F>` is only ever created for a socket that holds a reference for as long as the
/// borrow lasts: inside a `proto_ops` callback (the file holds it), or through a [`SockRef`].
///
/// # Invariants
///
/// `sk` is a live `struct sock` created by [`create_callback`] for `F`, whose memory is a
/// [`SockMem`] with its `state` set.
#[repr(transparent)]
pub(crate) struct Sock<F: Family> {
    sk: Opaque<raw::sock>,
    _family: PhantomData<F>,
}

// SAFETY: A `Sock` only hands out `&F::Socket` (which is `Sync`) and calls C functions that the
// socket layer allows from any thread; the `struct sock` itself is shared by design.
unsafe impl<F: Family> Sync for Sock<F> {}
// SAFETY: As above; a `Sock` is never owned by value, only borrowed or referenced.
unsafe impl<F: Family> Send for Sock<F> {}

impl<F: Family> Sock<F> {
    /// Borrows a socket of family `F`.
    ///
    /// # Safety
    ///
    /// `sk` was created by [`create_callback`] for `F` and stays alive (a reference is held)
    /// for `'a`.
    unsafe fn from_raw<'a>(sk: *mut raw::sock) -> &'a Self {
        // CAST: `Sock<F>` is `repr(transparent)` over `Opaque<raw::sock>`, itself transparent.
        // SAFETY: Per the function's safety requirements the pointer is valid for `'a`.
        unsafe { &*sk.cast::<Self>() }
    }

    fn as_ptr(&self) -> *mut raw::sock {
        self.sk.get()
    }

    /// The family's state of this socket.
    pub(crate) fn state(&self) -> &F::Socket {
        // SAFETY: By the type invariant, the memory is a `SockMem` whose `state` came from
        // `Pin<KBox<F::Socket>>::into_foreign` and is released only in `destruct_callback`, which
        // cannot run while this `Sock` is borrowed (a reference to the sock is held).
        let state = unsafe {
            let state = (*self.as_ptr().cast::<SockMem>()).state;
            <Pin<KBox<F::Socket>> as ForeignOwnable>::borrow(state)
        };
        // Shared access needs no pinning guarantee.
        state.get_ref()
    }

    /// The socket's network namespace.
    pub(crate) fn net(&self) -> NetId {
        // SAFETY: The sock is alive (type invariant); `sock_net` only reads its namespace.
        NetId(unsafe { raw::sock_net(self.as_ptr()) } as usize)
    }

    /// `sk_sndbuf`, the send buffer size in bytes (`SO_SNDBUF` doubled, as the core stores it).
    pub(crate) fn sndbuf(&self) -> u32 {
        // SAFETY: The sock is alive (type invariant) and its layout is the bindings' (checked at
        // registration); the socket layer changes the field with `WRITE_ONCE`, so a volatile
        // read is C's `READ_ONCE`.
        let v = unsafe { ptr::read_volatile(ptr::addr_of!((*self.as_ptr()).sk_sndbuf)) };
        u32::try_from(v).unwrap_or(0)
    }

    /// `sk_rcvbuf`, the receive buffer size in bytes.
    pub(crate) fn rcvbuf(&self) -> u32 {
        // SAFETY: As in `sndbuf`.
        let v = unsafe { ptr::read_volatile(ptr::addr_of!((*self.as_ptr()).sk_rcvbuf)) };
        u32::try_from(v).unwrap_or(0)
    }

    /// `sock_sndtimeo`: how long a send may block (jiffies); 0 for non-blocking calls.
    pub(crate) fn sndtimeo(&self, nonblock: bool) -> Timeout {
        if nonblock {
            return Timeout(0);
        }
        // SAFETY: As in `sndbuf`.
        Timeout(unsafe { ptr::read_volatile(ptr::addr_of!((*self.as_ptr()).sk_sndtimeo)) } as i64)
    }

    /// `sock_rcvtimeo`: how long a receive may block (jiffies); 0 for non-blocking calls.
    pub(crate) fn rcvtimeo(&self, nonblock: bool) -> Timeout {
        if nonblock {
            return Timeout(0);
        }
        // SAFETY: As in `sndbuf`.
        Timeout(unsafe { ptr::read_volatile(ptr::addr_of!((*self.as_ptr()).sk_rcvtimeo)) } as i64)
    }

    /// Whether a `SOCK_*` flag of the socket is set.
    pub(crate) fn flag(&self, flag: SockFlag) -> bool {
        // SAFETY: The sock is alive (type invariant); `sock_flag` reads one bit.
        unsafe { raw::sock_flag(self.as_ptr(), flag as raw::sock_flags) }
    }

    /// Takes the socket lock (`lock_sock`), which the socket layer holds while it changes
    /// `SOL_SOCKET` options; released when the guard is dropped. Sleeps.
    pub(crate) fn lock_sock(&self, _ctx: &super::sync::ProcessCtx) -> SockLock<'_, F> {
        // SAFETY: The sock is alive (type invariant); `lock_sock` may sleep, which `_ctx`
        // allows.
        unsafe { raw::rds_rs_lock_sock(self.as_ptr()) };
        // INVARIANT: the lock was just taken.
        SockLock { sock: self }
    }

    /// Sets or clears a `SOCK_*` flag of the socket. `sk_flags` is changed with non-atomic
    /// bit operations by the socket layer under the socket lock, so this needs it too.
    pub(crate) fn set_flag(&self, locked: &SockLock<'_, F>, flag: SockFlag, on: bool) {
        debug_assert!(ptr::eq(locked.sock, self));
        // SAFETY: The sock is alive (type invariant); the helper only checks lockdep's record.
        unsafe { raw::rds_rs_sock_owned_by_me(self.as_ptr()) };
        // SAFETY: The sock is alive (type invariant); the helpers change one bit of `sk_flags`
        // under the socket lock (`locked`), as the socket layer does.
        unsafe {
            if on {
                raw::sock_set_flag(self.as_ptr(), flag as raw::sock_flags)
            } else {
                raw::sock_reset_flag(self.as_ptr(), flag as raw::sock_flags)
            }
        }
    }

    /// Whether the socket's file is non-blocking (`O_NONBLOCK`).
    pub(crate) fn nonblocking(&self) -> bool {
        // SAFETY: The sock is alive (type invariant); the helper checks for a missing file.
        unsafe { raw::rds_rs_sk_nonblocking(self.as_ptr()) }
    }

    /// Whether the socket has a pending error (`sk_err`) or a non-empty error queue.
    pub(crate) fn has_error(&self) -> bool {
        // SAFETY: The sock is alive (type invariant).
        unsafe { raw::rds_rs_sk_has_error(self.as_ptr()) }
    }

    /// The inode number of the socket (`sock_i_ino`), as `RDS_INFO_SOCKETS` reports it.
    pub(crate) fn inode(&self) -> u64 {
        // SAFETY: The sock is alive (type invariant).
        (unsafe { raw::sock_i_ino(self.as_ptr()) }) as u64
    }

    /// Wakes every task sleeping on the socket: readers, blocked senders and pollers.
    pub(crate) fn wake(&self) {
        // SAFETY: The sock is alive (type invariant); the helper reads `sk_wq` under RCU and
        // copes with an orphaned socket.
        unsafe { raw::rds_rs_sk_wake(self.as_ptr()) }
    }

    /// Sleeps on the socket's wait queue until `cond` holds, `timeo` runs out or a signal
    /// arrives.
    ///
    /// `cond` runs with the task state set to sleeping, so it must not sleep itself: spinlocks
    /// and atomics only. Meant for system calls on this socket; a socket that was released
    /// (orphaned, so without a wait queue) does not wait: it reports [`WaitOutcome::TimedOut`]
    /// at once.
    pub(crate) fn wait<C: FnMut() -> bool>(
        &self,
        timeo: Timeout,
        cond: C,
        _ctx: &ProcessCtx,
    ) -> WaitOutcome {
        let mut cond = cond;
        // The helper returns at once for an orphaned socket (no wait queue). Only `release`
        // orphans a socket, when the last file reference goes, so one that is not orphaned
        // when a system call on it starts waiting stays so (the call holds a file reference).
        // SAFETY: The sock is alive (type invariant) and has its wait queue (see above);
        // `cond_trampoline` gets `arg` pointing at `cond`, which outlives the call. Waiting
        // sleeps, which `_ctx` allows.
        let r = unsafe {
            raw::rds_rs_sk_wait(
                self.as_ptr(),
                timeo.0 as ffi::c_long,
                Some(cond_trampoline::<C>),
                ptr::addr_of_mut!(cond).cast(),
            )
        };
        WaitOutcome::from_raw(r as i64)
    }

    /// Takes a new reference to the socket.
    pub(crate) fn to_ref(&self) -> SockRef<F> {
        // SAFETY: The sock is alive (type invariant), so taking one more reference is sound.
        unsafe { raw::sock_hold(self.as_ptr()) };
        // INVARIANT: the reference taken above belongs to the new `SockRef`.
        SockRef {
            sk: NonNull::from(self),
        }
    }

    /// An identity of the socket, stable while it lives (its address), for use as a key.
    pub(crate) fn id(&self) -> usize {
        self.as_ptr() as usize
    }

    /// `sock_recv_errqueue` for `MSG_ERRQUEUE` receives (level `SOL_IP`, type `IP_RECVERR`).
    pub(crate) fn recv_errqueue(&self, msg: &mut MsgHdr<'_>, len: usize) -> Result<usize> {
        let len = ffi::c_int::try_from(len).unwrap_or(ffi::c_int::MAX);
        // SAFETY: The sock is alive (type invariant) and `msg` is the msghdr of the current
        // recvmsg call.
        let r = unsafe {
            raw::sock_recv_errqueue(self.as_ptr(), msg.as_ptr(), len, SOL_IP, IP_RECVERR)
        };
        if r < 0 {
            Err(Error::from_errno(r))
        } else {
            Ok(r as usize)
        }
    }
}

/// `SOL_IP`, the level `MSG_ERRQUEUE` reports use for RDS (as C does).
const SOL_IP: ffi::c_int = 0;
/// `IP_RECVERR`, the cmsg type of those reports.
const IP_RECVERR: ffi::c_int = 11;

/// The socket lock (`lock_sock`) of a socket, held while this guard exists.
///
/// # Invariants
///
/// The lock of `sock` is held by the current task until the guard is dropped.
pub(crate) struct SockLock<'a, F: Family> {
    sock: &'a Sock<F>,
}

impl<F: Family> Drop for SockLock<'_, F> {
    fn drop(&mut self) {
        // SAFETY: The lock is held (type invariant) and released once, here.
        unsafe { raw::rds_rs_release_sock(self.sock.as_ptr()) };
    }
}

/// The `SOCK_*` flags of a `struct sock` that RDS looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum SockFlag {
    /// `SOCK_RCVTSTAMP`: `SO_TIMESTAMP` is on.
    RcvTstamp = raw::sock_flags_SOCK_RCVTSTAMP as u32,
    /// `SOCK_TSTAMP_NEW`: the timestamp is to be reported in the 64-bit `SO_TIMESTAMP_NEW` form.
    TstampNew = raw::sock_flags_SOCK_TSTAMP_NEW as u32,
    /// `SOCK_ZEROCOPY`: `SO_ZEROCOPY` is on.
    ZeroCopy = raw::sock_flags_SOCK_ZEROCOPY as u32,
}

/// A counted reference to a socket of family `F` (`sock_hold` / `sock_put`).
///
/// It keeps the `struct sock`, and so the family's state, alive; it does not keep the socket
/// open (`release` may already have run).
///
/// # Invariants
///
/// `sk` points to a live socket of family `F` on which this object owns one reference.
pub(crate) struct SockRef<F: Family> {
    sk: NonNull<Sock<F>>,
}

// SAFETY: A `SockRef` is a counted pointer to a `Sock`, which is `Send + Sync`; dropping the
// reference (`sock_put`) is allowed from any thread in process context.
unsafe impl<F: Family> Send for SockRef<F> {}
// SAFETY: `&SockRef` only gives `&Sock`, which is `Sync`.
unsafe impl<F: Family> Sync for SockRef<F> {}

impl<F: Family> core::ops::Deref for SockRef<F> {
    type Target = Sock<F>;

    fn deref(&self) -> &Sock<F> {
        // SAFETY: By the type invariant the socket is alive while this reference exists.
        unsafe { self.sk.as_ref() }
    }
}

impl<F: Family> Clone for SockRef<F> {
    fn clone(&self) -> Self {
        self.to_ref()
    }
}

impl<F: Family> Drop for SockRef<F> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant this object owns one reference, dropped exactly once
        // here. The last `sock_put` runs `destruct_callback`, which only drops the state.
        unsafe { raw::sock_put(self.sk.as_ref().as_ptr()) };
    }
}

/// A timeout in jiffies, as the socket layer stores `SO_SNDTIMEO` and `SO_RCVTIMEO`
/// (`MAX_SCHEDULE_TIMEOUT` for none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timeout(i64);

impl Timeout {
    /// Whether the caller asked not to wait at all.
    pub(crate) fn is_zero(self) -> bool {
        self.0 == 0
    }
}

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitOutcome {
    /// The condition held; the time left.
    Ready(Timeout),
    /// The time ran out first.
    TimedOut,
    /// A signal arrived (`ERESTARTSYS`, which the syscall layer turns into `EINTR` or a
    /// restart).
    Interrupted,
}

impl WaitOutcome {
    fn from_raw(r: i64) -> Self {
        match r {
            0 => WaitOutcome::TimedOut,
            r if r < 0 => WaitOutcome::Interrupted,
            r => WaitOutcome::Ready(Timeout(r)),
        }
    }
}

/// `ERESTARTSYS`: a blocking call interrupted by a signal.
pub(crate) fn erestartsys() -> Error {
    ERESTARTSYS
}

/// Calls the closure behind `arg` for the C wait helpers.
///
/// # Safety
///
/// `arg` points to a live `C` that nothing else uses during the call.
unsafe extern "C" fn cond_trampoline<C: FnMut() -> bool>(arg: *mut c_void) -> bool {
    // SAFETY: Per the function's safety requirements.
    let cond = unsafe { &mut *arg.cast::<C>() };
    cond()
}

/// A wait queue (`wait_queue_head_t`) of the module's own, such as the one tasks blocked on a
/// congested destination sleep on.
///
/// # Invariants
///
/// `wq` is an initialised wait queue head that is never moved.
#[repr(transparent)]
pub(crate) struct WaitQueue {
    wq: Opaque<raw::wait_queue_head>,
}

// SAFETY: A wait queue is designed to be used from any thread; it has its own lock.
unsafe impl Sync for WaitQueue {}
// SAFETY: As above; it is never moved once initialised.
unsafe impl Send for WaitQueue {}

impl WaitQueue {
    /// The module's wait queue for congestion changes (C: `rds_poll_waitq`): a static of the
    /// module, so pollers may stay registered on it for as long as any socket exists.
    pub(crate) fn congestion() -> &'static WaitQueue {
        // The helper returns a static `wait_queue_head`, initialised at compile time
        // (`DECLARE_WAIT_QUEUE_HEAD`), never moved, alive as long as the module's code.
        // SAFETY: The queue is valid for `'static` (see above); `WaitQueue` is a transparent
        // wrapper of it, so the cast keeps the layout and the type invariant.
        unsafe { &*raw::rds_rs_poll_waitq_get().cast::<WaitQueue>() }
    }

    /// Wakes every task waiting on the queue.
    pub(crate) fn wake_all(&self) {
        // SAFETY: The queue is initialised (type invariant).
        unsafe { raw::rds_rs_wq_wake(self.wq.get()) }
    }

    /// Sleeps until `cond` holds, `timeo` runs out or a signal arrives. `cond` must not sleep
    /// (it runs with the task state set to sleeping).
    pub(crate) fn wait<C: FnMut() -> bool>(
        &self,
        timeo: Timeout,
        cond: C,
        _ctx: &ProcessCtx,
    ) -> WaitOutcome {
        let mut cond = cond;
        // SAFETY: The queue is initialised (type invariant); `arg` points at `cond`, which outlives
        // the call. Waiting sleeps, which `_ctx` allows.
        let r = unsafe {
            raw::rds_rs_wq_wait(
                self.wq.get(),
                timeo.0 as ffi::c_long,
                Some(cond_trampoline::<C>),
                ptr::addr_of_mut!(cond).cast(),
            )
        };
        WaitOutcome::from_raw(r as i64)
    }
}

/// The arguments of a `proto_ops::poll` call.
///
/// # Invariants
///
/// `file`, `sock` and `table` are the arguments of the `poll` call in progress, valid for `'a`.
pub(crate) struct PollCtx<'a> {
    file: *mut raw::file,
    sock: *mut raw::socket,
    table: *mut raw::poll_table_struct,
    _call: PhantomData<&'a ()>,
}

impl PollCtx<'_> {
    /// Registers the socket's own wait queue (`sock_poll_wait`).
    pub(crate) fn wait_on_socket(&self) {
        // SAFETY: The pointers are the arguments of the current poll call.
        unsafe { raw::rds_rs_sock_poll_wait(self.file, self.sock, self.table) }
    }

    /// Registers another wait queue (`poll_wait`), one that lives as long as the module (so
    /// it outlives every poller: open sockets pin the module).
    pub(crate) fn wait_on(&self, wq: &'static WaitQueue) {
        // SAFETY: The pointers are the arguments of the current poll call; the queue is
        // initialised (type invariant) and outlives the socket's pollers (see above).
        unsafe { raw::rds_rs_poll_wait(self.file, wq.wq.get(), self.table) }
    }
}

/// The `struct msghdr` of a `sendmsg` or `recvmsg` call.
///
/// # Invariants
///
/// `msg` is the valid `msghdr` of the call in progress, for `'a`; for `sendmsg` its name (if
/// any) has been copied into the kernel, for `recvmsg` a non-null name points to a kernel
/// `struct sockaddr_storage`.
pub(crate) struct MsgHdr<'a> {
    msg: *mut raw::msghdr,
    _call: PhantomData<&'a mut ()>,
}

impl<'a> MsgHdr<'a> {
    fn as_ptr(&self) -> *mut raw::msghdr {
        self.msg
    }

    /// The flags of a `sendmsg` call (`msg_flags`, set by the socket layer from the call's
    /// flags).
    pub(crate) fn flags(&self) -> i32 {
        // SAFETY: `msg` is the valid msghdr of the current call (the bindings' layout, the
        // kernel's: generated with its compiler flags).
        unsafe { (*self.msg).msg_flags as i32 }
    }

    /// Adds to the `msg_flags` returned by a `recvmsg` call (`MSG_TRUNC`, ...).
    pub(crate) fn add_flags(&mut self, flags: i32) {
        // SAFETY: `msg` is the valid msghdr of the current call, which this call may change.
        unsafe { (*self.msg).msg_flags |= flags as ffi::c_uint }
    }

    /// The name buffer and length of the call (`msg_name`, `msg_namelen`).
    fn name_raw(&self) -> (*mut c_void, c_int) {
        // SAFETY: `msg` is the valid msghdr of the current call.
        unsafe { ((*self.msg).msg_name, (*self.msg).msg_namelen) }
    }

    /// The destination address of a `sendmsg` (already copied into the kernel), if any.
    pub(crate) fn name(&self) -> Option<&[u8]> {
        let (p, len) = self.name_raw();
        if p.is_null() || len <= 0 {
            return None;
        }
        // SAFETY: For sendmsg the socket layer copied `msg_namelen` bytes (at most
        // `sizeof(struct sockaddr_storage)`) into a kernel buffer at `msg_name`, valid for the
        // call; the slice borrows `self`, so `set_name` cannot write the buffer meanwhile.
        Some(unsafe { core::slice::from_raw_parts(p.cast::<u8>(), len as usize) })
    }

    /// Whether `recvmsg`'s caller asked for the sender's address.
    pub(crate) fn wants_name(&self) -> bool {
        !self.name_raw().0.is_null()
    }

    /// Sets the sender's address of a `recvmsg` (`msg_name`, `msg_namelen`). Does nothing when
    /// the caller did not ask for it. At most [`GETNAME_LEN`] bytes are written.
    pub(crate) fn set_name(&mut self, addr: &[u8]) {
        let (p, _) = self.name_raw();
        if p.is_null() {
            return;
        }
        let n = addr.len().min(GETNAME_LEN);
        // SAFETY: For recvmsg, a non-null `msg_name` points to a kernel
        // `struct sockaddr_storage` (128 bytes >= GETNAME_LEN) that the socket layer copies
        // out afterwards; `msg` is the valid msghdr of the call, which this call may change.
        unsafe {
            ptr::copy_nonoverlapping(addr.as_ptr(), p.cast::<u8>(), n);
            (*self.msg).msg_namelen = n as c_int;
        }
    }

    /// The control messages of a `sendmsg`, in kernel memory (empty when there are none). They
    /// stay valid (and unchanged) for the whole call.
    pub(crate) fn control(&self) -> &'a [u8] {
        let mut len: usize = 0;
        // SAFETY: `msg` is the valid msghdr of the current call.
        let p = unsafe { raw::rds_rs_msg_kernel_control(self.msg, &mut len) };
        if p.is_null() || len == 0 {
            return &[];
        }
        // SAFETY: The helper returns a kernel buffer of `len` bytes (copied in by the socket
        // layer), valid for the call.
        unsafe { core::slice::from_raw_parts(p.cast::<u8>(), len) }
    }

    /// The room for control messages in a `recvmsg` (`msg_controllen`).
    pub(crate) fn control_room(&self) -> usize {
        // SAFETY: `msg` is the valid msghdr of the current call.
        unsafe { (*self.msg).msg_controllen }
    }

    /// Bytes left in the data iterator.
    pub(crate) fn data_left(&self) -> usize {
        // SAFETY: `msg` is the valid msghdr of the current call.
        unsafe { raw::rds_rs_msg_left(self.msg) }
    }

    /// Copies up to `len` bytes of payload from the caller's iovecs into `page` at `offset`
    /// (`copy_page_from_iter`); returns the bytes copied, short when user memory faults.
    /// `EINVAL` when the range is not inside the page.
    pub(crate) fn copy_into_page(
        &mut self,
        page: &Page,
        offset: usize,
        len: usize,
    ) -> Result<usize> {
        if offset
            .checked_add(len)
            .is_none_or(|end| end > kernel::page::PAGE_SIZE)
        {
            return Err(EINVAL);
        }
        // SAFETY: `msg` is the valid msghdr of the current call; `page` is an allocated page
        // that this call may write (it is borrowed from its owner, and the range is inside it).
        Ok(unsafe { raw::rds_rs_msg_copy_page_from(self.msg, page.as_ptr().cast(), offset, len) })
    }

    /// Copies up to `len` bytes from `page` at `offset` to the caller's iovecs
    /// (`copy_page_to_iter`); returns the bytes copied, short when user memory faults or the
    /// iovecs are full. `EINVAL` when the range is not inside the page.
    pub(crate) fn copy_from_page(
        &mut self,
        page: &Page,
        offset: usize,
        len: usize,
    ) -> Result<usize> {
        // SAFETY: `page` is an allocated page, alive while borrowed.
        unsafe { self.copy_from_raw_page(page.as_ptr().cast(), offset, len) }
    }

    /// Copies `len` bytes at `offset` in a page of a zero-copy payload to the caller's
    /// iovecs; returns the bytes copied (short when user memory faults).
    pub(crate) fn copy_from_user_page(
        &mut self,
        page: UserPage<'_>,
        offset: usize,
        len: usize,
    ) -> Result<usize> {
        // SAFETY: The page is referenced while `page` borrows its `UserPages`.
        unsafe { self.copy_from_raw_page(page.as_raw(), offset, len) }
    }

    /// Copies the first `max` bytes (at most) of `chain` to the caller's iovecs; returns the
    /// bytes copied, short when user memory faults or the iovecs fill up.
    pub(crate) fn copy_from_skbs(&mut self, chain: &super::tcp::SkbChain, max: usize) -> usize {
        let mut copied = 0;
        let _ = chain.try_for_each(|skb, at, n| {
            let n = n.min(max.saturating_sub(at));
            if n == 0 {
                return Err(EAGAIN);
            }
            // SAFETY: `msg` is the valid msghdr of the current call; `skb` is live during the
            // walk and holds at least `n` bytes from its start.
            let got = unsafe { raw::rds_rs_msg_copy_skb(self.msg, skb, 0, n) };
            copied += got;
            if got != n {
                return Err(EFAULT);
            }
            Ok(())
        });
        copied
    }

    /// [`MsgHdr::copy_from_page`] for a page given by pointer.
    ///
    /// # Safety
    ///
    /// `page` points to a page that stays valid during the call.
    unsafe fn copy_from_raw_page(
        &mut self,
        page: *mut raw::page,
        offset: usize,
        len: usize,
    ) -> Result<usize> {
        if offset
            .checked_add(len)
            .is_none_or(|end| end > kernel::page::PAGE_SIZE)
        {
            return Err(EINVAL);
        }
        // SAFETY: `msg` is the valid msghdr of the current call; `page` is valid (the
        // function's requirement) and the range is inside it.
        Ok(unsafe { raw::rds_rs_msg_copy_page_to(self.msg, page, offset, len) })
    }

    /// Takes the next `len` bytes of a `sendmsg`'s payload by reference, for a zero-copy send
    /// ([`UserPages`]); `EFAULT` when they are not all there.
    pub(crate) fn take_user_pages(&mut self, len: usize) -> Result<UserPages> {
        // SAFETY: `msg` is the valid msghdr of the current call, in its process context.
        unsafe { UserPages::take(self.msg, len) }
    }

    /// Copies payload from the caller's iovecs into `dst`, filling it (`copy_from_iter`);
    /// returns the bytes copied, short when user memory faults or the payload ends.
    pub(crate) fn copy_into_slice(&mut self, dst: &mut [u8]) -> usize {
        // SAFETY: `msg` is the valid msghdr of the current call; `dst` is valid for writes of
        // its length, and `copy_from_iter` writes at most that many bytes.
        let n = unsafe { raw::rds_rs_msg_copy_from(self.msg, dst.as_mut_ptr().cast(), dst.len()) };
        n.min(dst.len())
    }

    /// Appends up to `len` bytes of payload from the caller's iovecs to `dst`
    /// (`copy_from_iter`), which must have room for them; returns the bytes copied, short when
    /// user memory faults. `EINVAL` when `dst` has less than `len` bytes of spare capacity.
    pub(crate) fn copy_into_vec(&mut self, dst: &mut KVec<u8>, len: usize) -> Result<usize> {
        let spare = dst.spare_capacity_mut();
        if spare.len() < len {
            return Err(EINVAL);
        }
        // SAFETY: `msg` is the valid msghdr of the current call; `spare` is valid for writes
        // of `len` bytes (checked above) and `copy_from_iter` writes at most that many.
        let n = unsafe { raw::rds_rs_msg_copy_from(self.msg, spare.as_mut_ptr().cast(), len) };
        let n = n.min(len);
        // SAFETY: The first `n` bytes of the spare capacity were initialised by the copy.
        unsafe { dst.set_len(dst.len() + n) };
        Ok(n)
    }

    /// Copies `src` to the caller's iovecs (`copy_to_iter`); returns the bytes copied, short
    /// when user memory faults or the iovecs are full.
    pub(crate) fn copy_from_slice(&mut self, src: &[u8]) -> usize {
        // SAFETY: `msg` is the valid msghdr of the current call; `src` is valid for reads of
        // its length.
        unsafe { raw::rds_rs_msg_copy_to(self.msg, src.as_ptr().cast(), src.len()) }
    }

    /// Appends a control message to a `recvmsg` (`put_cmsg`): sets `MSG_CTRUNC` when it does
    /// not fit, fails with `EFAULT` when the user buffer cannot be written.
    pub(crate) fn put_cmsg(&mut self, level: i32, kind: i32, data: &[u8]) -> Result {
        let len = ffi::c_int::try_from(data.len()).map_err(|_| EINVAL)?;
        // SAFETY: `msg` is the valid msghdr of the current call; `put_cmsg` reads `len` bytes
        // of `data`.
        to_result(unsafe {
            raw::put_cmsg(self.msg, level, kind, len, data.as_ptr().cast_mut().cast())
        })
    }
}

/// The C tables of one socket family.
///
/// Define one as a `static` per [`Family`] with [`FamilyTables::new`]; [`Registration`] fills
/// and registers it.
///
/// # Invariants
///
/// `registered` is true exactly while a [`Registration`] owns the tables; the C fields are
/// written only by that registration, before it hands them to C and after C has let go of them.
pub(crate) struct FamilyTables {
    proto: Opaque<raw::proto>,
    ops: Opaque<raw::proto_ops>,
    family: Opaque<raw::net_proto_family>,
    registered: AtomicBool,
    /// `Arc<F::Shared>::into_foreign` while registered, null otherwise.
    shared: AtomicPtr<c_void>,
}

// SAFETY: Rust only writes the C fields while it owns them exclusively (see the type invariant:
// the `registered` flag admits one registration at a time, and it writes before registering and
// after unregistering). In between, the C socket layer reads them under its own synchronisation.
unsafe impl Sync for FamilyTables {}

impl FamilyTables {
    /// Creates empty tables, for use in a `static`.
    pub(crate) const fn new() -> Self {
        Self {
            proto: Opaque::uninit(),
            ops: Opaque::uninit(),
            family: Opaque::uninit(),
            registered: AtomicBool::new(false),
            shared: AtomicPtr::new(ptr::null_mut()),
        }
    }
}

/// The memory of one socket: the `struct sock` the socket layer works with, followed by the
/// Rust state of the socket. `struct proto::obj_size` is the size of this type, so `sk_alloc`
/// allocates one for every socket.
///
/// # Invariants
///
/// From the end of a successful [`create_callback`] until [`destruct_callback`], `state` holds
/// the result of `Pin<KBox<F::Socket>>::into_foreign` for the socket's family `F`.
#[repr(C)]
struct SockMem {
    sk: raw::sock,
    state: *const c_void,
}

/// A registered socket family; unregisters it when dropped.
///
/// # Invariants
///
/// `F::tables()` is registered with the socket layer (`proto_register` and `sock_register`
/// succeeded) for the lifetime of this object.
pub(crate) struct Registration<F: Family> {
    _family: PhantomData<F>,
}

// SAFETY: The registration holds no data; it only stands for the registered `static` tables,
// and unregistering them is allowed from any thread.
unsafe impl<F: Family> Send for Registration<F> {}
// SAFETY: `&Registration` offers no methods, so sharing it between threads is harmless.
unsafe impl<F: Family> Sync for Registration<F> {}

impl<F: Family> Registration<F> {
    /// Registers the family `F` with the socket layer.
    ///
    /// Sockets can be created as soon as this returns, even while the module is still
    /// initialising, and a module whose init fails is freed without waiting for them. So this
    /// must be the last fallible step of module init (as `sock_register` is in C's `rds_init`).
    ///
    /// Fails with `EEXIST` when another implementation of the same address family is loaded
    /// (for RDS: the in-tree `rds.ko`), with `EBUSY` if `F` is already registered, and with
    /// `EINVAL` if the bindings' layout of `struct sock` disagrees with the kernel's.
    pub(crate) fn new(module: &'static ThisModule, shared: Arc<F::Shared>) -> Result<Self> {
        // The bindings are generated without layout tests; check the two facts this module
        // relies on against the compiler that built the kernel.
        // SAFETY: The helpers only evaluate `sizeof`/`offsetof`.
        let (c_size, c_destruct, c_sndtimeo, c_msghdr, c_msg_flags) = unsafe {
            (
                raw::rds_rs_sizeof_sock(),
                raw::rds_rs_offsetof_sk_destruct(),
                raw::rds_rs_offsetof_sk_sndtimeo(),
                raw::rds_rs_sizeof_msghdr(),
                raw::rds_rs_offsetof_msg_flags(),
            )
        };
        if c_size != size_of::<raw::sock>()
            || c_destruct != offset_of!(raw::sock, sk_destruct)
            || c_sndtimeo != offset_of!(raw::sock, sk_sndtimeo)
            || c_msghdr != size_of::<raw::msghdr>()
            || c_msg_flags != offset_of!(raw::msghdr, msg_flags)
        {
            pr_err!("bindings disagree with the kernel's struct sock or msghdr layout\n");
            return Err(EINVAL);
        }
        let tables = F::tables();
        if tables.registered.swap(true, Ordering::AcqRel) {
            return Err(EBUSY);
        }
        let owner = module.as_ptr().cast::<raw::module>();

        let mut proto = raw::proto::default();
        let name = F::NAME.as_bytes();
        // Leave room for the terminating NUL (the array starts zeroed).
        let max = proto.name.len() - 1;
        for (dst, src) in proto.name.iter_mut().zip(name.iter().take(max)) {
            *dst = *src as c_char;
        }
        proto.owner = owner;
        proto.obj_size = size_of::<SockMem>() as u32;

        let ops = raw::proto_ops {
            family: c_int::from(F::FAMILY),
            owner,
            release: Some(release_callback::<F>),
            bind: Some(bind_callback::<F>),
            connect: Some(connect_callback::<F>),
            socketpair: Some(raw::sock_no_socketpair),
            accept: Some(raw::sock_no_accept),
            getname: Some(getname_callback::<F>),
            ioctl: Some(ioctl_callback::<F>),
            setsockopt: Some(setsockopt_callback::<F>),
            getsockopt: Some(getsockopt_callback::<F>),
            listen: Some(raw::sock_no_listen),
            shutdown: Some(raw::sock_no_shutdown),
            sendmsg: Some(sendmsg_callback::<F>),
            recvmsg: Some(recvmsg_callback::<F>),
            poll: Some(poll_callback::<F>),
            mmap: Some(raw::sock_no_mmap),
            ..Default::default()
        };
        let family = raw::net_proto_family {
            family: c_int::from(F::FAMILY),
            create: Some(create_callback::<F>),
            owner,
        };

        // SAFETY: `registered` was false and we set it, so by the type invariant of
        // `FamilyTables` nothing else reads or writes the tables now; the pointers come from
        // `Opaque::get` and are valid for writes.
        unsafe {
            tables.proto.get().write(proto);
            tables.ops.get().write(ops);
            tables.family.get().write(family);
        }
        // Published before `sock_register`, so every `create` finds it.
        tables
            .shared
            .store(shared.into_foreign().cast_mut(), Ordering::Release);

        // SAFETY: `proto` is fully initialised and lives in a `static`, so it outlives the
        // registration, as `proto_register` requires.
        if let Err(e) = to_result(unsafe { raw::proto_register(tables.proto.get(), 1) }) {
            // SAFETY: The family was never registered, so no socket of it exists.
            unsafe { unpublish::<F>() };
            return Err(e);
        }
        // SAFETY: `family` is fully initialised and lives in a `static`; its `create` callback
        // only uses tables that are now registered.
        if let Err(e) = to_result(unsafe { raw::sock_register(tables.family.get()) }) {
            // SAFETY: `proto_register` succeeded above and no socket can exist yet.
            unsafe { raw::proto_unregister(tables.proto.get()) };
            // SAFETY: The family was never registered, so no socket of it exists.
            unsafe { unpublish::<F>() };
            return Err(e);
        }
        // INVARIANT: both registrations succeeded.
        Ok(Self {
            _family: PhantomData,
        })
    }
}

impl<F: Family> Drop for Registration<F> {
    fn drop(&mut self) {
        let tables = F::tables();
        // A registration is dropped only at module exit (`new` must be the last fallible step of
        // init), and a module cannot exit while `socket(2)` is inside `create` (the socket layer
        // holds a reference to `net_proto_family::owner` around the call) or while any
        // `struct sock` of the family exists (`sk_alloc` takes a reference to `proto::owner`
        // that is dropped only after the sock is freed).
        // SAFETY: The family is registered (type invariant) and, as argued above, no socket of
        // it exists now, so unregistering the family and then the proto is sound.
        unsafe {
            raw::sock_unregister(c_int::from(F::FAMILY));
            raw::proto_unregister(tables.proto.get());
        }
        // SAFETY: As argued above, no socket of the family exists any more.
        unsafe { unpublish::<F>() };
    }
}

/// Drops the shared state `Registration::new` published in `F::tables()` and marks the tables
/// free for another registration.
///
/// # Safety
///
/// `new` published the shared state, and no socket of `F` exists (only sockets borrow it).
unsafe fn unpublish<F: Family>() {
    let tables = F::tables();
    let p = tables.shared.swap(ptr::null_mut(), Ordering::AcqRel);
    // SAFETY: `p` came from `Arc::into_foreign` in `new`, and per the function's safety
    // requirements nothing borrows it any more.
    drop(unsafe { <Arc<F::Shared> as ForeignOwnable>::from_foreign(p) });
    tables.registered.store(false, Ordering::Release);
}

/// `net_proto_family::create`: called by `socket(2)` for a new socket of family `F`.
///
/// # Safety
///
/// Called by the socket layer with a valid `net` and a valid, exclusively owned `sock` that has
/// no `struct sock` yet, while `F` is registered.
unsafe extern "C" fn create_callback<F: Family>(
    net: *mut raw::net,
    sock: *mut raw::socket,
    protocol: c_int,
    kern: c_int,
) -> c_int {
    from_result(|| {
        // SAFETY: `sock` is valid per the function's safety requirements.
        let sock_type = i32::from(unsafe { (*sock).type_ });
        // SAFETY: `F` is registered, so `shared` holds `Arc::into_foreign` (published before
        // `sock_register`) and is released only after `sock_unregister`, which cannot complete
        // while this `create` runs.
        let shared = unsafe {
            <Arc<F::Shared> as ForeignOwnable>::borrow(F::tables().shared.load(Ordering::Acquire))
        };
        // `socket(2)` (or a kernel caller's sock_create) runs in process context.
        let ctx = ProcessCtx::enter();
        let state = F::create(
            shared,
            NetId::from_raw(net),
            sock_type,
            protocol,
            kern != 0,
            &ctx,
        )?;
        let sk_protocol = u16::try_from(protocol).map_err(|_| EINVAL)?;
        let tables = F::tables();
        // SAFETY: `net` is valid per the safety requirements, and `tables.proto` is registered
        // while `F` is (type invariant of `Registration`).
        let sk = unsafe {
            raw::sk_alloc(
                net,
                c_int::from(F::FAMILY),
                kernel::bindings::GFP_KERNEL,
                tables.proto.get(),
                kern,
            )
        };
        if sk.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: `sk` is a new `struct sock` of `proto::obj_size == size_of::<SockMem>()`
        // bytes that nothing else references yet, and `sock` is valid and exclusively ours, so
        // initialising both and linking them is sound.
        unsafe {
            raw::sock_init_data(sock, sk);
            (*sock).ops = tables.ops.get();
            (*sk).sk_protocol = sk_protocol;
            (*sk).sk_destruct = Some(destruct_callback::<F>);
            // INVARIANT: `state` now belongs to the socket until `destruct_callback`.
            (*sk.cast::<SockMem>()).state = state.into_foreign();
        }
        // SAFETY: The socket is complete and `sock` holds a reference to it for the call.
        F::created(unsafe { Sock::<F>::from_raw(sk) }, &ProcessCtx::enter());
        Ok(0)
    })
}

/// `proto_ops::release`: called when the last file reference to a socket of family `F` goes.
///
/// # Safety
///
/// Called by the socket layer with a valid `sock` created by [`create_callback`] for `F`.
unsafe extern "C" fn release_callback<F: Family>(sock: *mut raw::socket) -> c_int {
    // SAFETY: `sock` is valid per the function's safety requirements.
    let sk = unsafe { (*sock).sk };
    if sk.is_null() {
        return 0;
    }
    // SAFETY: `sk` is a socket of `F` and `sock` holds its reference until the `sock_put`
    // below.
    F::release(unsafe { Sock::<F>::from_raw(sk) }, &ProcessCtx::enter());
    // SAFETY: `sk` is valid and this function owns the reference the socket holds on it; after
    // detaching it from `sock` that reference is dropped exactly once.
    unsafe {
        raw::sock_orphan(sk);
        (*sock).sk = ptr::null_mut();
        raw::sock_put(sk);
    }
    0
}

/// `sock::sk_destruct`: the last reference to the `struct sock` is gone; drop the Rust state.
///
/// # Safety
///
/// Called by the socket layer once, with a `sk` created by [`create_callback`] for `F`, before
/// its memory is freed.
unsafe extern "C" fn destruct_callback<F: Family>(sk: *mut raw::sock) {
    let mem = sk.cast::<SockMem>();
    // SAFETY: `sk` is valid per the function's safety requirements and its memory is a
    // `SockMem` (`proto::obj_size`).
    let state = unsafe { (*mem).state };
    if state.is_null() {
        return;
    }
    // SAFETY: By the type invariant of `SockMem`, `state` came from `into_foreign` for this
    // family, and this is the only place that takes it back (it is cleared right after).
    drop(unsafe { <Pin<KBox<F::Socket>> as ForeignOwnable>::from_foreign(state) });
    // SAFETY: As above, `mem` is valid for writes.
    unsafe { (*mem).state = ptr::null() };
}

/// Borrows the socket of a `proto_ops` call.
///
/// # Safety
///
/// `sock` is a valid socket of family `F` whose file is open, so `sock->sk` is set and stays
/// alive for the duration of the calling `proto_ops` callback, which bounds `'a`.
unsafe fn sock_of<'a, F: Family>(sock: *mut raw::socket) -> &'a Sock<F> {
    // SAFETY: Per the function's safety requirements.
    unsafe { Sock::from_raw((*sock).sk) }
}

/// Views a socket address the socket layer copied into the kernel as bytes.
///
/// # Safety
///
/// `addr` points to at least `len` readable bytes when `len > 0` (the socket layer copies
/// `addrlen` bytes into a `struct sockaddr_storage` before calling `bind` or `connect`).
unsafe fn addr_bytes<'a>(addr: *const raw::sockaddr, len: c_int) -> Result<&'a [u8]> {
    let len = usize::try_from(len).map_err(|_| EINVAL)?;
    if len == 0 {
        return Ok(&[]);
    }
    // SAFETY: Per the function's safety requirements.
    Ok(unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), len) })
}

/// `proto_ops::bind`.
///
/// # Safety
///
/// Called by the socket layer with an open socket of family `F` and `addr_len` bytes at `addr`.
unsafe extern "C" fn bind_callback<F: Family>(
    sock: *mut raw::socket,
    addr: *mut raw::sockaddr,
    addr_len: c_int,
) -> c_int {
    from_result(|| {
        // SAFETY: Per the function's safety requirements.
        let s = unsafe { sock_of::<F>(sock) };
        // SAFETY: As above.
        let addr = unsafe { addr_bytes(addr, addr_len)? };
        F::bind(s, addr, &ProcessCtx::enter())?;
        Ok(0)
    })
}

/// `proto_ops::connect`.
///
/// # Safety
///
/// Called by the socket layer with an open socket of family `F` and `addr_len` bytes at `addr`.
unsafe extern "C" fn connect_callback<F: Family>(
    sock: *mut raw::socket,
    addr: *mut raw::sockaddr,
    addr_len: c_int,
    _flags: c_int,
) -> c_int {
    from_result(|| {
        // SAFETY: Per the function's safety requirements.
        let s = unsafe { sock_of::<F>(sock) };
        // SAFETY: As above.
        let addr = unsafe { addr_bytes(addr, addr_len)? };
        F::connect(s, addr, &ProcessCtx::enter())?;
        Ok(0)
    })
}

/// `proto_ops::getname`.
///
/// # Safety
///
/// Called by the socket layer with an open socket of family `F` and `addr` pointing to a
/// writable `struct sockaddr_storage` (at least [`GETNAME_LEN`] bytes).
unsafe extern "C" fn getname_callback<F: Family>(
    sock: *mut raw::socket,
    addr: *mut raw::sockaddr,
    peer: c_int,
) -> c_int {
    from_result(|| {
        // SAFETY: Per the function's safety requirements.
        let s = unsafe { sock_of::<F>(sock) };
        let mut out = [0u8; GETNAME_LEN];
        let len = F::getname(s, peer != 0, &mut out)?;
        let len = len.min(GETNAME_LEN);
        // SAFETY: `addr` is writable for at least `GETNAME_LEN >= len` bytes.
        unsafe { ptr::copy_nonoverlapping(out.as_ptr(), addr.cast::<u8>(), len) };
        Ok(len as c_int)
    })
}

/// `proto_ops::setsockopt`.
///
/// # Safety
///
/// Called by the socket layer with an open socket of family `F` and a `sockptr_t` to `optlen`
/// bytes of option value.
unsafe extern "C" fn setsockopt_callback<F: Family>(
    sock: *mut raw::socket,
    level: c_int,
    optname: c_int,
    optval: raw::sockptr_t,
    optlen: ffi::c_uint,
) -> c_int {
    from_result(|| {
        // SAFETY: Per the function's safety requirements.
        let s = unsafe { sock_of::<F>(sock) };
        let val = OptVal {
            ptr: optval,
            len: optlen,
        };
        F::setsockopt(s, level, optname, &val, &ProcessCtx::enter())?;
        Ok(0)
    })
}

/// `proto_ops::getsockopt`.
///
/// # Safety
///
/// Called by the socket layer with an open socket of family `F`; `optval` and `optlen` are
/// user pointers (checked when used).
unsafe extern "C" fn getsockopt_callback<F: Family>(
    sock: *mut raw::socket,
    level: c_int,
    optname: c_int,
    optval: *mut c_char,
    optlen: *mut c_int,
) -> c_int {
    from_result(|| {
        // SAFETY: Per the function's safety requirements.
        let s = unsafe { sock_of::<F>(sock) };
        let out = OptOut {
            val: optval as UserPtr,
            len: optlen as UserPtr,
        };
        F::getsockopt(s, level, optname, &out, &ProcessCtx::enter())
    })
}

/// `proto_ops::ioctl`.
///
/// # Safety
///
/// Called by the socket layer with an open socket of family `F`; `arg` is the user argument.
unsafe extern "C" fn ioctl_callback<F: Family>(
    sock: *mut raw::socket,
    cmd: ffi::c_uint,
    arg: ffi::c_ulong,
) -> c_int {
    from_result(|| {
        // SAFETY: Per the function's safety requirements.
        let s = unsafe { sock_of::<F>(sock) };
        F::ioctl(s, cmd, arg as UserPtr, &ProcessCtx::enter())?;
        Ok(0)
    })
}

/// Converts a byte count into a `proto_ops` return value.
fn byte_count(n: usize) -> Result<c_int> {
    c_int::try_from(n).map_err(|_| EINVAL)
}

/// `proto_ops::sendmsg`.
///
/// # Safety
///
/// Called by the socket layer with an open socket of family `F` and the call's valid `msg`.
unsafe extern "C" fn sendmsg_callback<F: Family>(
    sock: *mut raw::socket,
    msg: *mut raw::msghdr,
    len: usize,
) -> c_int {
    from_result(|| {
        // SAFETY: Per the function's safety requirements.
        let s = unsafe { sock_of::<F>(sock) };
        let mut m = MsgHdr {
            msg,
            _call: PhantomData,
        };
        byte_count(F::sendmsg(s, &mut m, len, &ProcessCtx::enter())?)
    })
}

/// `proto_ops::recvmsg`.
///
/// # Safety
///
/// Called by the socket layer with an open socket of family `F` and the call's valid `msg`.
unsafe extern "C" fn recvmsg_callback<F: Family>(
    sock: *mut raw::socket,
    msg: *mut raw::msghdr,
    len: usize,
    flags: c_int,
) -> c_int {
    from_result(|| {
        // SAFETY: Per the function's safety requirements.
        let s = unsafe { sock_of::<F>(sock) };
        let mut m = MsgHdr {
            msg,
            _call: PhantomData,
        };
        byte_count(F::recvmsg(s, &mut m, len, flags, &ProcessCtx::enter())?)
    })
}

/// `proto_ops::poll`.
///
/// # Safety
///
/// Called by the socket layer with an open socket of family `F`, its file and a poll table
/// (possibly null).
unsafe extern "C" fn poll_callback<F: Family>(
    file: *mut raw::file,
    sock: *mut raw::socket,
    table: *mut raw::poll_table_struct,
) -> raw::__poll_t {
    // SAFETY: Per the function's safety requirements.
    let s = unsafe { sock_of::<F>(sock) };
    let ctx = PollCtx {
        file,
        sock,
        table,
        _call: PhantomData,
    };
    F::poll(s, &ctx)
}

/// A random `u16` from the kernel's RNG (`get_random_u16`).
pub(crate) fn random_u16() -> u16 {
    // SAFETY: `get_random_u16` has no preconditions.
    unsafe { raw::get_random_u16() }
}

/// `ESOCKTNOSUPPORT`, which `kernel::error::code` does not provide.
pub(crate) fn esocktnosupport() -> Error {
    Error::from_errno(-(raw::ESOCKTNOSUPPORT as c_int))
}

/// The [`Error`] of a positive errno number (for errnos `kernel::error::code` lacks).
pub(crate) fn errno(positive: i32) -> Error {
    Error::from_errno(-positive)
}

/// `EADDRINUSE`, which `kernel::error::code` does not provide.
pub(crate) fn eaddrinuse() -> Error {
    errno(raw::EADDRINUSE as i32)
}

/// `EADDRNOTAVAIL`, which `kernel::error::code` does not provide.
pub(crate) fn eaddrnotavail() -> Error {
    errno(raw::EADDRNOTAVAIL as i32)
}

/// `EOPNOTSUPP` (as C uses it, not the kernel-internal `ENOTSUPP`).
pub(crate) fn eopnotsupp() -> Error {
    errno(raw::EOPNOTSUPP as i32)
}

/// `ENOPROTOOPT`, which `kernel::error::code` does not provide.
pub(crate) fn enoprotoopt() -> Error {
    errno(raw::ENOPROTOOPT as i32)
}

/// `EPROTOTYPE`, which `kernel::error::code` does not provide.
pub(crate) fn eprototype() -> Error {
    errno(raw::EPROTOTYPE as i32)
}

/// `ENOTCONN`, which `kernel::error::code` does not provide.
pub(crate) fn enotconn() -> Error {
    errno(raw::ENOTCONN as i32)
}

/// `EMSGSIZE`, which `kernel::error::code` does not provide.
pub(crate) fn emsgsize() -> Error {
    errno(raw::EMSGSIZE as i32)
}

/// `ETIMEDOUT`, which `kernel::error::code` does not provide.
pub(crate) fn etimedout() -> Error {
    errno(raw::ETIMEDOUT as i32)
}

/// `EBADMSG`, which `kernel::error::code` does not provide.
#[cfg(rds_test)]
pub(crate) fn ebadmsg() -> Error {
    errno(raw::EBADMSG as i32)
}

/// `ENOBUFS`.
pub(crate) fn enobufs() -> Error {
    errno(raw::ENOBUFS as i32)
}
