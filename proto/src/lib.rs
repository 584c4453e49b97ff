//! RDS (Reliable Datagram Sockets) wire format, as pure logic.
//!
//! This crate is the host-side wrapper around the code in `proto.rs`, which
//! is shared with the Linux kernel module: the kernel crate includes that file
//! directly with `#[path = "../proto/src/proto.rs"] pub mod proto;`, so
//! everything in it is `core`-only, free of `unsafe`, and never panics on any
//! input. This root only adds the crate-level attributes (which are not
//! allowed in a non-root module) and re-exports the API, so host code and
//! tests see the same items as the kernel's `proto` module.
//!
//! See the [`Header`] type for the 48-byte `struct rds_header`,
//! [`header_checksum`] / [`verify_checksum`] for `h_csum`, and [`Ext`] for the
//! extension headers carried in `h_exthdr`; and [`parse_bind`],
//! [`parse_connect`] and [`encode_sockaddr`] for the socket-address rules of
//! `bind`, `connect` and `getname` (with [`Addr`] and [`SockAddr`]), and
//! [`parse_send_dest`] / [`check_send_dest`] for those of `sendmsg`.
//!
//! Beyond the wire format: [`cmsgs`], [`rdma_bytes`] and [`scan_send_cmsgs`]
//! walk and check `sendmsg` control messages; [`ConnInfo`], [`MsgInfo`],
//! [`SockInfo`], [`TcpSockInfo`], [`RdmaConnInfo`], [`encode_counter`] /
//! [`decode_counter`] and [`info_outcome`] are the `RDS_INFO_*` getsockopt
//! records (encoded and decoded) and rules; [`RecvAccount`] and
//! [`uncongested_mask`] are receive-buffer congestion and congestion maps;
//! [`RxSeq`], [`TxSeq`], [`AckPacer`] and [`sndbuf_admits`] are sequence
//! numbers, ACK pacing and send-buffer admission.
//!
//! RDMA: [`RdsIovec`], [`GetMrArgs`], [`GetMrForDestArgs`], [`FreeMrArgs`],
//! [`RdmaArgs`], [`AtomicArgs`] (with [`AtomicOp::apply`], the IB masked
//! atomic semantics) and [`RdmaNotify`] are the RDMA ABI structs, and
//! [`make_cookie`] / [`cookie_key`] / [`cookie_offset`] the cookies;
//! [`check_registration`], [`check_rdma_args`], [`check_atomic`] and
//! [`Region`] are the memory-registration rules, and [`Quarantine`] /
//! [`key_acceptable`] the R_Key allocation policy; [`OpTracker`] and
//! [`BarrierArgs`] are the barrier's operation ids, high-water mark and ABI
//! (an rds-rs extension).
//!
//! RDS over TCP (issue 20, its pure logic so far): [`StreamRx`] reassembles
//! the stream's headers and payloads from pieces of any size, [`tcp_acked`]
//! settles sent messages by TCP's acknowledged sequence, [`tcp_connects`] is
//! the rule of who connects, and [`mpath_of`] (with [`jhash_1word`] and
//! [`mpath_key`]) picks a message's path of a multipath connection.

#![no_std]
#![forbid(unsafe_code)]
// Host-side guard for the "never panics on untrusted input" rule of the shared
// code: these lints are not enabled by the kernel build, so enforce them here.
#![deny(
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

// `#[path]` makes this file own the `src/` directory for the modules nested in
// `proto.rs`, exactly as the kernel crate's `#[path]` include does, so the
// submodule files resolve to the same siblings of `proto.rs` in both builds.
#[path = "proto.rs"]
mod proto;

pub use proto::*;
