//! The RDMA ABI checks whose answer does not depend on RDMA working: run against C RDS
//! (`rdma-abi.c.tap`) and rds_rs (`rdma-abi.rs.tap`), and the two must agree check by check.
//!
//! C's loopback transport has no memory registrations and no RDMA (`EOPNOTSUPP` once a request
//! gets that far), so every check here fails before the transport matters: the argument
//! checks of `RDS_GET_MR`, `RDS_GET_MR_FOR_DEST` and `RDS_FREE_MR` (C's `rds_get_mr`,
//! `__rds_rdma_map` up to its transport check, `rds_free_mr`), and those of the RDMA control
//! messages on `sendmsg` (C's `rds_rdma_bytes`, `rds_rm_size`, `rds_rdma_extra_size`,
//! `rds_cmsg_send`, `rds_cmsg_rdma_args`, `rds_cmsg_atomic`, in C's order). At the end the
//! receiver must have got nothing.
//!
//! Ports 4700-4709 on 127.0.0.1.

use crate::util::{bound, drain, fresh, res_obs, v4};
use crate::Report;
use librds::rdma::{
    encode_iovecs, FreeMrArgs, GetMrArgs, RDS_GET_MR_FOR_DEST_ARGS_SIZE, RDS_RDMA_INVALIDATE,
    RDS_RDMA_NOTIFY_ME, RDS_RDMA_READWRITE,
};
use librds::{
    sockaddr_bytes, AtomicArgs, AtomicOp, ControlBuf, FaultRegion, RawSend, RdmaArgs, RdmaMem,
    RdsIovec, RdsSocket, UserBuf, RDS_CMSG_ATOMIC_FADD, RDS_CMSG_RDMA_ARGS, RDS_CMSG_RDMA_DEST,
    RDS_CMSG_RDMA_MAP, RDS_FREE_MR, RDS_GET_MR, RDS_GET_MR_FOR_DEST, SOL_RDS,
};
use std::net::SocketAddr;
use std::time::Duration;

const LO: [u8; 4] = [127, 0, 0, 1];

/// Sends one byte to `dest` with control messages `c` (payload from `payload`, which may be
/// a faulting region).
fn send_with(s: &RdsSocket, dest: &SocketAddr, c: &ControlBuf, payload: UserBuf<'_>) -> String {
    let name = sockaddr_bytes(dest);
    res_obs(&s.sendmsg_raw(&RawSend {
        name: UserBuf::Bytes(&name),
        namelen: name.len() as u32,
        iov: vec![(payload, 1)],
        control: UserBuf::Bytes(c.as_bytes()),
        controllen: c.len(),
        flags: 0,
    }))
}

pub(crate) fn run(r: &mut Report) -> Result<(), String> {
    let a = bound(v4(LO, 4700))?;
    let b = bound(v4(LO, 4701))?;
    let dest = v4(LO, 4701);
    let unbound = fresh()?;
    let mem = RdmaMem::new(4 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let fault = FaultRegion::unmapped(2 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let ro = FaultRegion::read_only(2 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let (fa, ra) = (fault.addr() as u64, ro.addr() as u64);

    // RDS_GET_MR and RDS_GET_MR_FOR_DEST: length, readability, binding.
    let mr = GetMrArgs {
        vec: RdsIovec {
            addr: mem.at(0),
            bytes: 4096,
        },
        cookie_addr: 0,
        flags: 0,
    };
    let mut long = mr.encode().to_vec();
    long.resize(256, 0);
    let opt = |s: &RdsSocket, name: i32, val: UserBuf<'_>, len: usize| {
        res_obs(&s.setsockopt_ptr(SOL_RDS, name, val, len))
    };
    for (cname, len, want) in [
        ("get_mr_optlen_0", 0, "EINVAL"),
        ("get_mr_optlen_31", 31, "EINVAL"),
        ("get_mr_optlen_33", 33, "EINVAL"),
        ("get_mr_optlen_160", 160, "EINVAL"),
    ] {
        r.expect(
            cname,
            &opt(&a, RDS_GET_MR, UserBuf::Bytes(&long), len),
            want,
        );
    }
    r.expect(
        "get_mr_null",
        &opt(&a, RDS_GET_MR, UserBuf::Null, 32),
        "EFAULT",
    );
    r.expect(
        "get_mr_args_unmapped",
        &opt(&a, RDS_GET_MR, UserBuf::Fault(&fault), 32),
        "EFAULT",
    );
    r.expect(
        "get_mr_unbound",
        &res_obs(&unbound.get_mr(mem.at(0), 4096, 0)),
        "ENOTCONN",
    );
    r.expect(
        "get_mr_unbound_zero_length",
        &res_obs(&unbound.get_mr(mem.at(0), 0, 0)),
        "ENOTCONN",
    );
    r.expect(
        "get_mr_unbound_wrapping",
        &res_obs(&unbound.get_mr(u64::MAX - 10, 100, 0)),
        "ENOTCONN",
    );
    r.expect(
        "get_mr_unbound_cookie_addr_unmapped",
        &res_obs(&unbound.get_mr_args(&GetMrArgs {
            cookie_addr: fa,
            ..mr
        })),
        "ENOTCONN",
    );
    r.expect(
        "get_mr_unbound_optlen_31",
        &opt(&unbound, RDS_GET_MR, UserBuf::Bytes(&long), 31),
        "EINVAL",
    );
    r.expect(
        "get_mr_unbound_args_unmapped",
        &opt(&unbound, RDS_GET_MR, UserBuf::Fault(&fault), 32),
        "EFAULT",
    );
    for (cname, len, want) in [
        ("get_mr_for_dest_optlen_32", 32, "EINVAL"),
        ("get_mr_for_dest_optlen_159", 159, "EINVAL"),
        ("get_mr_for_dest_optlen_161", 161, "EINVAL"),
    ] {
        r.expect(
            cname,
            &opt(&a, RDS_GET_MR_FOR_DEST, UserBuf::Bytes(&long), len),
            want,
        );
    }
    r.expect(
        "get_mr_for_dest_null",
        &opt(
            &a,
            RDS_GET_MR_FOR_DEST,
            UserBuf::Null,
            RDS_GET_MR_FOR_DEST_ARGS_SIZE,
        ),
        "EFAULT",
    );
    r.expect(
        "get_mr_for_dest_args_unmapped",
        &opt(
            &a,
            RDS_GET_MR_FOR_DEST,
            UserBuf::Fault(&fault),
            RDS_GET_MR_FOR_DEST_ARGS_SIZE,
        ),
        "EFAULT",
    );
    r.expect(
        "get_mr_for_dest_unbound",
        &res_obs(&unbound.get_mr_for_dest(&dest, mem.at(0), 4096, 0)),
        "ENOTCONN",
    );

    // RDS_FREE_MR: length, readability, cookies this socket does not own.
    let fm = FreeMrArgs {
        cookie: 0x0bad_c0de,
        flags: 0,
    }
    .encode();
    let mut fml = fm.to_vec();
    fml.resize(64, 0);
    for (cname, len) in [
        ("free_mr_optlen_0", 0),
        ("free_mr_optlen_8", 8),
        ("free_mr_optlen_15", 15),
        ("free_mr_optlen_17", 17),
        ("free_mr_optlen_32", 32),
    ] {
        r.expect(
            cname,
            &opt(&a, RDS_FREE_MR, UserBuf::Bytes(&fml), len),
            "EINVAL",
        );
    }
    r.expect(
        "free_mr_null",
        &opt(&a, RDS_FREE_MR, UserBuf::Null, 16),
        "EFAULT",
    );
    r.expect(
        "free_mr_args_unmapped",
        &opt(&a, RDS_FREE_MR, UserBuf::Fault(&fault), 16),
        "EFAULT",
    );
    r.expect(
        "free_mr_unknown_cookie",
        &res_obs(&a.free_mr(0x0bad_c0de, 0)),
        "EINVAL",
    );
    r.expect(
        "free_mr_unknown_cookie_invalidate",
        &res_obs(&a.free_mr(0x1234_5678_0bad_c0de, RDS_RDMA_INVALIDATE)),
        "EINVAL",
    );
    r.expect(
        "free_mr_unbound_unknown_cookie",
        &res_obs(&unbound.free_mr(0x0bad_c0de, 0)),
        "EINVAL",
    );
    r.expect(
        "free_mr_unbound_cookie_0",
        &res_obs(&unbound.free_mr(0, 0)),
        "EINVAL",
    );

    // The RDMA control messages on sendmsg.
    let iov = vec![RdsIovec {
        addr: mem.at(100),
        bytes: 64,
    }];
    let iov_bytes = encode_iovecs(&iov);
    let args = RdmaArgs {
        cookie: 0x1234,
        remote: RdsIovec { addr: 0, bytes: 64 },
        local_vec_addr: iov_bytes.as_ptr() as u64,
        nr_local: 1,
        flags: RDS_RDMA_READWRITE | RDS_RDMA_NOTIFY_ME,
        user_token: 1,
    };
    let atomic = AtomicArgs {
        cookie: 0x1234,
        local_addr: mem.at(2048),
        remote_addr: 0,
        op: AtomicOp::Fadd { add: 1 },
        flags: 0,
        user_token: 2,
    };
    let map = GetMrArgs {
        vec: RdsIovec {
            addr: mem.at(0),
            bytes: 64,
        },
        cookie_addr: 0,
        flags: 0,
    };
    let one = UserBuf::Bytes(b"x");
    let build = |f: &dyn Fn(&mut ControlBuf)| {
        let mut c = ControlBuf::new();
        f(&mut c);
        c
    };
    let with_args = |f: &dyn Fn(&mut RdmaArgs)| {
        let mut x = args;
        f(&mut x);
        x
    };
    let with_atomic = |f: &dyn Fn(&mut AtomicArgs)| {
        let mut x = atomic;
        f(&mut x);
        x
    };
    let iovecs_at = |v: &[RdsIovec]| encode_iovecs(v);
    let empty_iov = iovecs_at(&[RdsIovec {
        addr: mem.at(0),
        bytes: 0,
    }]);
    let wrap_iov = iovecs_at(&[RdsIovec {
        addr: u64::MAX - 10,
        bytes: 64,
    }]);
    let big_iov = iovecs_at(&[RdsIovec {
        addr: mem.at(0),
        bytes: 1 << 32,
    }]);
    let unmapped_iov = iovecs_at(&[RdsIovec {
        addr: fa,
        bytes: 64,
    }]);
    // 4 GiB - 1: 2^20 pages, more scatterlist than C's rds_message_alloc will allocate.
    let huge_iov = iovecs_at(&[RdsIovec {
        addr: mem.at(0),
        bytes: u64::from(u32::MAX),
    }]);
    let ro_iov = iovecs_at(&[RdsIovec {
        addr: ra,
        bytes: 64,
    }]);
    let two_iov = iovecs_at(&[
        RdsIovec {
            addr: mem.at(0),
            bytes: 64,
        },
        RdsIovec {
            addr: fa,
            bytes: 64,
        },
    ]);
    let checks: Vec<(&str, ControlBuf, &str)> = vec![
        (
            "args_truncated_55",
            build(&|c| {
                c.push(SOL_RDS, RDS_CMSG_RDMA_ARGS, &args.encode()[..55]);
            }),
            "EINVAL",
        ),
        (
            "args_truncated_0",
            build(&|c| {
                c.push(SOL_RDS, RDS_CMSG_RDMA_ARGS, &[]);
            }),
            "EINVAL",
        ),
        (
            "dest_and_args",
            build(&|c| {
                c.rdma_dest(0x1234).rdma_args(&args);
            }),
            "EINVAL",
        ),
        (
            "args_and_dest",
            build(&|c| {
                c.rdma_args(&args).rdma_dest(0x1234);
            }),
            "EINVAL",
        ),
        (
            "map_and_args",
            build(&|c| {
                c.rdma_map(&map).rdma_args(&args);
            }),
            "EINVAL",
        ),
        (
            "args_and_map",
            build(&|c| {
                c.rdma_args(&args).rdma_map(&map);
            }),
            "EINVAL",
        ),
        (
            "dest_and_atomic",
            build(&|c| {
                c.rdma_dest(0x1234).atomic(&atomic);
            }),
            "EINVAL",
        ),
        (
            "atomic_and_map",
            build(&|c| {
                c.atomic(&atomic).rdma_map(&map);
            }),
            "EINVAL",
        ),
        (
            "unknown_type_99",
            build(&|c| {
                c.push(SOL_RDS, 99, &[0; 8]);
            }),
            "EINVAL",
        ),
        (
            "args_nr_local_0",
            build(&|c| {
                c.rdma_args(&with_args(&|x| x.nr_local = 0));
            }),
            "EINVAL",
        ),
        (
            "args_nr_local_1025",
            build(&|c| {
                c.rdma_args(&with_args(&|x| x.nr_local = 1025));
            }),
            "EMSGSIZE",
        ),
        (
            "args_nr_local_max",
            build(&|c| {
                c.rdma_args(&with_args(&|x| x.nr_local = u64::MAX));
            }),
            "EMSGSIZE",
        ),
        (
            "args_remote_bytes_1m_plus_1",
            build(&|c| {
                c.rdma_args(&with_args(&|x| x.remote.bytes = (1 << 20) + 1));
            }),
            "EMSGSIZE",
        ),
        (
            "args_remote_bytes_max",
            build(&|c| {
                c.rdma_args(&with_args(&|x| x.remote.bytes = u64::MAX));
            }),
            "EMSGSIZE",
        ),
        (
            "two_args_sum_over_1m",
            build(&|c| {
                let x = with_args(&|x| x.remote.bytes = 600 << 10);
                c.rdma_args(&x).rdma_args(&x);
            }),
            "EMSGSIZE",
        ),
        (
            "two_args_sum_wraps",
            build(&|c| {
                c.rdma_args(&with_args(&|x| x.remote.bytes = u64::MAX))
                    .rdma_args(&with_args(&|x| x.remote.bytes = 2));
            }),
            "EINVAL",
        ),
        (
            "args_remote_over_1m_before_nr_local_0",
            build(&|c| {
                c.rdma_args(&with_args(&|x| {
                    x.remote.bytes = 2 << 20;
                    x.nr_local = 0;
                }));
            }),
            "EMSGSIZE",
        ),
        (
            "args_remote_over_1m_before_unknown_type",
            build(&|c| {
                c.push(SOL_RDS, 99, &[0; 8])
                    .rdma_args(&with_args(&|x| x.remote.bytes = 2 << 20));
            }),
            "EMSGSIZE",
        ),
        (
            "args_iovecs_unmapped",
            build(&|c| {
                c.rdma_args(&with_args(&|x| x.local_vec_addr = fa));
            }),
            "EFAULT",
        ),
        (
            "args_iovecs_null",
            build(&|c| {
                c.rdma_args(&with_args(&|x| x.local_vec_addr = 0));
            }),
            "EFAULT",
        ),
        (
            "args_empty_local_iovec",
            build(&|c| {
                c.rdma_args(&with_args(&|x| {
                    x.local_vec_addr = empty_iov.as_ptr() as u64
                }));
            }),
            "EINVAL",
        ),
        (
            "args_wrapping_local_iovec",
            build(&|c| {
                c.rdma_args(&with_args(&|x| x.local_vec_addr = wrap_iov.as_ptr() as u64));
            }),
            "EINVAL",
        ),
        (
            "args_local_iovec_over_4g",
            build(&|c| {
                c.rdma_args(&with_args(&|x| x.local_vec_addr = big_iov.as_ptr() as u64));
            }),
            "EINVAL",
        ),
        (
            "args_local_more_than_remote",
            build(&|c| {
                c.rdma_args(&with_args(&|x| x.remote.bytes = 63));
            }),
            "EINVAL",
        ),
        (
            "args_local_4g_minus_1",
            build(&|c| {
                c.rdma_args(&with_args(&|x| x.local_vec_addr = huge_iov.as_ptr() as u64));
            }),
            "ENOMEM",
        ),
        (
            "args_local_more_than_remote_unmapped",
            build(&|c| {
                c.rdma_args(&with_args(&|x| {
                    x.local_vec_addr = unmapped_iov.as_ptr() as u64;
                    x.remote.bytes = 63;
                }));
            }),
            "EFAULT",
        ),
        (
            "args_write_local_unmapped",
            build(&|c| {
                c.rdma_args(&with_args(&|x| {
                    x.local_vec_addr = unmapped_iov.as_ptr() as u64
                }));
            }),
            "EFAULT",
        ),
        (
            "args_read_local_unmapped",
            build(&|c| {
                c.rdma_args(&with_args(&|x| {
                    x.local_vec_addr = unmapped_iov.as_ptr() as u64;
                    x.flags = RDS_RDMA_NOTIFY_ME;
                }));
            }),
            "EFAULT",
        ),
        (
            "args_second_local_iovec_unmapped",
            build(&|c| {
                c.rdma_args(&with_args(&|x| {
                    x.local_vec_addr = two_iov.as_ptr() as u64;
                    x.nr_local = 2;
                    x.remote.bytes = 128;
                }));
            }),
            "EFAULT",
        ),
        (
            "args_read_local_read_only",
            build(&|c| {
                c.rdma_args(&with_args(&|x| {
                    x.local_vec_addr = ro_iov.as_ptr() as u64;
                    x.flags = 0;
                }));
            }),
            "EFAULT",
        ),
        (
            "two_args",
            build(&|c| {
                c.rdma_args(&args).rdma_args(&args);
            }),
            "EINVAL",
        ),
        (
            "atomic_truncated",
            build(&|c| {
                c.push(SOL_RDS, RDS_CMSG_ATOMIC_FADD, &atomic.encode()[..71]);
            }),
            "EINVAL",
        ),
        (
            "atomic_local_unaligned",
            build(&|c| {
                c.atomic(&with_atomic(&|x| x.local_addr += 4));
            }),
            "EFAULT",
        ),
        (
            "atomic_local_and_remote_unaligned",
            build(&|c| {
                c.atomic(&with_atomic(&|x| {
                    x.local_addr += 1;
                    x.remote_addr = 3;
                }));
            }),
            "EFAULT",
        ),
        (
            "atomic_local_unmapped",
            build(&|c| {
                c.atomic(&with_atomic(&|x| x.local_addr = fa));
            }),
            "EFAULT",
        ),
        (
            "atomic_local_read_only",
            build(&|c| {
                c.atomic(&with_atomic(&|x| x.local_addr = ra));
            }),
            "EFAULT",
        ),
        (
            "atomic_local_null",
            build(&|c| {
                c.atomic(&with_atomic(&|x| x.local_addr = 0));
            }),
            "EFAULT",
        ),
        (
            "masked_cswp_local_unaligned",
            build(&|c| {
                c.atomic(&with_atomic(&|x| {
                    x.local_addr += 2;
                    x.op = AtomicOp::MaskedCswp {
                        compare: 0,
                        swap: 0,
                        compare_mask: 0,
                        swap_mask: 0,
                    };
                }));
            }),
            "EFAULT",
        ),
        (
            "two_atomics",
            build(&|c| {
                c.atomic(&atomic).atomic(&atomic);
            }),
            "EINVAL",
        ),
        (
            "dest_unknown_cookie",
            build(&|c| {
                c.rdma_dest(0x00ab_cdef);
            }),
            "EINVAL",
        ),
        (
            "dest_truncated",
            build(&|c| {
                c.push(SOL_RDS, RDS_CMSG_RDMA_DEST, &[0; 4]);
            }),
            "EINVAL",
        ),
        (
            "map_truncated",
            build(&|c| {
                c.push(SOL_RDS, RDS_CMSG_RDMA_MAP, &map.encode()[..31]);
            }),
            "EINVAL",
        ),
        // C checks each RDMA_ARGS (rds_rm_size: rds_rdma_extra_size) as it walks the control
        // messages, before the check that DEST/MAP and ARGS/atomics are not mixed and before
        // an unknown type further on.
        (
            "order_dest_then_args_nr_local_1025",
            build(&|c| {
                c.rdma_dest(0x1234)
                    .rdma_args(&with_args(&|x| x.nr_local = 1025));
            }),
            "EMSGSIZE",
        ),
        (
            "order_dest_then_args_iovecs_unmapped",
            build(&|c| {
                c.rdma_dest(0x1234)
                    .rdma_args(&with_args(&|x| x.local_vec_addr = fa));
            }),
            "EFAULT",
        ),
        (
            "order_args_nr_local_1025_then_unknown_type",
            build(&|c| {
                c.rdma_args(&with_args(&|x| x.nr_local = 1025))
                    .push(SOL_RDS, 99, &[0; 8]);
            }),
            "EMSGSIZE",
        ),
        (
            "order_args_iovecs_unmapped_then_unknown_type",
            build(&|c| {
                c.rdma_args(&with_args(&|x| x.local_vec_addr = fa))
                    .push(SOL_RDS, 99, &[0; 8]);
            }),
            "EFAULT",
        ),
        (
            "order_unknown_type_then_args_nr_local_1025",
            build(&|c| {
                c.push(SOL_RDS, 99, &[0; 8])
                    .rdma_args(&with_args(&|x| x.nr_local = 1025));
            }),
            "EINVAL",
        ),
    ];
    for (name, c, want) in checks {
        r.expect(name, &send_with(&a, &dest, &c, one), want);
    }
    // C checks the control messages (rds_rm_size) before copying the payload.
    let args0 = build(&|c| {
        c.rdma_args(&with_args(&|x| x.nr_local = 0));
    });
    r.expect(
        "order_args_nr_local_0_before_payload_fault",
        &send_with(&a, &dest, &args0, UserBuf::Fault(&fault)),
        "EINVAL",
    );
    let args_iov_fault = build(&|c| {
        c.rdma_args(&with_args(&|x| x.local_vec_addr = fa));
    });
    r.expect(
        "order_args_iovecs_unmapped_and_payload_fault",
        &send_with(&a, &dest, &args_iov_fault, UserBuf::Fault(&fault)),
        "EFAULT",
    );
    let plain = build(&|c| {
        c.rdma_args(&args);
    });
    r.expect(
        "args_unbound",
        &send_with(&unbound, &dest, &plain, one),
        "ENOTCONN",
    );

    // Nothing of it arrived.
    std::thread::sleep(Duration::from_millis(300));
    r.expect(
        "rdma_abi_nothing_delivered",
        &format!("delivered={}", drain(&b)),
        "delivered=0",
    );
    Ok(())
}
