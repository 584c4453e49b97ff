//! Bindings and network namespaces: a deliberate difference from C RDS.
//!
//! C RDS 6.12 keys its bind table without the namespace, so binding an address and port that a
//! socket in another namespace holds fails with `EADDRINUSE`; rds_rs keeps bindings per
//! namespace, so it succeeds. The caller passes what the implementation under test must do.

use crate::{outcome, Report};
use librds::RdsSocket;
use std::net::{Ipv4Addr, SocketAddrV4};

pub(crate) fn run(r: &mut Report, expect_other_ns: &str) -> Result<(), String> {
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4200);
    let first = RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
    r.expect("netns_bind_first", &outcome(&first.bind(addr)), "OK");
    // SAFETY: `unshare` has no memory-safety preconditions; this process is single-threaded.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(format!(
            "unshare(CLONE_NEWNET): {}",
            std::io::Error::last_os_error()
        ));
    }
    let second = RdsSocket::new().map_err(|e| format!("socket in new netns: {e}"))?;
    r.expect(
        "netns_bind_same_port_other_namespace",
        &outcome(&second.bind(addr)),
        expect_other_ns,
    );
    // Taken either way: in C by the first socket (one table for all namespaces), in rds_rs
    // by the second (same namespace).
    let third = RdsSocket::new().map_err(|e| format!("socket in new netns: {e}"))?;
    r.expect(
        "netns_bind_same_port_same_namespace",
        &outcome(&third.bind(addr)),
        "EADDRINUSE",
    );
    Ok(())
}
