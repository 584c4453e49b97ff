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

use super::raw;
use core::{
    marker::PhantomData,
    mem::{offset_of, size_of},
    ptr,
    sync::atomic::{AtomicBool, AtomicPtr, Ordering},
};
use kernel::{
    error::{from_result, to_result},
    ffi::{self, c_char, c_int, c_void},
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
/// Only compared, never dereferenced. A socket holds a reference on its namespace for its
/// whole life, so the identity of a live socket's namespace cannot be reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct NetId(usize);

/// The size of the address buffer `getname` fills: a `struct sockaddr_in6`, the largest
/// address an inet-style family returns (callers pass a `struct sockaddr_storage`).
pub(crate) const GETNAME_LEN: usize = 28;

impl NetId {
    /// The initial network namespace.
    pub(crate) fn init() -> Self {
        // Taking the address of a static reads nothing.
        NetId(ptr::addr_of!(raw::init_net) as usize)
    }
}

/// The value of a `setsockopt(2)` call: user memory, or kernel memory for in-kernel callers
/// (a `sockptr_t`), and its length.
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
        let mut v: c_int = 0;
        // SAFETY: `v` is valid for writes of `size_of::<c_int>()` bytes, the most the helper
        // copies; the helper itself checks the source (`copy_from_user` for user memory, and
        // in-kernel callers pass valid kernel memory of `optlen` bytes).
        to_result(unsafe {
            raw::rds_rs_copy_from_sockptr(ptr::addr_of_mut!(v).cast(), self.ptr, size_of::<c_int>())
        })?;
        Ok(v)
    }
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
        sock_type: i32,
        protocol: i32,
        kern: bool,
    ) -> Result<Pin<KBox<Self::Socket>>>;

    /// Called when the socket is closed: the last file reference to it is gone.
    ///
    /// The state itself is dropped later, when the last reference to the `struct sock` goes.
    /// That can happen in any context, softirq included, so `Self::Socket`'s `Drop` must not
    /// sleep.
    fn release(socket: Pin<&Self::Socket>);

    /// `bind(2)`: `addr` is the socket address user space passed (already copied into the
    /// kernel; its length is the `addrlen` argument), `net` the socket's namespace.
    fn bind(socket: Pin<&Self::Socket>, net: NetId, addr: &[u8]) -> Result;

    /// `connect(2)`: `addr` as for [`Family::bind`].
    fn connect(socket: Pin<&Self::Socket>, addr: &[u8]) -> Result;

    /// `getsockname(2)` (`peer` false) and `getpeername(2)` (`peer` true): writes the address
    /// into `out` and returns its length.
    fn getname(
        socket: Pin<&Self::Socket>,
        peer: bool,
        out: &mut [u8; GETNAME_LEN],
    ) -> Result<usize>;

    /// `setsockopt(2)` for levels other than `SOL_SOCKET` (which the socket layer handles).
    fn setsockopt(
        socket: Pin<&Self::Socket>,
        net: NetId,
        level: i32,
        optname: i32,
        val: &OptVal,
    ) -> Result;

    /// `getsockopt(2)` for levels other than `SOL_SOCKET`.
    fn getsockopt(socket: Pin<&Self::Socket>, level: i32, optname: i32, out: &OptOut) -> Result;

    /// `ioctl(2)` on the socket; `ENOIOCTLCMD` for commands the family does not know (the
    /// socket layer then answers `ENOTTY`). `arg` is the user-space argument.
    fn ioctl(socket: Pin<&Self::Socket>, cmd: u32, arg: UserPtr) -> Result;
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
        let (c_size, c_destruct) = unsafe {
            (
                raw::rds_rs_sizeof_sock(),
                raw::rds_rs_offsetof_sk_destruct(),
            )
        };
        if c_size != size_of::<raw::sock>() || c_destruct != offset_of!(raw::sock, sk_destruct) {
            pr_err!("bindings disagree with the kernel's struct sock layout\n");
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
            sendmsg: Some(raw::sock_no_sendmsg),
            recvmsg: Some(raw::sock_no_recvmsg),
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
        let state = F::create(shared, sock_type, protocol, kern != 0)?;
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
    // SAFETY: `sock` is a socket of `F` with `sk` set, and its state stays valid until
    // `destruct_callback`, which cannot run before the `sock_put` below.
    let (_, state) = unsafe { state::<F>(sock) };
    F::release(state);
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

/// Borrows the Rust state of a socket of family `F`.
///
/// # Safety
///
/// `sock` is a valid socket of family `F` whose file is open (so `sock->sk` is set and its
/// state lives at least as long as the returned reference is used, within the calling
/// `proto_ops` callback).
unsafe fn state<'a, F: Family>(sock: *mut raw::socket) -> (*mut raw::sock, Pin<&'a F::Socket>) {
    // SAFETY: Per the function's safety requirements `sock` is valid and `sk` is set; by the
    // type invariant of `SockMem`, `state` came from `into_foreign` for `F` and stays valid
    // until `destruct_callback`, which cannot run while the socket's file is open.
    unsafe {
        let sk = (*sock).sk;
        let state = (*sk.cast::<SockMem>()).state;
        (sk, <Pin<KBox<F::Socket>> as ForeignOwnable>::borrow(state))
    }
}

/// The namespace of a socket.
///
/// # Safety
///
/// `sk` is a valid `struct sock`.
unsafe fn net_of(sk: *mut raw::sock) -> NetId {
    // SAFETY: `sk` is valid per the function's safety requirements; `sock_net` only reads its
    // namespace pointer.
    NetId(unsafe { raw::sock_net(sk) } as usize)
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
        let (sk, socket) = unsafe { state::<F>(sock) };
        // SAFETY: As above.
        let addr = unsafe { addr_bytes(addr, addr_len)? };
        // SAFETY: `sk` is the valid sock of an open socket.
        let net = unsafe { net_of(sk) };
        F::bind(socket, net, addr)?;
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
        let (_, socket) = unsafe { state::<F>(sock) };
        // SAFETY: As above.
        let addr = unsafe { addr_bytes(addr, addr_len)? };
        F::connect(socket, addr)?;
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
        let (_, socket) = unsafe { state::<F>(sock) };
        let mut out = [0u8; GETNAME_LEN];
        let len = F::getname(socket, peer != 0, &mut out)?;
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
        let (sk, socket) = unsafe { state::<F>(sock) };
        // SAFETY: `sk` is the valid sock of an open socket.
        let net = unsafe { net_of(sk) };
        let val = OptVal {
            ptr: optval,
            len: optlen,
        };
        F::setsockopt(socket, net, level, optname, &val)?;
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
        let (_, socket) = unsafe { state::<F>(sock) };
        let out = OptOut {
            val: optval as UserPtr,
            len: optlen as UserPtr,
        };
        F::getsockopt(socket, level, optname, &out)?;
        Ok(0)
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
        let (_, socket) = unsafe { state::<F>(sock) };
        F::ioctl(socket, cmd, arg as UserPtr)?;
        Ok(0)
    })
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
