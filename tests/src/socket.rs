//! Socket creation and type checks: `socket(AF_RDS, type, protocol)` and close.
//!
//! C RDS (`rds_create`) accepts only `SOCK_SEQPACKET` with protocol 0 and refuses everything
//! else with `ESOCKTNOSUPPORT`; types the socket core itself rejects get `EINVAL`.

use crate::{outcome, Report};
use librds::{raw_socket, RdsSocket, AF_RDS};

pub(crate) fn run(r: &mut Report) {
    let s = RdsSocket::new();
    r.expect("socket_seqpacket", &outcome(&s), "OK");
    drop(s);

    for (name, ty) in [
        ("socket_stream", libc::SOCK_STREAM),
        ("socket_dgram", libc::SOCK_DGRAM),
        ("socket_raw", libc::SOCK_RAW),
        ("socket_rdm", libc::SOCK_RDM),
    ] {
        r.expect(
            name,
            &outcome(&raw_socket(AF_RDS, ty, 0)),
            "ESOCKTNOSUPPORT",
        );
    }
    for proto in [1, 6, 17, -1] {
        r.expect(
            &format!("socket_seqpacket_protocol_{proto}"),
            &outcome(&raw_socket(AF_RDS, libc::SOCK_SEQPACKET, proto)),
            "ESOCKTNOSUPPORT",
        );
    }
    // Flags in the type argument are the socket core's business and must work with RDS too.
    let s = raw_socket(
        AF_RDS,
        libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        0,
    );
    r.expect("socket_seqpacket_flags", &outcome(&s), "OK");
    // An out-of-range type is refused by the socket core before the family sees it.
    r.expect(
        "socket_type_out_of_range",
        &outcome(&raw_socket(AF_RDS, 99, 0)),
        "EINVAL",
    );

    // Many sockets opened and closed: creation and release leave nothing behind (the harness
    // checks the module unloads and kmemleak is quiet afterwards).
    let many: Result<Vec<_>, _> = (0..256).map(|_| RdsSocket::new()).collect();
    r.expect("socket_many_open", &outcome(&many), "OK");
    drop(many);
}
