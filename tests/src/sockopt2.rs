//! The socket options of the datapath: `RDS_CANCEL_SENT_TO`, `SO_TIMESTAMP` (at `SOL_SOCKET`
//! and at `SOL_RDS`, with the receive timestamp control message), `RDS_CONG_MONITOR`,
//! `SO_RDS_MSG_RXPATH_LATENCY`, and odd option lengths.
//!
//! Ports 4440-4459 on 127.0.0.1.

use crate::util::{bound, drain, err_name, fresh, res_obs, v4, wait_msg};
use crate::Report;
use librds::info::{RDS_INFO_RECV_MESSAGES, RDS_INFO_SEND_MESSAGES};
use librds::{
    sockaddr_bytes, FaultRegion, RawRecv, RdsSocket, UserBuf, UserBufMut, RDS_CANCEL_SENT_TO,
    RDS_CMSG_RXPATH_LATENCY, RDS_CONG_MONITOR, RDS_MSG_RX_DGRAM_TRACE_MAX, RDS_RECVERR, SOL_RDS,
    SO_RDS_MSG_RXPATH_LATENCY, SO_RDS_TRANSPORT,
};
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SO_TIMESTAMP_OLD: i32 = 29;
const SO_TIMESTAMP_NEW: i32 = 63;

fn set(s: &RdsSocket, level: i32, name: i32, val: UserBuf<'_>, len: usize) -> String {
    res_obs(&s.setsockopt_ptr(level, name, val, len))
}

/// Sends "stamp" from `a` to `dest` and receives it on `b` with `cap` bytes of control
/// room: describes the control messages (`none`, or `level/type/len` each) and checks a
/// timestamp's plausibility.
fn stamp_obs(a: &RdsSocket, b: &RdsSocket, dest: SocketAddr, cap: usize) -> String {
    if let Err(e) = a.send_to(b"stamp", dest) {
        return format!("send_{}", err_name(&e));
    }
    if !wait_msg(b) {
        return "nothing_arrived".into();
    }
    recv_cmsgs(b, cap)
}

fn recv_cmsgs(b: &RdsSocket, cap: usize) -> String {
    let mut buf = [0u8; 64];
    match b.recv_msg(&mut buf, cap, libc::MSG_DONTWAIT) {
        Ok(m) => {
            let mut v: Vec<String> = m
                .cmsgs
                .iter()
                .map(|c| {
                    let mut d = format!("{}/{}/{}", c.level, c.ty, c.data.len());
                    if c.level == libc::SOL_SOCKET && c.data.len() == 16 {
                        let sec = i64::from_ne_bytes(c.data[..8].try_into().expect("8"));
                        let now = SystemTime::now()
                            .duration_since(UNIX_EPOCH)
                            .map_or(0, |d| d.as_secs() as i64);
                        d += if (now - sec).abs() < 120 {
                            "/plausible"
                        } else {
                            "/implausible"
                        };
                    }
                    if c.level == SOL_RDS && c.ty == RDS_CMSG_RXPATH_LATENCY && !c.data.is_empty() {
                        let n = usize::from(c.data[0]).min(RDS_MSG_RX_DGRAM_TRACE_MAX);
                        let pos = c.data.get(1..1 + n).unwrap_or(&[]);
                        d += &format!("/traces={}/pos={:?}", c.data[0], pos);
                    }
                    d
                })
                .collect();
            if v.is_empty() {
                v.push("none".into());
            }
            format!(
                "len={} ctrunc={} cmsgs={}",
                m.len,
                m.flags & libc::MSG_CTRUNC != 0,
                v.join(",")
            )
        }
        Err(e) => err_name(&e),
    }
}

pub(crate) fn run(r: &mut Report) -> Result<(), String> {
    let a = bound(v4([127, 0, 0, 1], 4440))?;
    let b = bound(v4([127, 0, 0, 1], 4441))?;
    let dest = v4([127, 0, 0, 1], 4441);
    let sin = sockaddr_bytes(&dest);
    let mut sin20 = sin.clone();
    sin20.resize(20, 0);
    let sin6 = sockaddr_bytes(&"[::ffff:127.0.0.1]:4441".parse().expect("addr"));
    let fault = FaultRegion::unmapped(4096).map_err(|e| format!("mmap: {e}"))?;

    // RDS_CANCEL_SENT_TO.
    let u = fresh()?;
    r.expect(
        "cancel_unbound",
        &set(&u, SOL_RDS, RDS_CANCEL_SENT_TO, UserBuf::Bytes(&sin), 16),
        "ENOTCONN",
    );
    r.expect(
        "cancel_unbound_null",
        &set(&u, SOL_RDS, RDS_CANCEL_SENT_TO, UserBuf::Null, 16),
        "ENOTCONN",
    );
    for (name, val, len, want) in [
        ("cancel_len_0", UserBuf::Bytes(&sin), 0, "EINVAL"),
        ("cancel_len_8", UserBuf::Bytes(&sin), 8, "EINVAL"),
        ("cancel_len_15", UserBuf::Bytes(&sin), 15, "EINVAL"),
        ("cancel_null", UserBuf::Null, 16, "EFAULT"),
        ("cancel_unmapped", UserBuf::Fault(&fault), 16, "EFAULT"),
        ("cancel_null_len_28", UserBuf::Null, 28, "EFAULT"),
        ("cancel_sin", UserBuf::Bytes(&sin), 16, "OK"),
        ("cancel_len_20", UserBuf::Bytes(&sin20), 20, "OK"),
        ("cancel_sin6_mapped", UserBuf::Bytes(&sin6), 28, "OK"),
    ] {
        r.expect(name, &set(&a, SOL_RDS, RDS_CANCEL_SENT_TO, val, len), want);
    }
    // Over loopback a message is delivered when it is sent: nothing is left to cancel, and a
    // cancel takes nothing back from the receiver.
    for i in 0..3u8 {
        let _ = a.send_to(&[i; 10], dest);
    }
    let t0 = Instant::now();
    let queued = |s: &RdsSocket| {
        s.messages(RDS_INFO_RECV_MESSAGES)
            .map(|l| l.iter().filter(|m| m.lport == 4441).count())
            .unwrap_or(0)
    };
    while queued(&a) < 3 && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let cancel = set(&a, SOL_RDS, RDS_CANCEL_SENT_TO, UserBuf::Bytes(&sin), 16);
    let pending = a
        .messages(RDS_INFO_SEND_MESSAGES)
        .map_or_else(|e| err_name(&e), |l| l.len().to_string());
    r.expect(
        "cancel_after_delivery",
        &format!("{cancel} send_queue={pending} received={}", drain(&b)),
        "OK send_queue=0 received=3",
    );
    let again = a.send_to(b"after", dest);
    let got = wait_msg(&b);
    r.expect(
        "send_after_cancel",
        &format!("{} arrived={got}", res_obs(&again)),
        "OK arrived=true",
    );
    drain(&b);

    // SO_TIMESTAMP at SOL_SOCKET.
    r.expect(
        "timestamp_default_none",
        &stamp_obs(&a, &b, dest, 64),
        "len=5 ctrunc=false cmsgs=none",
    );
    r.expect(
        "timestamp_sol_socket_on",
        &res_obs(&b.set_int(libc::SOL_SOCKET, libc::SO_TIMESTAMP, 1)),
        "OK",
    );
    r.expect(
        "timestamp_sol_socket_get",
        &b.get_int(libc::SOL_SOCKET, libc::SO_TIMESTAMP)
            .map_or_else(|e| err_name(&e), |v| v.to_string()),
        "1",
    );
    r.expect(
        "timestamp_cmsg",
        &stamp_obs(&a, &b, dest, 64),
        "len=5 ctrunc=false cmsgs=1/29/16/plausible",
    );
    r.expect(
        "timestamp_cmsg_no_room",
        &stamp_obs(&a, &b, dest, 16),
        "len=5 ctrunc=true cmsgs=1/29/0",
    );
    r.expect(
        "timestamp_cmsg_no_control",
        &stamp_obs(&a, &b, dest, 0),
        "len=5 ctrunc=true cmsgs=none",
    );
    // An unmapped control buffer: the message is dequeued before the cmsg is written.
    let _ = a.send_to(b"stamp", dest);
    let obs = if wait_msg(&b) {
        let mut body = [0u8; 16];
        let mut m = RawRecv {
            iov: vec![(UserBufMut::Bytes(&mut body), 16)],
            control: UserBufMut::Fault(&fault),
            controllen: 64,
            ..Default::default()
        };
        let res = b.recvmsg_raw(&mut m);
        drop(m);
        format!(
            "{} then={}",
            res_obs(&res),
            res_obs(&b.recv(&mut [0u8; 16], libc::MSG_DONTWAIT))
        )
    } else {
        "nothing_arrived".into()
    };
    r.expect(
        "timestamp_cmsg_control_unmapped",
        &obs,
        "EFAULT then=EAGAIN",
    );
    // Switched off between arrival and reading: no timestamp.
    let _ = a.send_to(b"stamp", dest);
    let _ = wait_msg(&b);
    std::thread::sleep(Duration::from_millis(100));
    let _ = b.set_int(libc::SOL_SOCKET, libc::SO_TIMESTAMP, 0);
    r.expect(
        "timestamp_off_before_read",
        &recv_cmsgs(&b, 64),
        "len=5 ctrunc=false cmsgs=none",
    );
    r.expect(
        "timestamp_sol_socket_off",
        &stamp_obs(&a, &b, dest, 64),
        "len=5 ctrunc=false cmsgs=none",
    );
    // Switched on between arrival and reading: the message carries no time.
    let _ = a.send_to(b"stamp", dest);
    let _ = wait_msg(&b);
    std::thread::sleep(Duration::from_millis(100));
    let _ = b.set_int(libc::SOL_SOCKET, libc::SO_TIMESTAMP, 1);
    r.expect(
        "timestamp_on_after_arrival",
        &recv_cmsgs(&b, 64),
        "len=5 ctrunc=false cmsgs=none",
    );
    let _ = b.set_int(libc::SOL_SOCKET, libc::SO_TIMESTAMP, 0);
    r.expect(
        "timestamp_new_sol_socket",
        &res_obs(&b.set_int(libc::SOL_SOCKET, SO_TIMESTAMP_NEW, 1)),
        "OK",
    );
    r.expect(
        "timestamp_new_cmsg",
        &stamp_obs(&a, &b, dest, 64),
        "len=5 ctrunc=false cmsgs=1/63/16/plausible",
    );
    let _ = b.set_int(libc::SOL_SOCKET, SO_TIMESTAMP_NEW, 0);

    // SO_TIMESTAMP at SOL_RDS: exactly an int, else EFAULT.
    let c = bound(v4([127, 0, 0, 1], 4442))?;
    let dc = v4([127, 0, 0, 1], 4442);
    let one = 1i32.to_ne_bytes();
    let eight = [1u8, 0, 0, 0, 0, 0, 0, 0];
    for (name, val, len, want) in [
        ("timestamp_sol_rds_len_0", UserBuf::Bytes(&one), 0, "EFAULT"),
        ("timestamp_sol_rds_len_2", UserBuf::Bytes(&one), 2, "EFAULT"),
        (
            "timestamp_sol_rds_len_8",
            UserBuf::Bytes(&eight),
            8,
            "EFAULT",
        ),
        ("timestamp_sol_rds_null", UserBuf::Null, 4, "EFAULT"),
        (
            "timestamp_sol_rds_unmapped",
            UserBuf::Fault(&fault),
            4,
            "EFAULT",
        ),
    ] {
        r.expect(name, &set(&c, SOL_RDS, SO_TIMESTAMP_OLD, val, len), want);
    }
    r.expect(
        "timestamp_sol_rds_refused_left_off",
        &stamp_obs(&a, &c, dc, 64),
        "len=5 ctrunc=false cmsgs=none",
    );
    r.expect(
        "timestamp_sol_rds_on",
        &set(&c, SOL_RDS, SO_TIMESTAMP_OLD, UserBuf::Bytes(&one), 4),
        "OK",
    );
    r.expect(
        "timestamp_sol_rds_cmsg",
        &stamp_obs(&a, &c, dc, 64),
        "len=5 ctrunc=false cmsgs=1/29/16/plausible",
    );
    r.expect(
        "timestamp_sol_rds_seen_at_sol_socket",
        &c.get_int(libc::SOL_SOCKET, libc::SO_TIMESTAMP)
            .map_or_else(|e| err_name(&e), |v| v.to_string()),
        "1",
    );
    r.expect(
        "timestamp_sol_rds_get",
        &res_obs(&c.getsockopt_raw(SOL_RDS, SO_TIMESTAMP_OLD, 4)),
        "ENOPROTOOPT",
    );
    r.expect(
        "timestamp_new_sol_rds_on",
        &set(&c, SOL_RDS, SO_TIMESTAMP_NEW, UserBuf::Bytes(&one), 4),
        "OK",
    );
    r.expect(
        "timestamp_new_sol_rds_cmsg",
        &stamp_obs(&a, &c, dc, 64),
        "len=5 ctrunc=false cmsgs=1/63/16/plausible",
    );
    // At SOL_RDS, the old option does not clear the new format (C sets SOCK_TSTAMP_NEW only).
    let _ = set(&c, SOL_RDS, SO_TIMESTAMP_OLD, UserBuf::Bytes(&one), 4);
    r.expect(
        "timestamp_old_after_new_sol_rds",
        &stamp_obs(&a, &c, dc, 64),
        "len=5 ctrunc=false cmsgs=1/63/16/plausible",
    );
    let zero = 0i32.to_ne_bytes();
    r.expect(
        "timestamp_sol_rds_off",
        &set(&c, SOL_RDS, SO_TIMESTAMP_OLD, UserBuf::Bytes(&zero), 4),
        "OK",
    );
    r.expect(
        "timestamp_sol_rds_off_cmsg",
        &stamp_obs(&a, &c, dc, 64),
        "len=5 ctrunc=false cmsgs=none",
    );

    // RDS_CONG_MONITOR: set only.
    let eight_one = 1u64.to_ne_bytes();
    for (name, val, len, want) in [
        ("cong_monitor_len_3", UserBuf::Bytes(&one), 3, "EINVAL"),
        ("cong_monitor_null", UserBuf::Null, 4, "EFAULT"),
        ("cong_monitor_unmapped", UserBuf::Fault(&fault), 4, "EFAULT"),
        ("cong_monitor_set", UserBuf::Bytes(&one), 4, "OK"),
        ("cong_monitor_len_8", UserBuf::Bytes(&eight_one), 8, "OK"),
    ] {
        r.expect(name, &set(&a, SOL_RDS, RDS_CONG_MONITOR, val, len), want);
    }
    r.expect(
        "cong_monitor_get",
        &res_obs(&a.getsockopt_raw(SOL_RDS, RDS_CONG_MONITOR, 4)),
        "ENOPROTOOPT",
    );
    r.expect(
        "cong_monitor_clear",
        &set(&a, SOL_RDS, RDS_CONG_MONITOR, UserBuf::Bytes(&zero), 4),
        "OK",
    );

    // SO_RDS_MSG_RXPATH_LATENCY: struct rds_rx_trace_so { u8 rx_traces; u8 pos[3]; }, 4
    // bytes exactly; the control message is struct rds_cmsg_rx_trace (32 bytes).
    let d = bound(v4([127, 0, 0, 1], 4443))?;
    let dd = v4([127, 0, 0, 1], 4443);
    let good = [2u8, 0, 1, 0];
    for (name, val, len, want) in [
        ("rxpath_len_3", UserBuf::Bytes(&good), 3, "EFAULT"),
        (
            "rxpath_len_5",
            UserBuf::Bytes(&[2u8, 0, 1, 0, 0]),
            5,
            "EFAULT",
        ),
        ("rxpath_null", UserBuf::Null, 4, "EFAULT"),
        (
            "rxpath_traces_4",
            UserBuf::Bytes(&[4u8, 0, 1, 2]),
            4,
            "EFAULT",
        ),
        ("rxpath_pos_3", UserBuf::Bytes(&[2u8, 0, 3, 0]), 4, "EFAULT"),
    ] {
        r.expect(
            name,
            &set(&d, SOL_RDS, SO_RDS_MSG_RXPATH_LATENCY, val, len),
            want,
        );
    }
    r.expect(
        "rxpath_refused_no_cmsg",
        &stamp_obs(&a, &d, dd, 128),
        "len=5 ctrunc=false cmsgs=none",
    );
    r.expect(
        "rxpath_set",
        &set(
            &d,
            SOL_RDS,
            SO_RDS_MSG_RXPATH_LATENCY,
            UserBuf::Bytes(&good),
            4,
        ),
        "OK",
    );
    r.expect(
        "rxpath_cmsg",
        &stamp_obs(&a, &d, dd, 128),
        "len=5 ctrunc=false cmsgs=276/11/32/traces=2/pos=[0, 1]",
    );
    r.expect(
        "rxpath_get",
        &res_obs(&d.getsockopt_raw(SOL_RDS, SO_RDS_MSG_RXPATH_LATENCY, 4)),
        "ENOPROTOOPT",
    );
    r.expect(
        "rxpath_clear",
        &set(
            &d,
            SOL_RDS,
            SO_RDS_MSG_RXPATH_LATENCY,
            UserBuf::Bytes(&[0u8; 4]),
            4,
        ),
        "OK",
    );
    r.expect(
        "rxpath_cleared_no_cmsg",
        &stamp_obs(&a, &d, dd, 128),
        "len=5 ctrunc=false cmsgs=none",
    );

    // Option lengths: huge for set, negative for get (C compares an int with sizeof).
    let big = vec![0u8; 65536];
    r.expect(
        "recverr_set_len_64k",
        &set(&a, SOL_RDS, RDS_RECVERR, UserBuf::Bytes(&big), 65536),
        "OK",
    );
    let mut room = [0u8; 64];
    let (res, optlen) = a.getsockopt_ptr(SOL_RDS, RDS_RECVERR, UserBufMut::Bytes(&mut room), -1);
    r.expect(
        "recverr_get_len_negative",
        &format!("{} optlen={optlen}", res_obs(&res)),
        "OK optlen=4",
    );
    let (res, optlen) =
        a.getsockopt_ptr(SOL_RDS, SO_RDS_TRANSPORT, UserBufMut::Bytes(&mut room), -1);
    r.expect(
        "transport_get_len_negative",
        &format!("{} optlen={optlen}", res_obs(&res)),
        "OK optlen=4",
    );
    let (res, _) = a.getsockopt_ptr(SOL_RDS, RDS_RECVERR, UserBufMut::Null, 4);
    r.expect("recverr_get_null", &res_obs(&res), "EFAULT");
    r.expect(
        "recverr_get_optlen_unmapped",
        &res_obs(&a.getsockopt_bad_optlen(SOL_RDS, RDS_RECVERR, &fault)),
        "EFAULT",
    );
    Ok(())
}
