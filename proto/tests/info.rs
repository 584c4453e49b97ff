//! `RDS_INFO_*` records (include/uapi/linux/rds.h), `rds_info_getsockopt`
//! (net/rds/info.c) and the counter names (net/rds/stats.c).
//!
//! The offsets below were computed by hand from the packed structs in
//! rds.h (and checked against `offsetof` with the uapi header):
//!
//! - `rds_info_counter` (40): name 0, value 32.
//! - `rds_info_connection` (42): next_tx_seq 0, next_rx_seq 8, laddr 16,
//!   faddr 20, transport 24, flags 40, tos 41.
//! - `rds6_info_connection` (65): next_tx_seq 0, next_rx_seq 8, laddr 16,
//!   faddr 32, transport 48, flags 64 (no tos).
//! - `rds_info_message` (26): seq 0, len 8, laddr 12, faddr 16, lport 20,
//!   fport 22, flags 24, tos 25.
//! - `rds6_info_message` (50): seq 0, len 8, laddr 12, faddr 28, lport 44,
//!   fport 46, flags 48, tos 49.
//! - `rds_info_socket` (28): sndbuf 0, bound_addr 4, connected_addr 8,
//!   bound_port 12, connected_port 14, rcvbuf 16, inum 20.
//! - `rds6_info_socket` (52): sndbuf 0, bound_addr 4, connected_addr 20,
//!   bound_port 36, connected_port 38, rcvbuf 40, inum 44.
//! - `rds_info_tcp_socket` (41): local_addr 0, local_port 4, peer_addr 6,
//!   peer_port 10, hdr_rem 12, data_rem 20, last_sent_nxt 28,
//!   last_expected_una 32, last_seen_una 36, tos 40.
//! - `rds6_info_tcp_socket` (64): local_addr 0, local_port 16, peer_addr 18,
//!   peer_port 34, hdr_rem 36, data_rem 44, last_sent_nxt 52,
//!   last_expected_una 56, last_seen_una 60 (no tos).
//! - `rds_info_rdma_connection` (68, not packed): src_addr 0, dst_addr 4,
//!   src_gid 8, dst_gid 24, max_send_wr 40, max_recv_wr 44, max_send_sge 48,
//!   rdma_mr_max 52, rdma_mr_size 56, tos 60, sl 61, cache_allocs 64.
//! - `rds6_info_rdma_connection` (92): src_addr 0, dst_addr 16, src_gid 32,
//!   dst_gid 48, max_send_wr 64, ..., tos 84, sl 85, cache_allocs 88.

use proptest::prelude::*;
use rds_proto::{
    check_info_request, decode_counter, encode_counter, info_outcome, is_info_option, Addr,
    ConnInfo, InfoError, InfoOutcome, MsgInfo, RdmaConnInfo, SockInfo, Stat, TcpSockInfo,
    INFO6_CONNECTION_LEN, INFO6_MESSAGE_LEN, INFO6_RDMA_CONNECTION_LEN, INFO6_SOCKET_LEN,
    INFO6_TCP_SOCKET_LEN, INFO_CONNECTION_LEN, INFO_COUNTER_LEN, INFO_COUNTER_NAME_LEN,
    INFO_MAX_LEN, INFO_MESSAGE_LEN, INFO_RDMA_CONNECTION_LEN, INFO_SOCKET_LEN, INFO_TCP_SOCKET_LEN,
    RDS6_INFO_CONNECTIONS, RDS6_INFO_IB_CONNECTIONS, RDS6_INFO_RECV_MESSAGES,
    RDS6_INFO_RETRANS_MESSAGES, RDS6_INFO_SEND_MESSAGES, RDS6_INFO_SOCKETS, RDS6_INFO_TCP_SOCKETS,
    RDS_IB_GID_LEN, RDS_INFO_CONNECTIONS, RDS_INFO_CONNECTION_FLAG_CONNECTED,
    RDS_INFO_CONNECTION_FLAG_CONNECTING, RDS_INFO_CONNECTION_FLAG_SENDING,
    RDS_INFO_CONNECTION_STATS, RDS_INFO_COUNTERS, RDS_INFO_FIRST, RDS_INFO_IB_CONNECTIONS,
    RDS_INFO_IWARP_CONNECTIONS, RDS_INFO_LAST, RDS_INFO_RECV_MESSAGES, RDS_INFO_RETRANS_MESSAGES,
    RDS_INFO_SEND_MESSAGES, RDS_INFO_SOCKETS, RDS_INFO_TCP_SOCKETS, STAT_COUNT, STAT_NAMES,
    TRANSNAMSIZ,
};

// --- helpers ---------------------------------------------------------------

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().unwrap())
}
fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().unwrap())
}
fn be16_at(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes(b[off..off + 2].try_into().unwrap())
}

fn v4(a: [u8; 4]) -> Addr {
    Addr::from_v4(a)
}

fn v6(s: &str) -> Addr {
    Addr(s.parse::<std::net::Ipv6Addr>().unwrap().octets())
}

// --- constants -----------------------------------------------------------------

#[test]
fn option_numbers() {
    assert_eq!(RDS_INFO_FIRST, 10000);
    assert_eq!(RDS_INFO_COUNTERS, 10000);
    assert_eq!(RDS_INFO_CONNECTIONS, 10001);
    assert_eq!(RDS_INFO_SEND_MESSAGES, 10003);
    assert_eq!(RDS_INFO_RETRANS_MESSAGES, 10004);
    assert_eq!(RDS_INFO_RECV_MESSAGES, 10005);
    assert_eq!(RDS_INFO_SOCKETS, 10006);
    assert_eq!(RDS_INFO_TCP_SOCKETS, 10007);
    assert_eq!(RDS_INFO_IB_CONNECTIONS, 10008);
    assert_eq!(RDS_INFO_CONNECTION_STATS, 10009);
    assert_eq!(RDS_INFO_IWARP_CONNECTIONS, 10010);
    assert_eq!(RDS6_INFO_CONNECTIONS, 10011);
    assert_eq!(RDS6_INFO_SEND_MESSAGES, 10012);
    assert_eq!(RDS6_INFO_RETRANS_MESSAGES, 10013);
    assert_eq!(RDS6_INFO_RECV_MESSAGES, 10014);
    assert_eq!(RDS6_INFO_SOCKETS, 10015);
    assert_eq!(RDS6_INFO_TCP_SOCKETS, 10016);
    assert_eq!(RDS6_INFO_IB_CONNECTIONS, 10017);
    assert_eq!(RDS_INFO_LAST, 10017);
    assert_eq!(RDS_INFO_CONNECTION_FLAG_SENDING, 1);
    assert_eq!(RDS_INFO_CONNECTION_FLAG_CONNECTING, 2);
    assert_eq!(RDS_INFO_CONNECTION_FLAG_CONNECTED, 4);
    assert_eq!(TRANSNAMSIZ, 16);
}

#[test]
fn record_sizes() {
    assert_eq!(INFO_COUNTER_LEN, 32 + 8);
    assert_eq!(INFO_CONNECTION_LEN, 8 + 8 + 4 + 4 + 16 + 1 + 1);
    assert_eq!(INFO6_CONNECTION_LEN, 8 + 8 + 16 + 16 + 16 + 1);
    assert_eq!(INFO_MESSAGE_LEN, 8 + 4 + 4 + 4 + 2 + 2 + 1 + 1);
    assert_eq!(INFO6_MESSAGE_LEN, 8 + 4 + 16 + 16 + 2 + 2 + 1 + 1);
    assert_eq!(INFO_SOCKET_LEN, 4 + 4 + 4 + 2 + 2 + 4 + 8);
    assert_eq!(INFO6_SOCKET_LEN, 4 + 16 + 16 + 2 + 2 + 4 + 8);
    assert_eq!(INFO_TCP_SOCKET_LEN, 4 + 2 + 4 + 2 + 8 + 8 + 4 + 4 + 4 + 1);
    assert_eq!(INFO6_TCP_SOCKET_LEN, 16 + 2 + 16 + 2 + 8 + 8 + 4 + 4 + 4);
    // Not packed: 2 bytes of padding align cache_allocs.
    assert_eq!(RDS_IB_GID_LEN, 16);
    assert_eq!(
        INFO_RDMA_CONNECTION_LEN,
        4 + 4 + 16 + 16 + 5 * 4 + 1 + 1 + 2 + 4
    );
    assert_eq!(
        INFO6_RDMA_CONNECTION_LEN,
        16 + 16 + 16 + 16 + 5 * 4 + 1 + 1 + 2 + 4
    );
    assert_eq!(
        [
            INFO_COUNTER_LEN,
            INFO_CONNECTION_LEN,
            INFO6_CONNECTION_LEN,
            INFO_MESSAGE_LEN,
            INFO6_MESSAGE_LEN,
            INFO_SOCKET_LEN,
            INFO6_SOCKET_LEN
        ],
        [40, 42, 65, 26, 50, 28, 52]
    );
}

#[test]
fn option_range() {
    // rds_getsockopt: case RDS_INFO_FIRST ... RDS_INFO_LAST.
    assert!(!is_info_option(9999));
    assert!(is_info_option(10000));
    assert!(is_info_option(10002)); // deprecated RDS_INFO_FLOWS: ENOPROTOOPT later
    assert!(is_info_option(10017));
    assert!(!is_info_option(10018));
    assert!(!is_info_option(i32::MIN));
}

// --- counters ------------------------------------------------------------------

#[test]
fn counter_record() {
    // rds_stats_info_copy: strncpy(name, src, 31); name[31] = 0; value.
    let r = encode_counter("conn_reset", 0x0102_0304_0506_0708);
    assert_eq!(&r[..10], b"conn_reset");
    assert!(r[10..32].iter().all(|b| *b == 0));
    assert_eq!(u64_at(&r, 32), 0x0102_0304_0506_0708);
    // Truncated to 31 bytes, always NUL-terminated.
    let long = "abcdefghijklmnopqrstuvwxyz0123456789";
    let r = encode_counter(long, 1);
    assert_eq!(&r[..31], &long.as_bytes()[..31]);
    assert_eq!(r[31], 0);
    assert_eq!(u64_at(&r, 32), 1);
    // strncpy stops at a NUL.
    let r = encode_counter("ab\0cd", 0);
    assert_eq!(&r[..INFO_COUNTER_NAME_LEN], &{
        let mut n = [0u8; 32];
        n[..2].copy_from_slice(b"ab");
        n
    });
}

#[test]
fn stat_names_in_c_order() {
    // net/rds/stats.c rds_stat_names, verbatim.
    let c = [
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
    assert_eq!(STAT_COUNT, 36 + 39 + 5 + 43);
    assert_eq!(rds_proto::C_STAT_COUNT, 36);
    assert_eq!(STAT_NAMES[..rds_proto::C_STAT_COUNT], c);
    let ib_end = rds_proto::C_STAT_COUNT + rds_proto::C_IB_STAT_COUNT;
    assert!(STAT_NAMES[rds_proto::C_STAT_COUNT..ib_end]
        .iter()
        .all(|n| n.starts_with("ib_")));
    assert_eq!(STAT_NAMES[rds_proto::C_STAT_COUNT], "ib_connect_raced");
    assert_eq!(STAT_NAMES[ib_end - 1], "ib_atomic_fadd");
    let tcp_end = ib_end + rds_proto::C_TCP_STAT_COUNT;
    assert!(STAT_NAMES[ib_end..tcp_end]
        .iter()
        .all(|n| n.starts_with("tcp_")));
    assert_eq!(STAT_NAMES[ib_end], "tcp_data_ready_calls");
    assert!(STAT_NAMES[tcp_end..].iter().all(|n| n.starts_with("rs_")));
    for (i, s) in Stat::ALL.iter().enumerate() {
        assert_eq!(s.index(), i);
        assert_eq!(Some(&s.name()), c.get(i).or(STAT_NAMES.get(i)));
        // C BUG_ONs a name that does not fit with its NUL.
        assert!(s.name().len() < INFO_COUNTER_NAME_LEN);
    }
    assert_eq!(Stat::ConnReset.index(), 0);
    assert_eq!(Stat::RecvDropOldSeq.name(), "recv_drop_old_seq");
    assert_eq!(Stat::SendStuckRm.index(), 35);
}

// --- connections ---------------------------------------------------------------

#[test]
fn connection_v4_offsets() {
    let c = ConnInfo {
        next_tx_seq: 0x1111_2222_3333_4444,
        next_rx_seq: 0x5555_6666_7777_8888,
        laddr: v4([127, 0, 0, 1]),
        faddr: v4([10, 1, 2, 3]),
        transport: "loopback",
        flags: RDS_INFO_CONNECTION_FLAG_CONNECTED | RDS_INFO_CONNECTION_FLAG_SENDING,
        tos: 7,
    };
    let r = c.encode_v4();
    assert_eq!(r.len(), 42);
    assert_eq!(u64_at(&r, 0), c.next_tx_seq);
    assert_eq!(u64_at(&r, 8), c.next_rx_seq);
    assert_eq!(&r[16..20], &[127, 0, 0, 1]);
    assert_eq!(&r[20..24], &[10, 1, 2, 3]);
    assert_eq!(&r[24..32], b"loopback");
    assert_eq!(&r[32..40], &[0; 8]);
    assert_eq!(r[40], 5);
    assert_eq!(r[41], 7);
}

#[test]
fn connection_v4_takes_the_last_four_bytes() {
    // C copies c_laddr.s6_addr32[3] whatever the address.
    let c = ConnInfo {
        next_tx_seq: 1,
        next_rx_seq: 0,
        laddr: v6("fe80::1:2:304"),
        faddr: v6("::1"),
        transport: "tcp",
        flags: 0,
        tos: 0,
    };
    let r = c.encode_v4();
    assert_eq!(&r[16..20], &[0, 2, 3, 4]);
    assert_eq!(&r[20..24], &[0, 0, 0, 1]);
}

#[test]
fn connection_transport_is_strncpy() {
    let mk = |t| ConnInfo {
        next_tx_seq: 0,
        next_rx_seq: 0,
        laddr: Addr::ANY,
        faddr: Addr::ANY,
        transport: t,
        flags: 0xff,
        tos: 0xee,
    };
    // Exactly 16: no NUL, and flags follow directly.
    let r = mk("0123456789abcdef").encode_v4();
    assert_eq!(&r[24..40], b"0123456789abcdef");
    assert_eq!(r[40], 0xff);
    // Longer: truncated.
    let r = mk("0123456789abcdefXYZ").encode_v6();
    assert_eq!(&r[48..64], b"0123456789abcdef");
    assert_eq!(r[64], 0xff);
    // "infiniband" NUL-padded.
    let r = mk("infiniband").encode_v6();
    assert_eq!(&r[48..58], b"infiniband");
    assert_eq!(&r[58..64], &[0; 6]);
}

#[test]
fn connection_v6_offsets() {
    let c = ConnInfo {
        next_tx_seq: 9,
        next_rx_seq: u64::MAX,
        laddr: v6("2001:db8::1"),
        faddr: v4([192, 168, 0, 1]),
        transport: "tcp",
        flags: RDS_INFO_CONNECTION_FLAG_CONNECTING,
        tos: 3,
    };
    let r = c.encode_v6();
    assert_eq!(r.len(), 65);
    assert_eq!(u64_at(&r, 0), 9);
    assert_eq!(u64_at(&r, 8), u64::MAX);
    assert_eq!(&r[16..32], &c.laddr.0);
    assert_eq!(&r[32..48], &c.faddr.0);
    assert_eq!(&r[48..51], b"tcp");
    assert_eq!(r[64], 2);
    // struct rds6_info_connection has no tos: 3 appears nowhere after the
    // addresses.
    assert!(!r[51..64].contains(&3));
}

// --- messages ------------------------------------------------------------------

#[test]
fn message_offsets() {
    let m = MsgInfo {
        seq: 0xdead_beef_0000_0001,
        len: 0x0001_0203,
        laddr: v4([1, 2, 3, 4]),
        faddr: v4([5, 6, 7, 8]),
        lport: 0x1234,
        fport: 0xabcd,
        flags: 0,
        tos: 9,
    };
    let r = m.encode_v4();
    assert_eq!(r.len(), 26);
    assert_eq!(u64_at(&r, 0), m.seq);
    assert_eq!(u32_at(&r, 8), m.len);
    assert_eq!(&r[12..16], &[1, 2, 3, 4]);
    assert_eq!(&r[16..20], &[5, 6, 7, 8]);
    assert_eq!(&r[20..22], &[0x12, 0x34]);
    assert_eq!(&r[22..24], &[0xab, 0xcd]);
    assert_eq!(r[24], 0);
    assert_eq!(r[25], 9);

    let r = m.encode_v6();
    assert_eq!(r.len(), 50);
    assert_eq!(u64_at(&r, 0), m.seq);
    assert_eq!(u32_at(&r, 8), m.len);
    assert_eq!(&r[12..28], &m.laddr.0);
    assert_eq!(&r[28..44], &m.faddr.0);
    assert_eq!(&r[44..46], &[0x12, 0x34]);
    assert_eq!(&r[46..48], &[0xab, 0xcd]);
    assert_eq!(r[48], 0);
    assert_eq!(r[49], 9);
}

// --- sockets -------------------------------------------------------------------

#[test]
fn socket_offsets() {
    let s = SockInfo {
        sndbuf: 0x0010_0000,
        rcvbuf: 0x0020_0000,
        bound_addr: v4([127, 0, 0, 1]),
        connected_addr: v4([127, 0, 0, 2]),
        bound_port: 4000,
        connected_port: 4001,
        inum: 0x1234_5678_9abc,
    };
    let r = s.encode_v4();
    assert_eq!(r.len(), 28);
    assert_eq!(u32_at(&r, 0), s.sndbuf);
    assert_eq!(&r[4..8], &[127, 0, 0, 1]);
    assert_eq!(&r[8..12], &[127, 0, 0, 2]);
    assert_eq!(be16_at(&r, 12), 4000);
    assert_eq!(be16_at(&r, 14), 4001);
    assert_eq!(u32_at(&r, 16), s.rcvbuf);
    assert_eq!(u64_at(&r, 20), s.inum);

    let r = s.encode_v6();
    assert_eq!(r.len(), 52);
    assert_eq!(u32_at(&r, 0), s.sndbuf);
    assert_eq!(&r[4..20], &s.bound_addr.0);
    assert_eq!(&r[20..36], &s.connected_addr.0);
    assert_eq!(be16_at(&r, 36), 4000);
    assert_eq!(be16_at(&r, 38), 4001);
    assert_eq!(u32_at(&r, 40), s.rcvbuf);
    assert_eq!(u64_at(&r, 44), s.inum);
}

// --- decoding ------------------------------------------------------------------

#[test]
fn counter_decode() {
    let mut b = encode_counter("conn_reset", 7).to_vec();
    assert_eq!(decode_counter(&b), Some(("conn_reset", 7)));
    // Bytes past the record are not looked at; a short record is refused.
    b.push(0xff);
    assert_eq!(decode_counter(&b), Some(("conn_reset", 7)));
    assert_eq!(decode_counter(&b[..INFO_COUNTER_LEN - 1]), None);
    assert_eq!(decode_counter(&[]), None);
    // A name filling all 32 bytes has no NUL: all of it is the name.
    let mut full = [b'x'; INFO_COUNTER_LEN];
    full[32..].copy_from_slice(&1u64.to_ne_bytes());
    let name = "x".repeat(32);
    assert_eq!(decode_counter(&full), Some((name.as_str(), 1)));
    // Bytes after the first NUL are ignored; invalid UTF-8 cuts the name.
    let mut odd = [0u8; INFO_COUNTER_LEN];
    odd[..6].copy_from_slice(b"ab\0cd\xff");
    assert_eq!(decode_counter(&odd), Some(("ab", 0)));
    odd[..4].copy_from_slice(b"ab\xffc");
    assert_eq!(decode_counter(&odd), Some(("ab", 0)));
}

#[test]
fn connection_decode() {
    let c = ConnInfo {
        next_tx_seq: 4,
        next_rx_seq: 3,
        laddr: v4([127, 0, 0, 1]),
        faddr: v4([127, 0, 0, 2]),
        transport: "loopback",
        flags: RDS_INFO_CONNECTION_FLAG_CONNECTED,
        tos: 5,
    };
    let r = c.encode_v4();
    assert_eq!(ConnInfo::decode_v4(&r), Some(c));
    assert_eq!(ConnInfo::decode_v4(&r[..INFO_CONNECTION_LEN - 1]), None);
    // The IPv4 record holds the last four bytes: they come back v4-mapped.
    let odd = ConnInfo {
        laddr: v6("fe80::1:2:304"),
        ..c
    };
    let r = odd.encode_v4();
    let d = ConnInfo::decode_v4(&r).unwrap();
    assert_eq!(d.laddr, v4([0, 2, 3, 4]));
    // The IPv6 record has no tos.
    let r = c.encode_v6();
    assert_eq!(ConnInfo::decode_v6(&r), Some(ConnInfo { tos: 0, ..c }));
    assert_eq!(ConnInfo::decode_v6(&r[..INFO6_CONNECTION_LEN - 1]), None);
    // A transport name of 16 bytes has no NUL; a longer one was cut.
    let long = ConnInfo {
        transport: "0123456789abcdefXYZ",
        ..c
    };
    let r = long.encode_v4();
    assert_eq!(
        ConnInfo::decode_v4(&r).unwrap().transport,
        "0123456789abcdef"
    );
    assert_eq!(ConnInfo::decode_v4(&r).unwrap().flags, c.flags);
}

#[test]
fn message_and_socket_decode() {
    let m = MsgInfo {
        seq: 9,
        len: 100,
        laddr: v4([1, 2, 3, 4]),
        faddr: v4([5, 6, 7, 8]),
        lport: 4000,
        fport: 4001,
        flags: 0,
        tos: 2,
    };
    assert_eq!(MsgInfo::decode_v4(&m.encode_v4()), Some(m));
    assert_eq!(MsgInfo::decode_v6(&m.encode_v6()), Some(m));
    assert_eq!(MsgInfo::decode_v4(&m.encode_v4()[..25]), None);
    assert_eq!(MsgInfo::decode_v6(&m.encode_v6()[..49]), None);
    let s = SockInfo {
        sndbuf: 1000,
        rcvbuf: 2000,
        bound_addr: v4([127, 0, 0, 1]),
        connected_addr: Addr::from_v4([0; 4]),
        bound_port: 4001,
        connected_port: 0,
        inum: 99,
    };
    assert_eq!(SockInfo::decode_v4(&s.encode_v4()), Some(s));
    assert_eq!(SockInfo::decode_v6(&s.encode_v6()), Some(s));
    assert_eq!(SockInfo::decode_v4(&s.encode_v4()[..27]), None);
    assert_eq!(SockInfo::decode_v6(&s.encode_v6()[..51]), None);
    // Ports are network order.
    let mut b = [0u8; INFO_SOCKET_LEN];
    b[12..14].copy_from_slice(&[0x0f, 0xa1]);
    assert_eq!(SockInfo::decode_v4(&b).unwrap().bound_port, 4001);
}

#[test]
fn tcp_socket_offsets() {
    let t = TcpSockInfo {
        local_addr: v4([10, 0, 0, 1]),
        local_port: 0x1234,
        peer_addr: v4([10, 0, 0, 2]),
        peer_port: 0xabcd,
        hdr_rem: 0x0102_0304_0506_0708,
        data_rem: 0x1112_1314_1516_1718,
        last_sent_nxt: 0x2122_2324,
        last_expected_una: 0x3132_3334,
        last_seen_una: 0x4142_4344,
        tos: 6,
    };
    let r = t.encode_v4();
    assert_eq!(r.len(), 41);
    assert_eq!(&r[0..4], &[10, 0, 0, 1]);
    assert_eq!(be16_at(&r, 4), 0x1234);
    assert_eq!(&r[6..10], &[10, 0, 0, 2]);
    assert_eq!(be16_at(&r, 10), 0xabcd);
    assert_eq!(u64_at(&r, 12), t.hdr_rem);
    assert_eq!(u64_at(&r, 20), t.data_rem);
    assert_eq!(u32_at(&r, 28), t.last_sent_nxt);
    assert_eq!(u32_at(&r, 32), t.last_expected_una);
    assert_eq!(u32_at(&r, 36), t.last_seen_una);
    assert_eq!(r[40], 6);
    assert_eq!(TcpSockInfo::decode_v4(&r), Some(t));
    assert_eq!(TcpSockInfo::decode_v4(&r[..40]), None);

    let r = t.encode_v6();
    assert_eq!(r.len(), 64);
    assert_eq!(&r[0..16], &t.local_addr.0);
    assert_eq!(be16_at(&r, 16), 0x1234);
    assert_eq!(&r[18..34], &t.peer_addr.0);
    assert_eq!(be16_at(&r, 34), 0xabcd);
    assert_eq!(u64_at(&r, 36), t.hdr_rem);
    assert_eq!(u64_at(&r, 44), t.data_rem);
    assert_eq!(u32_at(&r, 52), t.last_sent_nxt);
    assert_eq!(u32_at(&r, 56), t.last_expected_una);
    assert_eq!(u32_at(&r, 60), t.last_seen_una);
    assert_eq!(
        TcpSockInfo::decode_v6(&r),
        Some(TcpSockInfo { tos: 0, ..t })
    );
    assert_eq!(TcpSockInfo::decode_v6(&r[..63]), None);
}

#[test]
fn rdma_connection_offsets() {
    let c = RdmaConnInfo {
        src_addr: v4([192, 0, 2, 1]),
        dst_addr: v4([192, 0, 2, 2]),
        src_gid: [0x11; 16],
        dst_gid: [0x22; 16],
        max_send_wr: 1,
        max_recv_wr: 2,
        max_send_sge: 3,
        rdma_mr_max: 4,
        rdma_mr_size: 5,
        tos: 3,
        sl: 1,
        cache_allocs: 42,
    };
    let r = c.encode_v4();
    assert_eq!(r.len(), 68);
    assert_eq!(&r[0..4], &[192, 0, 2, 1]);
    assert_eq!(&r[4..8], &[192, 0, 2, 2]);
    assert_eq!(&r[8..24], &[0x11; 16]);
    assert_eq!(&r[24..40], &[0x22; 16]);
    for (i, v) in (1u32..=5).enumerate() {
        assert_eq!(u32_at(&r, 40 + 4 * i), v);
    }
    assert_eq!((r[60], r[61]), (3, 1));
    assert_eq!(&r[62..64], &[0, 0]);
    assert_eq!(u32_at(&r, 64), 42);
    assert_eq!(RdmaConnInfo::decode_v4(&r), Some(c));
    assert_eq!(RdmaConnInfo::decode_v4(&r[..67]), None);
    // The padding is not looked at.
    let mut p = r;
    p[62] = 0xff;
    assert_eq!(RdmaConnInfo::decode_v4(&p), Some(c));

    let r = c.encode_v6();
    assert_eq!(r.len(), 92);
    assert_eq!(&r[0..16], &c.src_addr.0);
    assert_eq!(&r[16..32], &c.dst_addr.0);
    assert_eq!(&r[32..48], &[0x11; 16]);
    assert_eq!(&r[48..64], &[0x22; 16]);
    for (i, v) in (1u32..=5).enumerate() {
        assert_eq!(u32_at(&r, 64 + 4 * i), v);
    }
    assert_eq!((r[84], r[85]), (3, 1));
    assert_eq!(u32_at(&r, 88), 42);
    assert_eq!(RdmaConnInfo::decode_v6(&r), Some(c));
    assert_eq!(RdmaConnInfo::decode_v6(&r[..91]), None);
}

// --- rds_info_getsockopt -------------------------------------------------------

#[test]
fn request_checks() {
    use InfoError::Inval;
    assert_eq!(Inval.errno(), 22);
    assert_eq!(INFO_MAX_LEN, i32::MAX - 4096 + 1);
    assert_eq!(check_info_request(0, 0), Ok(()));
    assert_eq!(check_info_request(0, u64::MAX), Ok(()));
    assert_eq!(check_info_request(-1, 0x1000), Err(Inval));
    assert_eq!(check_info_request(i32::MIN, 0x1000), Err(Inval));
    assert_eq!(check_info_request(INFO_MAX_LEN, 0x1000), Ok(()));
    assert_eq!(check_info_request(INFO_MAX_LEN + 1, 0x1000), Err(Inval));
    assert_eq!(check_info_request(i32::MAX, 0x1000), Err(Inval));
    // start + len wraps.
    assert_eq!(check_info_request(1, u64::MAX), Err(Inval));
    assert_eq!(check_info_request(10, u64::MAX - 9), Err(Inval));
    assert_eq!(check_info_request(9, u64::MAX - 9), Ok(()));
}

#[test]
fn outcome() {
    // 36 counters of 40 bytes: 1440.
    assert_eq!(
        info_outcome(1440, 40, 36),
        InfoOutcome::Fits {
            each: 40,
            total: 1440
        }
    );
    assert_eq!(
        info_outcome(1439, 40, 36),
        InfoOutcome::NoSpace { needed: 1440 }
    );
    // A probe with len 0 learns the size.
    assert_eq!(info_outcome(0, 28, 3), InfoOutcome::NoSpace { needed: 84 });
    // Nothing to report: success with len 0, returning each.
    assert_eq!(
        info_outcome(0, 28, 0),
        InfoOutcome::Fits { each: 28, total: 0 }
    );
    // Bigger buffer: len becomes total.
    assert_eq!(
        info_outcome(1 << 20, 26, 2),
        InfoOutcome::Fits {
            each: 26,
            total: 52
        }
    );
    // No overflow.
    assert_eq!(
        info_outcome(usize::MAX, usize::MAX, 2),
        InfoOutcome::Fits {
            each: usize::MAX,
            total: usize::MAX
        }
    );
    assert_eq!(
        info_outcome(100, usize::MAX, 2),
        InfoOutcome::NoSpace { needed: usize::MAX }
    );
}

// --- properties -----------------------------------------------------------------

fn any_addr() -> impl Strategy<Value = Addr> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(Addr::from_v4),
        any::<[u8; 16]>().prop_map(Addr)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn connection_fields_land_at_c_offsets(
        tx in any::<u64>(), rx in any::<u64>(), l in any_addr(), f in any_addr(),
        t in "[a-z]{0,20}", flags in any::<u8>(), tos in any::<u8>(),
    ) {
        let c = ConnInfo {
            next_tx_seq: tx, next_rx_seq: rx, laddr: l, faddr: f, transport: &t, flags, tos,
        };
        let mut name = [0u8; 16];
        let n = t.len().min(16);
        name[..n].copy_from_slice(&t.as_bytes()[..n]);

        let r = c.encode_v4();
        prop_assert_eq!(u64_at(&r, 0), tx);
        prop_assert_eq!(u64_at(&r, 8), rx);
        prop_assert_eq!(&r[16..20], &l.0[12..]);
        prop_assert_eq!(&r[20..24], &f.0[12..]);
        prop_assert_eq!(&r[24..40], &name);
        prop_assert_eq!((r[40], r[41]), (flags, tos));

        let r = c.encode_v6();
        prop_assert_eq!(u64_at(&r, 0), tx);
        prop_assert_eq!(u64_at(&r, 8), rx);
        prop_assert_eq!(&r[16..32], &l.0);
        prop_assert_eq!(&r[32..48], &f.0);
        prop_assert_eq!(&r[48..64], &name);
        prop_assert_eq!(r[64], flags);
    }

    #[test]
    fn message_fields_land_at_c_offsets(
        seq in any::<u64>(), len in any::<u32>(), l in any_addr(), f in any_addr(),
        lport in any::<u16>(), fport in any::<u16>(), flags in any::<u8>(), tos in any::<u8>(),
    ) {
        let m = MsgInfo { seq, len, laddr: l, faddr: f, lport, fport, flags, tos };
        let r = m.encode_v4();
        prop_assert_eq!(u64_at(&r, 0), seq);
        prop_assert_eq!(u32_at(&r, 8), len);
        prop_assert_eq!(&r[12..16], &l.0[12..]);
        prop_assert_eq!(&r[16..20], &f.0[12..]);
        prop_assert_eq!(be16_at(&r, 20), lport);
        prop_assert_eq!(be16_at(&r, 22), fport);
        prop_assert_eq!((r[24], r[25]), (flags, tos));
        let r = m.encode_v6();
        prop_assert_eq!(u64_at(&r, 0), seq);
        prop_assert_eq!(u32_at(&r, 8), len);
        prop_assert_eq!(&r[12..28], &l.0);
        prop_assert_eq!(&r[28..44], &f.0);
        prop_assert_eq!(be16_at(&r, 44), lport);
        prop_assert_eq!(be16_at(&r, 46), fport);
        prop_assert_eq!((r[48], r[49]), (flags, tos));
    }

    #[test]
    fn socket_fields_land_at_c_offsets(
        sndbuf in any::<u32>(), rcvbuf in any::<u32>(), b in any_addr(), c in any_addr(),
        bport in any::<u16>(), cport in any::<u16>(), inum in any::<u64>(),
    ) {
        let s = SockInfo {
            sndbuf, rcvbuf, bound_addr: b, connected_addr: c,
            bound_port: bport, connected_port: cport, inum,
        };
        let r = s.encode_v4();
        prop_assert_eq!(u32_at(&r, 0), sndbuf);
        prop_assert_eq!(&r[4..8], &b.0[12..]);
        prop_assert_eq!(&r[8..12], &c.0[12..]);
        prop_assert_eq!(be16_at(&r, 12), bport);
        prop_assert_eq!(be16_at(&r, 14), cport);
        prop_assert_eq!(u32_at(&r, 16), rcvbuf);
        prop_assert_eq!(u64_at(&r, 20), inum);
        let r = s.encode_v6();
        prop_assert_eq!(u32_at(&r, 0), sndbuf);
        prop_assert_eq!(&r[4..20], &b.0);
        prop_assert_eq!(&r[20..36], &c.0);
        prop_assert_eq!(be16_at(&r, 36), bport);
        prop_assert_eq!(be16_at(&r, 38), cport);
        prop_assert_eq!(u32_at(&r, 40), rcvbuf);
        prop_assert_eq!(u64_at(&r, 44), inum);
    }

    #[test]
    fn counter_fields(name in "\\PC{0,40}", value in any::<u64>()) {
        let r = encode_counter(&name, value);
        let bytes: Vec<u8> = name.bytes().take_while(|b| *b != 0).take(31).collect();
        prop_assert_eq!(&r[..bytes.len()], &bytes[..]);
        prop_assert!(r[bytes.len()..32].iter().all(|b| *b == 0));
        prop_assert_eq!(u64_at(&r, 32), value);
    }

    #[test]
    fn request_check_matches_c(len in any::<i32>(), start in any::<u64>()) {
        // C: len < 0 || len > INT_MAX - PAGE_SIZE + 1 || start + len < start
        let bad = len < 0
            || i64::from(len) > i64::from(i32::MAX) - 4096 + 1
            || start.wrapping_add(len as u64) < start;
        prop_assert_eq!(check_info_request(len, start).is_err(), bad);
    }

    #[test]
    fn outcome_matches_c(len in 0usize..100_000, each in 1usize..200, nr in 0usize..1000) {
        let total = each * nr;
        let want = if total > len {
            InfoOutcome::NoSpace { needed: total }
        } else {
            InfoOutcome::Fits { each, total }
        };
        prop_assert_eq!(info_outcome(len, each, nr), want);
    }

    #[test]
    fn counter_round_trip(name in "[\\x01-\\x7f]{0,31}|[^\\x00]{0,7}", value in any::<u64>()) {
        // At most 31 bytes, no NUL: the name fits with its terminator.
        let r = encode_counter(&name, value);
        prop_assert_eq!(decode_counter(&r), Some((name.as_str(), value)));
    }

    #[test]
    fn connection_round_trip(
        tx in any::<u64>(), rx in any::<u64>(), l in any_addr(), f in any_addr(),
        l4 in any::<[u8; 4]>(), f4 in any::<[u8; 4]>(),
        t in "[ -~]{0,16}", flags in any::<u8>(), tos in any::<u8>(),
    ) {
        let c = ConnInfo {
            next_tx_seq: tx, next_rx_seq: rx, laddr: l, faddr: f, transport: &t, flags, tos: 0,
        };
        let r = c.encode_v6();
        prop_assert_eq!(ConnInfo::decode_v6(&r), Some(c));
        let c = ConnInfo { laddr: v4(l4), faddr: v4(f4), tos, ..c };
        let r = c.encode_v4();
        prop_assert_eq!(ConnInfo::decode_v4(&r), Some(c));
    }

    #[test]
    fn message_round_trip(
        seq in any::<u64>(), len in any::<u32>(), l in any_addr(), f in any_addr(),
        l4 in any::<[u8; 4]>(), f4 in any::<[u8; 4]>(),
        lport in any::<u16>(), fport in any::<u16>(), flags in any::<u8>(), tos in any::<u8>(),
    ) {
        let m = MsgInfo { seq, len, laddr: l, faddr: f, lport, fport, flags, tos };
        prop_assert_eq!(MsgInfo::decode_v6(&m.encode_v6()), Some(m));
        let m = MsgInfo { laddr: v4(l4), faddr: v4(f4), ..m };
        prop_assert_eq!(MsgInfo::decode_v4(&m.encode_v4()), Some(m));
    }

    #[test]
    fn socket_round_trip(
        sndbuf in any::<u32>(), rcvbuf in any::<u32>(), b in any_addr(), c in any_addr(),
        b4 in any::<[u8; 4]>(), c4 in any::<[u8; 4]>(),
        bport in any::<u16>(), cport in any::<u16>(), inum in any::<u64>(),
    ) {
        let s = SockInfo {
            sndbuf, rcvbuf, bound_addr: b, connected_addr: c,
            bound_port: bport, connected_port: cport, inum,
        };
        prop_assert_eq!(SockInfo::decode_v6(&s.encode_v6()), Some(s));
        let s = SockInfo { bound_addr: v4(b4), connected_addr: v4(c4), ..s };
        prop_assert_eq!(SockInfo::decode_v4(&s.encode_v4()), Some(s));
    }

    #[test]
    fn tcp_socket_round_trip(
        l in any_addr(), p in any_addr(), l4 in any::<[u8; 4]>(), p4 in any::<[u8; 4]>(),
        lport in any::<u16>(), pport in any::<u16>(), hdr_rem in any::<u64>(),
        data_rem in any::<u64>(), una in any::<[u32; 3]>(), tos in any::<u8>(),
    ) {
        let t = TcpSockInfo {
            local_addr: l, local_port: lport, peer_addr: p, peer_port: pport, hdr_rem, data_rem,
            last_sent_nxt: una[0], last_expected_una: una[1], last_seen_una: una[2], tos: 0,
        };
        prop_assert_eq!(TcpSockInfo::decode_v6(&t.encode_v6()), Some(t));
        let t = TcpSockInfo { local_addr: v4(l4), peer_addr: v4(p4), tos, ..t };
        prop_assert_eq!(TcpSockInfo::decode_v4(&t.encode_v4()), Some(t));
    }

    #[test]
    fn rdma_connection_round_trip(
        s in any_addr(), d in any_addr(), s4 in any::<[u8; 4]>(), d4 in any::<[u8; 4]>(),
        sgid in any::<[u8; 16]>(), dgid in any::<[u8; 16]>(), w in any::<[u32; 5]>(),
        tos in any::<u8>(), sl in any::<u8>(), cache_allocs in any::<u32>(),
    ) {
        let c = RdmaConnInfo {
            src_addr: s, dst_addr: d, src_gid: sgid, dst_gid: dgid,
            max_send_wr: w[0], max_recv_wr: w[1], max_send_sge: w[2],
            rdma_mr_max: w[3], rdma_mr_size: w[4], tos, sl, cache_allocs,
        };
        prop_assert_eq!(RdmaConnInfo::decode_v6(&c.encode_v6()), Some(c));
        let c = RdmaConnInfo { src_addr: v4(s4), dst_addr: v4(d4), ..c };
        prop_assert_eq!(RdmaConnInfo::decode_v4(&c.encode_v4()), Some(c));
    }

    #[test]
    fn decoders_never_panic(b in proptest::collection::vec(any::<u8>(), 0..100)) {
        // Any bytes: a record when long enough, else None.
        prop_assert_eq!(decode_counter(&b).is_some(), b.len() >= INFO_COUNTER_LEN);
        prop_assert_eq!(ConnInfo::decode_v4(&b).is_some(), b.len() >= INFO_CONNECTION_LEN);
        prop_assert_eq!(ConnInfo::decode_v6(&b).is_some(), b.len() >= INFO6_CONNECTION_LEN);
        prop_assert_eq!(MsgInfo::decode_v4(&b).is_some(), b.len() >= INFO_MESSAGE_LEN);
        prop_assert_eq!(MsgInfo::decode_v6(&b).is_some(), b.len() >= INFO6_MESSAGE_LEN);
        prop_assert_eq!(SockInfo::decode_v4(&b).is_some(), b.len() >= INFO_SOCKET_LEN);
        prop_assert_eq!(SockInfo::decode_v6(&b).is_some(), b.len() >= INFO6_SOCKET_LEN);
        prop_assert_eq!(TcpSockInfo::decode_v4(&b).is_some(), b.len() >= INFO_TCP_SOCKET_LEN);
        prop_assert_eq!(TcpSockInfo::decode_v6(&b).is_some(), b.len() >= INFO6_TCP_SOCKET_LEN);
        prop_assert_eq!(
            RdmaConnInfo::decode_v4(&b).is_some(),
            b.len() >= INFO_RDMA_CONNECTION_LEN
        );
        prop_assert_eq!(
            RdmaConnInfo::decode_v6(&b).is_some(),
            b.len() >= INFO6_RDMA_CONNECTION_LEN
        );
    }

    #[test]
    fn decoded_records_encode_back(b in any::<[u8; INFO6_RDMA_CONNECTION_LEN]>()) {
        // Every field of these records is decoded, so re-encoding gives the bytes back.
        let m = MsgInfo::decode_v4(&b).unwrap();
        prop_assert_eq!(&m.encode_v4()[..], &b[..INFO_MESSAGE_LEN]);
        let m = MsgInfo::decode_v6(&b).unwrap();
        prop_assert_eq!(&m.encode_v6()[..], &b[..INFO6_MESSAGE_LEN]);
        let s = SockInfo::decode_v4(&b).unwrap();
        prop_assert_eq!(&s.encode_v4()[..], &b[..INFO_SOCKET_LEN]);
        let s = SockInfo::decode_v6(&b).unwrap();
        prop_assert_eq!(&s.encode_v6()[..], &b[..INFO6_SOCKET_LEN]);
        let t = TcpSockInfo::decode_v4(&b).unwrap();
        prop_assert_eq!(&t.encode_v4()[..], &b[..INFO_TCP_SOCKET_LEN]);
        let t = TcpSockInfo::decode_v6(&b).unwrap();
        prop_assert_eq!(&t.encode_v6()[..], &b[..INFO6_TCP_SOCKET_LEN]);
    }
}
