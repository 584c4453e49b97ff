// SPDX-License-Identifier: GPL-2.0

//! The loopback transport (`rds_loop/`), compiled into the core crate.

#[path = "loopback.rs"]
mod loopback;

pub(crate) use loopback::LOOPBACK;
