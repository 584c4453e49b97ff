//! The `RDS_INFO_*` getsockopt interface: option numbers, item sizes and parsers of the packed
//! structures of `linux/rds.h`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// `RDS_INFO_COUNTERS`: `struct rds_info_counter` items.
pub const RDS_INFO_COUNTERS: i32 = 10000;
/// `RDS_INFO_CONNECTIONS`: `struct rds_info_connection` items.
pub const RDS_INFO_CONNECTIONS: i32 = 10001;
/// `RDS_INFO_SEND_MESSAGES`: `struct rds_info_message` items.
pub const RDS_INFO_SEND_MESSAGES: i32 = 10003;
/// `RDS_INFO_RETRANS_MESSAGES`: `struct rds_info_message` items.
pub const RDS_INFO_RETRANS_MESSAGES: i32 = 10004;
/// `RDS_INFO_RECV_MESSAGES`: `struct rds_info_message` items.
pub const RDS_INFO_RECV_MESSAGES: i32 = 10005;
/// `RDS_INFO_SOCKETS`: `struct rds_info_socket` items.
pub const RDS_INFO_SOCKETS: i32 = 10006;
/// `RDS_INFO_TCP_SOCKETS`: `struct rds_info_tcp_socket` items (rds_tcp).
pub const RDS_INFO_TCP_SOCKETS: i32 = 10007;
/// `RDS_INFO_IB_CONNECTIONS`: `struct rds_info_rdma_connection` items (rds_rdma).
pub const RDS_INFO_IB_CONNECTIONS: i32 = 10008;
/// `RDS_INFO_CONNECTION_STATS` (never registered by Linux).
pub const RDS_INFO_CONNECTION_STATS: i32 = 10009;
/// `RDS_INFO_IWARP_CONNECTIONS` (never registered by Linux).
pub const RDS_INFO_IWARP_CONNECTIONS: i32 = 10010;
/// `RDS6_INFO_CONNECTIONS`: `struct rds6_info_connection` items.
pub const RDS6_INFO_CONNECTIONS: i32 = 10011;
/// `RDS6_INFO_SEND_MESSAGES`: `struct rds6_info_message` items.
pub const RDS6_INFO_SEND_MESSAGES: i32 = 10012;
/// `RDS6_INFO_RETRANS_MESSAGES`: `struct rds6_info_message` items.
pub const RDS6_INFO_RETRANS_MESSAGES: i32 = 10013;
/// `RDS6_INFO_RECV_MESSAGES`: `struct rds6_info_message` items.
pub const RDS6_INFO_RECV_MESSAGES: i32 = 10014;
/// `RDS6_INFO_SOCKETS`: `struct rds6_info_socket` items.
pub const RDS6_INFO_SOCKETS: i32 = 10015;
/// `RDS6_INFO_TCP_SOCKETS`: `struct rds6_info_tcp_socket` items (rds_tcp).
pub const RDS6_INFO_TCP_SOCKETS: i32 = 10016;
/// `RDS6_INFO_IB_CONNECTIONS`: `struct rds6_info_rdma_connection` items (rds_rdma).
pub const RDS6_INFO_IB_CONNECTIONS: i32 = 10017;
/// The first info option number.
pub const RDS_INFO_FIRST: i32 = 10000;
/// The last info option number.
pub const RDS_INFO_LAST: i32 = 10017;

/// `sizeof(struct rds_info_counter)`.
pub const INFO_COUNTER_SIZE: usize = 40;
/// `sizeof(struct rds_info_connection)`.
pub const INFO_CONNECTION_SIZE: usize = 42;
/// `sizeof(struct rds6_info_connection)`.
pub const INFO6_CONNECTION_SIZE: usize = 65;
/// `sizeof(struct rds_info_message)`.
pub const INFO_MESSAGE_SIZE: usize = 26;
/// `sizeof(struct rds6_info_message)`.
pub const INFO6_MESSAGE_SIZE: usize = 50;
/// `sizeof(struct rds_info_socket)`.
pub const INFO_SOCKET_SIZE: usize = 28;
/// `sizeof(struct rds6_info_socket)`.
pub const INFO6_SOCKET_SIZE: usize = 52;
/// `sizeof(struct rds_info_tcp_socket)`.
pub const INFO_TCP_SOCKET_SIZE: usize = 41;
/// `sizeof(struct rds6_info_tcp_socket)`.
pub const INFO6_TCP_SOCKET_SIZE: usize = 64;
/// `sizeof(struct rds_info_rdma_connection)`.
pub const INFO_RDMA_CONNECTION_SIZE: usize = 68;
/// `sizeof(struct rds6_info_rdma_connection)`.
pub const INFO6_RDMA_CONNECTION_SIZE: usize = 92;

/// `RDS_INFO_CONNECTION_FLAG_SENDING`.
pub const CONN_FLAG_SENDING: u8 = 0x01;
/// `RDS_INFO_CONNECTION_FLAG_CONNECTING`.
pub const CONN_FLAG_CONNECTING: u8 = 0x02;
/// `RDS_INFO_CONNECTION_FLAG_CONNECTED`.
pub const CONN_FLAG_CONNECTED: u8 = 0x04;

/// The names of C RDS's own statistics counters, in the order of `rds_stat_names` (stats.c).
pub const COUNTER_NAMES: [&str; 36] = [
    "conn_reset",
    "recv_drop_bad_checksum",
    "recv_drop_old_seq",
    "recv_drop_no_sock",
    "recv_drop_dead_sock",
    "recv_deliver_raced",
    "recv_delivered",
    "recv_queued",
    "recv_immediate_retry",
    "recv_delayed_retry",
    "recv_ack_required",
    "recv_rdma_bytes",
    "recv_ping",
    "send_queue_empty",
    "send_queue_full",
    "send_lock_contention",
    "send_lock_queue_raced",
    "send_immediate_retry",
    "send_delayed_retry",
    "send_drop_acked",
    "send_ack_required",
    "send_queued",
    "send_rdma",
    "send_rdma_bytes",
    "send_pong",
    "page_remainder_hit",
    "page_remainder_miss",
    "copy_to_user",
    "copy_from_user",
    "cong_update_queued",
    "cong_update_received",
    "cong_send_error",
    "cong_send_blocked",
    "recv_bytes_added_to_sock",
    "recv_bytes_freed_fromsock",
    "send_stuck_rm",
];

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

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_ne_bytes(b[o..o + 8].try_into().expect("8 bytes"))
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().expect("4 bytes"))
}
fn be16_at(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}
fn ip4_at(b: &[u8], o: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(b[o], b[o + 1], b[o + 2], b[o + 3]))
}
fn ip6_at(b: &[u8], o: usize) -> IpAddr {
    let a: [u8; 16] = b[o..o + 16].try_into().expect("16 bytes");
    IpAddr::V6(Ipv6Addr::from(a))
}
fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Parses `struct rds_info_counter` items.
pub fn parse_counters(b: &[u8]) -> Vec<Counter> {
    b.chunks_exact(INFO_COUNTER_SIZE)
        .map(|c| Counter {
            name: cstr(&c[..32]),
            value: u64_at(c, 32),
        })
        .collect()
}

/// Parses `struct rds_info_connection` (`v6` false) or `struct rds6_info_connection` items.
pub fn parse_connections(b: &[u8], v6: bool) -> Vec<ConnectionInfo> {
    if v6 {
        b.chunks_exact(INFO6_CONNECTION_SIZE)
            .map(|c| ConnectionInfo {
                next_tx_seq: u64_at(c, 0),
                next_rx_seq: u64_at(c, 8),
                laddr: ip6_at(c, 16),
                faddr: ip6_at(c, 32),
                transport: cstr(&c[48..64]),
                flags: c[64],
                tos: None,
            })
            .collect()
    } else {
        b.chunks_exact(INFO_CONNECTION_SIZE)
            .map(|c| ConnectionInfo {
                next_tx_seq: u64_at(c, 0),
                next_rx_seq: u64_at(c, 8),
                laddr: ip4_at(c, 16),
                faddr: ip4_at(c, 20),
                transport: cstr(&c[24..40]),
                flags: c[40],
                tos: Some(c[41]),
            })
            .collect()
    }
}

/// Parses `struct rds_info_message` (`v6` false) or `struct rds6_info_message` items.
pub fn parse_messages(b: &[u8], v6: bool) -> Vec<MessageInfo> {
    if v6 {
        b.chunks_exact(INFO6_MESSAGE_SIZE)
            .map(|c| MessageInfo {
                seq: u64_at(c, 0),
                len: u32_at(c, 8),
                laddr: ip6_at(c, 12),
                faddr: ip6_at(c, 28),
                lport: be16_at(c, 44),
                fport: be16_at(c, 46),
                flags: c[48],
                tos: c[49],
            })
            .collect()
    } else {
        b.chunks_exact(INFO_MESSAGE_SIZE)
            .map(|c| MessageInfo {
                seq: u64_at(c, 0),
                len: u32_at(c, 8),
                laddr: ip4_at(c, 12),
                faddr: ip4_at(c, 16),
                lport: be16_at(c, 20),
                fport: be16_at(c, 22),
                flags: c[24],
                tos: c[25],
            })
            .collect()
    }
}

/// Parses `struct rds_info_socket` (`v6` false) or `struct rds6_info_socket` items.
pub fn parse_sockets(b: &[u8], v6: bool) -> Vec<SocketInfo> {
    if v6 {
        b.chunks_exact(INFO6_SOCKET_SIZE)
            .map(|c| SocketInfo {
                sndbuf: u32_at(c, 0),
                bound: SocketAddr::new(ip6_at(c, 4), be16_at(c, 36)),
                connected: SocketAddr::new(ip6_at(c, 20), be16_at(c, 38)),
                rcvbuf: u32_at(c, 40),
                inum: u64_at(c, 44),
            })
            .collect()
    } else {
        b.chunks_exact(INFO_SOCKET_SIZE)
            .map(|c| SocketInfo {
                sndbuf: u32_at(c, 0),
                bound: SocketAddr::new(ip4_at(c, 4), be16_at(c, 12)),
                connected: SocketAddr::new(ip4_at(c, 8), be16_at(c, 14)),
                rcvbuf: u32_at(c, 16),
                inum: u64_at(c, 20),
            })
            .collect()
    }
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
}
