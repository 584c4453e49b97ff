// SPDX-License-Identifier: GPL-2.0

//! rds_rs: Reliable Datagram Sockets (`AF_RDS`) in Rust.
//!
//! The crate root of `rds_rs.ko`: the module declaration, the list of the core's modules and the
//! order in which they are set up and torn down. The design is described in
//! `Documentation/design.md`.
//!
//! Layout:
//! - `bindings` (from `bindings/`): the only code that touches C, with thin safe wrappers.
//! - `proto` (from `proto/src/`): pure, `no_std` protocol logic shared with host tests.
//! - [`socket`]: the `AF_RDS` socket family and the state shared by all sockets.
//! - [`bind`]: the table of bound sockets.
//! - [`send`], [`recv`]: the data path; [`message`]: messages in both directions.
//! - [`conn`]: connections and their send queues; [`transport`]: the transport interface and
//!   the registry the transports join at load; `rds_loop` (from `rds_loop/`): the loopback
//!   transport; `rds_ib` (from `rds_ib/`): the IB/iWARP transport; `rds_tcp` (from
//!   `rds_tcp/`): the TCP transport. Only this file names them, to set them up and tear them
//!   down.
//! - [`rdma`]: memory registrations, RDMA and atomic operations, notifications, the barrier.
//! - [`cong`]: congestion maps; [`info`]: the `RDS_INFO_*` getsockopts; [`stats`]: counters.
//! - `kunit` (test build only): the Rust side of the module's KUnit suite (`rds/kunit.c`).

// `pin_init!` of the larger structs (`Conn`) needs more macro recursion than the default.
#![recursion_limit = "256"]
// Unsafe code lives in `bindings` only (`Documentation/design.md`, "Pieces").
#![deny(unsafe_code)]

use kernel::{prelude::*, sync::Arc};

mod bind;
#[path = "../bindings/bindings.rs"]
#[allow(unsafe_code)]
mod bindings;
mod cong;
mod conn;
mod info;
#[cfg(rds_test)]
// The KUnit suite's entry points are `#[no_mangle]` functions that `rds/kunit.c` calls (the
// lint counts them as unsafe code); it has no `unsafe` block.
#[allow(unsafe_code)]
mod kunit;
mod message;
#[path = "../proto/src/proto.rs"]
pub mod proto;
mod rdma;
#[path = "../rds_ib/rds_ib.rs"]
mod rds_ib;
#[path = "../rds_loop/rds_loop.rs"]
mod rds_loop;
#[path = "../rds_tcp/rds_tcp.rs"]
mod rds_tcp;
mod recv;
mod send;
mod socket;
mod stats;
mod transport;

module! {
    type: RdsModule,
    name: "rds_rs",
    author: "rds-rs developers",
    description: "Reliable Datagram Sockets (AF_RDS) in Rust",
    license: "GPL",
}

/// The loaded module: owns every registration and the core's shared state.
///
/// Teardown order (see [`Drop`]): the socket family first (no socket can exist at unload, and
/// none can be created afterwards), then the reaper, then the namespace hook (unregistering it
/// destroys the connections of every namespace), the test hooks, then the workqueue is
/// drained and the deferred drops are flushed, so that the last reference to the shared state
/// is the module's own.
struct RdsModule {
    /// The module, whose init and exit run in process context.
    module: &'static ThisModule,
    family: Option<bindings::net::Registration<socket::Rds>>,
    pernet: Option<bindings::sys::PernetRegistration<socket::Shared>>,
    /// The loopback transport's place in the registry.
    lo: Option<transport::Membership>,
    ib: Option<rds_ib::IbModule>,
    tcp: Option<rds_tcp::TcpModule>,
    sysctl: Option<bindings::sys::SysctlRegistration>,
    #[cfg(rds_test)]
    hooks: Option<bindings::testhooks::TestHooks>,
    /// The module's reference to the shared state: at unload, after the teardown, the last one.
    shared: Option<Arc<socket::Shared>>,
}

impl kernel::Module for RdsModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        // /proc/sys/net/rds exists while C RDS is loaded; then the family registration below
        // fails with EEXIST, which is the error to report. Without C RDS, a failure here is a
        // shortage of memory, not worth refusing to load for.
        let sysctl = bindings::sys::SysctlRegistration::new()
            .inspect_err(|_| pr_warn!("cannot register /proc/sys/net/rds\n"))
            .ok();
        let shared = socket::Shared::new()?;
        // Loopback first: it serves the loopback addresses, which no other transport does.
        let loopback = rds_loop::Loopback::new()?;
        let lo = transport::join(&shared, loopback.clone())?;
        #[cfg(rds_test)]
        let hooks = Some(bindings::testhooks::TestHooks::new(Arc::new(
            Hooks {
                shared: shared.clone(),
                lo: loopback,
            },
            GFP_KERNEL,
        )?)?);
        #[cfg(not(rds_test))]
        drop(loopback);
        let pernet = bindings::sys::PernetRegistration::new(shared.clone())?;
        let ctx = bindings::sync::ProcessCtx::for_module(module);
        // The IB transport: RDMA devices present are added now; on a machine without one,
        // only loopback serves.
        let ib = rds_ib::IbModule::new(&shared, &ctx)
            .inspect_err(|e| pr_warn!("no IB transport ({:?})\n", e.to_errno()))
            .ok();
        // The TCP transport: a listener in every namespace.
        let tcp = rds_tcp::TcpModule::new(&shared, &ctx)
            .inspect_err(|e| pr_warn!("no TCP transport ({:?})\n", e.to_errno()))
            .ok();
        let family = bindings::net::Registration::<socket::Rds>::new(module, shared.clone())
            .inspect_err(|e| {
                pr_err!(
                    "cannot register PF_RDS ({:?}); is another RDS module loaded?\n",
                    e.to_errno()
                )
            })?;
        shared.start_reaper();
        Ok(Self {
            module,
            family: Some(family),
            pernet: Some(pernet),
            lo: Some(lo),
            ib,
            tcp,
            sysctl,
            #[cfg(rds_test)]
            hooks,
            shared: Some(shared),
        })
    }
}

impl Drop for RdsModule {
    fn drop(&mut self) {
        let ctx = bindings::sync::ProcessCtx::for_module(self.module);
        let Some(shared) = self.shared.take() else {
            return;
        };
        drop(self.family.take());
        // The bind table's deferred frees are the module's code: they finish first.
        bindings::rcu::barrier(&ctx);
        if let Some(ib) = self.ib.as_mut() {
            ib.stop_listening();
        }
        if let Some(tcp) = self.tcp.as_mut() {
            tcp.stop_listening(&ctx);
        }
        shared.stop_reaper(&ctx);
        drop(self.pernet.take());
        shared.conns.destroy_all(&ctx);
        // Every device is removed from the IB transport (no connection is left).
        drop(self.ib.take());
        drop(self.tcp.take());
        #[cfg(rds_test)]
        drop(self.hooks.take());
        drop(self.lo.take());
        shared.wq.drain();
        bindings::sync::flush_deferred(&ctx);
        drop(self.sysctl.take());
        // Nothing may hold the shared state now: a reference left would keep its workqueue
        // and everything in it for ever. Said loudly (the tests fail on it) rather than only
        // found by kmemleak, so that the unload that leaked is known.
        if Arc::into_unique_or_drop(shared).is_none() {
            pr_err!(
                "leak: the shared state is still referenced after unload ({} connections alive)\n",
                conn::live()
            );
        }
    }
}

/// The test build's hooks act on the shared state and on the loopback transport.
#[cfg(rds_test)]
struct Hooks {
    shared: Arc<socket::Shared>,
    lo: Arc<rds_loop::Loopback>,
}

#[cfg(rds_test)]
impl bindings::testhooks::TestTarget for Hooks {
    fn softirq_run(&self) {
        self.lo.softirq_run();
    }

    fn reset_all(&self, _ctx: &bindings::sync::ProcessCtx) -> Result {
        self.shared.conns.reset_all();
        Ok(())
    }

    fn inject(&self, frame: &[u8], ctx: &bindings::sync::ProcessCtx) -> Result {
        self.lo
            .inject(&self.shared, bindings::net::NetId::init(), frame, ctx)
    }

    fn kunit(&self, case: u32, ctx: &bindings::sync::ProcessCtx) -> i32 {
        kunit::run_on_shared(&self.shared, case, ctx)
    }
}
