// SPDX-License-Identifier: GPL-2.0

//! The loopback transport (`rds_loop/`), compiled into the core crate: the transport
//! (`loopback.rs`) and its model of an RDMA device (`hca.rs`).

#[path = "hca.rs"]
mod hca;
#[path = "loopback.rs"]
mod loopback;

pub(crate) use loopback::Loopback;
