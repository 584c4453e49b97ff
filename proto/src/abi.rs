//! The numbers of the RDS socket ABI that are not wire format or control
//! messages: the address family, the `SOL_RDS` socket options, the
//! transport numbers `SO_RDS_TRANSPORT` takes and reports, and the type of
//! service ioctls (`include/uapi/linux/rds.h`, `net/rds/rds.h`).
//!
//! Defined here once, for the kernel module (which includes this file) and
//! user-space code (`librds` re-exports them). The control-message levels and
//! types are in `cmsg.rs`, the RDMA ones in `rdma.rs`.

/// `AF_RDS` / `PF_RDS` (`include/linux/socket.h`).
pub const AF_RDS: u16 = 21;

/// `RDS_CANCEL_SENT_TO`: drop queued messages to a destination.
pub const RDS_CANCEL_SENT_TO: i32 = 1;
/// `RDS_GET_MR`: register memory for RDMA.
pub const RDS_GET_MR: i32 = 2;
/// `RDS_FREE_MR`: release a registration.
pub const RDS_FREE_MR: i32 = 3;
/// `RDS_RECVERR`: report send failures as notifications.
pub const RDS_RECVERR: i32 = 5;
/// `RDS_CONG_MONITOR`: ask for congestion updates.
pub const RDS_CONG_MONITOR: i32 = 6;
/// `RDS_GET_MR_FOR_DEST`: register memory for RDMA with one destination.
pub const RDS_GET_MR_FOR_DEST: i32 = 7;
/// `SO_RDS_TRANSPORT`: pin the socket to a transport before binding.
pub const SO_RDS_TRANSPORT: i32 = 8;
/// `SO_RDS_MSG_RXPATH_LATENCY`: trace receive-path latencies.
pub const SO_RDS_MSG_RXPATH_LATENCY: i32 = 10;

/// `SO_TIMESTAMP_OLD` (`asm-generic/socket.h`): accepted at level `SOL_RDS`
/// too, as C does, and the type of the 16-byte `struct __kernel_old_timeval`
/// control message.
pub const SO_TIMESTAMP_OLD: i32 = 29;
/// `SO_TIMESTAMP_NEW`: as [`SO_TIMESTAMP_OLD`], for the 64-bit
/// `struct __kernel_sock_timeval`.
pub const SO_TIMESTAMP_NEW: i32 = 63;

/// `RDS_TRANS_IB`: InfiniBand, RoCE and iWARP.
pub const RDS_TRANS_IB: i32 = 0;
/// `RDS_TRANS_GAP`: a number no transport has (once IWARP).
pub const RDS_TRANS_GAP: i32 = 1;
/// `RDS_TRANS_TCP`.
pub const RDS_TRANS_TCP: i32 = 2;
/// `RDS_TRANS_COUNT`: the transport numbers user space may ask for are below
/// this.
pub const RDS_TRANS_COUNT: i32 = 3;
/// `RDS_TRANS_LOOP` (`net/rds/rds.h`): what `SO_RDS_TRANSPORT` reports for a
/// socket on the loopback transport (user space cannot ask for it).
pub const RDS_TRANS_LOOP: i32 = 3;
/// `RDS_TRANS_NONE` (`~0`): what `SO_RDS_TRANSPORT` reads on a socket with no
/// transport.
pub const RDS_TRANS_NONE: i32 = -1;

/// `SIOCRDSSETTOS` (`SIOCPROTOPRIVATE`): set the socket's type of service.
pub const SIOCRDSSETTOS: u32 = 0x89e0;
/// `SIOCRDSGETTOS` (`SIOCPROTOPRIVATE + 1`): read it.
pub const SIOCRDSGETTOS: u32 = 0x89e1;

/// `RDS_MSG_RX_DGRAM_TRACE_MAX`: the trace points of
/// `SO_RDS_MSG_RXPATH_LATENCY`.
pub const RX_TRACE_MAX: u8 = 3;
/// `sizeof(struct rds_rx_trace_so)`: a count and [`RX_TRACE_MAX`] positions.
pub const RX_TRACE_SO_LEN: usize = 4;
