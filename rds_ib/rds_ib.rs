// SPDX-License-Identifier: GPL-2.0

//! The IB/iWARP transport (`rds_ib/`), compiled into the core crate: reliable connected queue
//! pairs over ib_core and rdma_cm, wire-compatible with Linux's `rds_rdma` (C:
//! `net/rds/ib*.c`, `rdma_transport.c`). `Documentation/design.md` says why it is part of
//! `rds_rs.ko` rather than a module of its own.

mod ib;

pub(crate) use ib::IbModule;
