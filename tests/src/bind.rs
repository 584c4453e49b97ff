//! `bind`, `connect`, `getsockname` and `getpeername`, with every refusal of C's `rds_bind`,
//! `rds_connect` and `rds_getname`.
//!
//! Addresses are given as raw `sockaddr` bytes so that short, odd and wrong-family addresses
//! reach the kernel as they are. Observations are errno names or the returned address bytes.

use crate::{outcome, Report};
use librds::RdsSocket;

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

fn sin(addr: [u8; 4], port: u16) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    v.extend_from_slice(&AF_INET.to_ne_bytes());
    v.extend_from_slice(&port.to_be_bytes());
    v.extend_from_slice(&addr);
    v.extend_from_slice(&[0; 8]);
    v
}

fn sin6(addr: [u8; 16], port: u16, scope: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(28);
    v.extend_from_slice(&AF_INET6.to_ne_bytes());
    v.extend_from_slice(&port.to_be_bytes());
    v.extend_from_slice(&[0; 4]);
    v.extend_from_slice(&addr);
    v.extend_from_slice(&scope.to_ne_bytes());
    v
}

fn v6(prefix: &[u8], last: &[u8]) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..prefix.len()].copy_from_slice(prefix);
    a[16 - last.len()..].copy_from_slice(last);
    a
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The observation of a getsockname/getpeername: the errno, or the bytes returned.
fn name(s: &RdsSocket, peer: bool) -> String {
    match s.name_raw(peer) {
        Ok(b) => format!("len={}:{}", b.len(), hex(&b)),
        Err(e) => outcome::<()>(&Err(e)),
    }
}

fn fresh() -> RdsSocket {
    RdsSocket::new().expect("socket(AF_RDS)")
}

/// Binds a fresh socket to `addr` and returns the outcome.
fn try_bind(addr: &[u8]) -> String {
    outcome(&fresh().bind_raw(addr))
}

pub(crate) fn run(r: &mut Report) {
    let lo = [127, 0, 0, 1];
    let loop6 = v6(&[], &[1]);

    // getsockname/getpeername of a new socket.
    let s = fresh();
    r.expect(
        "getsockname_unbound",
        &name(&s, false),
        &format!("len=16:{}", hex(&[0; 16])),
    );
    r.expect("getpeername_unconnected", &name(&s, true), "ENOTCONN");

    // Malformed addresses.
    r.expect("bind_len_0", &try_bind(&[]), "EINVAL");
    r.expect("bind_len_1", &try_bind(&sin(lo, 4000)[..1]), "EINVAL");
    r.expect(
        "bind_inet_len_15",
        &try_bind(&sin(lo, 4000)[..15]),
        "EINVAL",
    );
    r.expect(
        "bind_inet6_len_27",
        &try_bind(&sin6(loop6, 4000, 0)[..27]),
        "EINVAL",
    );
    let mut unix = sin(lo, 4000);
    unix[..2].copy_from_slice(&1u16.to_ne_bytes());
    r.expect("bind_family_unix", &try_bind(&unix), "EINVAL");
    r.expect("bind_inaddr_any", &try_bind(&sin([0; 4], 4000)), "EINVAL");
    r.expect("bind_broadcast", &try_bind(&sin([255; 4], 4000)), "EINVAL");
    r.expect(
        "bind_multicast",
        &try_bind(&sin([224, 0, 0, 1], 4000)),
        "EINVAL",
    );
    r.expect("bind6_any", &try_bind(&sin6([0; 16], 4000, 0)), "EINVAL");
    r.expect(
        "bind6_multicast",
        &try_bind(&sin6(v6(&[0xff, 2], &[1]), 4000, 0)),
        "EINVAL",
    );
    let mapped_any = v6(&[], &[0xff, 0xff, 0, 0, 0, 0]);
    r.expect(
        "bind6_mapped_any",
        &try_bind(&sin6(mapped_any, 4000, 0)),
        "EINVAL",
    );
    let mapped_bcast = v6(&[], &[0xff, 0xff, 255, 255, 255, 255]);
    r.expect(
        "bind6_mapped_broadcast",
        &try_bind(&sin6(mapped_bcast, 4000, 0)),
        "EINVAL",
    );
    let linklocal = v6(&[0xfe, 0x80], &[1]);
    r.expect(
        "bind6_linklocal_no_scope",
        &try_bind(&sin6(linklocal, 4000, 0)),
        "EINVAL",
    );

    // Addresses no loaded transport serves (the guest has only `lo`).
    r.expect(
        "bind_not_local",
        &try_bind(&sin([192, 0, 2, 77], 4000)),
        "EADDRNOTAVAIL",
    );
    r.expect(
        "bind6_linklocal_not_local",
        &try_bind(&sin6(linklocal, 4000, 1)),
        "EADDRNOTAVAIL",
    );
    r.expect(
        "bind6_global_not_local",
        &try_bind(&sin6(v6(&[0x20, 1, 0x0d, 0xb8], &[7]), 4000, 0)),
        "EADDRNOTAVAIL",
    );

    // The probe port is never bound.
    r.expect("bind_probe_port", &try_bind(&sin(lo, 1)), "EINVAL");

    // A good bind, its name, no rebinding, no second owner; a close frees the port.
    let a = fresh();
    r.expect("bind_loopback", &outcome(&a.bind_raw(&sin(lo, 4000))), "OK");
    r.expect(
        "getsockname_bound",
        &name(&a, false),
        &format!("len=16:{}", hex(&sin(lo, 4000))),
    );
    r.expect(
        "rebind_same",
        &outcome(&a.bind_raw(&sin(lo, 4001))),
        "EINVAL",
    );
    r.expect("bind_in_use", &try_bind(&sin(lo, 4000)), "EADDRINUSE");
    r.expect(
        "bind_other_loopback_addr",
        &try_bind(&sin([127, 0, 0, 2], 4000)),
        "OK",
    );
    drop(a);
    r.expect("bind_after_close", &try_bind(&sin(lo, 4000)), "OK");

    // Port 0 picks a free port (neither 0 nor the probe port).
    let p = fresh();
    r.expect("bind_port_0", &outcome(&p.bind_raw(&sin(lo, 0))), "OK");
    let got = p
        .name_raw(false)
        .ok()
        .and_then(|b| b.get(2..4).map(|x| u16::from_be_bytes([x[0], x[1]])));
    let picked = match got {
        Some(0) | Some(1) | None => format!("bad:{got:?}"),
        Some(_) => "picked".into(),
    };
    r.expect("bind_port_0_picks", &picked, "picked");

    // IPv6: ::1 is loopback; a v4-mapped loopback address is reported as AF_INET.
    let b = fresh();
    r.expect(
        "bind6_loopback",
        &outcome(&b.bind_raw(&sin6(loop6, 4002, 0))),
        "OK",
    );
    r.expect(
        "getsockname6_bound",
        &name(&b, false),
        &format!("len=28:{}", hex(&sin6(loop6, 4002, 0))),
    );
    let c = fresh();
    let mapped_lo = v6(&[], &[0xff, 0xff, 127, 0, 0, 1]);
    r.expect(
        "bind6_mapped_loopback",
        &outcome(&c.bind_raw(&sin6(mapped_lo, 4003, 0))),
        "OK",
    );
    r.expect(
        "getsockname6_mapped",
        &name(&c, false),
        &format!("len=16:{}", hex(&sin(lo, 4003))),
    );

    // connect: the default destination.
    let d = fresh();
    r.expect(
        "connect_len_1",
        &outcome(&d.connect_raw(&sin(lo, 5000)[..1])),
        "EINVAL",
    );
    r.expect(
        "connect_inet_len_15",
        &outcome(&d.connect_raw(&sin(lo, 5000)[..15])),
        "EINVAL",
    );
    r.expect(
        "connect_inaddr_any",
        &outcome(&d.connect_raw(&sin([0; 4], 5000))),
        "EDESTADDRREQ",
    );
    r.expect(
        "connect_multicast",
        &outcome(&d.connect_raw(&sin([239, 1, 1, 1], 5000))),
        "EINVAL",
    );
    r.expect(
        "connect_family_unix",
        &outcome(&d.connect_raw(&unix)),
        "EAFNOSUPPORT",
    );
    r.expect(
        "connect6_multicast",
        &outcome(&d.connect_raw(&sin6(v6(&[0xff, 2], &[1]), 5000, 0))),
        "EPROTOTYPE",
    );
    r.expect(
        "connect6_linklocal_no_scope",
        &outcome(&d.connect_raw(&sin6(linklocal, 5000, 0))),
        "EINVAL",
    );
    r.expect(
        "connect_loopback",
        &outcome(&d.connect_raw(&sin(lo, 5000))),
        "OK",
    );
    r.expect(
        "getpeername_connected",
        &name(&d, true),
        &format!("len=16:{}", hex(&sin(lo, 5000))),
    );
    r.expect(
        "getsockname_connected_unbound",
        &name(&d, false),
        &format!("len=16:{}", hex(&sin([0; 4], 0))),
    );
    let e = fresh();
    r.expect(
        "connect6_loopback",
        &outcome(&e.connect_raw(&sin6(loop6, 5001, 0))),
        "OK",
    );
    r.expect(
        "getpeername6",
        &name(&e, true),
        &format!("len=28:{}", hex(&sin6(loop6, 5001, 0))),
    );
    r.expect(
        "getsockname6_connected_unbound",
        &name(&e, false),
        &format!("len=28:{}", hex(&sin6([0; 16], 0, 0))),
    );
}
