//! RDS wire format: the 48-byte message header, its checksum and its
//! extension headers; the socket-address rules of `bind`, `connect`,
//! `getname` and `sendmsg`; control messages; the `RDS_INFO_*` records;
//! congestion maps and receive-buffer accounting; sequence numbers,
//! ACK pacing and send-buffer admission; and the RDMA ABI, the
//! memory-registration rules and the RDMA barrier's id bookkeeping.
//!
//! This mirrors Linux `net/rds/rds.h` (`struct rds_header`,
//! `rds_message_make_checksum`, `rds_message_verify_checksum`) and
//! `net/rds/message.c` (`rds_message_add_extension`,
//! `rds_message_next_extension`). All multi-byte fields are big-endian on the
//! wire; the Rust types hold them as ordinary host-order integers. The
//! address rules mirror `net/rds/bind.c` (`rds_bind`) and `net/rds/af_rds.c`
//! (`rds_connect`, `rds_getname`).
//!
//! This file is shared verbatim by the host crate `rds-proto` and the kernel
//! module, so it uses only `core`, contains no `unsafe`, and never panics:
//! every read of untrusted bytes is length-checked and reports an error.

// Explicit paths: relative to this file's own directory in every build, no
// matter which file includes this one or how.
#[path = "abi.rs"]
mod abi;
#[path = "addr.rs"]
mod addr;
#[path = "barrier.rs"]
mod barrier;
#[path = "checksum.rs"]
mod checksum;
#[path = "cmsg.rs"]
mod cmsg;
#[path = "cong.rs"]
mod cong;
#[path = "ext.rs"]
mod ext;
#[path = "frame.rs"]
mod frame;
#[path = "header.rs"]
mod header;
#[path = "ib.rs"]
mod ib;
#[path = "info.rs"]
mod info;
#[path = "link.rs"]
mod link;
#[path = "mr.rs"]
mod mr;
#[path = "port.rs"]
mod port;
#[path = "rdma.rs"]
mod rdma;
#[path = "seq.rs"]
mod seq;
#[path = "stack.rs"]
mod stack;
#[path = "tcp.rs"]
mod tcp;
#[path = "zcopy.rs"]
mod zcopy;

pub use abi::{
    AF_RDS, RDS_CANCEL_SENT_TO, RDS_CONG_MONITOR, RDS_FREE_MR, RDS_GET_MR, RDS_GET_MR_FOR_DEST,
    RDS_RECVERR, RDS_TRANS_COUNT, RDS_TRANS_GAP, RDS_TRANS_IB, RDS_TRANS_LOOP, RDS_TRANS_NONE,
    RDS_TRANS_TCP, RX_TRACE_MAX, RX_TRACE_SO_LEN, SIOCRDSGETTOS, SIOCRDSSETTOS,
    SO_RDS_MSG_RXPATH_LATENCY, SO_RDS_TRANSPORT, SO_TIMESTAMP_NEW, SO_TIMESTAMP_OLD,
};
pub use addr::{
    check_bind_scope, check_send_dest, encode_sockaddr, encode_unbound_local, parse_bind,
    parse_connect, parse_send_dest, Addr, AddrError, SockAddr, AF_INET, AF_INET6, AF_UNSPEC,
    IPV6_ADDR_ANY, IPV6_ADDR_COMPATV4, IPV6_ADDR_LINKLOCAL, IPV6_ADDR_LOOPBACK, IPV6_ADDR_MAPPED,
    IPV6_ADDR_MULTICAST, IPV6_ADDR_SCOPE_GLOBAL, IPV6_ADDR_SCOPE_LINKLOCAL, IPV6_ADDR_SCOPE_MASK,
    IPV6_ADDR_SCOPE_NODELOCAL, IPV6_ADDR_SCOPE_ORGLOCAL, IPV6_ADDR_SCOPE_SITELOCAL,
    IPV6_ADDR_SITELOCAL, IPV6_ADDR_UNICAST, SOCKADDR_IN6_LEN, SOCKADDR_IN_LEN,
};
pub use barrier::{
    BarrierArgs, BarrierState, OpTracker, SocketIds, BARRIER_ARGS_LEN, BARRIER_FLAGS,
    RDMA_ID_CMSG_LEN, RDS_BARRIER, RDS_CMSG_RDMA_ID,
};
pub use checksum::{header_checksum, internet_checksum, verify_checksum};
pub use cmsg::{
    cmsg_align, cmsg_len, cmsg_space, cmsgs, encode_cmsg, rdma_bytes, scan_send_cmsgs,
    scan_send_cmsgs_with, Cmsg, CmsgError, CmsgHdr, CmsgIter, SendCmsgs, CMSG_HDR_LEN,
    RDMA_ARGS_LEN, RDS_CMSG_ATOMIC_CSWP, RDS_CMSG_ATOMIC_FADD, RDS_CMSG_CONG_UPDATE,
    RDS_CMSG_MASKED_ATOMIC_CSWP, RDS_CMSG_MASKED_ATOMIC_FADD, RDS_CMSG_RDMA_ARGS,
    RDS_CMSG_RDMA_DEST, RDS_CMSG_RDMA_MAP, RDS_CMSG_RDMA_STATUS, RDS_CMSG_RXPATH_LATENCY,
    RDS_CMSG_ZCOPY_COMPLETION, RDS_CMSG_ZCOPY_COOKIE, SOL_RDS, SOL_SOCKET,
};
pub use cong::{
    cong_clear, cong_mask, cong_set, cong_test, cong_word, monitor_mask, uncongested_mask,
    wire_to_words, words_to_wire, CongChange, RecvAccount, CONG_MAP_BITS, CONG_MAP_BYTES,
    CONG_MAP_WORDS,
};
pub use ext::{
    Ext, ExtIter, EXTHDR_GEN_NUM, EXTHDR_NONE, EXTHDR_NPATHS, EXTHDR_RDMA, EXTHDR_RDMA_DEST,
    EXTHDR_SPORT_IDX, EXTHDR_VERSION,
};
pub use frame::{
    exthdr_payload_len, parse_frame, walk_exthdrs, Frame, FrameError, FrameKind, RdmaExts,
    EXTHDR_TYPES, MAX_FRAME_LEN,
};
pub use header::{
    Header, HeaderError, EXTHDR_SPACE, FLAG_ACK_REQUIRED, FLAG_CONG_BITMAP, FLAG_RETRANSMITTED,
    HEADER_LEN,
};
pub use ib::{
    frag_count, negotiate, reject_drops, reject_reason, reply_version_ok, yields_connect, ConnPriv,
    Credits, FragError, FragOutcome, Grab, NegotiateError, Reassembly, RejectReason, WorkRing,
    CREDIT_UPDATE_AT, FRAG_SIZE, MAX_ADV_CREDIT, MAX_CREDITS, MINOR_MASK, PRIV_LEN_V4, PRIV_LEN_V6,
    PROTOCOL_3_0, PROTOCOL_3_1, PROTOCOL_4_0, PROTOCOL_4_1, RDS_IB_PORT, RDS_IB_PORT6,
};
pub use info::{
    check_info_request, decode_counter, encode_counter, info_outcome, is_info_option, ConnInfo,
    InfoError, InfoOutcome, MsgInfo, RdmaConnInfo, SockInfo, Stat, TcpSockInfo, C_IB_STAT_COUNT,
    C_STAT_COUNT, C_TCP_STAT_COUNT, INFO6_CONNECTION_LEN, INFO6_MESSAGE_LEN,
    INFO6_RDMA_CONNECTION_LEN, INFO6_SOCKET_LEN, INFO6_TCP_SOCKET_LEN, INFO_CONNECTION_LEN,
    INFO_COUNTER_LEN, INFO_COUNTER_NAME_LEN, INFO_MAX_LEN, INFO_MESSAGE_LEN,
    INFO_RDMA_CONNECTION_LEN, INFO_SOCKET_LEN, INFO_TCP_SOCKET_LEN, RDS6_INFO_CONNECTIONS,
    RDS6_INFO_IB_CONNECTIONS, RDS6_INFO_RECV_MESSAGES, RDS6_INFO_RETRANS_MESSAGES,
    RDS6_INFO_SEND_MESSAGES, RDS6_INFO_SOCKETS, RDS6_INFO_TCP_SOCKETS, RDS_IB_GID_LEN,
    RDS_INFO_CONNECTIONS, RDS_INFO_CONNECTION_FLAG_CONNECTED, RDS_INFO_CONNECTION_FLAG_CONNECTING,
    RDS_INFO_CONNECTION_FLAG_SENDING, RDS_INFO_CONNECTION_STATS, RDS_INFO_COUNTERS, RDS_INFO_FIRST,
    RDS_INFO_IB_CONNECTIONS, RDS_INFO_IWARP_CONNECTIONS, RDS_INFO_LAST, RDS_INFO_RECV_MESSAGES,
    RDS_INFO_RETRANS_MESSAGES, RDS_INFO_SEND_MESSAGES, RDS_INFO_SOCKETS, RDS_INFO_TCP_SOCKETS,
    STAT_COUNT, STAT_NAMES, TRANSNAMSIZ,
};
pub use link::{
    is_acked, msg_charge, on_reset, AckState, AtomicAckState, Backoff, ConnState, GuessLimit,
    OnReset, GUESS_BURST, GUESS_PER_SEC, MSG_OVERHEAD, NOTIFY_MAX,
};
pub use mr::{
    check_atomic, check_rdma_args, check_rdma_bytes, check_registration, check_registration_mlock,
    key_acceptable, loop_region, rdma_pages, rdma_sg_too_big, MrError, Quarantine, Region,
    LOOP_BASES, MAX_MR_PAGES, MSG_SG_MAX, SG_ENTRY_LEN,
};
pub use port::{bind_candidates, PROBE_PORT};
pub use rdma::{
    cookie_key, cookie_offset, make_cookie, AtomicArgs, AtomicOp, FreeMrArgs, GetMrArgs,
    GetMrForDestArgs, RdmaArgs, RdmaNotify, RdsIovec, ATOMIC_ARGS_LEN, FREE_MR_ARGS_LEN,
    GET_MR_ARGS_LEN, GET_MR_FOR_DEST_ARGS_LEN, MAX_MSG_SIZE, PAGE_SIZE, RDMA_NOTIFY_LEN,
    RDS_IOVEC_LEN, RDS_RDMA_CANCELED, RDS_RDMA_DONTWAIT, RDS_RDMA_DROPPED, RDS_RDMA_FENCE,
    RDS_RDMA_INVALIDATE, RDS_RDMA_NOTIFY_ME, RDS_RDMA_OTHER_ERROR, RDS_RDMA_READWRITE,
    RDS_RDMA_REMOTE_ERROR, RDS_RDMA_SILENT, RDS_RDMA_SUCCESS, RDS_RDMA_USE_ONCE,
    SOCKADDR_STORAGE_LEN, UIO_MAXIOV,
};
pub use seq::{
    sndbuf_ack_required, sndbuf_admits, AckPacer, Replays, RxSeq, SavedRx, SeqCheck, TxSeq,
    MAX_UNACKED_BYTES, MAX_UNACKED_PACKETS,
};
pub use stack::SpareStack;
pub use tcp::{
    accepted_path, hs_exts, hs_npaths, is_hs_probe, jhash_1word, misplaced, mpath_key, mpath_known,
    mpath_of, path_port, path_port_groups, tcp_acked, tcp_connects, StreamError, StreamRx,
    StreamStep, MPATH_MAX, RDS_TCP_PORT,
};
pub use zcopy::{ZcRing, ZCOOKIES_LEN, ZCOOKIES_MAX};
