//! `RDS_INFO_*` getsockopt: the records C RDS copies out
//! (`include/uapi/linux/rds.h`), the argument check and result of
//! `rds_info_getsockopt` (`net/rds/info.c`), and the statistics counter
//! names (`net/rds/stats.c`). Each record has an encoder (what the kernel
//! writes) and a decoder (what user space reads back); the TCP socket and
//! RDMA connection records belong to transports rds-rs does not have yet
//! and are here for readers of C RDS's tables.
//!
//! All records are `__attribute__((packed))`. Counters, sequence numbers,
//! lengths, buffer sizes and inode numbers are in native byte order;
//! addresses and ports are big-endian (network order). The IPv4 records
//! carry the last four bytes of the v4-mapped [`Addr`] (C's
//! `s6_addr32[3]`).

use super::addr::Addr;

/// The first `RDS_INFO_*` option number (`RDS_INFO_FIRST`).
pub const RDS_INFO_FIRST: i32 = 10000;
/// Statistics counters, [`encode_counter`] records (`RDS_INFO_COUNTERS`).
pub const RDS_INFO_COUNTERS: i32 = 10000;
/// IPv4 connections, [`ConnInfo::encode_v4`] records
/// (`RDS_INFO_CONNECTIONS`).
pub const RDS_INFO_CONNECTIONS: i32 = 10001;
/// IPv4 messages on send queues, [`MsgInfo::encode_v4`] records
/// (`RDS_INFO_SEND_MESSAGES`).
pub const RDS_INFO_SEND_MESSAGES: i32 = 10003;
/// IPv4 messages awaiting ACK, [`MsgInfo::encode_v4`] records
/// (`RDS_INFO_RETRANS_MESSAGES`).
pub const RDS_INFO_RETRANS_MESSAGES: i32 = 10004;
/// IPv4 messages on receive queues, [`MsgInfo::encode_v4`] records
/// (`RDS_INFO_RECV_MESSAGES`).
pub const RDS_INFO_RECV_MESSAGES: i32 = 10005;
/// IPv4 sockets, [`SockInfo::encode_v4`] records (`RDS_INFO_SOCKETS`).
pub const RDS_INFO_SOCKETS: i32 = 10006;
/// TCP transport sockets (`RDS_INFO_TCP_SOCKETS`).
pub const RDS_INFO_TCP_SOCKETS: i32 = 10007;
/// IB connections (`RDS_INFO_IB_CONNECTIONS`).
pub const RDS_INFO_IB_CONNECTIONS: i32 = 10008;
/// Transport statistics counters (`RDS_INFO_CONNECTION_STATS`).
pub const RDS_INFO_CONNECTION_STATS: i32 = 10009;
/// iWARP connections, deprecated (`RDS_INFO_IWARP_CONNECTIONS`).
pub const RDS_INFO_IWARP_CONNECTIONS: i32 = 10010;
/// Connections, [`ConnInfo::encode_v6`] records (`RDS6_INFO_CONNECTIONS`).
pub const RDS6_INFO_CONNECTIONS: i32 = 10011;
/// Messages on send queues, [`MsgInfo::encode_v6`] records
/// (`RDS6_INFO_SEND_MESSAGES`).
pub const RDS6_INFO_SEND_MESSAGES: i32 = 10012;
/// Messages awaiting ACK, [`MsgInfo::encode_v6`] records
/// (`RDS6_INFO_RETRANS_MESSAGES`).
pub const RDS6_INFO_RETRANS_MESSAGES: i32 = 10013;
/// Messages on receive queues, [`MsgInfo::encode_v6`] records
/// (`RDS6_INFO_RECV_MESSAGES`).
pub const RDS6_INFO_RECV_MESSAGES: i32 = 10014;
/// Sockets, [`SockInfo::encode_v6`] records (`RDS6_INFO_SOCKETS`).
pub const RDS6_INFO_SOCKETS: i32 = 10015;
/// TCP transport sockets (`RDS6_INFO_TCP_SOCKETS`).
pub const RDS6_INFO_TCP_SOCKETS: i32 = 10016;
/// IB connections (`RDS6_INFO_IB_CONNECTIONS`).
pub const RDS6_INFO_IB_CONNECTIONS: i32 = 10017;
/// The last `RDS_INFO_*` option number (`RDS_INFO_LAST`).
pub const RDS_INFO_LAST: i32 = 10017;

/// [`ConnInfo::flags`] bit: the path is transmitting
/// (`RDS_INFO_CONNECTION_FLAG_SENDING`).
pub const RDS_INFO_CONNECTION_FLAG_SENDING: u8 = 0x01;
/// [`ConnInfo::flags`] bit: the path is connecting
/// (`RDS_INFO_CONNECTION_FLAG_CONNECTING`).
pub const RDS_INFO_CONNECTION_FLAG_CONNECTING: u8 = 0x02;
/// [`ConnInfo::flags`] bit: the path is up
/// (`RDS_INFO_CONNECTION_FLAG_CONNECTED`).
pub const RDS_INFO_CONNECTION_FLAG_CONNECTED: u8 = 0x04;

/// Size of the transport name field of connection records (`TRANSNAMSIZ`).
pub const TRANSNAMSIZ: usize = 16;
/// Size of the name field of a counter record.
pub const INFO_COUNTER_NAME_LEN: usize = 32;
/// The longest counter name a record holds (`sizeof(name) - 1`, room for
/// the terminating NUL).
const INFO_COUNTER_NAME_MAX: usize = 31;

/// `sizeof(struct rds_info_counter)`: `name[32]` at 0, `u64 value` at 32.
pub const INFO_COUNTER_LEN: usize = 40;
/// `sizeof(struct rds_info_connection)`; see [`ConnInfo::encode_v4`].
pub const INFO_CONNECTION_LEN: usize = 42;
/// `sizeof(struct rds6_info_connection)`; see [`ConnInfo::encode_v6`].
pub const INFO6_CONNECTION_LEN: usize = 65;
/// `sizeof(struct rds_info_message)`; see [`MsgInfo::encode_v4`].
pub const INFO_MESSAGE_LEN: usize = 26;
/// `sizeof(struct rds6_info_message)`; see [`MsgInfo::encode_v6`].
pub const INFO6_MESSAGE_LEN: usize = 50;
/// `sizeof(struct rds_info_socket)`; see [`SockInfo::encode_v4`].
pub const INFO_SOCKET_LEN: usize = 28;
/// `sizeof(struct rds6_info_socket)`; see [`SockInfo::encode_v6`].
pub const INFO6_SOCKET_LEN: usize = 52;
/// `sizeof(struct rds_info_tcp_socket)`; see [`TcpSockInfo::encode_v4`].
pub const INFO_TCP_SOCKET_LEN: usize = 41;
/// `sizeof(struct rds6_info_tcp_socket)`; see [`TcpSockInfo::encode_v6`].
pub const INFO6_TCP_SOCKET_LEN: usize = 64;
/// `sizeof(struct rds_info_rdma_connection)` (not packed); see
/// [`RdmaConnInfo::encode_v4`].
pub const INFO_RDMA_CONNECTION_LEN: usize = 68;
/// `sizeof(struct rds6_info_rdma_connection)` (not packed); see
/// [`RdmaConnInfo::encode_v6`].
pub const INFO6_RDMA_CONNECTION_LEN: usize = 92;
/// Size of a GID field of the RDMA connection records (`RDS_IB_GID_LEN`).
pub const RDS_IB_GID_LEN: usize = 16;

/// The largest `optlen` `rds_info_getsockopt` accepts:
/// `INT_MAX - PAGE_SIZE + 1` with 4 KiB pages.
pub const INFO_MAX_LEN: i32 = 0x7fff_f000;

/// Writes `bytes` at `off` in `out`. Every caller writes inside its
/// fixed-size record, so nothing is ever dropped; out-of-range writes would
/// be ignored rather than panic.
fn put<const N: usize>(out: &mut [u8], off: usize, bytes: [u8; N]) {
    if let Some(dst) = out.get_mut(off..).and_then(|s| s.first_chunk_mut::<N>()) {
        *dst = bytes;
    }
}

/// C `strncpy(dst, src, dst_len)` into a zeroed `dst`: copies the bytes of
/// `src` up to its first NUL or `dst.len()`, whichever comes first; the
/// rest of `dst` stays zero (so no terminating NUL when `src` fills it).
fn strncpy(dst: &mut [u8], src: &str) {
    for (d, s) in dst
        .iter_mut()
        .zip(src.as_bytes().iter().take_while(|b| **b != 0))
    {
        *d = *s;
    }
}

/// The IPv4 address of an IPv4 info record: the last four bytes of `a`
/// (C `s6_addr32[3]`), whether or not `a` is v4-mapped.
const fn v4_tail(a: &Addr) -> [u8; 4] {
    let [.., a12, a13, a14, a15] = a.0;
    [a12, a13, a14, a15]
}

/// The `N` bytes at `off` in `b`, if `b` holds them.
fn take<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..).and_then(|s| s.first_chunk::<N>()).copied()
}

/// The native-endian `u64` at `off` in `b`.
fn ne_u64(b: &[u8], off: usize) -> Option<u64> {
    take(b, off).map(u64::from_ne_bytes)
}

/// The native-endian `u32` at `off` in `b`.
fn ne_u32(b: &[u8], off: usize) -> Option<u32> {
    take(b, off).map(u32::from_ne_bytes)
}

/// The big-endian `u16` (a port) at `off` in `b`.
fn be_u16(b: &[u8], off: usize) -> Option<u16> {
    take(b, off).map(u16::from_be_bytes)
}

/// The `__be32` IPv4 address at `off` in `b`, v4-mapped (the inverse of
/// [`v4_tail`] for v4-mapped addresses).
fn addr4(b: &[u8], off: usize) -> Option<Addr> {
    take(b, off).map(Addr::from_v4)
}

/// The `struct in6_addr` at `off` in `b`.
fn addr6(b: &[u8], off: usize) -> Option<Addr> {
    take(b, off).map(Addr)
}

/// A C string in the fixed-size field `field` (as [`strncpy`] writes
/// one): the bytes up to the first NUL, or all of them when there is none.
/// Only the longest prefix of those that is valid UTF-8 is returned, so
/// every name [`strncpy`] wrote from a `&str` without NULs that fits the
/// field reads back unchanged.
fn c_str(field: &[u8]) -> &str {
    let bytes = field.split(|b| *b == 0).next().unwrap_or_default();
    match core::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => bytes
            .get(..e.valid_up_to())
            .and_then(|p| core::str::from_utf8(p).ok())
            .unwrap_or_default(),
    }
}

/// `struct rds_info_counter` as `rds_stats_info_copy` fills it: `name` is
/// copied up to its first NUL and truncated to 31 bytes, NUL-padded (so
/// always NUL-terminated); `value` native-endian at offset 32.
#[must_use]
pub fn encode_counter(name: &str, value: u64) -> [u8; INFO_COUNTER_LEN] {
    let mut out = [0u8; INFO_COUNTER_LEN];
    if let Some(n) = out.first_chunk_mut::<INFO_COUNTER_NAME_MAX>() {
        strncpy(n, name);
    }
    put(&mut out, INFO_COUNTER_NAME_LEN, value.to_ne_bytes());
    out
}

/// Reads the first [`INFO_COUNTER_LEN`] bytes of `b` as a
/// `struct rds_info_counter`: the name (see [`encode_counter`]; the bytes
/// up to the first NUL of the 32-byte field, cut to their longest UTF-8
/// prefix) and the value. `None` if `b` is shorter.
#[must_use]
pub fn decode_counter(b: &[u8]) -> Option<(&str, u64)> {
    let (name, rest) = b.split_first_chunk::<INFO_COUNTER_NAME_LEN>()?;
    Some((c_str(name), ne_u64(rest, 0)?))
}

/// One connection path, as `rds_conn_info_visitor` /
/// `rds6_conn_info_visitor` report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnInfo<'a> {
    /// `cp_next_tx_seq`.
    pub next_tx_seq: u64,
    /// `cp_next_rx_seq`.
    pub next_rx_seq: u64,
    /// Local address (`c_laddr`).
    pub laddr: Addr,
    /// Peer address (`c_faddr`).
    pub faddr: Addr,
    /// Transport name (`t_name`), e.g. `"loopback"`, `"tcp"`.
    pub transport: &'a str,
    /// `RDS_INFO_CONNECTION_FLAG_*` bits.
    pub flags: u8,
    /// Type of service (`c_tos`); only the IPv4 record carries it.
    pub tos: u8,
}

impl<'a> ConnInfo<'a> {
    /// `struct rds_info_connection` (42 bytes):
    ///
    /// | offset | field |
    /// |---|---|
    /// | 0  | `u64 next_tx_seq` |
    /// | 8  | `u64 next_rx_seq` |
    /// | 16 | `__be32 laddr` (last 4 bytes of [`Self::laddr`]) |
    /// | 20 | `__be32 faddr` |
    /// | 24 | `u8 transport[16]` (strncpy: NUL-padded, not terminated at 16) |
    /// | 40 | `u8 flags` |
    /// | 41 | `u8 tos` |
    #[must_use]
    pub fn encode_v4(&self) -> [u8; INFO_CONNECTION_LEN] {
        let mut out = [0u8; INFO_CONNECTION_LEN];
        put(&mut out, 0, self.next_tx_seq.to_ne_bytes());
        put(&mut out, 8, self.next_rx_seq.to_ne_bytes());
        put(&mut out, 16, v4_tail(&self.laddr));
        put(&mut out, 20, v4_tail(&self.faddr));
        if let Some(t) = out
            .get_mut(24..)
            .and_then(|s| s.first_chunk_mut::<TRANSNAMSIZ>())
        {
            strncpy(t, self.transport);
        }
        put(&mut out, 40, [self.flags, self.tos]);
        out
    }

    /// `struct rds6_info_connection` (65 bytes; it has no `tos`):
    ///
    /// | offset | field |
    /// |---|---|
    /// | 0  | `u64 next_tx_seq` |
    /// | 8  | `u64 next_rx_seq` |
    /// | 16 | `struct in6_addr laddr` |
    /// | 32 | `struct in6_addr faddr` |
    /// | 48 | `u8 transport[16]` |
    /// | 64 | `u8 flags` |
    #[must_use]
    pub fn encode_v6(&self) -> [u8; INFO6_CONNECTION_LEN] {
        let mut out = [0u8; INFO6_CONNECTION_LEN];
        put(&mut out, 0, self.next_tx_seq.to_ne_bytes());
        put(&mut out, 8, self.next_rx_seq.to_ne_bytes());
        put(&mut out, 16, self.laddr.0);
        put(&mut out, 32, self.faddr.0);
        if let Some(t) = out
            .get_mut(48..)
            .and_then(|s| s.first_chunk_mut::<TRANSNAMSIZ>())
        {
            strncpy(t, self.transport);
        }
        put(&mut out, 64, [self.flags]);
        out
    }

    /// Reads the first [`INFO_CONNECTION_LEN`] bytes of `b` as laid out by
    /// [`Self::encode_v4`]; `None` if `b` is shorter. The addresses come
    /// back v4-mapped; [`Self::transport`] borrows from `b` (the bytes up
    /// to the first NUL of the field, cut to their longest UTF-8 prefix).
    #[must_use]
    pub fn decode_v4(b: &'a [u8]) -> Option<Self> {
        let b = b.get(..INFO_CONNECTION_LEN)?;
        Some(ConnInfo {
            next_tx_seq: ne_u64(b, 0)?,
            next_rx_seq: ne_u64(b, 8)?,
            laddr: addr4(b, 16)?,
            faddr: addr4(b, 20)?,
            transport: c_str(b.get(24..40)?),
            flags: *b.get(40)?,
            tos: *b.get(41)?,
        })
    }

    /// Reads the first [`INFO6_CONNECTION_LEN`] bytes of `b` as laid out by
    /// [`Self::encode_v6`]; `None` if `b` is shorter. The record has no
    /// `tos`: [`Self::tos`] is 0. [`Self::transport`] as in
    /// [`Self::decode_v4`].
    #[must_use]
    pub fn decode_v6(b: &'a [u8]) -> Option<Self> {
        let b = b.get(..INFO6_CONNECTION_LEN)?;
        Some(ConnInfo {
            next_tx_seq: ne_u64(b, 0)?,
            next_rx_seq: ne_u64(b, 8)?,
            laddr: addr6(b, 16)?,
            faddr: addr6(b, 32)?,
            transport: c_str(b.get(48..64)?),
            flags: *b.get(64)?,
            tos: 0,
        })
    }
}

/// One message, as `rds_inc_info_copy` / `rds6_inc_info_copy` report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsgInfo {
    /// Sequence number (`h_sequence`).
    pub seq: u64,
    /// Payload length (`h_len`).
    pub len: u32,
    /// Local address.
    pub laddr: Addr,
    /// Peer address.
    pub faddr: Addr,
    /// Local port, host order (written big-endian).
    pub lport: u16,
    /// Peer port, host order (written big-endian).
    pub fport: u16,
    /// Flags; C always reports 0.
    pub flags: u8,
    /// Type of service of the connection (`c_tos`).
    pub tos: u8,
}

impl MsgInfo {
    /// `struct rds_info_message` (26 bytes):
    ///
    /// | offset | field |
    /// |---|---|
    /// | 0  | `u64 seq` |
    /// | 8  | `u32 len` |
    /// | 12 | `__be32 laddr` |
    /// | 16 | `__be32 faddr` |
    /// | 20 | `__be16 lport` |
    /// | 22 | `__be16 fport` |
    /// | 24 | `u8 flags` |
    /// | 25 | `u8 tos` |
    #[must_use]
    pub fn encode_v4(&self) -> [u8; INFO_MESSAGE_LEN] {
        let mut out = [0u8; INFO_MESSAGE_LEN];
        put(&mut out, 0, self.seq.to_ne_bytes());
        put(&mut out, 8, self.len.to_ne_bytes());
        put(&mut out, 12, v4_tail(&self.laddr));
        put(&mut out, 16, v4_tail(&self.faddr));
        put(&mut out, 20, self.lport.to_be_bytes());
        put(&mut out, 22, self.fport.to_be_bytes());
        put(&mut out, 24, [self.flags, self.tos]);
        out
    }

    /// `struct rds6_info_message` (50 bytes):
    ///
    /// | offset | field |
    /// |---|---|
    /// | 0  | `u64 seq` |
    /// | 8  | `u32 len` |
    /// | 12 | `struct in6_addr laddr` |
    /// | 28 | `struct in6_addr faddr` |
    /// | 44 | `__be16 lport` |
    /// | 46 | `__be16 fport` |
    /// | 48 | `u8 flags` |
    /// | 49 | `u8 tos` |
    #[must_use]
    pub fn encode_v6(&self) -> [u8; INFO6_MESSAGE_LEN] {
        let mut out = [0u8; INFO6_MESSAGE_LEN];
        put(&mut out, 0, self.seq.to_ne_bytes());
        put(&mut out, 8, self.len.to_ne_bytes());
        put(&mut out, 12, self.laddr.0);
        put(&mut out, 28, self.faddr.0);
        put(&mut out, 44, self.lport.to_be_bytes());
        put(&mut out, 46, self.fport.to_be_bytes());
        put(&mut out, 48, [self.flags, self.tos]);
        out
    }

    /// Reads the first [`INFO_MESSAGE_LEN`] bytes of `b` as laid out by
    /// [`Self::encode_v4`]; `None` if `b` is shorter. The addresses come
    /// back v4-mapped.
    #[must_use]
    pub fn decode_v4(b: &[u8]) -> Option<Self> {
        let b = b.get(..INFO_MESSAGE_LEN)?;
        Some(MsgInfo {
            seq: ne_u64(b, 0)?,
            len: ne_u32(b, 8)?,
            laddr: addr4(b, 12)?,
            faddr: addr4(b, 16)?,
            lport: be_u16(b, 20)?,
            fport: be_u16(b, 22)?,
            flags: *b.get(24)?,
            tos: *b.get(25)?,
        })
    }

    /// Reads the first [`INFO6_MESSAGE_LEN`] bytes of `b` as laid out by
    /// [`Self::encode_v6`]; `None` if `b` is shorter.
    #[must_use]
    pub fn decode_v6(b: &[u8]) -> Option<Self> {
        let b = b.get(..INFO6_MESSAGE_LEN)?;
        Some(MsgInfo {
            seq: ne_u64(b, 0)?,
            len: ne_u32(b, 8)?,
            laddr: addr6(b, 12)?,
            faddr: addr6(b, 28)?,
            lport: be_u16(b, 44)?,
            fport: be_u16(b, 46)?,
            flags: *b.get(48)?,
            tos: *b.get(49)?,
        })
    }
}

/// One socket, as `rds_sock_info` / `rds6_sock_info` report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SockInfo {
    /// `rds_sk_sndbuf` (`sk_sndbuf / 2`).
    pub sndbuf: u32,
    /// `rds_sk_rcvbuf` (`sk_rcvbuf / 2`).
    pub rcvbuf: u32,
    /// Bound address.
    pub bound_addr: Addr,
    /// Connected address.
    pub connected_addr: Addr,
    /// Bound port, host order (written big-endian).
    pub bound_port: u16,
    /// Connected port, host order (written big-endian).
    pub connected_port: u16,
    /// Inode number of the socket (`sock_i_ino`).
    pub inum: u64,
}

impl SockInfo {
    /// `struct rds_info_socket` (28 bytes; note `rcvbuf` comes after the
    /// ports):
    ///
    /// | offset | field |
    /// |---|---|
    /// | 0  | `u32 sndbuf` |
    /// | 4  | `__be32 bound_addr` |
    /// | 8  | `__be32 connected_addr` |
    /// | 12 | `__be16 bound_port` |
    /// | 14 | `__be16 connected_port` |
    /// | 16 | `u32 rcvbuf` |
    /// | 20 | `u64 inum` |
    #[must_use]
    pub fn encode_v4(&self) -> [u8; INFO_SOCKET_LEN] {
        let mut out = [0u8; INFO_SOCKET_LEN];
        put(&mut out, 0, self.sndbuf.to_ne_bytes());
        put(&mut out, 4, v4_tail(&self.bound_addr));
        put(&mut out, 8, v4_tail(&self.connected_addr));
        put(&mut out, 12, self.bound_port.to_be_bytes());
        put(&mut out, 14, self.connected_port.to_be_bytes());
        put(&mut out, 16, self.rcvbuf.to_ne_bytes());
        put(&mut out, 20, self.inum.to_ne_bytes());
        out
    }

    /// `struct rds6_info_socket` (52 bytes):
    ///
    /// | offset | field |
    /// |---|---|
    /// | 0  | `u32 sndbuf` |
    /// | 4  | `struct in6_addr bound_addr` |
    /// | 20 | `struct in6_addr connected_addr` |
    /// | 36 | `__be16 bound_port` |
    /// | 38 | `__be16 connected_port` |
    /// | 40 | `u32 rcvbuf` |
    /// | 44 | `u64 inum` |
    #[must_use]
    pub fn encode_v6(&self) -> [u8; INFO6_SOCKET_LEN] {
        let mut out = [0u8; INFO6_SOCKET_LEN];
        put(&mut out, 0, self.sndbuf.to_ne_bytes());
        put(&mut out, 4, self.bound_addr.0);
        put(&mut out, 20, self.connected_addr.0);
        put(&mut out, 36, self.bound_port.to_be_bytes());
        put(&mut out, 38, self.connected_port.to_be_bytes());
        put(&mut out, 40, self.rcvbuf.to_ne_bytes());
        put(&mut out, 44, self.inum.to_ne_bytes());
        out
    }

    /// Reads the first [`INFO_SOCKET_LEN`] bytes of `b` as laid out by
    /// [`Self::encode_v4`]; `None` if `b` is shorter. The addresses come
    /// back v4-mapped.
    #[must_use]
    pub fn decode_v4(b: &[u8]) -> Option<Self> {
        let b = b.get(..INFO_SOCKET_LEN)?;
        Some(SockInfo {
            sndbuf: ne_u32(b, 0)?,
            bound_addr: addr4(b, 4)?,
            connected_addr: addr4(b, 8)?,
            bound_port: be_u16(b, 12)?,
            connected_port: be_u16(b, 14)?,
            rcvbuf: ne_u32(b, 16)?,
            inum: ne_u64(b, 20)?,
        })
    }

    /// Reads the first [`INFO6_SOCKET_LEN`] bytes of `b` as laid out by
    /// [`Self::encode_v6`]; `None` if `b` is shorter.
    #[must_use]
    pub fn decode_v6(b: &[u8]) -> Option<Self> {
        let b = b.get(..INFO6_SOCKET_LEN)?;
        Some(SockInfo {
            sndbuf: ne_u32(b, 0)?,
            bound_addr: addr6(b, 4)?,
            connected_addr: addr6(b, 20)?,
            bound_port: be_u16(b, 36)?,
            connected_port: be_u16(b, 38)?,
            rcvbuf: ne_u32(b, 40)?,
            inum: ne_u64(b, 44)?,
        })
    }
}

/// One TCP transport socket, as `rds_tcp_tc_info` / `rds6_tcp_tc_info`
/// (`net/rds/tcp.c`) report it for `RDS_INFO_TCP_SOCKETS` /
/// `RDS6_INFO_TCP_SOCKETS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSockInfo {
    /// Local address of the TCP socket.
    pub local_addr: Addr,
    /// Local port, host order (written big-endian).
    pub local_port: u16,
    /// Peer address.
    pub peer_addr: Addr,
    /// Peer port, host order (written big-endian).
    pub peer_port: u16,
    /// Header bytes still to receive (`t_tinc_hdr_rem`).
    pub hdr_rem: u64,
    /// Data bytes still to receive (`t_tinc_data_rem`).
    pub data_rem: u64,
    /// `t_last_sent_nxt`.
    pub last_sent_nxt: u32,
    /// `t_last_expected_una`.
    pub last_expected_una: u32,
    /// `t_last_seen_una`.
    pub last_seen_una: u32,
    /// Type of service (`c_tos`); only the IPv4 record carries it.
    pub tos: u8,
}

impl TcpSockInfo {
    /// `struct rds_info_tcp_socket` (41 bytes, packed):
    ///
    /// | offset | field |
    /// |---|---|
    /// | 0  | `__be32 local_addr` (last 4 bytes of [`Self::local_addr`]) |
    /// | 4  | `__be16 local_port` |
    /// | 6  | `__be32 peer_addr` |
    /// | 10 | `__be16 peer_port` |
    /// | 12 | `u64 hdr_rem` |
    /// | 20 | `u64 data_rem` |
    /// | 28 | `u32 last_sent_nxt` |
    /// | 32 | `u32 last_expected_una` |
    /// | 36 | `u32 last_seen_una` |
    /// | 40 | `u8 tos` |
    #[must_use]
    pub fn encode_v4(&self) -> [u8; INFO_TCP_SOCKET_LEN] {
        let mut out = [0u8; INFO_TCP_SOCKET_LEN];
        put(&mut out, 0, v4_tail(&self.local_addr));
        put(&mut out, 4, self.local_port.to_be_bytes());
        put(&mut out, 6, v4_tail(&self.peer_addr));
        put(&mut out, 10, self.peer_port.to_be_bytes());
        put(&mut out, 12, self.hdr_rem.to_ne_bytes());
        put(&mut out, 20, self.data_rem.to_ne_bytes());
        put(&mut out, 28, self.last_sent_nxt.to_ne_bytes());
        put(&mut out, 32, self.last_expected_una.to_ne_bytes());
        put(&mut out, 36, self.last_seen_una.to_ne_bytes());
        put(&mut out, 40, [self.tos]);
        out
    }

    /// `struct rds6_info_tcp_socket` (64 bytes, packed; it has no `tos`):
    ///
    /// | offset | field |
    /// |---|---|
    /// | 0  | `struct in6_addr local_addr` |
    /// | 16 | `__be16 local_port` |
    /// | 18 | `struct in6_addr peer_addr` |
    /// | 34 | `__be16 peer_port` |
    /// | 36 | `u64 hdr_rem` |
    /// | 44 | `u64 data_rem` |
    /// | 52 | `u32 last_sent_nxt` |
    /// | 56 | `u32 last_expected_una` |
    /// | 60 | `u32 last_seen_una` |
    #[must_use]
    pub fn encode_v6(&self) -> [u8; INFO6_TCP_SOCKET_LEN] {
        let mut out = [0u8; INFO6_TCP_SOCKET_LEN];
        put(&mut out, 0, self.local_addr.0);
        put(&mut out, 16, self.local_port.to_be_bytes());
        put(&mut out, 18, self.peer_addr.0);
        put(&mut out, 34, self.peer_port.to_be_bytes());
        put(&mut out, 36, self.hdr_rem.to_ne_bytes());
        put(&mut out, 44, self.data_rem.to_ne_bytes());
        put(&mut out, 52, self.last_sent_nxt.to_ne_bytes());
        put(&mut out, 56, self.last_expected_una.to_ne_bytes());
        put(&mut out, 60, self.last_seen_una.to_ne_bytes());
        out
    }

    /// Reads the first [`INFO_TCP_SOCKET_LEN`] bytes of `b` as laid out by
    /// [`Self::encode_v4`]; `None` if `b` is shorter. The addresses come
    /// back v4-mapped.
    #[must_use]
    pub fn decode_v4(b: &[u8]) -> Option<Self> {
        let b = b.get(..INFO_TCP_SOCKET_LEN)?;
        Some(TcpSockInfo {
            local_addr: addr4(b, 0)?,
            local_port: be_u16(b, 4)?,
            peer_addr: addr4(b, 6)?,
            peer_port: be_u16(b, 10)?,
            hdr_rem: ne_u64(b, 12)?,
            data_rem: ne_u64(b, 20)?,
            last_sent_nxt: ne_u32(b, 28)?,
            last_expected_una: ne_u32(b, 32)?,
            last_seen_una: ne_u32(b, 36)?,
            tos: *b.get(40)?,
        })
    }

    /// Reads the first [`INFO6_TCP_SOCKET_LEN`] bytes of `b` as laid out by
    /// [`Self::encode_v6`]; `None` if `b` is shorter. [`Self::tos`] is 0.
    #[must_use]
    pub fn decode_v6(b: &[u8]) -> Option<Self> {
        let b = b.get(..INFO6_TCP_SOCKET_LEN)?;
        Some(TcpSockInfo {
            local_addr: addr6(b, 0)?,
            local_port: be_u16(b, 16)?,
            peer_addr: addr6(b, 18)?,
            peer_port: be_u16(b, 34)?,
            hdr_rem: ne_u64(b, 36)?,
            data_rem: ne_u64(b, 44)?,
            last_sent_nxt: ne_u32(b, 52)?,
            last_expected_una: ne_u32(b, 56)?,
            last_seen_una: ne_u32(b, 60)?,
            tos: 0,
        })
    }
}

/// One RDMA (IB or iWARP) connection, as `rds_ib_conn_info_visitor` /
/// `rds6_ib_conn_info_visitor` (`net/rds/ib.c`) report it for
/// `RDS_INFO_IB_CONNECTIONS` / `RDS6_INFO_IB_CONNECTIONS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RdmaConnInfo {
    /// Source address.
    pub src_addr: Addr,
    /// Destination address.
    pub dst_addr: Addr,
    /// Source GID.
    pub src_gid: [u8; RDS_IB_GID_LEN],
    /// Destination GID.
    pub dst_gid: [u8; RDS_IB_GID_LEN],
    /// `max_send_wr`.
    pub max_send_wr: u32,
    /// `max_recv_wr`.
    pub max_recv_wr: u32,
    /// `max_send_sge`.
    pub max_send_sge: u32,
    /// `rdma_mr_max`.
    pub rdma_mr_max: u32,
    /// `rdma_mr_size`.
    pub rdma_mr_size: u32,
    /// Type of service.
    pub tos: u8,
    /// Service level.
    pub sl: u8,
    /// `cache_allocs`.
    pub cache_allocs: u32,
}

impl RdmaConnInfo {
    /// Writes the fields from `src_gid` on, laid out alike in both records
    /// after the two addresses, to `out`, the rest of the record.
    fn put_tail(&self, out: &mut [u8]) {
        put(out, 0, self.src_gid);
        put(out, 16, self.dst_gid);
        put(out, 32, self.max_send_wr.to_ne_bytes());
        put(out, 36, self.max_recv_wr.to_ne_bytes());
        put(out, 40, self.max_send_sge.to_ne_bytes());
        put(out, 44, self.rdma_mr_max.to_ne_bytes());
        put(out, 48, self.rdma_mr_size.to_ne_bytes());
        put(out, 52, [self.tos, self.sl]);
        put(out, 56, self.cache_allocs.to_ne_bytes());
    }

    /// Reads the fields [`Self::put_tail`] writes, with the addresses
    /// already read.
    fn get_tail(src_addr: Addr, dst_addr: Addr, b: &[u8]) -> Option<Self> {
        Some(RdmaConnInfo {
            src_addr,
            dst_addr,
            src_gid: take(b, 0)?,
            dst_gid: take(b, 16)?,
            max_send_wr: ne_u32(b, 32)?,
            max_recv_wr: ne_u32(b, 36)?,
            max_send_sge: ne_u32(b, 40)?,
            rdma_mr_max: ne_u32(b, 44)?,
            rdma_mr_size: ne_u32(b, 48)?,
            tos: *b.get(52)?,
            sl: *b.get(53)?,
            cache_allocs: ne_u32(b, 56)?,
        })
    }

    /// `struct rds_info_rdma_connection` (68 bytes; not packed, so two
    /// bytes of padding, written as zero, follow `sl`):
    ///
    /// | offset | field |
    /// |---|---|
    /// | 0  | `__be32 src_addr` (last 4 bytes of [`Self::src_addr`]) |
    /// | 4  | `__be32 dst_addr` |
    /// | 8  | `u8 src_gid[16]` |
    /// | 24 | `u8 dst_gid[16]` |
    /// | 40 | `u32 max_send_wr` |
    /// | 44 | `u32 max_recv_wr` |
    /// | 48 | `u32 max_send_sge` |
    /// | 52 | `u32 rdma_mr_max` |
    /// | 56 | `u32 rdma_mr_size` |
    /// | 60 | `u8 tos` |
    /// | 61 | `u8 sl` |
    /// | 64 | `u32 cache_allocs` |
    #[must_use]
    pub fn encode_v4(&self) -> [u8; INFO_RDMA_CONNECTION_LEN] {
        let mut out = [0u8; INFO_RDMA_CONNECTION_LEN];
        put(&mut out, 0, v4_tail(&self.src_addr));
        put(&mut out, 4, v4_tail(&self.dst_addr));
        if let Some(tail) = out.get_mut(8..) {
            self.put_tail(tail);
        }
        out
    }

    /// `struct rds6_info_rdma_connection` (92 bytes): the two
    /// `struct in6_addr` at 0 and 16, then the fields of
    /// [`Self::encode_v4`] from `src_gid` on, 24 bytes later (`src_gid` at
    /// 32, `tos` at 84, `sl` at 85, `cache_allocs` at 88).
    #[must_use]
    pub fn encode_v6(&self) -> [u8; INFO6_RDMA_CONNECTION_LEN] {
        let mut out = [0u8; INFO6_RDMA_CONNECTION_LEN];
        put(&mut out, 0, self.src_addr.0);
        put(&mut out, 16, self.dst_addr.0);
        if let Some(tail) = out.get_mut(32..) {
            self.put_tail(tail);
        }
        out
    }

    /// Reads the first [`INFO_RDMA_CONNECTION_LEN`] bytes of `b` as laid
    /// out by [`Self::encode_v4`] (the padding is not looked at); `None`
    /// if `b` is shorter. The addresses come back v4-mapped.
    #[must_use]
    pub fn decode_v4(b: &[u8]) -> Option<Self> {
        let b = b.get(..INFO_RDMA_CONNECTION_LEN)?;
        Self::get_tail(addr4(b, 0)?, addr4(b, 4)?, b.get(8..)?)
    }

    /// Reads the first [`INFO6_RDMA_CONNECTION_LEN`] bytes of `b` as laid
    /// out by [`Self::encode_v6`]; `None` if `b` is shorter.
    #[must_use]
    pub fn decode_v6(b: &[u8]) -> Option<Self> {
        let b = b.get(..INFO6_RDMA_CONNECTION_LEN)?;
        Self::get_tail(addr6(b, 0)?, addr6(b, 16)?, b.get(32..)?)
    }
}

/// Errors of `rds_info_getsockopt`'s argument check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InfoError {
    /// `EINVAL`: a negative or too large `optlen`, or a buffer that wraps
    /// around the address space.
    Inval,
}

impl InfoError {
    /// The positive errno C RDS returns (negated) for this error.
    #[must_use]
    pub const fn errno(self) -> i32 {
        match self {
            InfoError::Inval => 22,
        }
    }
}

impl core::fmt::Display for InfoError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            InfoError::Inval => write!(f, "invalid RDS info request"),
        }
    }
}

impl core::error::Error for InfoError {}

/// Whether `optname` is an `RDS_INFO_*` option `rds_getsockopt` hands to
/// `rds_info_getsockopt` ([`RDS_INFO_FIRST`] ..= [`RDS_INFO_LAST`]).
#[must_use]
pub const fn is_info_option(optname: i32) -> bool {
    optname >= RDS_INFO_FIRST && optname <= RDS_INFO_LAST
}

/// `rds_info_getsockopt`'s check of the user's `optlen` (`len`) and
/// `optval` address (`start`).
///
/// # Errors
///
/// [`InfoError::Inval`] when `len` < 0, `len` > [`INFO_MAX_LEN`]
/// (`INT_MAX - PAGE_SIZE + 1`), or `start + len` wraps around 2^64.
pub fn check_info_request(len: i32, start: u64) -> Result<(), InfoError> {
    let Ok(ulen) = u64::try_from(len) else {
        return Err(InfoError::Inval);
    };
    if len > INFO_MAX_LEN || start.checked_add(ulen).is_none() {
        return Err(InfoError::Inval);
    }
    Ok(())
}

/// The result of an `RDS_INFO_*` getsockopt; see [`info_outcome`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InfoOutcome {
    /// The records were copied: getsockopt returns `each` and sets
    /// `optlen` to `total`.
    Fits {
        /// Size of one record; the (positive) return value.
        each: usize,
        /// `nr * each`, written back to `optlen`.
        total: usize,
    },
    /// The buffer is too small: getsockopt fails with `ENOSPC` and sets
    /// `optlen` to `needed`.
    NoSpace {
        /// `nr * each` (saturated at `usize::MAX`), written back to
        /// `optlen`.
        needed: usize,
    },
}

/// `rds_info_getsockopt`'s result, given the user's buffer length `len` and
/// what the info function reported: `nr` records of `each` bytes.
///
/// [`InfoOutcome::NoSpace`] when `nr * each` > `len`, else
/// [`InfoOutcome::Fits`]. The product saturates instead of wrapping (C
/// computes it in `unsigned int` and stores it in an `int`; the info
/// functions keep it small). C `BUG_ON`s `each == 0`; here that is simply a
/// fit of 0 bytes.
#[must_use]
pub fn info_outcome(len: usize, each: usize, nr: usize) -> InfoOutcome {
    let total = nr.saturating_mul(each);
    if total > len {
        InfoOutcome::NoSpace { needed: total }
    } else {
        InfoOutcome::Fits { each, total }
    }
}

/// Defines [`Stat`], [`STAT_NAMES`] and [`STAT_COUNT`] from one list, so
/// their orders cannot drift apart.
macro_rules! stats {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// One RDS statistics counter, in the order of C's
        /// `struct rds_statistics` and `rds_stat_names` (`net/rds/stats.c`),
        /// which is also the order `RDS_INFO_COUNTERS` reports them in.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Stat {
            $($(#[$doc])* $variant,)*
        }

        /// The names of the RDS statistics counters, in C's order
        /// (`rds_stat_names`); `STAT_NAMES[s.index()] == s.name()`.
        pub const STAT_NAMES: [&str; STAT_COUNT] = [$($name,)*];

        impl Stat {
            /// Every counter, in C's order; `Stat::ALL[i].index() == i`.
            pub const ALL: [Stat; STAT_COUNT] = [$(Stat::$variant,)*];

            /// The counter's name as `RDS_INFO_COUNTERS` reports it.
            #[must_use]
            pub const fn name(self) -> &'static str {
                match self {
                    $(Stat::$variant => $name,)*
                }
            }
        }
    };
}

/// The number of RDS statistics counters: C's core's, C's IB transport's, C's TCP
/// transport's, and rds-rs's.
pub const STAT_COUNT: usize = 36 + 39 + 5 + 43;

/// How many of the counters are C's core's (`ARRAY_SIZE(rds_stat_names)`); the IB
/// transport's follow (as C appends them with `rds_rdma` loaded), then rds-rs's own.
pub const C_STAT_COUNT: usize = 36;

/// How many IB transport counters follow C's core's (`ARRAY_SIZE(rds_ib_stat_names)`).
pub const C_IB_STAT_COUNT: usize = 39;

/// How many TCP transport counters follow the IB transport's (`ARRAY_SIZE(rds_tcp_stat_names)`,
/// as C appends them with `rds_tcp` loaded).
pub const C_TCP_STAT_COUNT: usize = 5;

stats! {
    /// `s_conn_reset`.
    ConnReset => "conn_reset",
    /// `s_recv_drop_bad_checksum`.
    RecvDropBadChecksum => "recv_drop_bad_checksum",
    /// `s_recv_drop_old_seq`.
    RecvDropOldSeq => "recv_drop_old_seq",
    /// `s_recv_drop_no_sock`.
    RecvDropNoSock => "recv_drop_no_sock",
    /// `s_recv_drop_dead_sock`.
    RecvDropDeadSock => "recv_drop_dead_sock",
    /// `s_recv_deliver_raced`.
    RecvDeliverRaced => "recv_deliver_raced",
    /// `s_recv_delivered`.
    RecvDelivered => "recv_delivered",
    /// `s_recv_queued`.
    RecvQueued => "recv_queued",
    /// `s_recv_immediate_retry`.
    RecvImmediateRetry => "recv_immediate_retry",
    /// `s_recv_delayed_retry`.
    RecvDelayedRetry => "recv_delayed_retry",
    /// `s_recv_ack_required`.
    RecvAckRequired => "recv_ack_required",
    /// `s_recv_rdma_bytes`.
    RecvRdmaBytes => "recv_rdma_bytes",
    /// `s_recv_ping`.
    RecvPing => "recv_ping",
    /// `s_send_queue_empty`.
    SendQueueEmpty => "send_queue_empty",
    /// `s_send_queue_full`.
    SendQueueFull => "send_queue_full",
    /// `s_send_lock_contention`.
    SendLockContention => "send_lock_contention",
    /// `s_send_lock_queue_raced`.
    SendLockQueueRaced => "send_lock_queue_raced",
    /// `s_send_immediate_retry`.
    SendImmediateRetry => "send_immediate_retry",
    /// `s_send_delayed_retry`.
    SendDelayedRetry => "send_delayed_retry",
    /// `s_send_drop_acked`.
    SendDropAcked => "send_drop_acked",
    /// `s_send_ack_required`.
    SendAckRequired => "send_ack_required",
    /// `s_send_queued`.
    SendQueued => "send_queued",
    /// `s_send_rdma`.
    SendRdma => "send_rdma",
    /// `s_send_rdma_bytes`.
    SendRdmaBytes => "send_rdma_bytes",
    /// `s_send_pong`.
    SendPong => "send_pong",
    /// `s_page_remainder_hit`.
    PageRemainderHit => "page_remainder_hit",
    /// `s_page_remainder_miss`.
    PageRemainderMiss => "page_remainder_miss",
    /// `s_copy_to_user`.
    CopyToUser => "copy_to_user",
    /// `s_copy_from_user`.
    CopyFromUser => "copy_from_user",
    /// `s_cong_update_queued`.
    CongUpdateQueued => "cong_update_queued",
    /// `s_cong_update_received`.
    CongUpdateReceived => "cong_update_received",
    /// `s_cong_send_error`.
    CongSendError => "cong_send_error",
    /// `s_cong_send_blocked`.
    CongSendBlocked => "cong_send_blocked",
    /// `s_recv_bytes_added_to_socket` (C's name for it is
    /// `recv_bytes_added_to_sock`).
    RecvBytesAddedToSock => "recv_bytes_added_to_sock",
    /// `s_recv_bytes_removed_from_socket` (C's name for it is
    /// `recv_bytes_freed_fromsock`).
    RecvBytesFreedFromSock => "recv_bytes_freed_fromsock",
    /// `s_send_stuck_rm`.
    SendStuckRm => "send_stuck_rm",
    /// `s_ib_connect_raced` (C's `rds_ib_stat_names`).
    IbConnectRaced => "ib_connect_raced",
    /// `s_ib_listen_closed_stale` (C's `rds_ib_stat_names`).
    IbListenClosedStale => "ib_listen_closed_stale",
    /// `s_ib_evt_handler_call` (C's `rds_ib_stat_names`).
    IbEvtHandlerCall => "ib_evt_handler_call",
    /// `s_ib_tasklet_call` (C's `rds_ib_stat_names`).
    IbTaskletCall => "ib_tasklet_call",
    /// `s_ib_tx_cq_event` (C's `rds_ib_stat_names`).
    IbTxCqEvent => "ib_tx_cq_event",
    /// `s_ib_tx_ring_full` (C's `rds_ib_stat_names`).
    IbTxRingFull => "ib_tx_ring_full",
    /// `s_ib_tx_throttle` (C's `rds_ib_stat_names`).
    IbTxThrottle => "ib_tx_throttle",
    /// `s_ib_tx_sg_mapping_failure` (C's `rds_ib_stat_names`).
    IbTxSgMappingFailure => "ib_tx_sg_mapping_failure",
    /// `s_ib_tx_stalled` (C's `rds_ib_stat_names`).
    IbTxStalled => "ib_tx_stalled",
    /// `s_ib_tx_credit_updates` (C's `rds_ib_stat_names`).
    IbTxCreditUpdates => "ib_tx_credit_updates",
    /// `s_ib_rx_cq_event` (C's `rds_ib_stat_names`).
    IbRxCqEvent => "ib_rx_cq_event",
    /// `s_ib_rx_ring_empty` (C's `rds_ib_stat_names`).
    IbRxRingEmpty => "ib_rx_ring_empty",
    /// `s_ib_rx_refill_from_cq` (C's `rds_ib_stat_names`).
    IbRxRefillFromCq => "ib_rx_refill_from_cq",
    /// `s_ib_rx_refill_from_thread` (C's `rds_ib_stat_names`).
    IbRxRefillFromThread => "ib_rx_refill_from_thread",
    /// `s_ib_rx_alloc_limit` (C's `rds_ib_stat_names`).
    IbRxAllocLimit => "ib_rx_alloc_limit",
    /// `s_ib_rx_total_frags` (C's `rds_ib_stat_names`).
    IbRxTotalFrags => "ib_rx_total_frags",
    /// `s_ib_rx_total_incs` (C's `rds_ib_stat_names`).
    IbRxTotalIncs => "ib_rx_total_incs",
    /// `s_ib_rx_credit_updates` (C's `rds_ib_stat_names`).
    IbRxCreditUpdates => "ib_rx_credit_updates",
    /// `s_ib_ack_sent` (C's `rds_ib_stat_names`).
    IbAckSent => "ib_ack_sent",
    /// `s_ib_ack_send_failure` (C's `rds_ib_stat_names`).
    IbAckSendFailure => "ib_ack_send_failure",
    /// `s_ib_ack_send_delayed` (C's `rds_ib_stat_names`).
    IbAckSendDelayed => "ib_ack_send_delayed",
    /// `s_ib_ack_send_piggybacked` (C's `rds_ib_stat_names`).
    IbAckSendPiggybacked => "ib_ack_send_piggybacked",
    /// `s_ib_ack_received` (C's `rds_ib_stat_names`).
    IbAckReceived => "ib_ack_received",
    /// `s_ib_rdma_mr_8k_alloc` (C's `rds_ib_stat_names`).
    IbRdmaMr8kAlloc => "ib_rdma_mr_8k_alloc",
    /// `s_ib_rdma_mr_8k_free` (C's `rds_ib_stat_names`).
    IbRdmaMr8kFree => "ib_rdma_mr_8k_free",
    /// `s_ib_rdma_mr_8k_used` (C's `rds_ib_stat_names`).
    IbRdmaMr8kUsed => "ib_rdma_mr_8k_used",
    /// `s_ib_rdma_mr_8k_pool_flush` (C's `rds_ib_stat_names`).
    IbRdmaMr8kPoolFlush => "ib_rdma_mr_8k_pool_flush",
    /// `s_ib_rdma_mr_8k_pool_wait` (C's `rds_ib_stat_names`).
    IbRdmaMr8kPoolWait => "ib_rdma_mr_8k_pool_wait",
    /// `s_ib_rdma_mr_8k_pool_depleted` (C's `rds_ib_stat_names`).
    IbRdmaMr8kPoolDepleted => "ib_rdma_mr_8k_pool_depleted",
    /// `s_ib_rdma_mr_1m_alloc` (C's `rds_ib_stat_names`).
    IbRdmaMr1mAlloc => "ib_rdma_mr_1m_alloc",
    /// `s_ib_rdma_mr_1m_free` (C's `rds_ib_stat_names`).
    IbRdmaMr1mFree => "ib_rdma_mr_1m_free",
    /// `s_ib_rdma_mr_1m_used` (C's `rds_ib_stat_names`).
    IbRdmaMr1mUsed => "ib_rdma_mr_1m_used",
    /// `s_ib_rdma_mr_1m_pool_flush` (C's `rds_ib_stat_names`).
    IbRdmaMr1mPoolFlush => "ib_rdma_mr_1m_pool_flush",
    /// `s_ib_rdma_mr_1m_pool_wait` (C's `rds_ib_stat_names`).
    IbRdmaMr1mPoolWait => "ib_rdma_mr_1m_pool_wait",
    /// `s_ib_rdma_mr_1m_pool_depleted` (C's `rds_ib_stat_names`).
    IbRdmaMr1mPoolDepleted => "ib_rdma_mr_1m_pool_depleted",
    /// `s_ib_rdma_mr_8k_reused` (C's `rds_ib_stat_names`).
    IbRdmaMr8kReused => "ib_rdma_mr_8k_reused",
    /// `s_ib_rdma_mr_1m_reused` (C's `rds_ib_stat_names`).
    IbRdmaMr1mReused => "ib_rdma_mr_1m_reused",
    /// `s_ib_atomic_cswp` (C's `rds_ib_stat_names`).
    IbAtomicCswp => "ib_atomic_cswp",
    /// `s_ib_atomic_fadd` (C's `rds_ib_stat_names`).
    IbAtomicFadd => "ib_atomic_fadd",
    /// `s_tcp_data_ready_calls` (C's `rds_tcp_stat_names`).
    TcpDataReadyCalls => "tcp_data_ready_calls",
    /// `s_tcp_write_space_calls` (C's `rds_tcp_stat_names`).
    TcpWriteSpaceCalls => "tcp_write_space_calls",
    /// `s_tcp_sndbuf_full` (C's `rds_tcp_stat_names`).
    TcpSndbufFull => "tcp_sndbuf_full",
    /// `s_tcp_connect_raced` (C's `rds_tcp_stat_names`): accepted sockets reset because
    /// their connection was busy.
    TcpConnectRaced => "tcp_connect_raced",
    /// `s_tcp_listen_closed_stale` (C's `rds_tcp_stat_names`).
    TcpListenClosedStale => "tcp_listen_closed_stale",
    /// rds-rs: frames dropped for a malformed header other than its checksum (length,
    /// congestion-map shape, extension headers); see `parse_frame`.
    RsRecvDropBadHeader => "rs_recv_drop_bad_header",
    /// rds-rs: messages sent again after a connection reset (`RDS_FLAG_RETRANSMITTED`).
    RsSendRetransmitted => "rs_send_retransmitted",
    /// rds-rs: RDMA and atomic operations reported `RDS_RDMA_DROPPED` at a reset (their
    /// messages are never resent; one that was performed before the reset is not counted).
    RsSendOpDropped => "rs_send_op_dropped",
    /// rds-rs: idle connections reaped.
    RsConnReaped => "rs_conn_reaped",
    /// rds-rs: unused congestion maps reaped.
    RsCongMapReaped => "rs_cong_map_reaped",
    /// rds-rs: RDMA and atomic operations whose r_key lookup failed.
    RsRdmaLookupFailed => "rs_rdma_lookup_failed",
    /// rds-rs: operations failed without a lookup, their socket being over its rate of
    /// failed lookups.
    RsRdmaLookupLimited => "rs_rdma_lookup_limited",
    /// rds-rs: sends refused because the socket has too many completion notifications
    /// outstanding.
    RsNotifyLimit => "rs_notify_limit",
    /// rds-rs: connection requests the peer rejected (C's answer to simultaneous connects among them).
    RsIbConnectRejected => "rs_ib_connect_rejected",
    /// rds-rs: connection requests or replies refused for their private data (none, too short, an incompatible version).
    RsIbConnectBadPrivate => "rs_ib_connect_bad_private",
    /// rds-rs: connection handshakes abandoned because their connection was torn down or
    /// destroyed while a connection-manager handler was building the queue pair.
    RsIbCmRaced => "rs_ib_cm_raced",
    /// rds-rs: received fragments that broke their connection (no header, too long, bad checksum, a header that does not match the message's, a wrong length).
    RsIbBadFragment => "rs_ib_bad_fragment",
    /// rds-rs: SENDs that completed with an error (the connection resets).
    RsIbSendError => "rs_ib_send_error",
    /// rds-rs: receives that completed with an error (the connection resets).
    RsIbRecvError => "rs_ib_recv_error",
    /// rds-rs: registrations made on an RDMA device (`RDS_GET_MR`, `RDS_CMSG_RDMA_MAP`).
    RsIbMrRegistered => "rs_ib_mr_registered",
    /// rds-rs: registrations deregistered by their owner (freed, used once, socket closed).
    RsIbMrDeregistered => "rs_ib_mr_deregistered",
    /// rds-rs: registrations revoked because their RDMA device went away.
    RsIbMrRevoked => "rs_ib_mr_revoked",
    /// rds-rs: RDMA writes posted over IB (one per operation).
    RsIbRdmaWrite => "rs_ib_rdma_write",
    /// rds-rs: RDMA reads posted over IB (one per operation).
    RsIbRdmaRead => "rs_ib_rdma_read",
    /// rds-rs: atomic operations posted over IB.
    RsIbAtomic => "rs_ib_atomic",
    /// rds-rs: connections that stayed connecting for 30 s and started over.
    RsConnConnectTimeout => "rs_conn_connect_timeout",
    /// rds-rs: fences posted on the QPs of an iWARP device after a registration on it was
    /// deregistered, before its pages are let go (see `Documentation/rdma.md`).
    RsIbMrFence => "rs_ib_mr_fence",
    /// rds-rs: QPs moved to the error state because a fence did not complete in time (a READ
    /// response stuck behind a peer that does not take its data); their connections reset.
    RsIbMrFenceStalled => "rs_ib_mr_fence_stalled",
    /// rds-rs: messages a socket sent in new memory (its pool of spares was empty).
    RsMsgAlloc => "rs_msg_alloc",
    /// rds-rs: messages a socket sent in a spare of its pool (memory of an earlier message,
    /// given back when its receiver was done with it).
    RsMsgRecycled => "rs_msg_recycled",
    /// rds-rs: payloads (over 64 bytes) copied into new memory.
    RsPayloadAlloc => "rs_payload_alloc",
    /// rds-rs: payloads copied into the buffer of a spare message.
    RsPayloadRecycled => "rs_payload_recycled",
    /// rds-rs: reaped network connections whose sequence numbers were kept for the next
    /// connection to the same peer (which may retransmit what this one received).
    RsConnSeqKept => "rs_conn_seq_kept",
    /// rds-rs: new connections that took up the sequence numbers a reaped one left.
    RsConnSeqRestored => "rs_conn_seq_restored",
    /// rds-rs: reaped network connections whose sequence numbers could not be kept (the
    /// table of kept ones full, or no memory): their peers' retransmissions may be delivered
    /// again.
    RsConnSeqForgotten => "rs_conn_seq_forgotten",
    /// rds-rs: messages dropped as replays: within one incarnation of an IB/iWARP
    /// connection, a sequence number not above the last one received, without
    /// `RDS_FLAG_RETRANSMITTED` (C delivers them again).
    RsRecvDropReplay => "rs_recv_drop_replay",
    /// rds-rs: IB/iWARP connection requests accepted although our own connect to the same
    /// peer was in progress (both ends connected at once, and this end's address is the
    /// larger: it yields, and its own connect is dropped; see `yields_connect`).
    RsIbConnectYielded => "rs_ib_connect_yielded",
    /// rds-rs: fence rounds of an iWARP device's fence work, each for every registration
    /// deregistered on the device since the last (`rs_ib_mr_fence` counts the QPs fenced).
    RsIbMrFenceRound => "rs_ib_mr_fence_rounds",
    /// rds-rs: accepts of the TCP listener that failed.
    RsTcpAcceptFailed => "rs_tcp_accept_failed",
    /// rds-rs: accepted TCP connections reset because they are for no connection of TCP's
    /// (from an address of this host, or between addresses another transport connects).
    RsTcpAcceptRefused => "rs_tcp_accept_refused",
    /// rds-rs: TCP connections dropped because the stream broke the framing (a header whose
    /// `h_len` is above 1 MiB).
    RsTcpBadStream => "rs_tcp_bad_stream",
    /// rds-rs: reads of a TCP stream that stopped for memory (the rest waits in the socket).
    RsTcpRxNomem => "rs_tcp_rx_nomem",
    /// rds-rs: TCP client connects that found no port of the local port range free that
    /// carries their path (see `path_port`); they are tried again later.
    RsTcpPortAny => "rs_tcp_port_any",
    /// rds-rs: accepted TCP connections dropped because they came from another path's port
    /// (taken before the handshake said the peer numbers its ports by path).
    RsTcpPathMisplaced => "rs_tcp_path_misplaced",
    /// rds-rs: accepted TCP connections taken on a path before the handshake, closed once it
    /// said they were another path's: the path's receive sequence state was given back as it
    /// was before them (see `SavedRx`).
    RsTcpRxSeqRestored => "rs_tcp_rx_seq_restored",
    /// rds-rs: zero-copy sends refused because the socket had `ZC_MAX` completions unread
    /// or sends in flight.
    RsZcopyFull => "rs_zcopy_full",
    /// rds-rs: bytes sent zero-copy (taken by reference from the sender's pages).
    RsZcopyBytes => "rs_zcopy_bytes",
    /// rds-rs: TCP payloads that came in too many small pieces to keep in their skbs (or
    /// when an skb could not be had), copied into pages of their own instead.
    RsTcpRxCompacted => "rs_tcp_rx_compacted",
}

impl Stat {
    /// The counter's position in C's order (and in [`STAT_NAMES`]).
    #[must_use]
    pub const fn index(self) -> usize {
        // A field-less enum without explicit discriminants numbers its
        // variants 0, 1, ... in declaration order.
        self as usize
    }
}
