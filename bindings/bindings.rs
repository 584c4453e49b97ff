// SPDX-License-Identifier: GPL-2.0

//! The boundary between rds-rs and the C kernel.
//!
//! Everything that touches C lives here: the bindgen output for the kernel headers rds-rs needs
//! ([`raw`]), and thin safe wrappers over it. The RDS logic above this module contains no
//! `unsafe` code.
//!
//! The bindings are generated at build time (`gen-bindings.sh`) against the configured kernel
//! tree, with the clang flags the kernel used for its own bindings, so struct layouts always
//! match the kernel the module is built for.

#[path = "ib.rs"]
pub(crate) mod ib;
#[path = "mm.rs"]
pub(crate) mod mm;
#[path = "net.rs"]
pub(crate) mod net;
#[path = "raw.rs"]
pub(crate) mod raw;
#[path = "rcu.rs"]
pub(crate) mod rcu;
#[path = "sync.rs"]
pub(crate) mod sync;
#[path = "sys.rs"]
pub(crate) mod sys;
#[path = "tcp.rs"]
pub(crate) mod tcp;
#[path = "testhooks.rs"]
pub(crate) mod testhooks;
