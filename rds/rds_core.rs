// SPDX-License-Identifier: GPL-2.0

//! rds_rs: Reliable Datagram Sockets (`AF_RDS`) in Rust.
//!
//! The crate root of `rds_rs.ko`: the module declaration, the list of the core's modules and the
//! order in which they are set up. The design is described in `Documentation/design.md`.
//!
//! Layout:
//! - `bindings` (from `bindings/`): the only code that touches C, with thin safe wrappers.
//! - `proto` (from `proto/src/`): pure, `no_std` protocol logic shared with host tests.
//! - [`socket`]: the `AF_RDS` socket family.
//! - [`bind`]: the table of bound sockets.
//! - [`kunit`]: the Rust side of the module's KUnit suite (`rds/kunit.c`).

use kernel::prelude::*;

mod bind;
#[path = "../bindings/bindings.rs"]
mod bindings;
mod kunit;
#[path = "../proto/src/proto.rs"]
pub mod proto;
mod socket;

module! {
    type: RdsModule,
    name: "rds_rs",
    author: "rds-rs developers",
    description: "Reliable Datagram Sockets (AF_RDS) in Rust",
    license: "GPL",
}

/// The loaded module: owns every registration.
///
/// Rust drops fields in declaration order, so fields are declared in the reverse of the order
/// `init` sets them up. The family registration comes last in `init` (see
/// [`bindings::net::Registration::new`]) and so first here.
struct RdsModule {
    _family: bindings::net::Registration<socket::Rds>,
}

impl kernel::Module for RdsModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let shared = socket::Shared::new()?;
        let family =
            bindings::net::Registration::<socket::Rds>::new(module, shared).inspect_err(|e| {
                pr_err!(
                    "cannot register PF_RDS ({:?}); is another RDS module loaded?\n",
                    e.to_errno()
                )
            })?;
        pr_info!("PF_RDS registered\n");
        Ok(Self { _family: family })
    }
}
