//! Decoding of the `RDS_INFO_*` tables (`include/uapi/linux/rds.h`). Every structure is packed
//! except the RDMA connection ones; integers are in host order, addresses and ports in network
//! order. The item size the kernel returns is used as the stride, so an implementation that
//! appends fields still decodes; an item shorter than the fields read here is an error.

use std::net::{Ipv4Addr, Ipv6Addr};

/// `RDS_INFO_COUNTERS`.
pub const RDS_INFO_COUNTERS: i32 = 10000;
/// `RDS_INFO_CONNECTIONS`.
pub const RDS_INFO_CONNECTIONS: i32 = 10001;
/// `RDS_INFO_SEND_MESSAGES`.
pub const RDS_INFO_SEND_MESSAGES: i32 = 10003;
/// `RDS_INFO_RETRANS_MESSAGES`.
pub const RDS_INFO_RETRANS_MESSAGES: i32 = 10004;
/// `RDS_INFO_RECV_MESSAGES`.
pub const RDS_INFO_RECV_MESSAGES: i32 = 10005;
/// `RDS_INFO_SOCKETS`.
pub const RDS_INFO_SOCKETS: i32 = 10006;
/// `RDS_INFO_TCP_SOCKETS`.
pub const RDS_INFO_TCP_SOCKETS: i32 = 10007;
/// `RDS_INFO_IB_CONNECTIONS`.
pub const RDS_INFO_IB_CONNECTIONS: i32 = 10008;
/// `RDS6_INFO_CONNECTIONS`.
pub const RDS6_INFO_CONNECTIONS: i32 = 10011;
/// `RDS6_INFO_SEND_MESSAGES`.
pub const RDS6_INFO_SEND_MESSAGES: i32 = 10012;
/// `RDS6_INFO_RETRANS_MESSAGES`.
pub const RDS6_INFO_RETRANS_MESSAGES: i32 = 10013;
/// `RDS6_INFO_RECV_MESSAGES`.
pub const RDS6_INFO_RECV_MESSAGES: i32 = 10014;
/// `RDS6_INFO_SOCKETS`.
pub const RDS6_INFO_SOCKETS: i32 = 10015;
/// `RDS6_INFO_TCP_SOCKETS`.
pub const RDS6_INFO_TCP_SOCKETS: i32 = 10016;
/// `RDS6_INFO_IB_CONNECTIONS`.
pub const RDS6_INFO_IB_CONNECTIONS: i32 = 10017;

/// `RDS_INFO_CONNECTION_FLAG_SENDING`.
pub const CONN_FLAG_SENDING: u8 = 0x01;
/// `RDS_INFO_CONNECTION_FLAG_CONNECTING`.
pub const CONN_FLAG_CONNECTING: u8 = 0x02;
/// `RDS_INFO_CONNECTION_FLAG_CONNECTED`.
pub const CONN_FLAG_CONNECTED: u8 = 0x04;

/// An IPv4 or IPv6 address as an info table carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addr {
    /// A `__be32`.
    V4(Ipv4Addr),
    /// A `struct in6_addr`.
    V6(Ipv6Addr),
}

impl std::fmt::Display for Addr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Padding applies to the whole address, as for a string.
        let s = match self {
            Addr::V4(a) => a.to_string(),
            Addr::V6(a) => a.to_string(),
        };
        f.pad(&s)
    }
}

/// Reads the fields of one packed item in order.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(b: &'a [u8]) -> Self {
        Self { b, at: 0 }
    }
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&self.b[self.at..self.at + N]);
        self.at += N;
        a
    }
    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    fn u32(&mut self) -> u32 {
        u32::from_ne_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_ne_bytes(self.take())
    }
    fn be16(&mut self) -> u16 {
        u16::from_be_bytes(self.take())
    }
    fn addr(&mut self, v6: bool) -> Addr {
        if v6 {
            Addr::V6(Ipv6Addr::from(self.take::<16>()))
        } else {
            Addr::V4(Ipv4Addr::from(self.take::<4>()))
        }
    }
    fn skip(&mut self, n: usize) {
        self.at += n;
    }
    fn cstr(&mut self, n: usize) -> String {
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        let end = s.iter().position(|&c| c == 0).unwrap_or(n);
        String::from_utf8_lossy(&s[..end]).into_owned()
    }
}

/// Splits a table into items of `each` bytes, each at least `need` bytes long.
fn items<'a>(
    each: usize,
    data: &'a [u8],
    need: usize,
    what: &str,
) -> Result<Vec<&'a [u8]>, String> {
    if each == 0 {
        return Err(format!("{what}: the kernel reported an item size of 0"));
    }
    if each < need {
        return Err(format!(
            "{what}: items of {each} bytes, shorter than the {need} this program reads"
        ));
    }
    if !data.len().is_multiple_of(each) {
        return Err(format!(
            "{what}: {} bytes is not a whole number of {each}-byte items",
            data.len()
        ));
    }
    Ok(data.chunks_exact(each).collect())
}

/// `struct rds_info_counter`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counter {
    /// The counter's name.
    pub name: String,
    /// Its value.
    pub value: u64,
}

/// Decodes `RDS_INFO_COUNTERS`.
pub fn counters(each: usize, data: &[u8]) -> Result<Vec<Counter>, String> {
    Ok(items(each, data, 40, "counters")?
        .into_iter()
        .map(|b| {
            let mut c = Cursor::new(b);
            Counter {
                name: c.cstr(32),
                value: c.u64(),
            }
        })
        .collect())
}

/// `struct rds_info_connection` / `rds6_info_connection`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    /// `next_tx_seq`.
    pub next_tx_seq: u64,
    /// `next_rx_seq`.
    pub next_rx_seq: u64,
    /// Local address.
    pub laddr: Addr,
    /// Peer address.
    pub faddr: Addr,
    /// Transport name.
    pub transport: String,
    /// `RDS_INFO_CONNECTION_FLAG_*`.
    pub flags: u8,
    /// Type of service (IPv4 table only).
    pub tos: Option<u8>,
}

/// Decodes `RDS_INFO_CONNECTIONS` (`v6` false) or `RDS6_INFO_CONNECTIONS`.
pub fn connections(each: usize, data: &[u8], v6: bool) -> Result<Vec<Connection>, String> {
    let need = if v6 { 65 } else { 42 };
    Ok(items(each, data, need, "connections")?
        .into_iter()
        .map(|b| {
            let mut c = Cursor::new(b);
            Connection {
                next_tx_seq: c.u64(),
                next_rx_seq: c.u64(),
                laddr: c.addr(v6),
                faddr: c.addr(v6),
                transport: c.cstr(16),
                flags: c.u8(),
                tos: (!v6).then(|| c.u8()),
            }
        })
        .collect())
}

/// The flags of a connection as the classic rds-info shows them: `s` sending, `c` connecting,
/// `C` connected, `-` for each flag not set.
pub fn conn_flags(f: u8) -> String {
    [
        (CONN_FLAG_SENDING, 's'),
        (CONN_FLAG_CONNECTING, 'c'),
        (CONN_FLAG_CONNECTED, 'C'),
    ]
    .iter()
    .map(|&(bit, ch)| if f & bit != 0 { ch } else { '-' })
    .collect()
}

/// `struct rds_info_message` / `rds6_info_message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Sequence number.
    pub seq: u64,
    /// Payload length.
    pub len: u32,
    /// Local address.
    pub laddr: Addr,
    /// Peer address.
    pub faddr: Addr,
    /// Local port.
    pub lport: u16,
    /// Peer port.
    pub fport: u16,
    /// `RDS_INFO_MESSAGE_FLAG_*`.
    pub flags: u8,
    /// Type of service.
    pub tos: u8,
}

/// Decodes `RDS_INFO_{SEND,RETRANS,RECV}_MESSAGES` or the `RDS6_` variants.
pub fn messages(each: usize, data: &[u8], v6: bool) -> Result<Vec<Message>, String> {
    let need = if v6 { 50 } else { 26 };
    Ok(items(each, data, need, "messages")?
        .into_iter()
        .map(|b| {
            let mut c = Cursor::new(b);
            Message {
                seq: c.u64(),
                len: c.u32(),
                laddr: c.addr(v6),
                faddr: c.addr(v6),
                lport: c.be16(),
                fport: c.be16(),
                flags: c.u8(),
                tos: c.u8(),
            }
        })
        .collect())
}

/// `struct rds_info_socket` / `rds6_info_socket`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Socket {
    /// Send buffer (as RDS counts it).
    pub sndbuf: u32,
    /// Bound address.
    pub bound_addr: Addr,
    /// Connected (default destination) address.
    pub connected_addr: Addr,
    /// Bound port.
    pub bound_port: u16,
    /// Connected port.
    pub connected_port: u16,
    /// Receive buffer (as RDS counts it).
    pub rcvbuf: u32,
    /// Inode number.
    pub inum: u64,
}

/// Decodes `RDS_INFO_SOCKETS` or `RDS6_INFO_SOCKETS`.
pub fn sockets(each: usize, data: &[u8], v6: bool) -> Result<Vec<Socket>, String> {
    let need = if v6 { 52 } else { 28 };
    Ok(items(each, data, need, "sockets")?
        .into_iter()
        .map(|b| {
            let mut c = Cursor::new(b);
            Socket {
                sndbuf: c.u32(),
                bound_addr: c.addr(v6),
                connected_addr: c.addr(v6),
                bound_port: c.be16(),
                connected_port: c.be16(),
                rcvbuf: c.u32(),
                inum: c.u64(),
            }
        })
        .collect())
}

/// `struct rds_info_tcp_socket` / `rds6_info_tcp_socket`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpSocket {
    /// Local address.
    pub local_addr: Addr,
    /// Local port.
    pub local_port: u16,
    /// Peer address.
    pub peer_addr: Addr,
    /// Peer port.
    pub peer_port: u16,
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
    /// Type of service (IPv4 table only).
    pub tos: Option<u8>,
}

/// Decodes `RDS_INFO_TCP_SOCKETS` or `RDS6_INFO_TCP_SOCKETS`.
pub fn tcp_sockets(each: usize, data: &[u8], v6: bool) -> Result<Vec<TcpSocket>, String> {
    let need = if v6 { 64 } else { 41 };
    Ok(items(each, data, need, "tcp sockets")?
        .into_iter()
        .map(|b| {
            let mut c = Cursor::new(b);
            TcpSocket {
                local_addr: c.addr(v6),
                local_port: c.be16(),
                peer_addr: c.addr(v6),
                peer_port: c.be16(),
                hdr_rem: c.u64(),
                data_rem: c.u64(),
                last_sent_nxt: c.u32(),
                last_expected_una: c.u32(),
                last_seen_una: c.u32(),
                tos: (!v6).then(|| c.u8()),
            }
        })
        .collect())
}

/// `struct rds_info_rdma_connection` / `rds6_info_rdma_connection` (not packed: `tos` and
/// `sl` are followed by two bytes of padding before `cache_allocs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdmaConnection {
    /// Source address.
    pub src_addr: Addr,
    /// Destination address.
    pub dst_addr: Addr,
    /// Source GID.
    pub src_gid: [u8; 16],
    /// Destination GID.
    pub dst_gid: [u8; 16],
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

/// Decodes `RDS_INFO_IB_CONNECTIONS` or `RDS6_INFO_IB_CONNECTIONS`.
pub fn rdma_connections(each: usize, data: &[u8], v6: bool) -> Result<Vec<RdmaConnection>, String> {
    let need = if v6 { 92 } else { 68 };
    Ok(items(each, data, need, "IB connections")?
        .into_iter()
        .map(|b| {
            let mut c = Cursor::new(b);
            let src_addr = c.addr(v6);
            let dst_addr = c.addr(v6);
            let src_gid = c.take();
            let dst_gid = c.take();
            let max_send_wr = c.u32();
            let max_recv_wr = c.u32();
            let max_send_sge = c.u32();
            let rdma_mr_max = c.u32();
            let rdma_mr_size = c.u32();
            let tos = c.u8();
            let sl = c.u8();
            c.skip(2);
            RdmaConnection {
                src_addr,
                dst_addr,
                src_gid,
                dst_gid,
                max_send_wr,
                max_recv_wr,
                max_send_sge,
                rdma_mr_max,
                rdma_mr_size,
                tos,
                sl,
                cache_allocs: c.u32(),
            }
        })
        .collect())
}

/// A GID as colon-separated groups of four hex digits (IPv6 notation, uncompressed).
pub fn gid(g: &[u8; 16]) -> String {
    g.chunks(2)
        .map(|p| format!("{:02x}{:02x}", p[0], p[1]))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_and_connection() {
        let mut b = vec![0u8; 40];
        b[..10].copy_from_slice(b"conn_reset");
        b[32..].copy_from_slice(&7u64.to_ne_bytes());
        assert_eq!(
            counters(40, &b).unwrap(),
            vec![Counter {
                name: "conn_reset".into(),
                value: 7
            }]
        );
        let mut c = Vec::new();
        c.extend_from_slice(&3u64.to_ne_bytes());
        c.extend_from_slice(&4u64.to_ne_bytes());
        c.extend_from_slice(&[127, 0, 0, 1, 127, 0, 0, 2]);
        let mut t = [0u8; 16];
        t[..8].copy_from_slice(b"loopback");
        c.extend_from_slice(&t);
        c.extend_from_slice(&[CONN_FLAG_CONNECTED, 5]);
        let conns = connections(42, &c, false).unwrap();
        assert_eq!(conns[0].faddr, Addr::V4(Ipv4Addr::new(127, 0, 0, 2)));
        assert_eq!(conns[0].transport, "loopback");
        assert_eq!(conns[0].tos, Some(5));
        assert_eq!(conn_flags(conns[0].flags), "--C");
        assert!(connections(41, &c[..41], false).is_err());
    }

    #[test]
    fn socket_ports_are_network_order() {
        let mut b = Vec::new();
        b.extend_from_slice(&1000u32.to_ne_bytes());
        b.extend_from_slice(&[127, 0, 0, 1, 0, 0, 0, 0]);
        b.extend_from_slice(&4001u16.to_be_bytes());
        b.extend_from_slice(&0u16.to_be_bytes());
        b.extend_from_slice(&2000u32.to_ne_bytes());
        b.extend_from_slice(&99u64.to_ne_bytes());
        let s = sockets(28, &b, false).unwrap();
        assert_eq!(s[0].bound_port, 4001);
        assert_eq!(s[0].rcvbuf, 2000);
        assert_eq!(s[0].inum, 99);
        assert_eq!(format!("{:>10}", s[0].bound_addr), " 127.0.0.1");
    }

    #[test]
    fn rdma_padding() {
        let mut b = vec![0u8; 68];
        b[60] = 3; // tos
        b[61] = 1; // sl
        b[64..68].copy_from_slice(&42u32.to_ne_bytes());
        let r = rdma_connections(68, &b, false).unwrap();
        assert_eq!((r[0].tos, r[0].sl, r[0].cache_allocs), (3, 1, 42));
    }
}
