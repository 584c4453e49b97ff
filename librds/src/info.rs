//! The `RDS_INFO_*` getsockopt interface: option numbers, item sizes and parsers of the
//! structures of `linux/rds.h`.
//!
//! The constants and the record layouts are `rds-proto`'s (the code the kernel module encodes
//! the records with); this module turns its decoded records into `std` types.

use rds_proto::{Addr, ConnInfo, MsgInfo, RdmaConnInfo, SockInfo, TcpSockInfo};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub use rds_proto::{
    RDS6_INFO_CONNECTIONS, RDS6_INFO_IB_CONNECTIONS, RDS6_INFO_RECV_MESSAGES,
    RDS6_INFO_RETRANS_MESSAGES, RDS6_INFO_SEND_MESSAGES, RDS6_INFO_SOCKETS, RDS6_INFO_TCP_SOCKETS,
    RDS_INFO_CONNECTIONS, RDS_INFO_CONNECTION_STATS, RDS_INFO_COUNTERS, RDS_INFO_FIRST,
    RDS_INFO_IB_CONNECTIONS, RDS_INFO_IWARP_CONNECTIONS, RDS_INFO_LAST, RDS_INFO_RECV_MESSAGES,
    RDS_INFO_RETRANS_MESSAGES, RDS_INFO_SEND_MESSAGES, RDS_INFO_SOCKETS, RDS_INFO_TCP_SOCKETS,
};

/// `sizeof(struct rds_info_counter)`.
pub const INFO_COUNTER_SIZE: usize = rds_proto::INFO_COUNTER_LEN;
/// `sizeof(struct rds_info_connection)`.
pub const INFO_CONNECTION_SIZE: usize = rds_proto::INFO_CONNECTION_LEN;
/// `sizeof(struct rds6_info_connection)`.
pub const INFO6_CONNECTION_SIZE: usize = rds_proto::INFO6_CONNECTION_LEN;
/// `sizeof(struct rds_info_message)`.
pub const INFO_MESSAGE_SIZE: usize = rds_proto::INFO_MESSAGE_LEN;
/// `sizeof(struct rds6_info_message)`.
pub const INFO6_MESSAGE_SIZE: usize = rds_proto::INFO6_MESSAGE_LEN;
/// `sizeof(struct rds_info_socket)`.
pub const INFO_SOCKET_SIZE: usize = rds_proto::INFO_SOCKET_LEN;
/// `sizeof(struct rds6_info_socket)`.
pub const INFO6_SOCKET_SIZE: usize = rds_proto::INFO6_SOCKET_LEN;
/// `sizeof(struct rds_info_tcp_socket)`.
pub const INFO_TCP_SOCKET_SIZE: usize = rds_proto::INFO_TCP_SOCKET_LEN;
/// `sizeof(struct rds6_info_tcp_socket)`.
pub const INFO6_TCP_SOCKET_SIZE: usize = rds_proto::INFO6_TCP_SOCKET_LEN;
/// `sizeof(struct rds_info_rdma_connection)`.
pub const INFO_RDMA_CONNECTION_SIZE: usize = rds_proto::INFO_RDMA_CONNECTION_LEN;
/// `sizeof(struct rds6_info_rdma_connection)`.
pub const INFO6_RDMA_CONNECTION_SIZE: usize = rds_proto::INFO6_RDMA_CONNECTION_LEN;

/// `RDS_INFO_CONNECTION_FLAG_SENDING`.
pub const CONN_FLAG_SENDING: u8 = rds_proto::RDS_INFO_CONNECTION_FLAG_SENDING;
/// `RDS_INFO_CONNECTION_FLAG_CONNECTING`.
pub const CONN_FLAG_CONNECTING: u8 = rds_proto::RDS_INFO_CONNECTION_FLAG_CONNECTING;
/// `RDS_INFO_CONNECTION_FLAG_CONNECTED`.
pub const CONN_FLAG_CONNECTED: u8 = rds_proto::RDS_INFO_CONNECTION_FLAG_CONNECTED;

/// The names of C RDS's own statistics counters, in the order of `rds_stat_names` (stats.c).
pub const COUNTER_NAMES: &[&str] = rds_proto::STAT_NAMES.split_at(rds_proto::C_STAT_COUNT).0;

/// The names of the counters rds-rs reports after C's core's: the IB transport's (C's names,
/// as C reports them with `rds_rdma` loaded), then rds-rs's own (`rs_*`).
pub const RS_COUNTER_NAMES: &[&str] = rds_proto::STAT_NAMES.split_at(rds_proto::C_STAT_COUNT).1;

/// One `struct rds_info_counter`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counter {
    /// The counter's name.
    pub name: String,
    /// Its value.
    pub value: u64,
}

/// One `struct rds_info_connection` or `struct rds6_info_connection`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// Next sequence number to send.
    pub next_tx_seq: u64,
    /// Next sequence number expected.
    pub next_rx_seq: u64,
    /// Local address.
    pub laddr: IpAddr,
    /// Peer address.
    pub faddr: IpAddr,
    /// Transport name (`loopback`, `tcp`, `infiniband`).
    pub transport: String,
    /// `RDS_INFO_CONNECTION_FLAG_*`.
    pub flags: u8,
    /// Type of service (IPv4 layout only).
    pub tos: Option<u8>,
}

impl ConnectionInfo {
    /// Whether the connection is up (`RDS_INFO_CONNECTION_FLAG_CONNECTED`).
    pub fn connected(&self) -> bool {
        self.flags & CONN_FLAG_CONNECTED != 0
    }
}

/// One `struct rds_info_message` or `struct rds6_info_message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageInfo {
    /// Sequence number.
    pub seq: u64,
    /// Payload length.
    pub len: u32,
    /// Local address.
    pub laddr: IpAddr,
    /// Peer address.
    pub faddr: IpAddr,
    /// Local port.
    pub lport: u16,
    /// Peer port.
    pub fport: u16,
    /// `RDS_INFO_MESSAGE_FLAG_*`.
    pub flags: u8,
    /// Type of service.
    pub tos: u8,
}

/// One `struct rds_info_socket` or `struct rds6_info_socket`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocketInfo {
    /// Send buffer limit (half of `sk_sndbuf`).
    pub sndbuf: u32,
    /// Bound address and port.
    pub bound: SocketAddr,
    /// Connected address and port.
    pub connected: SocketAddr,
    /// Receive buffer limit (half of `sk_rcvbuf`).
    pub rcvbuf: u32,
    /// Inode number of the socket.
    pub inum: u64,
}

/// One `struct rds_info_tcp_socket` or `struct rds6_info_tcp_socket` (rds_tcp).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpSocketInfo {
    /// Local address and port of the TCP socket.
    pub local: SocketAddr,
    /// Peer address and port.
    pub peer: SocketAddr,
    /// Header bytes still to receive.
    pub hdr_rem: u64,
    /// Data bytes still to receive.
    pub data_rem: u64,
    /// `last_sent_nxt`.
    pub last_sent_nxt: u32,
    /// `last_expected_una`.
    pub last_expected_una: u32,
    /// `last_seen_una`.
    pub last_seen_una: u32,
    /// Type of service (IPv4 layout only).
    pub tos: Option<u8>,
}

/// One `struct rds_info_rdma_connection` or `struct rds6_info_rdma_connection` (rds_rdma).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdmaConnectionInfo {
    /// Source address.
    pub src_addr: IpAddr,
    /// Destination address.
    pub dst_addr: IpAddr,
    /// Source GID.
    pub src_gid: [u8; rds_proto::RDS_IB_GID_LEN],
    /// Destination GID.
    pub dst_gid: [u8; rds_proto::RDS_IB_GID_LEN],
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

/// An address of a decoded record: the IPv4 layouts hold an IPv4 address (which `rds-proto`
/// returns v4-mapped), the IPv6 ones an IPv6 address.
fn ip(a: Addr, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(a.0))
    } else {
        let [.., a0, a1, a2, a3] = a.0;
        IpAddr::V4(Ipv4Addr::new(a0, a1, a2, a3))
    }
}

/// A record of an info table: its two layouts' sizes and its decoder.
pub trait InfoRecord: Sized {
    /// The sizes of the IPv4 and the IPv6 layout (the same for a record without addresses).
    const SIZES: (usize, usize);

    /// The size of the IPv4 (`v6` false) or IPv6 layout.
    fn size(v6: bool) -> usize {
        if v6 {
            Self::SIZES.1
        } else {
            Self::SIZES.0
        }
    }

    /// Decodes the IPv4 (`v6` false) or IPv6 layout from the first bytes of `b`; `None` if
    /// `b` is shorter than the layout.
    fn decode(b: &[u8], v6: bool) -> Option<Self>;
}

impl InfoRecord for Counter {
    const SIZES: (usize, usize) = (INFO_COUNTER_SIZE, INFO_COUNTER_SIZE);

    fn decode(b: &[u8], _v6: bool) -> Option<Self> {
        let (name, value) = rds_proto::decode_counter(b)?;
        Some(Self {
            name: name.to_owned(),
            value,
        })
    }
}

impl InfoRecord for ConnectionInfo {
    const SIZES: (usize, usize) = (INFO_CONNECTION_SIZE, INFO6_CONNECTION_SIZE);

    fn decode(b: &[u8], v6: bool) -> Option<Self> {
        let c = if v6 {
            ConnInfo::decode_v6(b)?
        } else {
            ConnInfo::decode_v4(b)?
        };
        Some(Self {
            next_tx_seq: c.next_tx_seq,
            next_rx_seq: c.next_rx_seq,
            laddr: ip(c.laddr, v6),
            faddr: ip(c.faddr, v6),
            transport: c.transport.to_owned(),
            flags: c.flags,
            tos: (!v6).then_some(c.tos),
        })
    }
}

impl InfoRecord for MessageInfo {
    const SIZES: (usize, usize) = (INFO_MESSAGE_SIZE, INFO6_MESSAGE_SIZE);

    fn decode(b: &[u8], v6: bool) -> Option<Self> {
        let m = if v6 {
            MsgInfo::decode_v6(b)?
        } else {
            MsgInfo::decode_v4(b)?
        };
        Some(Self {
            seq: m.seq,
            len: m.len,
            laddr: ip(m.laddr, v6),
            faddr: ip(m.faddr, v6),
            lport: m.lport,
            fport: m.fport,
            flags: m.flags,
            tos: m.tos,
        })
    }
}

impl InfoRecord for SocketInfo {
    const SIZES: (usize, usize) = (INFO_SOCKET_SIZE, INFO6_SOCKET_SIZE);

    fn decode(b: &[u8], v6: bool) -> Option<Self> {
        let s = if v6 {
            SockInfo::decode_v6(b)?
        } else {
            SockInfo::decode_v4(b)?
        };
        Some(Self {
            sndbuf: s.sndbuf,
            bound: SocketAddr::new(ip(s.bound_addr, v6), s.bound_port),
            connected: SocketAddr::new(ip(s.connected_addr, v6), s.connected_port),
            rcvbuf: s.rcvbuf,
            inum: s.inum,
        })
    }
}

impl InfoRecord for TcpSocketInfo {
    const SIZES: (usize, usize) = (INFO_TCP_SOCKET_SIZE, INFO6_TCP_SOCKET_SIZE);

    fn decode(b: &[u8], v6: bool) -> Option<Self> {
        let t = if v6 {
            TcpSockInfo::decode_v6(b)?
        } else {
            TcpSockInfo::decode_v4(b)?
        };
        Some(Self {
            local: SocketAddr::new(ip(t.local_addr, v6), t.local_port),
            peer: SocketAddr::new(ip(t.peer_addr, v6), t.peer_port),
            hdr_rem: t.hdr_rem,
            data_rem: t.data_rem,
            last_sent_nxt: t.last_sent_nxt,
            last_expected_una: t.last_expected_una,
            last_seen_una: t.last_seen_una,
            tos: (!v6).then_some(t.tos),
        })
    }
}

impl InfoRecord for RdmaConnectionInfo {
    const SIZES: (usize, usize) = (INFO_RDMA_CONNECTION_SIZE, INFO6_RDMA_CONNECTION_SIZE);

    fn decode(b: &[u8], v6: bool) -> Option<Self> {
        let c = if v6 {
            RdmaConnInfo::decode_v6(b)?
        } else {
            RdmaConnInfo::decode_v4(b)?
        };
        Some(Self {
            src_addr: ip(c.src_addr, v6),
            dst_addr: ip(c.dst_addr, v6),
            src_gid: c.src_gid,
            dst_gid: c.dst_gid,
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            rdma_mr_max: c.rdma_mr_max,
            rdma_mr_size: c.rdma_mr_size,
            tos: c.tos,
            sl: c.sl,
            cache_allocs: c.cache_allocs,
        })
    }
}

/// The whole records of the layout of `T` in `b`, a trailing partial one ignored.
fn parse<T: InfoRecord>(b: &[u8], v6: bool) -> Vec<T> {
    b.chunks_exact(T::size(v6))
        .filter_map(|c| T::decode(c, v6))
        .collect()
}

/// Parses `struct rds_info_counter` items.
pub fn parse_counters(b: &[u8]) -> Vec<Counter> {
    parse(b, false)
}

/// Parses `struct rds_info_connection` (`v6` false) or `struct rds6_info_connection` items.
pub fn parse_connections(b: &[u8], v6: bool) -> Vec<ConnectionInfo> {
    parse(b, v6)
}

/// Parses `struct rds_info_message` (`v6` false) or `struct rds6_info_message` items.
pub fn parse_messages(b: &[u8], v6: bool) -> Vec<MessageInfo> {
    parse(b, v6)
}

/// Parses `struct rds_info_socket` (`v6` false) or `struct rds6_info_socket` items.
pub fn parse_sockets(b: &[u8], v6: bool) -> Vec<SocketInfo> {
    parse(b, v6)
}

/// The item size of an info option, for the ones Linux defines.
pub fn item_size(optname: i32) -> Option<usize> {
    Some(match optname {
        RDS_INFO_COUNTERS => INFO_COUNTER_SIZE,
        RDS_INFO_CONNECTIONS => INFO_CONNECTION_SIZE,
        RDS_INFO_SEND_MESSAGES | RDS_INFO_RETRANS_MESSAGES | RDS_INFO_RECV_MESSAGES => {
            INFO_MESSAGE_SIZE
        }
        RDS_INFO_SOCKETS => INFO_SOCKET_SIZE,
        RDS_INFO_TCP_SOCKETS => INFO_TCP_SOCKET_SIZE,
        RDS_INFO_IB_CONNECTIONS => INFO_RDMA_CONNECTION_SIZE,
        RDS6_INFO_CONNECTIONS => INFO6_CONNECTION_SIZE,
        RDS6_INFO_SEND_MESSAGES | RDS6_INFO_RETRANS_MESSAGES | RDS6_INFO_RECV_MESSAGES => {
            INFO6_MESSAGE_SIZE
        }
        RDS6_INFO_SOCKETS => INFO6_SOCKET_SIZE,
        RDS6_INFO_TCP_SOCKETS => INFO6_TCP_SOCKET_SIZE,
        RDS6_INFO_IB_CONNECTIONS => INFO6_RDMA_CONNECTION_SIZE,
        _ => return None,
    })
}

/// Why an info table could not be split into records (see [`decode_table`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableError {
    /// The kernel reported an item size of 0.
    ZeroSize,
    /// The items are shorter than the layout read from them.
    Short {
        /// The item size the kernel reported.
        each: usize,
        /// The size of the layout.
        need: usize,
    },
    /// The bytes are not a whole number of items.
    Partial {
        /// The length of the table.
        len: usize,
        /// The item size the kernel reported.
        each: usize,
    },
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TableError::ZeroSize => write!(f, "the kernel reported an item size of 0"),
            TableError::Short { each, need } => write!(
                f,
                "items of {each} bytes, shorter than the {need} this program reads"
            ),
            TableError::Partial { len, each } => {
                write!(f, "{len} bytes is not a whole number of {each}-byte items")
            }
        }
    }
}

impl std::error::Error for TableError {}

/// Decodes a whole table as an `RDS_INFO_*` getsockopt returned it: `each` is the item size
/// (the return value), `data` the items. The item size is used as the stride, so an
/// implementation that appends fields to a record still decodes; items shorter than the
/// layout (`v6` false: the IPv4 one), or bytes that are not a whole number of items, are an
/// error.
pub fn decode_table<T: InfoRecord>(
    each: usize,
    data: &[u8],
    v6: bool,
) -> Result<Vec<T>, TableError> {
    let need = T::size(v6);
    if each == 0 {
        return Err(TableError::ZeroSize);
    }
    if each < need {
        return Err(TableError::Short { each, need });
    }
    if !data.len().is_multiple_of(each) {
        return Err(TableError::Partial {
            len: data.len(),
            each,
        });
    }
    // Every item holds at least `need` bytes, so each decodes.
    Ok(data
        .chunks_exact(each)
        .filter_map(|b| T::decode(b, v6))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_packed_items() {
        let mut c = vec![0u8; INFO_CONNECTION_SIZE];
        c[..8].copy_from_slice(&4u64.to_ne_bytes());
        c[8..16].copy_from_slice(&3u64.to_ne_bytes());
        c[16..20].copy_from_slice(&[127, 0, 0, 1]);
        c[20..24].copy_from_slice(&[127, 0, 0, 2]);
        c[24..32].copy_from_slice(b"loopback");
        c[40] = CONN_FLAG_CONNECTED;
        let p = parse_connections(&c, false);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].transport, "loopback");
        assert_eq!(p[0].faddr, IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)));
        let mut s = vec![0u8; INFO_SOCKET_SIZE];
        s[12..14].copy_from_slice(&4000u16.to_be_bytes());
        s[20..28].copy_from_slice(&77u64.to_ne_bytes());
        let p = parse_sockets(&s, false);
        assert_eq!(p[0].bound.port(), 4000);
        assert_eq!(p[0].inum, 77);
    }

    #[test]
    fn tables_use_the_kernel_item_size() {
        let mut b = vec![0u8; 44];
        b[..10].copy_from_slice(b"conn_reset");
        b[32..40].copy_from_slice(&7u64.to_ne_bytes());
        let c: Vec<Counter> = decode_table(44, &b, false).unwrap();
        assert_eq!(
            c,
            vec![Counter {
                name: "conn_reset".into(),
                value: 7
            }]
        );
        assert_eq!(
            decode_table::<Counter>(0, &b, false),
            Err(TableError::ZeroSize)
        );
        assert_eq!(
            decode_table::<ConnectionInfo>(41, &b[..41], false),
            Err(TableError::Short { each: 41, need: 42 })
        );
        assert_eq!(
            decode_table::<Counter>(40, &b, false),
            Err(TableError::Partial { len: 44, each: 40 })
        );
        assert_eq!(
            TableError::Partial { len: 44, each: 40 }.to_string(),
            "44 bytes is not a whole number of 40-byte items"
        );
        let r: Vec<RdmaConnectionInfo> = decode_table(68, &[0; 136], false).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].src_addr, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let t: Vec<TcpSocketInfo> = decode_table(64, &[0; 64], true).unwrap();
        assert_eq!(t[0].tos, None);
    }
}
