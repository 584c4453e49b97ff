// SPDX-License-Identifier: GPL-2.0

//! The `AF_RDS` socket family.
//!
//! C counterpart: `net/rds/af_rds.c` (`rds_create`, `rds_release`).
//!
//! RDS sockets are `SOCK_SEQPACKET` with protocol 0; `socket(2)` with any other type or protocol
//! fails with `ESOCKTNOSUPPORT`, as in C RDS.

use crate::bindings::net::{esocktnosupport, Family, FamilyTables, SOCK_SEQPACKET};
use kernel::{c_str, prelude::*};

/// `AF_RDS` from `include/linux/socket.h`.
pub(crate) const AF_RDS: u16 = 21;

/// The RDS socket family.
pub(crate) struct Rds;

/// The state of one RDS socket.
pub(crate) struct RdsSocket {}

static RDS_TABLES: FamilyTables = FamilyTables::new();

impl Family for Rds {
    type Socket = RdsSocket;
    const FAMILY: u16 = AF_RDS;
    const NAME: &'static CStr = c_str!("RDS_RS");

    fn tables() -> &'static FamilyTables {
        &RDS_TABLES
    }

    fn create(sock_type: i32, protocol: i32, _kern: bool) -> Result<Pin<KBox<RdsSocket>>> {
        if sock_type != SOCK_SEQPACKET || protocol != 0 {
            return Err(esocktnosupport());
        }
        Ok(KBox::pin(RdsSocket {}, GFP_KERNEL)?)
    }

    fn release(_socket: Pin<&RdsSocket>) {}
}
