//! RDS wire format: the 48-byte message header, its checksum and its
//! extension headers; and the socket-address rules of `bind`, `connect` and
//! `getname`.
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
#[path = "addr.rs"]
mod addr;
#[path = "checksum.rs"]
mod checksum;
#[path = "ext.rs"]
mod ext;
#[path = "header.rs"]
mod header;
#[path = "port.rs"]
mod port;

pub use addr::{
    check_bind_scope, encode_sockaddr, encode_unbound_local, parse_bind, parse_connect, Addr,
    AddrError, SockAddr, AF_INET, AF_INET6, AF_UNSPEC, IPV6_ADDR_ANY, IPV6_ADDR_COMPATV4,
    IPV6_ADDR_LINKLOCAL, IPV6_ADDR_LOOPBACK, IPV6_ADDR_MAPPED, IPV6_ADDR_MULTICAST,
    IPV6_ADDR_SCOPE_GLOBAL, IPV6_ADDR_SCOPE_LINKLOCAL, IPV6_ADDR_SCOPE_MASK,
    IPV6_ADDR_SCOPE_NODELOCAL, IPV6_ADDR_SCOPE_ORGLOCAL, IPV6_ADDR_SCOPE_SITELOCAL,
    IPV6_ADDR_SITELOCAL, IPV6_ADDR_UNICAST, SOCKADDR_IN6_LEN, SOCKADDR_IN_LEN,
};
pub use checksum::{header_checksum, internet_checksum, verify_checksum};
pub use ext::{
    Ext, ExtIter, EXTHDR_GEN_NUM, EXTHDR_NONE, EXTHDR_NPATHS, EXTHDR_RDMA, EXTHDR_RDMA_DEST,
    EXTHDR_VERSION,
};
pub use header::{
    Header, HeaderError, EXTHDR_SPACE, FLAG_ACK_REQUIRED, FLAG_CONG_BITMAP, FLAG_RETRANSMITTED,
    HEADER_LEN,
};
pub use port::{bind_candidates, PROBE_PORT};
