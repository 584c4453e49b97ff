//! RDS wire format: the 48-byte message header, its checksum and its
//! extension headers.
//!
//! This mirrors Linux `net/rds/rds.h` (`struct rds_header`,
//! `rds_message_make_checksum`, `rds_message_verify_checksum`) and
//! `net/rds/message.c` (`rds_message_add_extension`,
//! `rds_message_next_extension`). All multi-byte fields are big-endian on the
//! wire; the Rust types hold them as ordinary host-order integers.
//!
//! This file is shared verbatim by the host crate `rds-proto` and the kernel
//! module, so it uses only `core`, contains no `unsafe`, and never panics:
//! every read of untrusted bytes is length-checked and reports an error.

// Explicit paths: relative to this file's own directory in every build, no
// matter which file includes this one or how.
#[path = "checksum.rs"]
mod checksum;
#[path = "ext.rs"]
mod ext;
#[path = "header.rs"]
mod header;

pub use checksum::{header_checksum, internet_checksum, verify_checksum};
pub use ext::{
    Ext, ExtIter, EXTHDR_GEN_NUM, EXTHDR_NONE, EXTHDR_NPATHS, EXTHDR_RDMA, EXTHDR_RDMA_DEST,
    EXTHDR_VERSION,
};
pub use header::{
    Header, HeaderError, EXTHDR_SPACE, FLAG_ACK_REQUIRED, FLAG_CONG_BITMAP, FLAG_RETRANSMITTED,
    HEADER_LEN,
};
