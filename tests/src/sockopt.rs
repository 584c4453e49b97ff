//! Socket options (`SOL_RDS`) and the TOS ioctls, with C RDS's refusals.
//!
//! `SO_RDS_TRANSPORT` is probed with `RDS_TRANS_GAP`, which no module provides: asking for IB
//! or TCP makes C RDS load those transports (`request_module`), which rds_rs does not have yet.

use crate::{outcome, Report};
use librds::{RdsSocket, SOL_RDS};

const RDS_RECVERR: i32 = 5;
const RDS_CONG_MONITOR: i32 = 6;
const SO_RDS_TRANSPORT: i32 = 8;
const RDS_TRANS_GAP: i32 = 1;
const SIOCRDSSETTOS: libc::c_ulong = 0x89e0;
const SIOCRDSGETTOS: libc::c_ulong = 0x89e1;

fn int(v: i32) -> [u8; 4] {
    v.to_ne_bytes()
}

/// A getsockopt observation: the errno, or `len=N:value`.
fn get(s: &RdsSocket, name: i32, cap: usize) -> String {
    match s.getsockopt_raw(SOL_RDS, name, cap) {
        Ok(b) if b.len() == 4 => format!("len=4:{}", i32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        Ok(b) => format!("len={}", b.len()),
        Err(e) => outcome::<()>(&Err(e)),
    }
}

fn fresh() -> RdsSocket {
    RdsSocket::new().expect("socket(AF_RDS)")
}

pub(crate) fn run(r: &mut Report) {
    let s = fresh();
    let one = int(1);
    // Levels and names nobody knows.
    r.expect(
        "setsockopt_bad_level",
        &outcome(&s.setsockopt_raw(999, RDS_RECVERR, Some(&one), 4)),
        "ENOPROTOOPT",
    );
    r.expect(
        "setsockopt_bad_name",
        &outcome(&s.setsockopt_raw(SOL_RDS, 9999, Some(&one), 4)),
        "ENOPROTOOPT",
    );
    r.expect(
        "getsockopt_bad_level",
        &outcome(&s.getsockopt_raw(999, RDS_RECVERR, 4)),
        "ENOPROTOOPT",
    );
    r.expect(
        "getsockopt_bad_name",
        &outcome(&s.getsockopt_raw(SOL_RDS, 9999, 4)),
        "ENOPROTOOPT",
    );

    // RDS_RECVERR: a boolean int.
    r.expect("recverr_default", &get(&s, RDS_RECVERR, 4), "len=4:0");
    r.expect(
        "recverr_len_0",
        &outcome(&s.setsockopt_raw(SOL_RDS, RDS_RECVERR, Some(&one), 0)),
        "EINVAL",
    );
    r.expect(
        "recverr_len_3",
        &outcome(&s.setsockopt_raw(SOL_RDS, RDS_RECVERR, Some(&one), 3)),
        "EINVAL",
    );
    r.expect(
        "recverr_null",
        &outcome(&s.setsockopt_raw(SOL_RDS, RDS_RECVERR, None, 4)),
        "EFAULT",
    );
    r.expect(
        "recverr_set_7",
        &outcome(&s.setsockopt_raw(SOL_RDS, RDS_RECVERR, Some(&int(7)), 4)),
        "OK",
    );
    r.expect("recverr_get_after_set", &get(&s, RDS_RECVERR, 4), "len=4:1");
    r.expect("recverr_get_len_3", &get(&s, RDS_RECVERR, 3), "EINVAL");
    r.expect("recverr_get_len_8", &get(&s, RDS_RECVERR, 8), "len=4:1");
    r.expect(
        "recverr_clear",
        &outcome(&s.setsockopt_raw(SOL_RDS, RDS_RECVERR, Some(&int(0)), 4)),
        "OK",
    );
    r.expect(
        "recverr_get_after_clear",
        &get(&s, RDS_RECVERR, 4),
        "len=4:0",
    );

    // RDS_CONG_MONITOR: a boolean int (no getsockopt).
    r.expect(
        "cong_monitor_len_2",
        &outcome(&s.setsockopt_raw(SOL_RDS, RDS_CONG_MONITOR, Some(&one), 2)),
        "EINVAL",
    );
    r.expect(
        "cong_monitor_on",
        &outcome(&s.setsockopt_raw(SOL_RDS, RDS_CONG_MONITOR, Some(&one), 4)),
        "OK",
    );
    r.expect(
        "cong_monitor_off",
        &outcome(&s.setsockopt_raw(SOL_RDS, RDS_CONG_MONITOR, Some(&int(0)), 4)),
        "OK",
    );

    // SO_RDS_TRANSPORT.
    r.expect(
        "transport_unbound",
        &get(&s, SO_RDS_TRANSPORT, 4),
        "len=4:-1",
    );
    let gap = int(RDS_TRANS_GAP);
    let mut eight = [0u8; 8];
    eight[..4].copy_from_slice(&gap);
    r.expect(
        "transport_len_3",
        &outcome(&s.setsockopt_raw(SOL_RDS, SO_RDS_TRANSPORT, Some(&gap), 3)),
        "EINVAL",
    );
    r.expect(
        "transport_len_8",
        &outcome(&s.setsockopt_raw(SOL_RDS, SO_RDS_TRANSPORT, Some(&eight), 8)),
        "EINVAL",
    );
    r.expect(
        "transport_null",
        &outcome(&s.setsockopt_raw(SOL_RDS, SO_RDS_TRANSPORT, None, 4)),
        "EFAULT",
    );
    r.expect(
        "transport_3",
        &outcome(&s.setsockopt_raw(SOL_RDS, SO_RDS_TRANSPORT, Some(&int(3)), 4)),
        "EINVAL",
    );
    r.expect(
        "transport_negative",
        &outcome(&s.setsockopt_raw(SOL_RDS, SO_RDS_TRANSPORT, Some(&int(-1)), 4)),
        "EINVAL",
    );
    r.expect(
        "transport_gap",
        &outcome(&s.setsockopt_raw(SOL_RDS, SO_RDS_TRANSPORT, Some(&gap), 4)),
        "ENOPROTOOPT",
    );
    r.expect(
        "transport_get_len_2",
        &get(&s, SO_RDS_TRANSPORT, 2),
        "EINVAL",
    );
    let b = fresh();
    let mut lo = Vec::new();
    lo.extend_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
    lo.extend_from_slice(&4100u16.to_be_bytes());
    lo.extend_from_slice(&[127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
    r.expect("transport_bind_loopback", &outcome(&b.bind_raw(&lo)), "OK");
    r.expect(
        "transport_after_bind",
        &get(&b, SO_RDS_TRANSPORT, 4),
        "len=4:3",
    );
    r.expect(
        "transport_set_after_bind",
        &outcome(&b.setsockopt_raw(SOL_RDS, SO_RDS_TRANSPORT, Some(&gap), 4)),
        "EOPNOTSUPP",
    );

    // The TOS ioctls: loopback has no TOS map, so only reading works.
    r.expect(
        "gettos_default",
        &match s.ioctl_byte(SIOCRDSGETTOS, Some(0xaa)) {
            Ok(v) => format!("tos={v}"),
            Err(e) => outcome::<()>(&Err(e)),
        },
        "tos=0",
    );
    r.expect(
        "gettos_null",
        &outcome(&s.ioctl_byte(SIOCRDSGETTOS, None)),
        "EFAULT",
    );
    r.expect(
        "settos_unbound",
        &outcome(&s.ioctl_byte(SIOCRDSSETTOS, Some(1))),
        "ENOTTY",
    );
    r.expect(
        "settos_null",
        &outcome(&s.ioctl_byte(SIOCRDSSETTOS, None)),
        "EFAULT",
    );
    r.expect(
        "settos_loopback",
        &outcome(&b.ioctl_byte(SIOCRDSSETTOS, Some(1))),
        "ENOTTY",
    );
    r.expect(
        "ioctl_unknown",
        &outcome(&s.ioctl_byte(0x89e5, Some(0))),
        "ENOTTY",
    );
}
