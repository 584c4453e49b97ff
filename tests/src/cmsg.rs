//! Control messages on `sendmsg`: the checks of C's `rds_rm_size`, `rds_rdma_bytes` and
//! `rds_cmsg_send`, the socket core's limits on `msg_controllen`, and `MSG_ZEROCOPY`.
//!
//! No check here needs a valid RDMA operation (rds_rs runs RDMA over loopback, C does not):
//! every RDMA control message is malformed or combined with one it must not be combined with.
//! At the end, the receiver must have exactly the messages whose send succeeded.
//!
//! Over loopback, or over TCP between two namespaces (`RDS_TESTS_TCP`, see
//! `util::tcp_peer_netns`): the same checks, but for `MSG_ZEROCOPY` with `SO_ZEROCOPY`, which
//! C's `rds_sendmsg` allows on TCP alone.

use crate::util::{arrival_bound, bound, drain, far4, near4, over_tcp, res_obs, wait_msg_for};
use crate::Report;
use librds::cmsg::cmsg_len;
use librds::{
    sockaddr_bytes, ControlBuf, FaultRegion, RawSend, RdsSocket, UserBuf, RDS_ATOMIC_ARGS_SIZE,
    RDS_CMSG_ATOMIC_FADD, RDS_CMSG_CONG_UPDATE, RDS_CMSG_RDMA_ARGS, RDS_CMSG_RDMA_DEST,
    RDS_CMSG_RDMA_MAP, RDS_CMSG_RDMA_STATUS, RDS_CMSG_RXPATH_LATENCY, RDS_CMSG_ZCOPY_COMPLETION,
    RDS_CMSG_ZCOPY_COOKIE, RDS_GET_MR_ARGS_SIZE, RDS_RDMA_ARGS_SIZE, SOL_RDS,
};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Sends "c" to `dest` with the control bytes `ctl` and `controllen`.
fn send_ctl(s: &RdsSocket, dest: &SocketAddr, ctl: &[u8], controllen: usize, flags: i32) -> String {
    let name = sockaddr_bytes(dest);
    res_obs(&s.sendmsg_raw(&RawSend {
        name: UserBuf::Bytes(&name),
        namelen: name.len() as u32,
        iov: vec![(UserBuf::Bytes(b"c"), 1)],
        control: if ctl.is_empty() {
            UserBuf::Null
        } else {
            UserBuf::Bytes(ctl)
        },
        controllen,
        flags,
    }))
}

/// A well-formed `struct rds_rdma_args` naming one local iovec (at `iov_addr`) of 4096 bytes
/// and a remote range of 4096 bytes.
fn rdma_args(iov_addr: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(RDS_RDMA_ARGS_SIZE);
    v.extend_from_slice(&0x1234u64.to_ne_bytes()); // cookie
    v.extend_from_slice(&0u64.to_ne_bytes()); // remote_vec.addr
    v.extend_from_slice(&4096u64.to_ne_bytes()); // remote_vec.bytes
    v.extend_from_slice(&iov_addr.to_ne_bytes()); // local_vec_addr
    v.extend_from_slice(&1u64.to_ne_bytes()); // nr_local
    v.extend_from_slice(&0u64.to_ne_bytes()); // flags
    v.extend_from_slice(&0u64.to_ne_bytes()); // user_token
    v
}

pub(crate) fn run(r: &mut Report) -> Result<(), String> {
    crate::util::tcp_warm_up(r, &[("far4", far4(0))])?;
    let a = bound(near4(4400))?;
    let b = bound(far4(4401))?;
    let dest = far4(4401);
    let mut ok_sends = 0;
    let mut check = |r: &mut Report, name: &str, obs: String, want: &str| {
        if obs == "OK" {
            ok_sends += 1;
        }
        r.expect(name, &obs, want);
    };
    let one = |ctl: &ControlBuf| ctl.as_bytes().to_vec();

    // Header lengths.
    let mut c = ControlBuf::new();
    c.push_with_len(8, SOL_RDS, RDS_CMSG_RDMA_DEST, &[0; 8]);
    check(
        r,
        "cmsg_len_8",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "EINVAL",
    );
    let mut c = ControlBuf::new();
    c.push_with_len(0, libc::SOL_SOCKET, 99, &[0; 8]);
    check(
        r,
        "cmsg_len_0_sol_socket",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "EINVAL",
    );
    let mut c = ControlBuf::new();
    c.push_with_len(64, SOL_RDS, RDS_CMSG_RDMA_DEST, &[0; 8]);
    check(
        r,
        "cmsg_len_over_controllen",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "EINVAL",
    );
    let mut c = ControlBuf::new();
    c.push_with_len(64, libc::SOL_SOCKET, 99, &[0; 8]);
    check(
        r,
        "cmsg_len_over_controllen_sol_socket",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "EINVAL",
    );
    // Fewer bytes than one header: no control message at all.
    check(
        r,
        "controllen_8",
        send_ctl(&a, &dest, &[0xff; 8], 8, 0),
        "OK",
    );
    // A last message whose length reaches exactly the end of the buffer, unpadded.
    let mut c = ControlBuf::new();
    c.push_with_len(cmsg_len(4), libc::SOL_SOCKET, 99, &[1, 2, 3, 4]);
    check(
        r,
        "cmsg_unpadded_at_end",
        send_ctl(&a, &dest, &one(&c), cmsg_len(4), 0),
        "OK",
    );

    // Types: SOL_RDS types that are not for sendmsg, and unknown ones.
    for (name, ty) in [
        ("cmsg_type_0", 0),
        ("cmsg_type_rdma_status", RDS_CMSG_RDMA_STATUS),
        ("cmsg_type_cong_update", RDS_CMSG_CONG_UPDATE),
        ("cmsg_type_10", 10),
        ("cmsg_type_rxpath_latency", RDS_CMSG_RXPATH_LATENCY),
        ("cmsg_type_zcopy_completion", RDS_CMSG_ZCOPY_COMPLETION),
        ("cmsg_type_99", 99),
        ("cmsg_type_negative", -1),
    ] {
        let mut c = ControlBuf::new();
        c.push(SOL_RDS, ty, &[0; 8]);
        check(r, name, send_ctl(&a, &dest, &one(&c), c.len(), 0), "EINVAL");
    }
    // Other levels are not RDS's business.
    for (name, level, ty) in [
        (
            "cmsg_sol_socket_ignored",
            libc::SOL_SOCKET,
            libc::SCM_RIGHTS,
        ),
        ("cmsg_sol_ip_ignored", libc::SOL_IP, libc::IP_TOS),
        ("cmsg_level_12345_ignored", 12345, RDS_CMSG_RDMA_ARGS),
    ] {
        let mut c = ControlBuf::new();
        c.push(level, ty, &0i32.to_ne_bytes());
        check(r, name, send_ctl(&a, &dest, &one(&c), c.len(), 0), "OK");
    }
    let mut c = ControlBuf::new();
    c.push(libc::SOL_SOCKET, 99, &[7; 3])
        .push(libc::SOL_IP, 99, &[7; 12]);
    check(
        r,
        "cmsg_two_foreign_ignored",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "OK",
    );
    let mut c = ControlBuf::new();
    c.push(libc::SOL_SOCKET, 99, &[7; 4])
        .push(SOL_RDS, 99, &[0; 8]);
    check(
        r,
        "cmsg_foreign_then_unknown_rds",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "EINVAL",
    );

    // RDMA control messages that are malformed or must not be combined.
    let local = vec![0u8; 4096];
    let mut iov = Vec::new();
    iov.extend_from_slice(&(local.as_ptr() as u64).to_ne_bytes());
    iov.extend_from_slice(&4096u64.to_ne_bytes());
    let args = rdma_args(iov.as_ptr() as u64);
    let mut c = ControlBuf::new();
    c.push(SOL_RDS, RDS_CMSG_RDMA_DEST, &0x1234u64.to_ne_bytes())
        .push(SOL_RDS, RDS_CMSG_RDMA_ARGS, &args);
    check(
        r,
        "cmsg_dest_and_args",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "EINVAL",
    );
    let mut c = ControlBuf::new();
    c.push(SOL_RDS, RDS_CMSG_RDMA_ARGS, &args).push(
        SOL_RDS,
        RDS_CMSG_RDMA_DEST,
        &0x1234u64.to_ne_bytes(),
    );
    check(
        r,
        "cmsg_args_and_dest",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "EINVAL",
    );
    let mut c = ControlBuf::new();
    c.push(SOL_RDS, RDS_CMSG_RDMA_MAP, &[0; RDS_GET_MR_ARGS_SIZE])
        .push(SOL_RDS, RDS_CMSG_RDMA_ARGS, &args);
    check(
        r,
        "cmsg_map_and_args",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "EINVAL",
    );
    let mut c = ControlBuf::new();
    c.push(SOL_RDS, RDS_CMSG_RDMA_ARGS, &args[..RDS_RDMA_ARGS_SIZE - 8]);
    check(
        r,
        "cmsg_rdma_args_truncated",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "EINVAL",
    );
    let mut c = ControlBuf::new();
    c.push(SOL_RDS, RDS_CMSG_RDMA_ARGS, &[]);
    check(
        r,
        "cmsg_rdma_args_empty",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "EINVAL",
    );
    let mut c = ControlBuf::new();
    c.push(SOL_RDS, RDS_CMSG_RDMA_DEST, &[0; 4]);
    check(
        r,
        "cmsg_rdma_dest_truncated",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "EINVAL",
    );
    let mut c = ControlBuf::new();
    c.push(SOL_RDS, RDS_CMSG_RDMA_DEST, &0x00ab_cdefu64.to_ne_bytes());
    check(
        r,
        "cmsg_rdma_dest_unknown_cookie",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "EINVAL",
    );
    let mut c = ControlBuf::new();
    c.push(SOL_RDS, RDS_CMSG_RDMA_MAP, &[0; 16]);
    check(
        r,
        "cmsg_rdma_map_truncated",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "EINVAL",
    );
    let mut c = ControlBuf::new();
    c.push(
        SOL_RDS,
        RDS_CMSG_ATOMIC_FADD,
        &[0; RDS_ATOMIC_ARGS_SIZE - 8],
    );
    check(
        r,
        "cmsg_atomic_truncated",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "EINVAL",
    );

    // msg_controllen: the socket core copies the control buffer into the kernel first.
    check(
        r,
        "controllen_4k_zeros",
        send_ctl(&a, &dest, &[0; 4096], 4096, 0),
        "EINVAL",
    );
    let mut c = ControlBuf::new();
    c.push(libc::SOL_SOCKET, 99, &[0; 4]);
    let mut tail = c.as_bytes().to_vec();
    tail.resize(4096, 0);
    check(
        r,
        "controllen_4k_one_then_zeros",
        send_ctl(&a, &dest, &tail, 4096, 0),
        "EINVAL",
    );
    check(
        r,
        "controllen_64k_zeros",
        send_ctl(&a, &dest, &vec![0; 65536], 65536, 0),
        "EINVAL",
    );
    check(
        r,
        "controllen_1m_zeros",
        send_ctl(&a, &dest, &vec![0; 1 << 20], 1 << 20, 0),
        "ENOBUFS",
    );
    let name = sockaddr_bytes(&dest);
    let raw = |control: UserBuf<'_>, controllen: usize| {
        res_obs(&a.sendmsg_raw(&RawSend {
            name: UserBuf::Bytes(&name),
            namelen: name.len() as u32,
            iov: vec![(UserBuf::Bytes(b"c"), 1)],
            control,
            controllen,
            flags: 0,
        }))
    };
    check(
        r,
        "controllen_over_int_max",
        raw(UserBuf::Null, 1 << 31),
        "ENOBUFS",
    );
    check(r, "control_null_len_64", raw(UserBuf::Null, 64), "EFAULT");
    let fault = FaultRegion::unmapped(4096).map_err(|e| format!("mmap: {e}"))?;
    check(
        r,
        "control_unmapped_len_64",
        raw(UserBuf::Fault(&fault), 64),
        "EFAULT",
    );

    // MSG_ZEROCOPY and the zero-copy cookie.
    check(
        r,
        "msg_zerocopy_without_cookie",
        send_ctl(&a, &dest, &[], 0, libc::MSG_ZEROCOPY),
        "EINVAL",
    );
    let mut c = ControlBuf::new();
    c.push(SOL_RDS, RDS_CMSG_ZCOPY_COOKIE, &7u32.to_ne_bytes());
    check(
        r,
        "zcopy_cookie_without_msg_zerocopy",
        send_ctl(&a, &dest, &one(&c), c.len(), 0),
        "EINVAL",
    );
    check(
        r,
        "msg_zerocopy_with_cookie_without_so_zerocopy",
        send_ctl(&a, &dest, &one(&c), c.len(), libc::MSG_ZEROCOPY),
        "EINVAL",
    );
    r.expect(
        "so_zerocopy_set",
        &res_obs(&a.set_int(libc::SOL_SOCKET, libc::SO_ZEROCOPY, 1)),
        "OK",
    );
    // Zero-copy is for TCP only: refused on the loopback transport before the control
    // messages are looked at; over TCP a send with a cookie goes (tests/guest/tcp-zcopy.py
    // checks the data and the completions), and one without is refused by the cmsg checks.
    let (with_cookie, want) = if over_tcp() {
        ("msg_zerocopy_with_cookie_tcp", ["OK", "EINVAL"])
    } else {
        (
            "msg_zerocopy_with_cookie_loopback",
            ["EOPNOTSUPP", "EOPNOTSUPP"],
        )
    };
    check(
        r,
        with_cookie,
        send_ctl(&a, &dest, &one(&c), c.len(), libc::MSG_ZEROCOPY),
        want[0],
    );
    check(
        r,
        "msg_zerocopy_without_cookie_so_zerocopy",
        send_ctl(&a, &dest, &[], 0, libc::MSG_ZEROCOPY),
        want[1],
    );
    check(
        r,
        "so_zerocopy_plain_send",
        send_ctl(&a, &dest, &[], 0, 0),
        "OK",
    );

    // Only the sends that succeeded delivered anything: as many as that arrive (or the
    // arrival bound passes), then a while for any other.
    let mut delivered = 0;
    let t0 = Instant::now();
    while delivered < ok_sends && t0.elapsed() < arrival_bound() {
        if wait_msg_for(&b, Duration::from_millis(100)) {
            delivered += drain(&b);
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    delivered += drain(&b);
    r.expect(
        "delivered_only_ok",
        &format!("delivered={delivered}"),
        &format!("delivered={ok_sends}"),
    );
    Ok(())
}
