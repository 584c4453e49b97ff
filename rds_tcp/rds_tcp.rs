// SPDX-License-Identifier: GPL-2.0

//! The TCP transport (`rds_tcp/`), compiled into the core crate: RDS over kernel TCP sockets,
//! wire-compatible with Linux's `rds_tcp` (C: `net/rds/tcp*.c`).

mod tcp;

pub(crate) use tcp::TcpModule;
