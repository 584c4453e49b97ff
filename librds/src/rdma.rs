//! RDMA with RDS: memory registrations (`RDS_GET_MR`, `RDS_GET_MR_FOR_DEST`, `RDS_FREE_MR`),
//! the RDMA and atomic control messages of `sendmsg`, completion notifications
//! (`RDS_CMSG_RDMA_STATUS`), and rds-rs's barrier (`RDS_BARRIER`, `RDS_CMSG_RDMA_ID`,
//! `include/uapi/rds_rs.h`).
//!
//! The argument structs of `include/uapi/linux/rds.h`, their constants and their layouts are
//! `rds-proto`'s, the code the kernel module decodes them with (native-endian, the x86-64
//! LP64 layout; see `rds_proto::RdmaArgs` and its siblings for the offsets). [`RdsIovec`],
//! [`GetMrArgs`], [`GetMrForDestArgs`], [`FreeMrArgs`] and [`RdmaNotify`] are its types;
//! [`RdmaArgs`], [`AtomicArgs`] and [`BarrierArgs`] are built here in the forms programs
//! write them (the atomic operation as one of the four control message types, the barrier's
//! destination as a [`SocketAddr`]) and encoded by it.
//!
//! Memory the kernel writes into after the system call returned (the target of an RDMA
//! write, the local buffer of an RDMA read, the result of an atomic) should be an
//! [`RdmaMem`]: it is never borrowed as a Rust slice, only copied from and to.

use crate::cmsg::{Cmsg, ControlBuf};
use crate::{cvt, sockaddr_bytes, RdsSocket, UserBuf, SOL_RDS};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::ptr;

pub use crate::{
    RDS_CMSG_ATOMIC_CSWP, RDS_CMSG_ATOMIC_FADD, RDS_CMSG_MASKED_ATOMIC_CSWP,
    RDS_CMSG_MASKED_ATOMIC_FADD, RDS_CMSG_RDMA_ARGS, RDS_CMSG_RDMA_DEST, RDS_CMSG_RDMA_MAP,
    RDS_CMSG_RDMA_STATUS, RDS_FREE_MR, RDS_GET_MR, RDS_GET_MR_FOR_DEST,
};
pub use rds_proto::{
    cookie_key, cookie_offset, make_cookie, FreeMrArgs, GetMrArgs, GetMrForDestArgs, RdmaNotify,
    RdsIovec, RDS_BARRIER, RDS_CMSG_RDMA_ID, RDS_RDMA_CANCELED, RDS_RDMA_DONTWAIT,
    RDS_RDMA_DROPPED, RDS_RDMA_FENCE, RDS_RDMA_INVALIDATE, RDS_RDMA_NOTIFY_ME,
    RDS_RDMA_OTHER_ERROR, RDS_RDMA_READWRITE, RDS_RDMA_REMOTE_ERROR, RDS_RDMA_SILENT,
    RDS_RDMA_SUCCESS, RDS_RDMA_USE_ONCE, UIO_MAXIOV,
};

/// `sizeof(struct rds_iovec)`.
pub const RDS_IOVEC_SIZE: usize = rds_proto::RDS_IOVEC_LEN;
/// `sizeof(struct rds_get_mr_for_dest_args)`.
pub const RDS_GET_MR_FOR_DEST_ARGS_SIZE: usize = rds_proto::GET_MR_FOR_DEST_ARGS_LEN;
/// `sizeof(struct rds_free_mr_args)`.
pub const RDS_FREE_MR_ARGS_SIZE: usize = rds_proto::FREE_MR_ARGS_LEN;
/// `sizeof(struct rds_rdma_notify)`.
pub const RDS_RDMA_NOTIFY_SIZE: usize = rds_proto::RDMA_NOTIFY_LEN;
/// `sizeof(struct rds_barrier_args)` (rds-rs).
pub const RDS_BARRIER_ARGS_SIZE: usize = rds_proto::BARRIER_ARGS_LEN;
/// `sizeof(struct __kernel_sockaddr_storage)`.
pub const SOCKADDR_STORAGE_SIZE: usize = rds_proto::SOCKADDR_STORAGE_LEN;
/// The page size of the guests (x86-64).
pub const PAGE_SIZE: usize = rds_proto::PAGE_SIZE as usize;

/// The bytes of an array of `struct rds_iovec` (what `local_vec_addr` points to).
pub fn encode_iovecs(v: &[RdsIovec]) -> Vec<u8> {
    v.iter().flat_map(|i| i.encode()).collect()
}

/// The 128 bytes of a `struct __kernel_sockaddr_storage` holding `a`.
pub fn sockaddr_storage(a: &SocketAddr) -> [u8; SOCKADDR_STORAGE_SIZE] {
    let mut out = [0u8; SOCKADDR_STORAGE_SIZE];
    let b = sockaddr_bytes(a);
    out[..b.len()].copy_from_slice(&b);
    out
}

/// `struct rds_rdma_args`: the `RDS_CMSG_RDMA_ARGS` control message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RdmaArgs {
    /// The cookie of the remote registration.
    pub cookie: u64,
    /// The remote range: `addr` relative to the start of the registered buffer.
    pub remote: RdsIovec,
    /// User address of the `nr_local` local `struct rds_iovec`s.
    pub local_vec_addr: u64,
    /// Number of local iovecs.
    pub nr_local: u64,
    /// `RDS_RDMA_READWRITE` (write), `RDS_RDMA_NOTIFY_ME`, `RDS_RDMA_SILENT`, ...
    pub flags: u64,
    /// Returned in the notification.
    pub user_token: u64,
}

impl RdmaArgs {
    /// The 56 bytes of the struct.
    pub fn encode(&self) -> [u8; crate::RDS_RDMA_ARGS_SIZE] {
        rds_proto::RdmaArgs {
            cookie: self.cookie,
            remote_vec: self.remote,
            local_vec_addr: self.local_vec_addr,
            nr_local: self.nr_local,
            flags: self.flags,
            user_token: self.user_token,
        }
        .encode()
    }
}

/// An atomic operation, as one of the four control message types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// `RDS_CMSG_ATOMIC_FADD`.
    Fadd {
        /// The addend.
        add: u64,
    },
    /// `RDS_CMSG_ATOMIC_CSWP`.
    Cswp {
        /// Compared with the remote value.
        compare: u64,
        /// Stored on a match.
        swap: u64,
    },
    /// `RDS_CMSG_MASKED_ATOMIC_FADD`.
    MaskedFadd {
        /// The addend.
        add: u64,
        /// Set bits are field boundaries: no carry out of them.
        nocarry_mask: u64,
    },
    /// `RDS_CMSG_MASKED_ATOMIC_CSWP`.
    MaskedCswp {
        /// Compared under `compare_mask`.
        compare: u64,
        /// Stored under `swap_mask` on a match.
        swap: u64,
        /// The bits compared.
        compare_mask: u64,
        /// The bits swapped.
        swap_mask: u64,
    },
}

impl AtomicOp {
    /// The control message type.
    pub fn cmsg_type(&self) -> i32 {
        match self {
            AtomicOp::Fadd { .. } => RDS_CMSG_ATOMIC_FADD,
            AtomicOp::Cswp { .. } => RDS_CMSG_ATOMIC_CSWP,
            AtomicOp::MaskedFadd { .. } => RDS_CMSG_MASKED_ATOMIC_FADD,
            AtomicOp::MaskedCswp { .. } => RDS_CMSG_MASKED_ATOMIC_CSWP,
        }
    }

    /// The operation in the masked form `rds-proto` (and C RDS) hold every atomic in: no
    /// carry mask for a plain fetch-and-add, all-ones masks for a plain compare-and-swap.
    pub fn masked(&self) -> rds_proto::AtomicOp {
        match *self {
            AtomicOp::Fadd { add } => rds_proto::AtomicOp::Fadd {
                add,
                nocarry_mask: 0,
            },
            AtomicOp::Cswp { compare, swap } => rds_proto::AtomicOp::Cswp {
                compare,
                swap,
                compare_mask: !0,
                swap_mask: !0,
            },
            AtomicOp::MaskedFadd { add, nocarry_mask } => {
                rds_proto::AtomicOp::Fadd { add, nocarry_mask }
            }
            AtomicOp::MaskedCswp {
                compare,
                swap,
                compare_mask,
                swap_mask,
            } => rds_proto::AtomicOp::Cswp {
                compare,
                swap,
                compare_mask,
                swap_mask,
            },
        }
    }
}

/// `struct rds_atomic_args`: the atomic control messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicArgs {
    /// The cookie of the remote registration.
    pub cookie: u64,
    /// User address of the local 8 bytes that receive the old remote value.
    pub local_addr: u64,
    /// The remote address, relative to the start of the registered buffer.
    pub remote_addr: u64,
    /// The operation.
    pub op: AtomicOp,
    /// `RDS_RDMA_NOTIFY_ME`, `RDS_RDMA_SILENT`.
    pub flags: u64,
    /// Returned in the notification.
    pub user_token: u64,
}

impl AtomicArgs {
    /// The 72 bytes of the struct.
    pub fn encode(&self) -> [u8; crate::RDS_ATOMIC_ARGS_SIZE] {
        rds_proto::AtomicArgs {
            cookie: self.cookie,
            local_addr: self.local_addr,
            remote_addr: self.remote_addr,
            op: self.op.masked(),
            flags: self.flags,
            user_token: self.user_token,
        }
        .encode(self.op.cmsg_type())
        .expect("every operation encodes as its own control message type")
    }
}

/// The name of a notification status: `OK`, `REMOTE_ERROR`, `CANCELED`, `DROPPED`,
/// `OTHER_ERROR` or the number.
pub fn status_name(status: i32) -> String {
    match status {
        RDS_RDMA_SUCCESS => "OK".into(),
        RDS_RDMA_REMOTE_ERROR => "REMOTE_ERROR".into(),
        RDS_RDMA_CANCELED => "CANCELED".into(),
        RDS_RDMA_DROPPED => "DROPPED".into(),
        RDS_RDMA_OTHER_ERROR => "OTHER_ERROR".into(),
        s => format!("status{s}"),
    }
}

/// `struct rds_barrier_args` (rds-rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BarrierArgs {
    /// The destination: a `struct __kernel_sockaddr_storage`.
    pub dest: [u8; SOCKADDR_STORAGE_SIZE],
    /// Wait until the mark reaches this id (0: do not wait).
    pub wait_id: u64,
    /// User address of a `u64` that receives the mark (0: none).
    pub mark_addr: u64,
    /// `RDS_RDMA_DONTWAIT`.
    pub flags: u64,
}

impl BarrierArgs {
    /// Arguments for destination `dest`.
    pub fn new(dest: &SocketAddr, wait_id: u64, mark_addr: u64, flags: u64) -> Self {
        Self {
            dest: sockaddr_storage(dest),
            wait_id,
            mark_addr,
            flags,
        }
    }

    /// The 152 bytes of the struct.
    pub fn encode(&self) -> [u8; RDS_BARRIER_ARGS_SIZE] {
        rds_proto::BarrierArgs {
            dest: self.dest,
            wait_id: self.wait_id,
            mark_addr: self.mark_addr,
            flags: self.flags,
        }
        .encode()
    }
}

impl ControlBuf {
    /// Appends an `RDS_CMSG_RDMA_ARGS`.
    pub fn rdma_args(&mut self, a: &RdmaArgs) -> &mut Self {
        self.push(SOL_RDS, RDS_CMSG_RDMA_ARGS, &a.encode())
    }

    /// Appends an atomic control message (its type from the operation).
    pub fn atomic(&mut self, a: &AtomicArgs) -> &mut Self {
        self.push(SOL_RDS, a.op.cmsg_type(), &a.encode())
    }

    /// Appends an `RDS_CMSG_RDMA_DEST` with `cookie`.
    pub fn rdma_dest(&mut self, cookie: u64) -> &mut Self {
        self.push(SOL_RDS, RDS_CMSG_RDMA_DEST, &cookie.to_ne_bytes())
    }

    /// Appends an `RDS_CMSG_RDMA_MAP`.
    pub fn rdma_map(&mut self, a: &GetMrArgs) -> &mut Self {
        self.push(SOL_RDS, RDS_CMSG_RDMA_MAP, &a.encode())
    }

    /// Appends an `RDS_CMSG_RDMA_ID` naming the user address that receives the id.
    pub fn rdma_id(&mut self, addr: u64) -> &mut Self {
        self.push(SOL_RDS, RDS_CMSG_RDMA_ID, &addr.to_ne_bytes())
    }
}

impl Cmsg {
    /// The notification, if this is an `RDS_CMSG_RDMA_STATUS`.
    pub fn rdma_status(&self) -> Option<RdmaNotify> {
        if self.level != SOL_RDS || self.ty != RDS_CMSG_RDMA_STATUS {
            return None;
        }
        RdmaNotify::decode(&self.data)
    }

    /// The cookie, if this is an `RDS_CMSG_RDMA_DEST`.
    pub fn rdma_dest(&self) -> Option<u64> {
        if self.level != SOL_RDS || self.ty != RDS_CMSG_RDMA_DEST {
            return None;
        }
        self.data_u64()
    }
}

impl RdsSocket {
    /// `RDS_GET_MR` with these arguments, as they are (the kernel writes the cookie to
    /// `cookie_addr`, whatever it is).
    pub fn get_mr_args(&self, a: &GetMrArgs) -> io::Result<()> {
        self.setsockopt_raw(SOL_RDS, RDS_GET_MR, Some(&a.encode()), 32)
    }

    /// Registers `bytes` bytes at `addr` (`RDS_GET_MR`) and returns the cookie.
    pub fn get_mr(&self, addr: u64, bytes: u64, flags: u64) -> io::Result<u64> {
        self.register(RDS_GET_MR, |cookie_addr| {
            GetMrArgs {
                vec: RdsIovec { addr, bytes },
                cookie_addr,
                flags,
            }
            .encode()
        })
    }

    /// Runs a registration option (`RDS_GET_MR`, `RDS_GET_MR_FOR_DEST`) with the arguments
    /// `encode` builds around the address of the cookie it is given; returns the cookie the
    /// kernel wrote there.
    fn register<E: AsRef<[u8]>>(
        &self,
        optname: i32,
        encode: impl FnOnce(u64) -> E,
    ) -> io::Result<u64> {
        let mut cookie = 0u64;
        let enc = encode(&mut cookie as *mut u64 as u64);
        let enc = enc.as_ref();
        // SAFETY: the kernel reads the `enc.len()` bytes of `enc` and writes 8 bytes to
        // `cookie`, which lives across the call; the registered range is the caller's business
        // (the kernel pins it and later touches the pinned pages, not this address space).
        cvt(unsafe {
            libc::setsockopt(
                self.as_raw_fd(),
                SOL_RDS,
                optname,
                enc.as_ptr().cast(),
                enc.len() as libc::socklen_t,
            )
        }
        .into())?;
        Ok(cookie)
    }

    /// Registers memory with `RDS_GET_MR_FOR_DEST` and returns the cookie.
    pub fn get_mr_for_dest(
        &self,
        dest: &SocketAddr,
        addr: u64,
        bytes: u64,
        flags: u64,
    ) -> io::Result<u64> {
        self.register(RDS_GET_MR_FOR_DEST, |cookie_addr| {
            GetMrForDestArgs {
                dest: sockaddr_storage(dest),
                vec: RdsIovec { addr, bytes },
                cookie_addr,
                flags,
            }
            .encode()
        })
    }

    /// `RDS_FREE_MR`.
    pub fn free_mr(&self, cookie: u64, flags: u64) -> io::Result<()> {
        let a = FreeMrArgs { cookie, flags }.encode();
        self.setsockopt_raw(SOL_RDS, RDS_FREE_MR, Some(&a), a.len())
    }

    /// `RDS_BARRIER` for `dest`: waits (unless non-blocking) until the mark reaches `wait_id`
    /// and returns the result and the mark the kernel wrote (`u64::MAX` if it wrote none).
    pub fn barrier(&self, dest: &SocketAddr, wait_id: u64, flags: u64) -> (io::Result<()>, u64) {
        let mut mark = u64::MAX;
        let a = BarrierArgs::new(dest, wait_id, &mut mark as *mut u64 as u64, flags).encode();
        // SAFETY: the kernel reads the 152 bytes of `a` and writes 8 bytes to `mark`, which
        // lives across the call.
        let r = cvt(unsafe {
            libc::setsockopt(
                self.as_raw_fd(),
                SOL_RDS,
                RDS_BARRIER,
                a.as_ptr().cast(),
                a.len() as libc::socklen_t,
            )
        }
        .into())
        .map(|_| ());
        (r, mark)
    }

    /// `RDS_BARRIER` with raw argument bytes and length (see [`RdsSocket::setsockopt_ptr`]).
    pub fn barrier_raw(&self, val: UserBuf<'_>, len: usize) -> io::Result<()> {
        self.setsockopt_ptr(SOL_RDS, RDS_BARRIER, val, len)
    }
}

/// Anonymous memory shared with the kernel for RDMA: a page-aligned mapping that is only ever
/// copied from and to (never borrowed), so the kernel may write into it at any time (RDMA
/// into a registration, the local side of a read, the result of an atomic).
#[derive(Debug)]
pub struct RdmaMem {
    addr: *mut u8,
    len: usize,
    /// A page-aligned range made inaccessible (`PROT_NONE`), never copied from or to.
    hole: Option<(usize, usize)>,
}

// SAFETY: the mapping is owned by this value and only accessed by copies through its raw
// pointer; `munmap` in `drop` is thread-safe.
unsafe impl Send for RdmaMem {}
// SAFETY: as above; shared references copy out or in (data races with the kernel or other
// threads only change which bytes are seen, as with any memory shared with a device).
unsafe impl Sync for RdmaMem {}

impl RdmaMem {
    /// `len` bytes (rounded up to whole pages) of zeroed read-write memory.
    pub fn new(len: usize) -> io::Result<Self> {
        let len = len.max(1).div_ceil(PAGE_SIZE) * PAGE_SIZE;
        // SAFETY: an anonymous private mapping at an address of the kernel's choice touches no
        // existing memory.
        let addr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            addr: addr.cast(),
            len,
            hole: None,
        })
    }

    /// Like [`RdmaMem::new`], with page `hole_page` inaccessible (`PROT_NONE`): memory that
    /// is partly mapped, for testing what the kernel makes of it. Copies must avoid the
    /// hole.
    pub fn with_hole(len: usize, hole_page: usize) -> io::Result<Self> {
        let mut m = Self::new(len)?;
        let off = hole_page * PAGE_SIZE;
        assert!(off + PAGE_SIZE <= m.len, "hole outside the mapping");
        // SAFETY: the page is inside our own mapping, which nothing borrows; copies check
        // that they stay out of it.
        let r = unsafe { libc::mprotect(m.addr.add(off).cast(), PAGE_SIZE, libc::PROT_NONE) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        m.hole = Some((off, PAGE_SIZE));
        Ok(m)
    }

    fn check(&self, off: usize, len: usize) {
        let end = off.checked_add(len).expect("range overflows");
        assert!(end <= self.len, "out of range");
        if let Some((h, hl)) = self.hole {
            assert!(
                len == 0 || end <= h || off >= h + hl,
                "range touches the hole"
            );
        }
    }

    /// The start address.
    pub fn addr(&self) -> u64 {
        self.addr as u64
    }

    /// The address of byte `off`.
    pub fn at(&self, off: usize) -> u64 {
        self.addr as u64 + off as u64
    }

    /// The length in bytes (whole pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty (never).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `len` bytes from offset `off`.
    pub fn read(&self, off: usize, len: usize) -> Vec<u8> {
        self.check(off, len);
        let mut v = vec![0u8; len];
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        // SAFETY: `off..off + len` is inside the mapping, out of the hole (checked), `v` holds `len` bytes and
        // does not overlap it.
        unsafe { ptr::copy_nonoverlapping(self.addr.add(off), v.as_mut_ptr(), len) };
        v
    }

    /// Copies `data` to offset `off`.
    pub fn write(&self, off: usize, data: &[u8]) {
        self.check(off, data.len());
        // SAFETY: `off..off + data.len()` is inside the mapping, out of the hole (checked), and
        // does not overlap
        // `data`.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.addr.add(off), data.len()) };
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }

    /// Sets every accessible byte to `b`.
    pub fn fill(&self, b: u8) {
        let (h, hl) = self.hole.unwrap_or((self.len, 0));
        // SAFETY: the mapping outside the hole is ours to write.
        unsafe {
            ptr::write_bytes(self.addr, b, h);
            ptr::write_bytes(self.addr.add(h + hl), b, self.len - h - hl);
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }

    /// The native-endian `u64` at `off`.
    pub fn read_u64(&self, off: usize) -> u64 {
        let b = self.read(off, 8);
        u64::from_ne_bytes(b.try_into().expect("8 bytes"))
    }

    /// Stores a native-endian `u64` at `off`.
    pub fn write_u64(&self, off: usize, v: u64) {
        self.write(off, &v.to_ne_bytes());
    }
}

impl Drop for RdmaMem {
    fn drop(&mut self) {
        // SAFETY: `addr`/`len` are exactly the mapping made in `new`, unmapped only here. Pages
        // the kernel still has pinned stay the kernel's; they leave this address space.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(b: &[u8], off: usize) -> Option<u64> {
        Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
    }

    #[test]
    fn layouts() {
        let a = RdmaArgs {
            cookie: 1,
            remote: RdsIovec { addr: 2, bytes: 3 },
            local_vec_addr: 4,
            nr_local: 5,
            flags: 6,
            user_token: 7,
        }
        .encode();
        for (i, v) in (1u64..=7).enumerate() {
            assert_eq!(get(&a, 8 * i), Some(v));
        }
        let m = AtomicArgs {
            cookie: 1,
            local_addr: 2,
            remote_addr: 3,
            op: AtomicOp::MaskedCswp {
                compare: 4,
                swap: 5,
                compare_mask: 6,
                swap_mask: 7,
            },
            flags: 8,
            user_token: 9,
        }
        .encode();
        for (i, v) in (1u64..=9).enumerate() {
            assert_eq!(get(&m, 8 * i), Some(v));
        }
        // The unmasked operations leave the rest of the union zero.
        for (op, union) in [
            (AtomicOp::Fadd { add: 4 }, [4, 0, 0, 0]),
            (
                AtomicOp::Cswp {
                    compare: 4,
                    swap: 5,
                },
                [4, 5, 0, 0],
            ),
            (
                AtomicOp::MaskedFadd {
                    add: 4,
                    nocarry_mask: 5,
                },
                [4, 5, 0, 0],
            ),
        ] {
            let e = AtomicArgs {
                cookie: 1,
                local_addr: 2,
                remote_addr: 3,
                op,
                flags: 8,
                user_token: 9,
            }
            .encode();
            for (i, v) in union.iter().enumerate() {
                assert_eq!(get(&e, 24 + 8 * i), Some(*v), "{op:?}");
            }
            assert_eq!(get(&e, 56), Some(8));
        }
        let d = GetMrForDestArgs {
            dest: sockaddr_storage(&"127.0.0.1:5".parse().unwrap()),
            vec: RdsIovec { addr: 1, bytes: 2 },
            cookie_addr: 3,
            flags: 4,
        }
        .encode();
        assert_eq!(get(&d, 128), Some(1));
        assert_eq!(get(&d, 152), Some(4));
        assert_eq!(u16::from_ne_bytes([d[0], d[1]]), libc::AF_INET as u16);
        let b = BarrierArgs::new(&"[::1]:9".parse().unwrap(), 1, 2, 3).encode();
        assert_eq!(u16::from_ne_bytes([b[0], b[1]]), libc::AF_INET6 as u16);
        assert_eq!(get(&b, 128), Some(1));
        assert_eq!(get(&b, 144), Some(3));
        let mut c = ControlBuf::new();
        c.push(
            SOL_RDS,
            RDS_CMSG_RDMA_STATUS,
            &[1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0],
        );
        let n = crate::parse_cmsgs(c.as_bytes())[0].rdma_status().unwrap();
        assert_eq!((n.user_token, n.status), (1, 2));
    }

    #[test]
    fn mem_copies() {
        let m = RdmaMem::new(5000).unwrap();
        assert_eq!(m.len(), 8192);
        m.write(4094, &[1, 2, 3, 4]);
        assert_eq!(m.read(4093, 6), vec![0, 1, 2, 3, 4, 0]);
        m.write_u64(16, 0x1122);
        assert_eq!(m.read_u64(16), 0x1122);
        let h = RdmaMem::with_hole(3 * 4096, 1).unwrap();
        h.fill(9);
        assert_eq!(h.read(4090, 6), vec![9; 6]);
        assert_eq!(h.read(8192, 4), vec![9; 4]);
    }
}
