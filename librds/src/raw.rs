//! Escape hatches for bad-input tests: user pointers that are NULL or point to memory the
//! kernel cannot access, and `msghdr`s with arbitrary lengths.
//!
//! Everything here stays memory-safe: the kernel only ever writes through a pointer that is a
//! slice we own (of at least the given length), NULL (never mapped in these programs), or a
//! [`FaultRegion`] whose pages the kernel cannot write (`PROT_NONE`, or `PROT_READ`).

use std::io;
use std::ptr;

/// A range of address space reserved with `mmap` that faults on access: `PROT_NONE` (neither
/// readable nor writable) or `PROT_READ` (readable zeros, not writable). Nothing else can be
/// mapped there while it lives, so handing its address to the kernel can never touch other
/// memory.
#[derive(Debug)]
pub struct FaultRegion {
    addr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the region is only an address range; it is never read or written through `addr` from
// user space, and `munmap` in `drop` is thread-safe.
unsafe impl Send for FaultRegion {}
// SAFETY: as above, shared references only hand out the address.
unsafe impl Sync for FaultRegion {}

impl FaultRegion {
    fn map(len: usize, prot: libc::c_int) -> io::Result<Self> {
        assert!(len > 0, "FaultRegion of length 0");
        // SAFETY: an anonymous private mapping at an address of the kernel's choice touches no
        // existing memory.
        let addr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { addr, len })
    }

    /// `len` bytes of address space that can be neither read nor written.
    pub fn unmapped(len: usize) -> io::Result<Self> {
        Self::map(len, libc::PROT_NONE)
    }

    /// `len` bytes of readable, not writable zeros.
    pub fn read_only(len: usize) -> io::Result<Self> {
        Self::map(len, libc::PROT_READ)
    }

    /// The start address.
    pub fn addr(&self) -> usize {
        self.addr as usize
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never: regions have a length).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for FaultRegion {
    fn drop(&mut self) {
        // SAFETY: `addr`/`len` are exactly the mapping made in `map`, unmapped only here.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

/// A user pointer the kernel reads from.
#[derive(Clone, Copy, Debug)]
pub enum UserBuf<'a> {
    /// NULL.
    Null,
    /// An address in a region that faults (see [`FaultRegion`]).
    Fault(&'a FaultRegion),
    /// Memory we own.
    Bytes(&'a [u8]),
}

impl UserBuf<'_> {
    /// The pointer, after checking that `len` bytes of a `Bytes` buffer exist.
    pub(crate) fn ptr(&self, len: usize) -> *const libc::c_void {
        match self {
            UserBuf::Null => ptr::null(),
            UserBuf::Fault(r) => r.addr as *const libc::c_void,
            UserBuf::Bytes(b) => {
                assert!(len <= b.len(), "user buffer shorter than the length passed");
                b.as_ptr().cast()
            }
        }
    }
}

/// A user pointer the kernel writes to.
#[derive(Debug)]
pub enum UserBufMut<'a> {
    /// NULL.
    Null,
    /// An address in a region that faults (see [`FaultRegion`]); also read-only regions.
    Fault(&'a FaultRegion),
    /// Memory we own.
    Bytes(&'a mut [u8]),
}

impl UserBufMut<'_> {
    /// The pointer, after checking that `len` bytes of a `Bytes` buffer exist: the kernel
    /// writes at most `len` bytes through it.
    pub(crate) fn ptr(&mut self, len: usize) -> *mut libc::c_void {
        match self {
            UserBufMut::Null => ptr::null_mut(),
            UserBufMut::Fault(r) => r.addr,
            UserBufMut::Bytes(b) => {
                assert!(len <= b.len(), "user buffer shorter than the length passed");
                b.as_mut_ptr().cast()
            }
        }
    }
}

/// A `sendmsg` with every field under the caller's control.
#[derive(Debug)]
pub struct RawSend<'a> {
    /// `msg_name`.
    pub name: UserBuf<'a>,
    /// `msg_namelen` (may disagree with `name`, but not exceed a `Bytes` buffer).
    pub namelen: u32,
    /// The iovecs: base and length.
    pub iov: Vec<(UserBuf<'a>, usize)>,
    /// `msg_control`.
    pub control: UserBuf<'a>,
    /// `msg_controllen`.
    pub controllen: usize,
    /// The `flags` argument of `sendmsg`.
    pub flags: i32,
}

impl Default for RawSend<'_> {
    fn default() -> Self {
        Self {
            name: UserBuf::Null,
            namelen: 0,
            iov: Vec::new(),
            control: UserBuf::Null,
            controllen: 0,
            flags: 0,
        }
    }
}

/// A `recvmsg` with every field under the caller's control.
#[derive(Debug)]
pub struct RawRecv<'a> {
    /// `msg_name`.
    pub name: UserBufMut<'a>,
    /// `msg_namelen` (not more than a `Bytes` buffer holds).
    pub namelen: u32,
    /// The iovecs: base and length.
    pub iov: Vec<(UserBufMut<'a>, usize)>,
    /// `msg_control`.
    pub control: UserBufMut<'a>,
    /// `msg_controllen`.
    pub controllen: usize,
    /// The `flags` argument of `recvmsg`.
    pub flags: i32,
}

impl Default for RawRecv<'_> {
    fn default() -> Self {
        Self {
            name: UserBufMut::Null,
            namelen: 0,
            iov: Vec::new(),
            control: UserBufMut::Null,
            controllen: 0,
            flags: 0,
        }
    }
}

/// What a successful raw `recvmsg` returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawRecvOut {
    /// The return value.
    pub ret: usize,
    /// `msg_namelen` afterwards.
    pub namelen: u32,
    /// `msg_controllen` afterwards.
    pub controllen: usize,
    /// `msg_flags` afterwards.
    pub msg_flags: i32,
}
