//! Safe user-space access to `AF_RDS` sockets (Reliable Datagram Sockets).
//!
//! The constants and layouts follow `include/uapi/linux/rds.h`, through `rds-proto` (the
//! code the kernel module itself decodes and encodes them with); programs written with this
//! library work against any RDS implementation, Linux's C RDS or rds-rs.
//!
//! ```no_run
//! use librds::RdsSocket;
//! use std::net::{Ipv4Addr, SocketAddrV4};
//!
//! let s = RdsSocket::new()?;
//! s.bind(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 4000))?;
//! s.send_to(b"hello", SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 4000))?;
//! let mut buf = [0u8; 64];
//! let (n, from) = s.recv_from(&mut buf)?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Besides the plain calls there are `sendmsg`/`recvmsg` with control messages
//! ([`RdsSocket::send_msg`], [`RdsSocket::recv_msg`], [`ControlBuf`]), the `RDS_INFO_*`
//! queries ([`RdsSocket::info`] and the parsers in [`info`]), `poll` helpers, and raw variants
//! whose every pointer and length is chosen by the caller, for testing what the kernel refuses
//! ([`RdsSocket::sendmsg_raw`], [`RdsSocket::recvmsg_raw`], [`FaultRegion`]).
//!
//! RDMA ([`rdma`]): memory registrations ([`RdsSocket::get_mr`], [`RdsSocket::free_mr`]), the
//! RDMA and atomic control messages ([`ControlBuf::rdma_args`], [`ControlBuf::atomic`], ...),
//! notifications ([`Cmsg::rdma_status`]), rds-rs's barrier ([`RdsSocket::barrier`]), and
//! [`rdma::RdmaMem`], memory the kernel may write into at any time.

pub mod addr;
pub mod cmsg;
pub mod info;
pub mod raw;
pub mod rdma;

pub use addr::{parse_sockaddr, sockaddr_bytes};
pub use cmsg::{parse_cmsgs, Cmsg, ControlBuf};
pub use raw::{FaultRegion, RawRecv, RawRecvOut, RawSend, UserBuf, UserBufMut};
pub use rdma::{
    AtomicArgs, AtomicOp, BarrierArgs, GetMrArgs, RdmaArgs, RdmaMem, RdmaNotify, RdsIovec,
};

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// `AF_RDS` / `PF_RDS`.
pub const AF_RDS: i32 = rds_proto::AF_RDS as i32;

pub use rds_proto::{
    RDS_CANCEL_SENT_TO, RDS_CMSG_ATOMIC_CSWP, RDS_CMSG_ATOMIC_FADD, RDS_CMSG_CONG_UPDATE,
    RDS_CMSG_MASKED_ATOMIC_CSWP, RDS_CMSG_MASKED_ATOMIC_FADD, RDS_CMSG_RDMA_ARGS,
    RDS_CMSG_RDMA_DEST, RDS_CMSG_RDMA_MAP, RDS_CMSG_RDMA_STATUS, RDS_CMSG_RXPATH_LATENCY,
    RDS_CMSG_ZCOPY_COMPLETION, RDS_CMSG_ZCOPY_COOKIE, RDS_CONG_MONITOR, RDS_FREE_MR, RDS_GET_MR,
    RDS_GET_MR_FOR_DEST, RDS_RECVERR, SOL_RDS, SO_RDS_MSG_RXPATH_LATENCY, SO_RDS_TRANSPORT,
};

/// `sizeof(struct rds_rdma_args)`.
pub const RDS_RDMA_ARGS_SIZE: usize = rds_proto::RDMA_ARGS_LEN;
/// `sizeof(struct rds_atomic_args)`.
pub const RDS_ATOMIC_ARGS_SIZE: usize = rds_proto::ATOMIC_ARGS_LEN;
/// `sizeof(struct rds_get_mr_args)`.
pub const RDS_GET_MR_ARGS_SIZE: usize = rds_proto::GET_MR_ARGS_LEN;
/// `RDS_MSG_RX_DGRAM_TRACE_MAX`: trace points of `SO_RDS_MSG_RXPATH_LATENCY` (so
/// `struct rds_rx_trace_so` is 4 bytes and `struct rds_cmsg_rx_trace` 32).
pub const RDS_MSG_RX_DGRAM_TRACE_MAX: usize = rds_proto::RX_TRACE_MAX as usize;

/// `SIOCRDSSETTOS`.
pub const SIOCRDSSETTOS: libc::c_ulong = rds_proto::SIOCRDSSETTOS as libc::c_ulong;
/// `SIOCRDSGETTOS`.
pub const SIOCRDSGETTOS: libc::c_ulong = rds_proto::SIOCRDSGETTOS as libc::c_ulong;

/// Largest RDS payload (`RDS_MAX_MSG_SIZE`, 1 MiB).
pub const RDS_MAX_MSG_SIZE: usize = rds_proto::MAX_MSG_SIZE as usize;

/// The transports `SO_RDS_TRANSPORT` can select (`RDS_TRANS_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// InfiniBand and iWARP (`RDS_TRANS_IB`).
    Ib = rds_proto::RDS_TRANS_IB as isize,
    /// TCP (`RDS_TRANS_TCP`).
    Tcp = rds_proto::RDS_TRANS_TCP as isize,
}

/// Converts a libc return value into an `io::Result`, taking `errno` on `-1`.
fn cvt(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn cvt_size(ret: isize) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

fn from_sockaddr_in(sin: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
        u16::from_be(sin.sin_port),
    )
}

fn timeval(d: Option<Duration>) -> libc::timeval {
    let d = d.unwrap_or(Duration::ZERO);
    libc::timeval {
        tv_sec: d.as_secs() as libc::time_t,
        tv_usec: d.subsec_micros() as libc::suseconds_t,
    }
}

/// Creates a socket of family `AF_RDS` with any type and protocol, for probing what the kernel
/// accepts. Returns the file descriptor.
pub fn raw_socket(family: i32, ty: i32, protocol: i32) -> io::Result<OwnedFd> {
    // SAFETY: `socket` has no memory-safety preconditions.
    let fd = cvt(unsafe { libc::socket(family, ty, protocol) }.into())?;
    // SAFETY: `fd` is a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `sendto(2)` on a descriptor given by number, for races with a `close` in another thread
/// (the descriptor may be closed, or even reused, by the time the call runs; the kernel checks
/// it).
pub fn send_to_fd(fd: RawFd, buf: &[u8], dest: &SocketAddr, flags: i32) -> io::Result<usize> {
    let name = sockaddr_bytes(dest);
    // SAFETY: `buf` and `name` are valid for their lengths.
    cvt_size(unsafe {
        libc::sendto(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            flags,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    })
}

/// `recv(2)` on a descriptor given by number (see [`send_to_fd`]).
pub fn recv_fd(fd: RawFd, buf: &mut [u8], flags: i32) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    cvt_size(unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), flags) })
}

/// `poll(2)` on several descriptors; returns each one's `revents` (all 0 on timeout).
pub fn poll_fds(fds: &[(RawFd, i16)], timeout: Duration) -> io::Result<Vec<i16>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&(fd, events)| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    loop {
        // SAFETY: `pfds` is a valid array of `pfds.len()` `pollfd`s.
        let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
        if r >= 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(pfds.iter().map(|p| p.revents).collect())
}

/// What a [`RdsSocket::recv_msg`] returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvMsg {
    /// The return value: bytes copied, or the full length with `MSG_TRUNC` in the flags.
    pub len: usize,
    /// The sender, decoded from `msg_name`.
    pub from: Option<SocketAddr>,
    /// `msg_namelen` as the kernel set it.
    pub namelen: usize,
    /// `msg_flags` as the kernel set it.
    pub flags: i32,
    /// The control messages.
    pub cmsgs: Vec<Cmsg>,
}

/// The answer to an `RDS_INFO_*` getsockopt: the result (the item size on success), the
/// length the kernel wrote back into `optlen`, and the buffer.
#[derive(Debug)]
pub struct InfoReply {
    /// Return value of `getsockopt` (the item size on success) or the error.
    pub ret: io::Result<i32>,
    /// `optlen` afterwards.
    pub optlen: i32,
    /// The buffer (as long as the length passed; empty for a probe with length 0).
    pub data: Vec<u8>,
}

/// An `AF_RDS` socket (`SOCK_SEQPACKET`, protocol 0).
#[derive(Debug)]
pub struct RdsSocket {
    fd: OwnedFd,
}

impl RdsSocket {
    /// Creates a new RDS socket.
    pub fn new() -> io::Result<Self> {
        Ok(Self {
            fd: raw_socket(AF_RDS, libc::SOCK_SEQPACKET, 0)?,
        })
    }

    /// Binds the socket to a local address and port (port 0 picks a free port).
    pub fn bind<A: Into<SocketAddr>>(&self, addr: A) -> io::Result<()> {
        self.bind_raw(&sockaddr_bytes(&addr.into()))
    }

    /// Sets the default destination (`connect(2)`).
    pub fn connect<A: Into<SocketAddr>>(&self, addr: A) -> io::Result<()> {
        self.connect_raw(&sockaddr_bytes(&addr.into()))
    }

    /// Selects the transport of an unbound socket (`SO_RDS_TRANSPORT`).
    pub fn set_transport(&self, t: Transport) -> io::Result<()> {
        self.set_int(SOL_RDS, SO_RDS_TRANSPORT, t as i32)
    }

    /// `bind(2)` with the raw bytes of a socket address (any family and length), for testing
    /// what the kernel accepts.
    pub fn bind_raw(&self, addr: &[u8]) -> io::Result<()> {
        // SAFETY: `addr` is valid for `addr.len()` bytes.
        cvt(unsafe {
            libc::bind(
                self.fd.as_raw_fd(),
                addr.as_ptr().cast(),
                addr.len() as libc::socklen_t,
            )
        }
        .into())?;
        Ok(())
    }

    /// `connect(2)` with the raw bytes of a socket address (sets the default destination).
    pub fn connect_raw(&self, addr: &[u8]) -> io::Result<()> {
        // SAFETY: `addr` is valid for `addr.len()` bytes.
        cvt(unsafe {
            libc::connect(
                self.fd.as_raw_fd(),
                addr.as_ptr().cast(),
                addr.len() as libc::socklen_t,
            )
        }
        .into())?;
        Ok(())
    }

    /// `getsockname(2)` (`peer` false) or `getpeername(2)` (`peer` true): the raw address
    /// bytes, as long as the length the kernel returned.
    pub fn name_raw(&self, peer: bool) -> io::Result<Vec<u8>> {
        let mut buf = [0u8; 128];
        let mut len = buf.len() as libc::socklen_t;
        let f = if peer {
            libc::getpeername
        } else {
            libc::getsockname
        };
        // SAFETY: `buf` and `len` are valid for writes and `len` holds the size of `buf`.
        cvt(unsafe { f(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), &mut len) }.into())?;
        Ok(buf[..(len as usize).min(buf.len())].to_vec())
    }

    /// `setsockopt(2)` with raw bytes (`None`: a NULL pointer with length `len`).
    pub fn setsockopt_raw(
        &self,
        level: i32,
        name: i32,
        val: Option<&[u8]>,
        len: usize,
    ) -> io::Result<()> {
        let p = val.map_or(UserBuf::Null, UserBuf::Bytes);
        self.setsockopt_ptr(level, name, p, len)
    }

    /// `setsockopt(2)` with any user pointer (NULL, faulting, or bytes of at least `len`).
    pub fn setsockopt_ptr(
        &self,
        level: i32,
        name: i32,
        val: UserBuf<'_>,
        len: usize,
    ) -> io::Result<()> {
        let p = val.ptr(len);
        // SAFETY: the kernel only reads through `p`, which is NULL, faulting, or valid for
        // `len` bytes (checked by `ptr`).
        cvt(unsafe {
            libc::setsockopt(self.fd.as_raw_fd(), level, name, p, len as libc::socklen_t)
        }
        .into())?;
        Ok(())
    }

    /// `getsockopt(2)` into a buffer of `cap` bytes; returns the bytes and the length the
    /// kernel reported.
    pub fn getsockopt_raw(&self, level: i32, name: i32, cap: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; cap];
        let mut len = cap as libc::socklen_t;
        // SAFETY: `buf` is valid for writes of `cap` bytes and `len` holds `cap`.
        cvt(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                buf.as_mut_ptr().cast(),
                &mut len,
            )
        }
        .into())?;
        buf.truncate((len as usize).min(cap));
        Ok(buf)
    }

    /// `getsockopt(2)` with any value pointer and any `optlen` value (also negative): returns
    /// the result and `optlen` afterwards. A `Bytes` buffer must hold `optlen` bytes, and at
    /// least 64 when `optlen` is negative (some options then write an `int` anyway).
    pub fn getsockopt_ptr(
        &self,
        level: i32,
        name: i32,
        mut val: UserBufMut<'_>,
        optlen: i32,
    ) -> (io::Result<i32>, i32) {
        let room = if optlen < 0 { 64 } else { optlen as usize };
        let p = val.ptr(room);
        let mut len = optlen;
        // SAFETY: `p` is NULL, faulting, or valid for writes of `room` bytes: `optlen` bytes,
        // or 64 for a negative `optlen`, more than any option's value. `len` is a valid `int`.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                p,
                (&mut len as *mut i32).cast(),
            )
        };
        (cvt(r.into()).map(|v| v as i32), len)
    }

    /// `getsockopt(2)` with `optlen` pointing into a faulting region.
    pub fn getsockopt_bad_optlen(
        &self,
        level: i32,
        name: i32,
        optlen: &FaultRegion,
    ) -> io::Result<i32> {
        let mut buf = [0u8; 64];
        // SAFETY: `buf` is valid for 64 bytes, and the kernel cannot read `optlen` (so it
        // learns no length at all and writes nothing).
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                buf.as_mut_ptr().cast(),
                optlen.addr() as *mut libc::socklen_t,
            )
        };
        cvt(r.into()).map(|v| v as i32)
    }

    /// Sets an `int` socket option at any level.
    pub fn set_int(&self, level: i32, name: i32, v: i32) -> io::Result<()> {
        self.setsockopt_raw(level, name, Some(&v.to_ne_bytes()), 4)
    }

    /// Reads an `int` socket option at any level.
    pub fn get_int(&self, level: i32, name: i32) -> io::Result<i32> {
        let b = self.getsockopt_raw(level, name, 4)?;
        if b.len() != 4 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("getsockopt returned {} bytes", b.len()),
            ));
        }
        Ok(i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// `SO_RCVTIMEO` (`None`: wait forever).
    pub fn set_recv_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.set_timeval(libc::SO_RCVTIMEO, d)
    }

    /// `SO_SNDTIMEO` (`None`: wait forever).
    pub fn set_send_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.set_timeval(libc::SO_SNDTIMEO, d)
    }

    fn set_timeval(&self, name: i32, d: Option<Duration>) -> io::Result<()> {
        let tv = timeval(d);
        // SAFETY: `tv` is a valid `timeval` and its size is passed along.
        cvt(unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                name,
                (&tv as *const libc::timeval).cast(),
                size_of::<libc::timeval>() as libc::socklen_t,
            )
        }
        .into())?;
        Ok(())
    }

    /// Switches `O_NONBLOCK` on or off.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        let fd = self.fd.as_raw_fd();
        // SAFETY: `fcntl(F_GETFL)` has no memory-safety preconditions.
        let fl = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) }.into())? as libc::c_int;
        let fl = if on {
            fl | libc::O_NONBLOCK
        } else {
            fl & !libc::O_NONBLOCK
        };
        // SAFETY: `fcntl(F_SETFL)` has no memory-safety preconditions.
        cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, fl) }.into())?;
        Ok(())
    }

    /// The inode number of the socket (what `RDS_INFO_SOCKETS` reports as `inum`).
    pub fn inode(&self) -> io::Result<u64> {
        // SAFETY: all-zero is a valid `stat`.
        let mut st: libc::stat = unsafe { zeroed() };
        // SAFETY: `st` is valid for writes.
        cvt(unsafe { libc::fstat(self.fd.as_raw_fd(), &mut st) }.into())?;
        Ok(st.st_ino)
    }

    /// `ioctl(2)` on the socket with a pointer to one byte (`None`: a NULL pointer). Returns the
    /// byte afterwards.
    pub fn ioctl_byte(&self, cmd: libc::c_ulong, val: Option<u8>) -> io::Result<u8> {
        let mut b = val.unwrap_or(0);
        let p: *mut u8 = if val.is_some() {
            &mut b
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: `p` is NULL or points to one writable byte.
        cvt(unsafe { libc::ioctl(self.fd.as_raw_fd(), cmd, p) }.into())?;
        Ok(b)
    }

    /// Returns the local address the socket is bound to (IPv4 sockets).
    pub fn local_addr(&self) -> io::Result<SocketAddrV4> {
        // SAFETY: all-zero is a valid `sockaddr_in`.
        let mut sin: libc::sockaddr_in = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `sin` and `len` are valid for writes and `len` holds the size of `sin`.
        cvt(unsafe {
            libc::getsockname(
                self.fd.as_raw_fd(),
                (&mut sin as *mut libc::sockaddr_in).cast(),
                &mut len,
            )
        }
        .into())?;
        Ok(from_sockaddr_in(&sin))
    }

    /// Returns the local address the socket is bound to, IPv4 or IPv6.
    pub fn local_socket_addr(&self) -> io::Result<SocketAddr> {
        let b = self.name_raw(false)?;
        parse_sockaddr(&b).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no address"))
    }

    /// Sends one datagram to `dest`. Returns the number of bytes sent.
    pub fn send_to<A: Into<SocketAddr>>(&self, buf: &[u8], dest: A) -> io::Result<usize> {
        send_to_fd(self.fd.as_raw_fd(), buf, &dest.into(), 0)
    }

    /// Sends one datagram to `dest` with `sendto(2)` flags.
    pub fn send_to_flags(&self, buf: &[u8], dest: &SocketAddr, flags: i32) -> io::Result<usize> {
        send_to_fd(self.fd.as_raw_fd(), buf, dest, flags)
    }

    /// Sends one datagram to the connected destination (`send(2)`, no address).
    pub fn send(&self, buf: &[u8], flags: i32) -> io::Result<usize> {
        // SAFETY: `buf` is valid for `buf.len()` bytes.
        cvt_size(unsafe { libc::send(self.fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), flags) })
    }

    /// Receives one datagram; returns its length and the sender's address.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let m = self.recv_msg(buf, 0, 0)?;
        let from = m
            .from
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no sender address"))?;
        Ok((m.len, from))
    }

    /// Receives one datagram with `recv(2)` flags, without the sender's address.
    pub fn recv(&self, buf: &mut [u8], flags: i32) -> io::Result<usize> {
        recv_fd(self.fd.as_raw_fd(), buf, flags)
    }

    /// `sendmsg(2)`: the payload gathered from `iov`, to `dest` (or the connected destination),
    /// with the control bytes `control` (see [`ControlBuf`]) and `flags`.
    pub fn send_msg(
        &self,
        iov: &[&[u8]],
        dest: Option<&SocketAddr>,
        control: &[u8],
        flags: i32,
    ) -> io::Result<usize> {
        let name = dest.map(sockaddr_bytes).unwrap_or_default();
        let m = RawSend {
            name: if name.is_empty() {
                UserBuf::Null
            } else {
                UserBuf::Bytes(&name)
            },
            namelen: name.len() as u32,
            iov: iov.iter().map(|b| (UserBuf::Bytes(b), b.len())).collect(),
            control: if control.is_empty() {
                UserBuf::Null
            } else {
                UserBuf::Bytes(control)
            },
            controllen: control.len(),
            flags,
        };
        self.sendmsg_raw(&m)
    }

    /// `recvmsg(2)` into `buf`, with room for `control_cap` bytes of control messages.
    pub fn recv_msg(&self, buf: &mut [u8], control_cap: usize, flags: i32) -> io::Result<RecvMsg> {
        let mut name = [0u8; 128];
        let mut control = vec![0u8; control_cap];
        let blen = buf.len();
        let mut m = RawRecv {
            name: UserBufMut::Bytes(&mut name),
            namelen: 128,
            iov: vec![(UserBufMut::Bytes(buf), blen)],
            control: if control_cap == 0 {
                UserBufMut::Null
            } else {
                UserBufMut::Bytes(&mut control)
            },
            controllen: control_cap,
            flags,
        };
        let out = self.recvmsg_raw(&mut m)?;
        drop(m);
        let nl = (out.namelen as usize).min(name.len());
        Ok(RecvMsg {
            len: out.ret,
            from: parse_sockaddr(&name[..nl]),
            namelen: out.namelen as usize,
            flags: out.msg_flags,
            cmsgs: parse_cmsgs(&control[..out.controllen.min(control.len())]),
        })
    }

    /// `sendmsg(2)` with every pointer and length as given (see [`RawSend`]).
    pub fn sendmsg_raw(&self, m: &RawSend<'_>) -> io::Result<usize> {
        let mut iov: Vec<libc::iovec> = m
            .iov
            .iter()
            .map(|(b, len)| libc::iovec {
                iov_base: b.ptr(*len).cast_mut(),
                iov_len: *len,
            })
            .collect();
        // SAFETY: all-zero is a valid `msghdr`.
        let mut h: libc::msghdr = unsafe { zeroed() };
        h.msg_name = m.name.ptr(m.namelen as usize).cast_mut();
        h.msg_namelen = m.namelen;
        h.msg_iov = if iov.is_empty() {
            std::ptr::null_mut()
        } else {
            iov.as_mut_ptr()
        };
        h.msg_iovlen = iov.len();
        h.msg_control = m.control.ptr(m.controllen).cast_mut();
        h.msg_controllen = m.controllen;
        // SAFETY: the kernel only reads through the pointers in `h`, each NULL, faulting, or
        // valid for its length (checked by `UserBuf::ptr`); `iov` lives across the call.
        cvt_size(unsafe { libc::sendmsg(self.fd.as_raw_fd(), &h, m.flags) })
    }

    /// `recvmsg(2)` with every pointer and length as given (see [`RawRecv`]).
    pub fn recvmsg_raw(&self, m: &mut RawRecv<'_>) -> io::Result<RawRecvOut> {
        let mut iov: Vec<libc::iovec> = m
            .iov
            .iter_mut()
            .map(|(b, len)| libc::iovec {
                iov_base: b.ptr(*len),
                iov_len: *len,
            })
            .collect();
        // SAFETY: all-zero is a valid `msghdr`.
        let mut h: libc::msghdr = unsafe { zeroed() };
        h.msg_name = m.name.ptr(m.namelen as usize);
        h.msg_namelen = m.namelen;
        h.msg_iov = if iov.is_empty() {
            std::ptr::null_mut()
        } else {
            iov.as_mut_ptr()
        };
        h.msg_iovlen = iov.len();
        h.msg_control = m.control.ptr(m.controllen);
        h.msg_controllen = m.controllen;
        // SAFETY: the kernel writes at most each length through the matching pointer in `h`,
        // each NULL, faulting, or an exclusively borrowed buffer at least that long (checked by
        // `UserBufMut::ptr`); `iov` and `h` live across the call.
        let r = cvt_size(unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut h, m.flags) })?;
        Ok(RawRecvOut {
            ret: r,
            namelen: h.msg_namelen,
            controllen: h.msg_controllen,
            msg_flags: h.msg_flags,
        })
    }

    /// `poll(2)` on this socket alone; returns `revents` (0 on timeout).
    pub fn poll(&self, events: i16, timeout: Duration) -> io::Result<i16> {
        Ok(poll_fds(&[(self.fd.as_raw_fd(), events)], timeout)?[0])
    }

    /// Waits until a datagram can be received, for at most `timeout`. Returns whether one can.
    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        Ok(self.poll(libc::POLLIN, timeout)? & libc::POLLIN != 0)
    }

    /// An `RDS_INFO_*` query with a buffer of `len` bytes (`len` 0 or negative: a NULL
    /// buffer, as a length probe; above 64 MiB also NULL, as no list is that long and the
    /// kernel refuses lengths near `INT_MAX` before using the buffer).
    pub fn info(&self, optname: i32, len: i32) -> InfoReply {
        let cap = if len > 64 << 20 {
            0
        } else {
            len.max(0) as usize
        };
        let mut data = vec![0u8; cap];
        let buf = if cap > 0 {
            UserBufMut::Bytes(&mut data)
        } else {
            UserBufMut::Null
        };
        let (ret, optlen) = self.getsockopt_ptr(SOL_RDS, optname, buf, len);
        InfoReply { ret, optlen, data }
    }

    /// All items of an `RDS_INFO_*` list: probes the length, then fetches (retrying while
    /// the list grows). Returns the item size and the bytes of all items.
    pub fn info_items(&self, optname: i32) -> io::Result<(usize, Vec<u8>)> {
        let mut len = 0;
        for _ in 0..8 {
            let r = self.info(optname, len);
            match r.ret {
                Ok(each) => {
                    let total = (r.optlen.max(0) as usize).min(r.data.len());
                    return Ok((each as usize, r.data[..total].to_vec()));
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && r.optlen > len => {
                    len = r.optlen;
                }
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other("info list kept growing"))
    }

    /// `RDS_INFO_COUNTERS`: every counter, C RDS's and the transports'.
    pub fn counters(&self) -> io::Result<Vec<info::Counter>> {
        Ok(info::parse_counters(
            &self.info_items(info::RDS_INFO_COUNTERS)?.1,
        ))
    }

    /// One counter by name (`None` if the implementation does not have it).
    pub fn counter(&self, name: &str) -> io::Result<Option<u64>> {
        Ok(self
            .counters()?
            .into_iter()
            .find(|c| c.name == name)
            .map(|c| c.value))
    }

    /// `RDS_INFO_CONNECTIONS` (`v6` false) or `RDS6_INFO_CONNECTIONS`.
    pub fn connections(&self, v6: bool) -> io::Result<Vec<info::ConnectionInfo>> {
        let opt = if v6 {
            info::RDS6_INFO_CONNECTIONS
        } else {
            info::RDS_INFO_CONNECTIONS
        };
        Ok(info::parse_connections(&self.info_items(opt)?.1, v6))
    }

    /// `RDS_INFO_IB_CONNECTIONS` (`v6` false) or `RDS6_INFO_IB_CONNECTIONS`: the connections
    /// of the IB/iWARP transport with their RDMA facts. A table that does not decode is an
    /// `InvalidData` error.
    pub fn rdma_connections(&self, v6: bool) -> io::Result<Vec<info::RdmaConnectionInfo>> {
        let opt = if v6 {
            info::RDS6_INFO_IB_CONNECTIONS
        } else {
            info::RDS_INFO_IB_CONNECTIONS
        };
        let (each, data) = self.info_items(opt)?;
        info::decode_table(each, &data, v6)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
    }

    /// `RDS_INFO_TCP_SOCKETS` (`v6` false) or `RDS6_INFO_TCP_SOCKETS`: the TCP sockets of
    /// the TCP transport's connections. A table that does not decode is an `InvalidData`
    /// error.
    pub fn tcp_sockets(&self, v6: bool) -> io::Result<Vec<info::TcpSocketInfo>> {
        let opt = if v6 {
            info::RDS6_INFO_TCP_SOCKETS
        } else {
            info::RDS_INFO_TCP_SOCKETS
        };
        let (each, data) = self.info_items(opt)?;
        info::decode_table(each, &data, v6)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
    }

    /// `RDS_INFO_SOCKETS` (`v6` false) or `RDS6_INFO_SOCKETS`.
    pub fn sockets(&self, v6: bool) -> io::Result<Vec<info::SocketInfo>> {
        let opt = if v6 {
            info::RDS6_INFO_SOCKETS
        } else {
            info::RDS_INFO_SOCKETS
        };
        Ok(info::parse_sockets(&self.info_items(opt)?.1, v6))
    }

    /// A message list: `RDS_INFO_{SEND,RETRANS,RECV}_MESSAGES` or the `RDS6_` ones.
    pub fn messages(&self, optname: i32) -> io::Result<Vec<info::MessageInfo>> {
        let v6 = matches!(
            optname,
            info::RDS6_INFO_SEND_MESSAGES
                | info::RDS6_INFO_RETRANS_MESSAGES
                | info::RDS6_INFO_RECV_MESSAGES
        );
        Ok(info::parse_messages(&self.info_items(optname)?.1, v6))
    }

    /// Gives up ownership of the descriptor.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

impl From<OwnedFd> for RdsSocket {
    fn from(fd: OwnedFd) -> Self {
        Self { fd }
    }
}

impl IntoRawFd for RdsSocket {
    fn into_raw_fd(self) -> RawFd {
        self.fd.into_raw_fd()
    }
}

impl AsRawFd for RdsSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
