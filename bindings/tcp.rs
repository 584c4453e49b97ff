// SPDX-License-Identifier: GPL-2.0

//! Kernel TCP sockets for the TCP transport: create, bind, connect, listen and accept; send
//! without blocking; receive through the socket's callbacks (`tcp_read_sock`); and the
//! per-namespace hooks that make and tear down the listeners. The C side is `tcp_glue.c`.
//!
//! # Contexts
//!
//! Creating, connecting, accepting, attaching and releasing sockets sleep: they take a
//! [`ProcessCtx`]. The callbacks ([`TcpEvents`], [`ListenEvents`]) run with bottom halves
//! disabled (softirq, or a process that owns the socket and runs its backlog), under the
//! socket's `sk_callback_lock`: they must not sleep. Once [`Attached`] is dropped (or
//! [`Attached::detach`]ed), no callback runs for it any more.

use super::mm::UserPage;
use super::net::NetId;
use super::raw;
use super::sync::ProcessCtx;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::error::to_result;
use kernel::page::Page;
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};

/// A TCP socket's state (`sk_state`, `include/net/tcp_states.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TcpState {
    /// `TCP_ESTABLISHED`.
    Established,
    /// `TCP_SYN_SENT`, `TCP_SYN_RECV`: still connecting.
    Connecting,
    /// `TCP_CLOSE_WAIT`: the peer closed its side.
    CloseWait,
    /// `TCP_CLOSE`: closed (a refused or reset connection ends here).
    Close,
    /// `TCP_LISTEN`.
    Listen,
    /// The other closing states (`FIN_WAIT*`, `TIME_WAIT`, `LAST_ACK`, `CLOSING`).
    Closing,
}

impl TcpState {
    fn from_raw(s: i32) -> Self {
        match s {
            1 => Self::Established,
            2 | 3 => Self::Connecting,
            7 => Self::Close,
            8 => Self::CloseWait,
            10 => Self::Listen,
            _ => Self::Closing,
        }
    }
}

/// The addresses of a connected socket.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TcpNames {
    /// Local address (v4-mapped for IPv4).
    pub(crate) laddr: [u8; 16],
    /// Local port.
    pub(crate) lport: u16,
    /// Peer address (v4-mapped for IPv4).
    pub(crate) faddr: [u8; 16],
    /// Peer port.
    pub(crate) fport: u16,
    /// The device the socket is bound to (0: none).
    pub(crate) dev_if: u32,
}

/// A kernel TCP socket (`struct socket`), owned: released when dropped (process context).
///
/// # Invariants
///
/// `ptr` came from `sock_create_kern` or `kernel_accept` and is released only by `Drop`; no
/// callback of ours is attached to it (that is [`Attached`]'s).
pub(crate) struct TcpSocket {
    ptr: NonNull<raw::socket>,
}

// SAFETY: A kernel socket may be used from any thread; the socket layer locks what it shares.
unsafe impl Send for TcpSocket {}
// SAFETY: As above: the calls `&TcpSocket` allows are safe concurrently.
unsafe impl Sync for TcpSocket {}

impl TcpSocket {
    /// A new TCP socket in `net` (IPv6, which also speaks IPv4 through v4-mapped addresses,
    /// unless `v6` is false), with C's options: no Nagle, keepalive after 5 s idle, 5 probes 5 s
    /// apart.
    ///
    /// `net` must be alive: [`NetId`]s come from sockets and from the namespace hooks, and a
    /// namespace's connections and listeners are destroyed in its exit hooks.
    pub(crate) fn new(net: NetId, v6: bool, _ctx: &ProcessCtx) -> Result<Self> {
        let mut p: *mut raw::socket = ptr::null_mut();
        // SAFETY: `net` is alive (see above); `p` is valid for writes; creating a socket may
        // sleep, which `_ctx` allows.
        to_result(unsafe { raw::rds_rs_tcp_create(net.as_raw(), v6, &mut p) })?;
        // INVARIANT: created just now, nothing attached.
        NonNull::new(p).map(|ptr| Self { ptr }).ok_or(ENOMEM)
    }

    fn as_ptr(&self) -> *mut raw::socket {
        self.ptr.as_ptr()
    }

    /// Gives the socket the buffer sizes of its namespace's `net.rds.tcp.rds_tcp_sndbuf` and
    /// `rds_tcp_rcvbuf` (0 leaves TCP's autotuning), as C's `rds_tcp_tune`.
    pub(crate) fn tune(&self, net: NetId, _ctx: &ProcessCtx) {
        let (mut snd, mut rcv) = (0, 0);
        // SAFETY: `net` is alive (as for `new`) and its TCP state exists while the hooks are
        // registered (which sockets of the transport need); the outputs are valid for writes.
        unsafe { raw::rds_rs_tcp_bufsizes(net.as_raw(), &mut snd, &mut rcv) };
        // SAFETY: The socket is live (type invariant); takes the socket lock (`_ctx`).
        unsafe { raw::rds_rs_tcp_tune(self.as_ptr(), snd, rcv) };
    }

    /// Binds `addr` (port 0: any).
    pub(crate) fn bind(
        &self,
        addr: &[u8; 16],
        port: u16,
        scope_id: u32,
        _ctx: &ProcessCtx,
    ) -> Result {
        // SAFETY: The socket is live; `addr` is valid for 16 bytes; may sleep (`_ctx`).
        to_result(unsafe { raw::rds_rs_tcp_bind(self.as_ptr(), addr.as_ptr(), port, scope_id) })
    }

    /// Listens (after [`TcpSocket::bind`]).
    pub(crate) fn listen(&self, backlog: i32, _ctx: &ProcessCtx) -> Result {
        // SAFETY: The socket is live; may sleep (`_ctx`).
        to_result(unsafe { raw::rds_rs_tcp_listen(self.as_ptr(), backlog) })
    }

    /// The addresses and ports.
    pub(crate) fn names(&self) -> TcpNames {
        names_of(self.ptr)
    }

    /// Reads what the socket still holds with `f` (as [`CbSock::read`] takes it), then shuts
    /// it down both ways under the same hold of its lock: what the peer sends afterwards is
    /// refused with a reset rather than acknowledged, so that no byte TCP acknowledged goes
    /// unread. For a socket whose callbacks were detached.
    pub(crate) fn read_and_shut(
        &self,
        f: Option<&mut dyn FnMut(&SkbData<'_>) -> ReadStep>,
        _ctx: &ProcessCtx,
    ) {
        let mut f = f;
        let arg = f.as_mut().map_or(ptr::null_mut(), actor_arg);
        // SAFETY: The socket is live (type invariant); `arg` is null or borrows `f`, which
        // outlives the call, which runs the actor only during it, with the socket lock held
        // (`_ctx`: process context).
        unsafe { raw::rds_rs_tcp_read_shutdown(self.as_ptr(), arg) };
    }

    /// Resets the connection (no linger: the peer gets a RST) and releases the socket.
    pub(crate) fn reset(self, _ctx: &ProcessCtx) {
        // SAFETY: The socket is live (type invariant); may sleep (`_ctx`). It is released by
        // the drop below.
        unsafe { raw::rds_rs_tcp_reset(self.as_ptr()) };
    }

    /// Attaches `handler` to the socket's callbacks and starts connecting to `faddr`:`port`
    /// (without waiting; [`TcpEvents::state_change`] tells how it went). On failure the socket
    /// comes back with the error.
    pub(crate) fn connect(
        self,
        faddr: &[u8; 16],
        port: u16,
        scope_id: u32,
        handler: Arc<dyn TcpEvents>,
        ctx: &ProcessCtx,
    ) -> core::result::Result<Attached, Error> {
        let a = self.attach(handler, ctx)?;
        // SAFETY: The socket is live (owned by `a`); `faddr` is valid for 16 bytes; may sleep
        // (`ctx`).
        to_result(unsafe {
            raw::rds_rs_tcp_connect(a.sock.as_ptr(), faddr.as_ptr(), port, scope_id)
        })?;
        Ok(a)
    }

    /// Attaches `handler` to the socket's callbacks (data ready, write space, state change).
    pub(crate) fn attach(self, handler: Arc<dyn TcpEvents>, _ctx: &ProcessCtx) -> Result<Attached> {
        let ctx = KBox::into_raw(KBox::new(handler, GFP_KERNEL)?);
        // SAFETY: The socket is live and has nothing of ours attached (type invariant); `ctx`
        // stays valid until the detach (`Attached`'s drop) hands it back.
        let r = to_result(unsafe { raw::rds_rs_tcp_attach(self.as_ptr(), ctx.cast()) });
        if let Err(e) = r {
            // SAFETY: Not attached: nothing else has `ctx`.
            drop(unsafe { KBox::from_raw(ctx) });
            return Err(e);
        }
        // INVARIANT: attached just now with `ctx`.
        Ok(Attached { sock: self, ctx })
    }

    /// Makes this (bound) socket a listener whose callbacks go to `handler`.
    pub(crate) fn into_listener(
        self,
        backlog: i32,
        handler: Arc<dyn ListenEvents>,
        ctx: &ProcessCtx,
    ) -> Result<Listener> {
        let lctx = KBox::into_raw(KBox::new(handler, GFP_KERNEL)?);
        // SAFETY: As in `attach`, for the listener's callback.
        let r = to_result(unsafe { raw::rds_rs_tcp_listen_attach(self.as_ptr(), lctx.cast()) });
        if let Err(e) = r {
            // SAFETY: Not attached: nothing else has `lctx`.
            drop(unsafe { KBox::from_raw(lctx) });
            return Err(e);
        }
        // INVARIANT: attached just now with `lctx`.
        let l = Listener {
            sock: self,
            ctx: lctx,
        };
        l.sock.listen(backlog, ctx)?;
        Ok(l)
    }
}

impl Drop for TcpSocket {
    fn drop(&mut self) {
        // Releasing takes the socket lock: process context only (as every owner of a
        // `TcpSocket` drops it: shutdowns, accepts, namespace hooks).
        let _ctx = ProcessCtx::enter();
        // SAFETY: Owned and not attached (type invariant); released once.
        unsafe { raw::rds_rs_tcp_release(self.as_ptr()) };
    }
}

fn names_of(sock: NonNull<raw::socket>) -> TcpNames {
    let mut n = TcpNames::default();
    // SAFETY: The caller has `sock` live; the outputs are valid for writes.
    unsafe {
        raw::rds_rs_tcp_names(
            sock.as_ptr(),
            n.laddr.as_mut_ptr(),
            &mut n.lport,
            n.faddr.as_mut_ptr(),
            &mut n.fport,
            &mut n.dev_if,
        )
    };
    n
}

/// What a connected socket's callbacks call (with bottom halves disabled: they must not
/// sleep).
pub(crate) trait TcpEvents: Send + Sync {
    /// Data arrived: read it with [`CbSock::read`].
    fn data_ready(self: ArcBorrow<'_, Self>, sock: &CbSock<'_>);
    /// Acknowledgements freed send space (`room`: at most half the send buffer is in use).
    fn write_space(self: ArcBorrow<'_, Self>, sock: &CbSock<'_>, room: bool);
    /// The connection's state changed.
    fn state_change(self: ArcBorrow<'_, Self>, sock: &CbSock<'_>, state: TcpState);
}

/// What a listener's callback calls (bottom halves disabled: it must not sleep).
pub(crate) trait ListenEvents: Send + Sync {
    /// A connection may be waiting: accept with [`Listener::accept`] from process context.
    fn ready(&self);
}

type EventsCtx = *mut Arc<dyn TcpEvents>;
type ListenCtx = *mut Arc<dyn ListenEvents>;

/// A socket with our callbacks attached, delivering to a [`TcpEvents`] handler.
///
/// # Invariants
///
/// `ctx` came from `KBox::into_raw` and is the context attached to `sock`'s callbacks until
/// the drop detaches them.
pub(crate) struct Attached {
    sock: TcpSocket,
    ctx: EventsCtx,
}

// SAFETY: The socket is `Send`; the handler is `Send + Sync`.
unsafe impl Send for Attached {}
// SAFETY: As above; `&Attached` allows only thread-safe calls.
unsafe impl Sync for Attached {}

/// The outcome of a send that did not block.
pub(crate) type Sent = Result<usize>;

/// The most pieces a [`PageBatch`] holds.
pub(crate) const PAGE_BATCH: usize = raw::RDS_RS_TCP_PAGE_BATCH as usize;

/// Pieces of pages for one [`Attached::send_pages`], borrowed for `'a`.
///
/// # Invariants
///
/// The first `n` entries of `refs` are pieces of pages that stay referenced for `'a`, each
/// inside its page; `len` is the sum of their lengths.
pub(crate) struct PageBatch<'a> {
    refs: [raw::rds_rs_page_ref; PAGE_BATCH],
    n: usize,
    len: usize,
    _pages: PhantomData<&'a Page>,
}

impl<'a> PageBatch<'a> {
    /// No pieces.
    pub(crate) fn new() -> Self {
        // INVARIANT: no entry is in use.
        Self {
            refs: [raw::rds_rs_page_ref::default(); PAGE_BATCH],
            n: 0,
            len: 0,
            _pages: PhantomData,
        }
    }

    /// Adds `len` bytes of `page` at `off`; false when the batch is full or the range is not
    /// inside the page.
    pub(crate) fn push_page(&mut self, page: &'a Page, off: usize, len: usize) -> bool {
        self.push(page.as_ptr().cast(), off, len)
    }

    /// Adds `len` bytes at `off` of a page of a zero-copy payload (as
    /// [`PageBatch::push_page`]).
    pub(crate) fn push_user(&mut self, page: UserPage<'a>, off: usize, len: usize) -> bool {
        self.push(page.as_raw(), off, len)
    }

    fn push(&mut self, page: *mut raw::page, off: usize, len: usize) -> bool {
        let inside = off
            .checked_add(len)
            .is_some_and(|end| end <= kernel::page::PAGE_SIZE);
        let (Ok(o), Ok(l)) = (u32::try_from(off), u32::try_from(len)) else {
            return false;
        };
        let Some(slot) = self.refs.get_mut(self.n).filter(|_| inside) else {
            return false;
        };
        // INVARIANT: the page is referenced for `'a` (the callers' borrows) and the range is
        // inside it (checked).
        *slot = raw::rds_rs_page_ref {
            page,
            off: o,
            len: l,
        };
        self.n += 1;
        self.len += len;
        true
    }

    /// Whether the batch holds no piece.
    pub(crate) fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The bytes the pieces hold.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Attached {
    fn as_ptr(&self) -> *mut raw::socket {
        self.sock.as_ptr()
    }

    /// The addresses and ports.
    pub(crate) fn names(&self) -> TcpNames {
        self.sock.names()
    }

    /// The state.
    pub(crate) fn state(&self) -> TcpState {
        // SAFETY: The socket is live (owned).
        TcpState::from_raw(unsafe { raw::rds_rs_tcp_state(self.as_ptr()) })
    }

    /// TCP's next sequence number to send (`write_seq`): where the next byte queued goes.
    pub(crate) fn write_seq(&self) -> u32 {
        // SAFETY: The socket is live (owned).
        unsafe { raw::rds_rs_tcp_write_seq(self.as_ptr()) }
    }

    /// Sets or clears `TCP_CORK`: while set, TCP sends only full segments; clearing it pushes
    /// what is queued.
    pub(crate) fn set_cork(&self, on: bool, _ctx: &ProcessCtx) {
        // SAFETY: The socket is live (owned); setting the option takes the socket lock, which
        // `_ctx` allows.
        unsafe { raw::rds_rs_tcp_set_cork(self.as_ptr(), on) }
    }

    /// Queues a copy of `buf` without blocking: the bytes taken (perhaps fewer), `EAGAIN`
    /// when none fit. `more`: more of the same message follows.
    pub(crate) fn send_bytes(&self, buf: &[u8], more: bool, _ctx: &ProcessCtx) -> Sent {
        // SAFETY: The socket is live (owned); `buf` is valid for its length; sending takes the
        // socket lock, which `_ctx` allows.
        let r = unsafe {
            raw::rds_rs_tcp_send_bytes(self.as_ptr(), buf.as_ptr().cast(), buf.len(), more)
        };
        sent(r)
    }

    /// Queues the pieces of `batch` by reference in one send (TCP holds the pages until it no
    /// longer needs them), without blocking: the bytes taken from the start (perhaps fewer
    /// than all), `EAGAIN` when none fit. `more`: more of the same message follows.
    pub(crate) fn send_pages(&self, batch: &PageBatch<'_>, more: bool, _ctx: &ProcessCtx) -> Sent {
        let (sock, refs) = (self.as_ptr(), batch.refs.as_ptr());
        let n = u32::try_from(batch.n).map_err(|_| EINVAL)?;
        // SAFETY: `sock` is live (owned); `refs` holds `n <= PAGE_BATCH` pieces, each inside a
        // page referenced while `batch` is borrowed (`PageBatch`'s invariant); process context.
        let r = unsafe { raw::rds_rs_tcp_send_pages(sock, refs, n, more) };
        sent(r)
    }

    /// Reads what the socket has queued, in process context (after a read in a callback had
    /// to stop for memory), with `f` as [`CbSock::read`] takes it.
    pub(crate) fn read(
        &self,
        f: &mut dyn FnMut(&SkbData<'_>) -> ReadStep,
        _ctx: &ProcessCtx,
    ) -> i32 {
        let mut f = f;
        // SAFETY: The socket is live (owned); the actor's argument borrows `f`, which outlives
        // the call, which runs the actor only during it; the socket lock is taken, which
        // `_ctx` allows.
        unsafe { raw::rds_rs_tcp_read_locked(self.as_ptr(), actor_arg(&mut f)) }
    }

    /// Detaches the callbacks (when this returns, none runs with the handler any more) and
    /// gives the socket back.
    pub(crate) fn detach(self, _ctx: &ProcessCtx) -> TcpSocket {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: Attached (type invariant); detaching takes the socket lock (process
        // context, `_ctx`) and waits for running callbacks (the callback lock's write side).
        unsafe { raw::rds_rs_tcp_detach(this.sock.as_ptr()) };
        // SAFETY: `ctx` came from `KBox::into_raw` (type invariant) and, detached above, no
        // callback uses it any more.
        drop(unsafe { KBox::from_raw(this.ctx) });
        // SAFETY: `this` is not dropped (`ManuallyDrop`): the socket is moved out once.
        unsafe { ptr::read(&this.sock) }
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        // SAFETY: Attached (type invariant); process context, as every owner drops it.
        unsafe { raw::rds_rs_tcp_detach(self.as_ptr()) };
        // SAFETY: As in `detach`.
        drop(unsafe { KBox::from_raw(self.ctx) });
        // The socket is released by its own drop, after this.
    }
}

fn sent(r: i32) -> Sent {
    if r < 0 {
        Err(Error::from_errno(r))
    } else {
        Ok(r as usize)
    }
}

/// The socket a callback is for, for the duration of the callback.
pub(crate) struct CbSock<'a> {
    ptr: NonNull<raw::socket>,
    _p: core::marker::PhantomData<&'a ()>,
}

impl CbSock<'_> {
    /// Reads what the socket has queued: `f` gets the data skb by skb and says how much it
    /// took ([`ReadStep`]). Returns the bytes read (or a negative errno).
    pub(crate) fn read(&self, f: &mut dyn FnMut(&SkbData<'_>) -> ReadStep) -> i32 {
        let mut f = f;
        // SAFETY: In a callback of the socket, which owns it (softirq or its lock's owner):
        // `tcp_read_sock` may run; the actor's argument borrows `f`, which outlives the call.
        unsafe { raw::rds_rs_tcp_read(self.ptr.as_ptr(), actor_arg(&mut f)) }
    }

    /// The oldest byte the peer has not acknowledged (`snd_una`).
    pub(crate) fn snd_una(&self) -> u32 {
        // SAFETY: The socket is live during the callback.
        unsafe { raw::rds_rs_tcp_snd_una(self.ptr.as_ptr()) }
    }
}

/// What the C reads take as their actor's argument: a pointer to `f` (a `&mut dyn`, a thin
/// pointer to a fat one, which [`rds_rs_tcp_cb_recv`] casts back), valid while `f` is borrowed.
fn actor_arg(f: &mut &mut dyn FnMut(&SkbData<'_>) -> ReadStep) -> *mut c_void {
    ptr::from_mut(f).cast()
}

/// What a read's `f` did with the data it was given.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadStep {
    /// Bytes taken (from the start).
    pub(crate) used: usize,
    /// Stop reading after them (the rest stays queued in the socket).
    pub(crate) stop: bool,
}

/// Bytes of a received skb, as a read hands them over.
pub(crate) struct SkbData<'a> {
    skb: NonNull<raw::sk_buff>,
    off: u32,
    len: usize,
    _p: core::marker::PhantomData<&'a ()>,
}

impl SkbData<'_> {
    /// How many bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Copies `dst.len()` bytes from `at` into `dst`.
    pub(crate) fn copy(&self, at: usize, dst: &mut [u8]) -> Result {
        let off = self.range(at, dst.len())?;
        // SAFETY: The skb is live during the read; the range is inside this data (checked);
        // `dst` is valid for its length.
        to_result(unsafe {
            raw::rds_rs_tcp_skb_copy(self.skb.as_ptr(), off, dst.as_mut_ptr().cast(), dst.len())
        })
    }

    /// Copies `len` bytes from `at` into `page` at `page_off`.
    pub(crate) fn copy_to_page(
        &self,
        at: usize,
        page: &Page,
        page_off: usize,
        len: usize,
    ) -> Result {
        let off = self.range(at, len)?;
        // SAFETY: As in `copy`; the C side checks the page range; we hold the page.
        to_result(unsafe {
            raw::rds_rs_tcp_skb_copy_to_page(
                self.skb.as_ptr(),
                off,
                page.as_ptr().cast(),
                page_off,
                len,
            )
        })
    }

    fn range(&self, at: usize, len: usize) -> Result<u32> {
        let end = at.checked_add(len).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        let at = u32::try_from(at).map_err(|_| EINVAL)?;
        self.off.checked_add(at).ok_or(EINVAL)
    }
}

impl SkbData<'_> {
    /// Appends `len` of these bytes from `at` to `chain`, without copying them: a new skb that
    /// shares this one's pages (C: `pskb_extract`). Atomic; `ENOMEM` when memory runs out.
    pub(crate) fn extract_into(&self, at: usize, len: usize, chain: &mut SkbChain) -> Result {
        let off = self.range(at, len)?;
        // SAFETY: The skb is live during the read; the range is inside this data (checked).
        let skb = unsafe { raw::rds_rs_tcp_skb_extract(self.skb.as_ptr(), off, len) };
        let skb = NonNull::new(skb).ok_or(ENOMEM)?;
        // SAFETY: `skb` is new, ours alone, linked to nothing, and holds `len` bytes.
        unsafe { chain.push(skb, len) };
        Ok(())
    }
}

/// Received bytes kept in the skbs they arrived in (C: `rds_tcp_incoming`'s `ti_skb_list`):
/// extracts of a read's skbs ([`SkbData::extract_into`]) in order, linked through their `next`.
/// Dropping it frees them, which process and softirq context may do.
///
/// # Invariants
///
/// `head` is `None` (and then `count` and `bytes` are 0) or the first of a chain of `count`
/// skbs that this owns alone, linked through `next`, whose last is `tail` (its `next` null);
/// together they hold `bytes` bytes.
pub(crate) struct SkbChain {
    head: Option<NonNull<raw::sk_buff>>,
    tail: Option<NonNull<raw::sk_buff>>,
    count: usize,
    bytes: usize,
}

// SAFETY: The skbs are owned by the chain alone (type invariant), and an skb with no socket
// may be read and freed from any thread.
unsafe impl Send for SkbChain {}
// SAFETY: Shared access only reads the skbs.
unsafe impl Sync for SkbChain {}

impl SkbChain {
    /// An empty chain.
    pub(crate) const fn new() -> Self {
        Self {
            head: None,
            tail: None,
            count: 0,
            bytes: 0,
        }
    }

    /// The bytes held.
    pub(crate) fn len(&self) -> usize {
        self.bytes
    }

    /// The skbs held.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Links `skb`, holding `len` bytes, at the end.
    ///
    /// # Safety
    ///
    /// `skb` is a live skb that the caller owns alone and gives to the chain, linked to
    /// nothing, holding `len` bytes.
    unsafe fn push(&mut self, skb: NonNull<raw::sk_buff>, len: usize) {
        match self.tail {
            // SAFETY: `tail` is the chain's last skb (type invariant), owned by it.
            Some(t) => unsafe { raw::rds_rs_tcp_skb_link(t.as_ptr(), skb.as_ptr()) },
            None => self.head = Some(skb),
        }
        // INVARIANT: `skb` is the new last, its `next` null (the function's requirement).
        self.tail = Some(skb);
        self.count += 1;
        self.bytes += len;
    }

    /// Calls `f` with each skb and the bytes before it, in order, until it fails.
    pub(super) fn try_for_each(
        &self,
        mut f: impl FnMut(*const raw::sk_buff, usize, usize) -> Result,
    ) -> Result {
        let mut cur = self.head;
        let mut at = 0;
        while let Some(skb) = cur {
            // SAFETY: `skb` is in the chain (type invariant), live while `self` is borrowed.
            let n = unsafe { raw::rds_rs_tcp_skb_len(skb.as_ptr()) } as usize;
            f(skb.as_ptr(), at, n)?;
            at += n;
            // SAFETY: As above.
            cur = NonNull::new(unsafe { raw::rds_rs_tcp_skb_next(skb.as_ptr()) });
        }
        Ok(())
    }

    /// Copies bytes from `offset` into `dst`; `EINVAL` when they are not all there.
    pub(crate) fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        self.copy_range(offset, dst.len(), &mut |skb, off, at, n| {
            let d = dst.get_mut(at..at + n).ok_or(EINVAL)?;
            // SAFETY: `skb` is live during the walk; `off..off + n` is inside it (the walk's
            // promise); `d` is valid for `n` bytes.
            to_result(unsafe { raw::rds_rs_tcp_skb_copy(skb, off, d.as_mut_ptr().cast(), n) })
        })
    }

    /// Copies `len` bytes from `offset` into `page` at `page_off`.
    pub(crate) fn copy_to_page(
        &self,
        offset: usize,
        page: &Page,
        page_off: usize,
        len: usize,
    ) -> Result {
        self.copy_range(offset, len, &mut |skb, off, at, n| {
            // SAFETY: As in `read`; the C side checks the page range; we hold the page.
            to_result(unsafe {
                raw::rds_rs_tcp_skb_copy_to_page(skb, off, page.as_ptr().cast(), page_off + at, n)
            })
        })
    }

    /// Calls `f(skb, offset in skb, offset in the range, n)` for each piece of the `len` bytes
    /// from `offset`, in order; `EINVAL` when they are not all there.
    fn copy_range(
        &self,
        offset: usize,
        len: usize,
        f: &mut dyn FnMut(*const raw::sk_buff, u32, usize, usize) -> Result,
    ) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.bytes {
            return Err(EINVAL);
        }
        self.try_for_each(|skb, at, n| {
            let lo = at.max(offset);
            let hi = (at + n).min(end);
            if lo < hi {
                let off = u32::try_from(lo - at).map_err(|_| EINVAL)?;
                f(skb, off, lo - offset, hi - lo)?;
            }
            Ok(())
        })
    }
}

impl Drop for SkbChain {
    fn drop(&mut self) {
        if let Some(head) = self.head {
            // SAFETY: The chain owns its skbs alone (type invariant); they are freed once.
            unsafe { raw::rds_rs_tcp_skb_free_chain(head.as_ptr()) };
        }
    }
}

/// A listening socket whose callback goes to a [`ListenEvents`] handler.
///
/// # Invariants
///
/// `ctx` came from `KBox::into_raw` and is attached to `sock`'s listener callback until the
/// drop detaches it.
pub(crate) struct Listener {
    sock: TcpSocket,
    ctx: ListenCtx,
}

// SAFETY: As for `Attached`.
unsafe impl Send for Listener {}
// SAFETY: As for `Attached`.
unsafe impl Sync for Listener {}

impl Listener {
    /// Accepts a waiting connection without blocking (`None`: none waits).
    pub(crate) fn accept(&self, _ctx: &ProcessCtx) -> Result<Option<TcpSocket>> {
        let mut p: *mut raw::socket = ptr::null_mut();
        // SAFETY: The listener is live (owned); `p` is valid for writes; may sleep (`_ctx`).
        let r = unsafe { raw::rds_rs_tcp_accept(self.sock.as_ptr(), &mut p) };
        if r == -(raw::EAGAIN as i32) {
            return Ok(None);
        }
        to_result(r)?;
        // INVARIANT: accepted just now; nothing of ours is attached (the accept gave the child
        // its original callback back).
        Ok(NonNull::new(p).map(|ptr| TcpSocket { ptr }))
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // SAFETY: Attached (type invariant); process context, as every owner drops it.
        unsafe { raw::rds_rs_tcp_detach(self.sock.as_ptr()) };
        // SAFETY: `ctx` came from `KBox::into_raw` (type invariant) and, detached above, no
        // callback uses it any more.
        drop(unsafe { KBox::from_raw(self.ctx) });
    }
}

/// Whether `addr` is an address of this host in `net` (C: `rds_tcp_laddr_check`).
pub(crate) fn addr_is_local(net: NetId, addr: &[u8; 16], scope_id: u32, _ctx: &ProcessCtx) -> bool {
    // SAFETY: `net` is alive (as for `TcpSocket::new`); `addr` is valid for 16 bytes.
    unsafe { raw::rds_rs_tcp_addr_local(net.as_raw(), addr.as_ptr(), scope_id) }
}

/// The namespace's local port range (`net.ipv4.ip_local_port_range`), from which ephemeral
/// ports are taken.
pub(crate) fn local_port_range(net: NetId) -> (u16, u16) {
    let (mut lo, mut hi) = (0i32, 0i32);
    // SAFETY: `net` is alive (as for `TcpSocket::new`); `lo` and `hi` are valid for writes.
    unsafe { raw::rds_rs_tcp_port_range(net.as_raw(), &mut lo, &mut hi) };
    (
        u16::try_from(lo).unwrap_or(u16::MAX),
        u16::try_from(hi).unwrap_or(0),
    )
}

/// # Safety
///
/// Called by the data_ready callback of a socket attached with `ctx`, under its callback lock.
#[no_mangle]
unsafe extern "C" fn rds_rs_tcp_cb_data_ready(ctx: *mut c_void, sock: *mut raw::socket) {
    let Some(ptr) = NonNull::new(sock) else {
        return;
    };
    // SAFETY: `ctx` is the attached context, valid until the detach, which waits for this
    // callback (it takes the callback lock's write side).
    let h = unsafe { &*ctx.cast::<Arc<dyn TcpEvents>>() };
    h.as_arc_borrow().data_ready(&CbSock {
        ptr,
        _p: core::marker::PhantomData,
    });
}

/// # Safety
///
/// As [`rds_rs_tcp_cb_data_ready`], for write_space.
#[no_mangle]
unsafe extern "C" fn rds_rs_tcp_cb_write_space(
    ctx: *mut c_void,
    sock: *mut raw::socket,
    room: bool,
) {
    let Some(ptr) = NonNull::new(sock) else {
        return;
    };
    // SAFETY: As in `rds_rs_tcp_cb_data_ready`.
    let h = unsafe { &*ctx.cast::<Arc<dyn TcpEvents>>() };
    h.as_arc_borrow().write_space(
        &CbSock {
            ptr,
            _p: core::marker::PhantomData,
        },
        room,
    );
}

/// # Safety
///
/// As [`rds_rs_tcp_cb_data_ready`], for state_change.
#[no_mangle]
unsafe extern "C" fn rds_rs_tcp_cb_state_change(
    ctx: *mut c_void,
    sock: *mut raw::socket,
    state: i32,
) {
    let Some(ptr) = NonNull::new(sock) else {
        return;
    };
    // SAFETY: As in `rds_rs_tcp_cb_data_ready`.
    let h = unsafe { &*ctx.cast::<Arc<dyn TcpEvents>>() };
    h.as_arc_borrow().state_change(
        &CbSock {
            ptr,
            _p: core::marker::PhantomData,
        },
        TcpState::from_raw(state),
    );
}

/// # Safety
///
/// Called by the data_ready callback of a listener attached with `ctx`, under its callback
/// lock.
#[no_mangle]
unsafe extern "C" fn rds_rs_tcp_cb_listen_ready(ctx: *mut c_void) {
    // SAFETY: As in `rds_rs_tcp_cb_data_ready`, for the listener's context.
    let h = unsafe { &*ctx.cast::<Arc<dyn ListenEvents>>() };
    h.ready();
}

/// # Safety
///
/// Called by `tcp_read_sock`'s actor during `rds_rs_tcp_read` with the `arg` a read of this
/// file passed, and an skb with `len` bytes from `off`.
#[no_mangle]
unsafe extern "C" fn rds_rs_tcp_cb_recv(
    arg: *mut c_void,
    skb: *const raw::sk_buff,
    off: u32,
    len: usize,
    stop: *mut bool,
) -> usize {
    let Some(skb) = NonNull::new(skb.cast_mut()) else {
        return 0;
    };
    // SAFETY: `arg` is the `&mut dyn FnMut` a read passed, alive for the read's duration
    // (which this call is part of), not used by anything else meanwhile.
    let f = unsafe { &mut **arg.cast::<&mut dyn FnMut(&SkbData<'_>) -> ReadStep>() };
    let step = f(&SkbData {
        skb,
        off,
        len,
        _p: core::marker::PhantomData,
    });
    // SAFETY: `stop` is valid for writes (the C actor's local).
    unsafe { *stop = step.stop };
    step.used.min(len)
}

/// The per-namespace hooks of the TCP transport: a listener made for each namespace and torn
/// down when it goes.
pub(crate) trait NetHooks: Send + Sync {
    /// A namespace appeared (or existed when the hooks were registered).
    fn net_init(&self, net: NetId, ctx: &ProcessCtx) -> Result;
    /// A namespace is going away.
    fn net_exit(&self, net: NetId, ctx: &ProcessCtx);
    /// A buffer size of the namespace's `net.rds.tcp` was written.
    fn sysctl_changed(&self, net: NetId, ctx: &ProcessCtx);
}

/// The registered hooks (a `KBox<Arc<dyn NetHooks>>` while a [`NetRegistration`] exists).
static NET_HOOKS: AtomicPtr<Arc<dyn NetHooks>> = AtomicPtr::new(ptr::null_mut());

/// The TCP transport's per-namespace hooks, registered while this exists (`register_pernet_device`:
/// registering runs `net_init` for every namespace, unregistering `net_exit`).
///
/// # Invariants
///
/// While this exists, `NET_HOOKS` holds a live box and the C hooks are registered.
pub(crate) struct NetRegistration(());

impl NetRegistration {
    /// Registers `hooks` (one registration at a time: `EBUSY`).
    pub(crate) fn new(hooks: Arc<dyn NetHooks>, _ctx: &ProcessCtx) -> Result<Self> {
        let b = KBox::into_raw(KBox::new(hooks, GFP_KERNEL)?);
        if NET_HOOKS
            .compare_exchange(ptr::null_mut(), b, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: Not published: ours alone.
            drop(unsafe { KBox::from_raw(b) });
            return Err(EBUSY);
        }
        // SAFETY: The hooks read `NET_HOOKS`, published above; may sleep (`_ctx`).
        if let Err(e) = to_result(unsafe { raw::rds_rs_tcp_pernet_register() }) {
            let p = NET_HOOKS.swap(ptr::null_mut(), Ordering::AcqRel);
            // SAFETY: Never registered: nothing else uses the box.
            drop(unsafe { KBox::from_raw(p) });
            return Err(e);
        }
        // INVARIANT: published and registered.
        Ok(Self(()))
    }
}

impl Drop for NetRegistration {
    fn drop(&mut self) {
        // SAFETY: Registered (type invariant); unregistering runs the exit hook for every
        // namespace and returns when no hook runs any more.
        unsafe { raw::rds_rs_tcp_pernet_unregister() };
        let p = NET_HOOKS.swap(ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            // SAFETY: The box published in `new`; no hook uses it any more.
            drop(unsafe { KBox::from_raw(p) });
        }
    }
}

fn with_hooks<R>(f: impl FnOnce(&dyn NetHooks) -> R) -> Option<R> {
    let p = NET_HOOKS.load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: A non-null `NET_HOOKS` is a live box while the hooks are registered, and the C
    // hooks run only then.
    Some(f(unsafe { &**p }))
}

/// # Safety
///
/// Called by the pernet init hook with a namespace being set up.
#[no_mangle]
unsafe extern "C" fn rds_rs_tcp_net_init(net: *mut raw::net) -> i32 {
    // Pernet hooks run in process context.
    let ctx = ProcessCtx::enter();
    match with_hooks(|h| h.net_init(NetId::from_raw(net), &ctx)) {
        Some(Err(e)) => e.to_errno(),
        _ => 0,
    }
}

/// # Safety
///
/// Called by the pernet exit hook with a namespace being dismantled.
#[no_mangle]
unsafe extern "C" fn rds_rs_tcp_net_exit(net: *mut raw::net) {
    let ctx = ProcessCtx::enter();
    let _ = with_hooks(|h| h.net_exit(NetId::from_raw(net), &ctx));
}

/// # Safety
///
/// Called by the `net.rds.tcp` sysctl handler of the live namespace `net`.
#[no_mangle]
unsafe extern "C" fn rds_rs_tcp_cb_sysctl_changed(net: *mut raw::net) {
    // Sysctl handlers run in process context.
    let ctx = ProcessCtx::enter();
    let _ = with_hooks(|h| h.sysctl_changed(NetId::from_raw(net), &ctx));
}
