//! Bad input to the RDMA API, each with its errno and no side effect: nothing registered
//! (`VmPin` unchanged), nothing delivered, no notification, and a good operation still
//! works afterwards. Part of `rds-tests rdma` (rds_rs only).
//!
//! A failure the remote side finds (a registration that does not exist or a range outside
//! it) is not an error of `sendmsg`: the operation completes with `RDS_RDMA_REMOTE_ERROR` and
//! its message is not delivered.

use crate::rdma::{
    atomic_op, big, got, leftovers, nothing_or, one_note, rdma_op, same, send_ctl, vmpin_kb,
    write_into, Env, Op, LO,
};
use crate::util::{fresh, in_new_netns, res_obs, v4};
use crate::Report;
use librds::rdma::{
    encode_iovecs, GetMrArgs, RDS_RDMA_NOTIFY_ME, RDS_RDMA_READWRITE, RDS_RDMA_SILENT,
    RDS_RDMA_USE_ONCE,
};
use librds::{
    AtomicArgs, AtomicOp, ControlBuf, FaultRegion, RdmaArgs, RdmaMem, RdsIovec, RdsSocket, UserBuf,
    RDS_FREE_MR, RDS_GET_MR, RDS_GET_MR_FOR_DEST, SOL_RDS,
};
use std::time::Duration;

/// `ERRNO vmpin=+N`: a registration call's result and the change of locked memory.
fn reg_obs<T>(res: &std::io::Result<T>, lck0: i64) -> String {
    format!("{} vmpin={:+}", res_obs(res), vmpin_kb() - lck0)
}

pub(crate) fn run(r: &mut Report, e: &mut Env) -> Result<(), String> {
    let mmap = |len| RdmaMem::new(len).map_err(|err| format!("mmap: {err}"));
    let cmem = mmap((2 << 20) + 2 * 4096)?;
    let smem = mmap(4 * 4096)?;
    let holed = RdmaMem::with_hole(3 * 4096, 1).map_err(|err| format!("mmap: {err}"))?;
    let fault = FaultRegion::unmapped(3 * 4096).map_err(|err| format!("mmap: {err}"))?;
    let ro = FaultRegion::read_only(3 * 4096).map_err(|err| format!("mmap: {err}"))?;
    let (fa, ra) = (fault.addr() as u64, ro.addr() as u64);
    cmem.fill(0xEE);
    smem.fill(0x33);
    let lck0 = vmpin_kb();

    // RDS_GET_MR.
    let unbound = fresh()?;
    r.expect(
        "get_mr_unbound",
        &reg_obs(&unbound.get_mr(cmem.at(0), 4096, 0), lck0),
        "ENOTCONN vmpin=+0",
    );
    let args = GetMrArgs {
        vec: RdsIovec {
            addr: cmem.at(0),
            bytes: 4096,
        },
        cookie_addr: 0,
        flags: 0,
    }
    .encode();
    let mut long = args.to_vec();
    long.resize(64, 0);
    for (name, len) in [("get_mr_optlen_31", 31), ("get_mr_optlen_33", 33)] {
        r.expect(
            name,
            &reg_obs(
                &e.c.setsockopt_raw(SOL_RDS, RDS_GET_MR, Some(&long), len),
                lck0,
            ),
            "EINVAL vmpin=+0",
        );
    }
    r.expect(
        "get_mr_args_unmapped",
        &reg_obs(
            &e.c.setsockopt_ptr(SOL_RDS, RDS_GET_MR, UserBuf::Fault(&fault), 32),
            lck0,
        ),
        "EFAULT vmpin=+0",
    );
    r.expect(
        "get_mr_args_null",
        &reg_obs(
            &e.c.setsockopt_ptr(SOL_RDS, RDS_GET_MR, UserBuf::Null, 32),
            lck0,
        ),
        "EFAULT vmpin=+0",
    );
    for (name, cookie_addr) in [
        ("get_mr_cookie_addr_unmapped", fa),
        ("get_mr_cookie_addr_read_only", ra),
    ] {
        let a = GetMrArgs {
            vec: RdsIovec {
                addr: cmem.at(0),
                bytes: 4096,
            },
            cookie_addr,
            flags: 0,
        };
        r.expect(
            name,
            &reg_obs(&e.c.get_mr_args(&a), lck0),
            "EFAULT vmpin=+0",
        );
    }
    let ok = e.c.get_mr(cmem.at(0), 4096, 0);
    r.expect("get_mr_after_bad_ones", &reg_obs(&ok, lck0), "OK vmpin=+4");
    if let Ok(c) = ok {
        let _ = e.c.free_mr(c, 0);
    }
    for (name, addr, bytes, want) in [
        ("get_mr_zero_length", cmem.at(0), 0, "EINVAL vmpin=+0"),
        ("get_mr_wrapping", u64::MAX - 100, 200, "EINVAL vmpin=+0"),
        (
            "get_mr_end_in_last_page",
            0xFFFF_FFFF_FFFF_F000,
            0x800,
            "EINVAL vmpin=+0",
        ),
        (
            "get_mr_258_pages",
            cmem.at(0),
            257 * 4096 + 1,
            "EMSGSIZE vmpin=+0",
        ),
        (
            "get_mr_4g_minus_1",
            cmem.at(0),
            u64::from(u32::MAX),
            "EMSGSIZE vmpin=+0",
        ),
        ("get_mr_over_4g", cmem.at(0), 1 << 32, "EINVAL vmpin=+0"),
        ("get_mr_unmapped", fa, 4096, "EFAULT vmpin=+0"),
        ("get_mr_read_only", ra, 4096, "EFAULT vmpin=+0"),
        (
            "get_mr_partly_unmapped",
            holed.at(100),
            8192,
            "EFAULT vmpin=+0",
        ),
        ("get_mr_null", 0, 4096, "EFAULT vmpin=+0"),
    ] {
        let res = e.c.get_mr(addr, bytes, RDS_RDMA_READWRITE);
        r.expect(name, &reg_obs(&res, lck0), want);
        if let Ok(c) = res {
            let _ = e.c.free_mr(c, 0);
        }
    }
    // 257 pages: the most (1 MiB from an odd start).
    let res = e.c.get_mr(cmem.at(1), 1 << 20, RDS_RDMA_READWRITE);
    r.expect("get_mr_257_pages", &reg_obs(&res, lck0), "OK vmpin=+1028");
    if let Ok(c) = res {
        let _ = e.c.free_mr(c, 0);
    }
    r.expect(
        "get_mr_for_dest_optlen_32",
        &res_obs(&e.c.setsockopt_raw(SOL_RDS, RDS_GET_MR_FOR_DEST, Some(&long), 32)),
        "EINVAL",
    );
    r.expect(
        "get_mr_for_dest_zero_length",
        &reg_obs(&e.c.get_mr_for_dest(&e.sa, cmem.at(0), 0, 0), lck0),
        "EINVAL vmpin=+0",
    );

    // RDS_FREE_MR.
    let c1 =
        e.c.get_mr(cmem.at(0), 64, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    r.expect(
        "free_mr_other_socket",
        &res_obs(&e.s.free_mr(c1, 0)),
        "EINVAL",
    );
    r.expect(
        "free_mr_other_socket_no_effect",
        &write_into(e, c1, &smem, 64),
        "OK got=w note=OK",
    );
    r.expect(
        "free_mr_other_offset_same_key",
        &res_obs(&e.c.free_mr(c1 ^ (5 << 32), 0)),
        "OK",
    );
    r.expect("free_mr_twice", &res_obs(&e.c.free_mr(c1, 0)), "EINVAL");
    r.expect(
        "free_mr_unknown",
        &res_obs(&e.c.free_mr(0x0bad_c0de, 0)),
        "EINVAL",
    );
    let fm = librds::rdma::FreeMrArgs {
        cookie: c1,
        flags: 0,
    }
    .encode();
    let mut fml = fm.to_vec();
    fml.resize(32, 0);
    for (name, len) in [("free_mr_optlen_15", 15), ("free_mr_optlen_17", 17)] {
        r.expect(
            name,
            &res_obs(&e.c.setsockopt_raw(SOL_RDS, RDS_FREE_MR, Some(&fml), len)),
            "EINVAL",
        );
    }
    r.expect(
        "free_mr_args_unmapped",
        &res_obs(&e.c.setsockopt_ptr(SOL_RDS, RDS_FREE_MR, UserBuf::Fault(&fault), 16)),
        "EFAULT",
    );
    r.expect(
        "free_mr_unbound_cookie_0",
        &res_obs(&unbound.free_mr(0, 0)),
        "EINVAL",
    );
    r.expect(
        "free_mr_unbound_unknown",
        &res_obs(&unbound.free_mr(0x1234, 0)),
        "EINVAL",
    );

    // RDS_CMSG_RDMA_DEST and RDS_CMSG_RDMA_MAP.
    let mine =
        e.s.get_mr(smem.at(0), 64, 0)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let other =
        e.c.get_mr(cmem.at(0), 64, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let freed =
        e.s.get_mr(smem.at(0), 64, 0)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let _ = e.s.free_mr(freed, 0);
    let dest_send = |e: &Env, cookies: &[u64]| {
        let mut c = ControlBuf::new();
        for k in cookies {
            c.rdma_dest(*k);
        }
        let res = send_ctl(&e.s, &e.ca, b"dest", &c, 0);
        format!("{}{}", res_obs(&res), leftovers(&e.c, &e.s))
    };
    r.expect(
        "rdma_dest_other_socket_cookie",
        &dest_send(e, &[other]),
        "EINVAL",
    );
    r.expect("rdma_dest_freed_cookie", &dest_send(e, &[freed]), "EINVAL");
    r.expect(
        "rdma_dest_twice_in_one_sendmsg",
        &dest_send(e, &[mine, mine]),
        "EINVAL",
    );
    r.expect(
        "rdma_dest_own_cookie",
        &format!(
            "{} {}",
            res_obs(&send_ctl(
                &e.s,
                &e.ca,
                b"own",
                &{
                    let mut c = ControlBuf::new();
                    c.rdma_dest(mine);
                    c
                },
                0
            )),
            got(&e.c)
        ),
        "OK got=own",
    );
    let map_send = |e: &Env, addr: u64, bytes: u64, cookie_addr: u64, also_dest: bool| {
        let mut c = ControlBuf::new();
        c.rdma_map(&GetMrArgs {
            vec: RdsIovec { addr, bytes },
            cookie_addr,
            flags: 0,
        });
        if also_dest {
            c.rdma_dest(mine);
        }
        let res = send_ctl(&e.s, &e.ca, b"map", &c, 0);
        format!(
            "{} vmpin={:+}{}",
            res_obs(&res),
            vmpin_kb() - lck0,
            leftovers(&e.c, &e.s)
        )
    };
    // The registrations `mine` and `other` hold one page each.
    r.expect(
        "rdma_map_unmapped",
        &map_send(e, fa, 4096, 0, false),
        "EFAULT vmpin=+8",
    );
    r.expect(
        "rdma_map_cookie_addr_unmapped",
        &map_send(e, smem.at(0), 4096, fa, false),
        "EFAULT vmpin=+8",
    );
    r.expect(
        "rdma_map_zero_length",
        &map_send(e, smem.at(0), 0, 0, false),
        "EINVAL vmpin=+8",
    );
    r.expect(
        "rdma_map_and_dest",
        &map_send(e, smem.at(0), 4096, 0, true),
        "EINVAL vmpin=+8",
    );
    let _ = e.s.free_mr(mine, 0);

    // RDS_CMSG_RDMA_ARGS: argument errors at sendmsg.
    let base = Op {
        cookie: other,
        remote_addr: 0,
        remote_bytes: 64,
        local: vec![RdsIovec {
            addr: smem.at(100),
            bytes: 64,
        }],
        flags: RDS_RDMA_READWRITE | RDS_RDMA_NOTIFY_ME,
        token: 77,
    };
    let send_op = |e: &Env, o: &Op| {
        let res = rdma_op(&e.s, &e.ca, o, b"bad", None, 0);
        format!("{}{}", res_obs(&res), leftovers(&e.c, &e.s))
    };
    let with = |f: &dyn Fn(&mut Op)| {
        let mut o = base.clone();
        f(&mut o);
        o
    };
    r.expect(
        "args_nr_local_0",
        &send_op(e, &with(&|o| o.local.clear())),
        "EINVAL",
    );
    let many: Vec<RdsIovec> = (0..1025)
        .map(|i| RdsIovec {
            addr: smem.at(i),
            bytes: 1,
        })
        .collect();
    r.expect(
        "args_nr_local_1025",
        &send_op(
            e,
            &with(&|o| {
                o.local = many.clone();
                o.remote_bytes = 4096;
            }),
        ),
        "EMSGSIZE",
    );
    let page =
        e.c.get_mr(cmem.at(16384), 4096, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    r.expect(
        "args_nr_local_1024",
        &{
            let o = with(&|o| {
                o.cookie = page;
                o.local = many[..1024].to_vec();
                o.remote_bytes = 1024;
                o.flags = RDS_RDMA_READWRITE;
            });
            let res = rdma_op(&e.s, &e.ca, &o, b"1024", None, 0);
            format!("{} {}", res_obs(&res), got(&e.c))
        },
        "OK got=1024",
    );
    let _ = e.c.free_mr(page, 0);
    // Raw variants of the iovec array pointer.
    let raw_args = |e: &Env, local_vec_addr: u64, nr_local: u64| {
        let mut c = ControlBuf::new();
        c.rdma_args(&RdmaArgs {
            cookie: other,
            remote: RdsIovec { addr: 0, bytes: 64 },
            local_vec_addr,
            nr_local,
            flags: RDS_RDMA_READWRITE | RDS_RDMA_NOTIFY_ME,
            user_token: 78,
        });
        let res = send_ctl(&e.s, &e.ca, b"bad", &c, 0);
        format!("{}{}", res_obs(&res), leftovers(&e.c, &e.s))
    };
    r.expect("args_iovecs_unmapped", &raw_args(e, fa, 1), "EFAULT");
    r.expect("args_iovecs_null", &raw_args(e, 0, 1), "EFAULT");
    // An array whose second entry is past the end of readable memory.
    let iov1 = RdsIovec {
        addr: smem.at(0),
        bytes: 8,
    }
    .encode();
    holed.write(4096 - 16, &iov1);
    r.expect(
        "args_iovecs_partly_unmapped",
        &raw_args(e, holed.at(4096 - 16), 2),
        "EFAULT",
    );
    r.expect(
        "args_empty_local_iovec",
        &send_op(
            e,
            &with(&|o| {
                o.local.push(RdsIovec {
                    addr: smem.at(0),
                    bytes: 0,
                })
            }),
        ),
        "EINVAL",
    );
    r.expect(
        "args_wrapping_local_iovec",
        &send_op(
            e,
            &with(&|o| {
                o.local = vec![RdsIovec {
                    addr: u64::MAX - 10,
                    bytes: 64,
                }]
            }),
        ),
        "EINVAL",
    );
    r.expect(
        "args_local_over_4g",
        &send_op(
            e,
            &with(&|o| {
                o.local = vec![RdsIovec {
                    addr: smem.at(0),
                    bytes: 1 << 32,
                }];
                o.remote_bytes = 1 << 20;
            }),
        ),
        "EINVAL",
    );
    // 4 GiB - 1 in one iovec: more pages than C allocates scatterlists for, refused before
    // anything is pinned (as C: ENOMEM), and with nothing left behind.
    r.expect(
        "args_local_4g_minus_1",
        &send_op(
            e,
            &with(&|o| {
                o.local = vec![RdsIovec {
                    addr: smem.at(0),
                    bytes: u64::from(u32::MAX),
                }];
                o.remote_bytes = 4096;
            }),
        ),
        "ENOMEM",
    );
    r.expect(
        "args_local_more_than_remote",
        &send_op(e, &with(&|o| o.remote_bytes = 63)),
        "EINVAL",
    );
    r.expect(
        "args_remote_bytes_over_1m",
        &send_op(e, &with(&|o| o.remote_bytes = (1 << 20) + 1)),
        "EMSGSIZE",
    );
    for (name, addr, write) in [
        ("args_write_local_unmapped", fa, true),
        ("args_read_local_unmapped", fa, false),
        ("args_write_local_partly_unmapped", holed.at(4090), true),
        ("args_read_local_read_only", ra, false),
    ] {
        r.expect(
            name,
            &send_op(
                e,
                &with(&|o| {
                    o.local = vec![RdsIovec { addr, bytes: 64 }];
                    if !write {
                        o.flags &= !RDS_RDMA_READWRITE;
                    }
                }),
            ),
            "EFAULT",
        );
    }
    // Read-only memory is a fine source for a write (zeros land).
    cmem.fill(0xEE);
    let o = with(&|o| {
        o.local = vec![RdsIovec {
            addr: ra,
            bytes: 64,
        }]
    });
    let res = rdma_op(&e.s, &e.ca, &o, b"ro", None, 0);
    r.expect(
        "args_write_local_read_only",
        &format!(
            "{} {} note={} data={}",
            res_obs(&res),
            got(&e.c),
            one_note(&e.s),
            same(&cmem.read(0, 64), &[0; 64])
        ),
        "OK got=ro note=OK#77 data=ok",
    );

    // Remote errors: sendmsg succeeds, the operation fails, nothing is delivered.
    let remote_err = |e: &Env, o: &Op, name: &str, r: &mut Report| {
        cmem.fill(0xEE);
        let res = rdma_op(&e.s, &e.ca, o, b"never", None, 0);
        let note = one_note(&e.s);
        let client = nothing_or(&e.c, Duration::from_millis(200), "message");
        r.expect(
            name,
            &format!(
                "{} note={note} client={client} data={}{}",
                res_obs(&res),
                same(&cmem.read(0, 8192), &[0xEE; 8192]),
                leftovers(&e.c, &e.s)
            ),
            "OK note=REMOTE_ERROR#77 client=nothing data=ok",
        );
    };
    remote_err(e, &with(&|o| o.remote_addr = 1), "remote_past_end_by_1", r);
    remote_err(
        e,
        &with(&|o| {
            o.remote_addr = 64;
            o.local[0].bytes = 1;
        }),
        "remote_at_end",
        r,
    );
    remote_err(
        e,
        &with(&|o| o.remote_addr = u64::MAX - 7),
        "remote_addr_wraps",
        r,
    );
    remote_err(
        e,
        &with(&|o| {
            o.flags &= !RDS_RDMA_READWRITE;
            o.remote_addr = 32;
        }),
        "read_remote_past_end",
        r,
    );
    remote_err(e, &with(&|o| o.cookie = freed), "remote_freed_key", r);
    remote_err(
        e,
        &with(&|o| o.cookie = 0x0bad_c0de),
        "remote_unknown_key",
        r,
    );
    // A cookie whose offset was changed: the zero-based address falls before the
    // registration (it starts 100 bytes into its page).
    let at100 =
        e.c.get_mr(cmem.at(100), 64, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    remote_err(
        e,
        &with(&|o| o.cookie = librds::rdma::cookie_key(at100) as u64),
        "remote_offset_tampered",
        r,
    );
    let _ = e.c.free_mr(at100, 0);
    // A registration of a socket bound to another address than the destination.
    let lo2 = big(v4([127, 0, 0, 2], 4661))?;
    let c2 = lo2
        .get_mr(cmem.at(4096), 64, RDS_RDMA_READWRITE)
        .map_err(|err| format!("GET_MR: {err}"))?;
    remote_err(
        e,
        &with(&|o| o.cookie = c2),
        "remote_key_of_other_address",
        r,
    );
    let res = rdma_op(
        &e.s,
        &v4([127, 0, 0, 2], 4661),
        &with(&|o| o.cookie = c2),
        b"lo2",
        None,
        0,
    );
    r.expect(
        "remote_key_of_other_address_control",
        &format!("{} {} note={}", res_obs(&res), got(&lo2), one_note(&e.s)),
        "OK got=lo2 note=OK#77",
    );
    drop(lo2);
    // A registration in another network namespace.
    let at = cmem.at(4096);
    let other_ns: Result<(RdsSocket, u64), String> = in_new_netns(move || {
        let s = crate::util::bound(v4(LO, 4600))?;
        let c = s
            .get_mr(at, 64, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
        Ok((s, c))
    });
    match other_ns {
        Ok((_ns_sock, c3)) => {
            remote_err(
                e,
                &with(&|o| o.cookie = c3),
                "remote_key_of_other_namespace",
                r,
            );
        }
        Err(err) => r.expect("remote_key_of_other_namespace", &err.replace(':', ""), "OK"),
    }
    // A use-once registration in the middle of this: still there for a good operation.
    let once =
        e.c.get_mr(cmem.at(0), 64, RDS_RDMA_READWRITE | RDS_RDMA_USE_ONCE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    remote_err(
        e,
        &with(&|o| {
            o.cookie = once;
            o.remote_addr = 8;
        }),
        "remote_past_end_use_once",
        r,
    );
    r.expect(
        "use_once_after_remote_error",
        &write_into(e, once, &smem, 64),
        "OK got=w note=OK",
    );

    // Atomics.
    let acookie =
        e.c.get_mr(cmem.at(8192), 16, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let odd =
        e.c.get_mr(cmem.at(8192 + 4096 + 4), 16, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let abase = AtomicArgs {
        cookie: acookie,
        local_addr: smem.at(2048),
        remote_addr: 0,
        op: AtomicOp::Fadd { add: 1 },
        flags: RDS_RDMA_NOTIFY_ME,
        user_token: 88,
    };
    let awith = |f: &dyn Fn(&mut AtomicArgs)| {
        let mut a = abase;
        f(&mut a);
        a
    };
    let asend = |e: &Env, a: &AtomicArgs| {
        let res = atomic_op(&e.s, &e.ca, a, b"bad", None);
        format!("{}{}", res_obs(&res), leftovers(&e.c, &e.s))
    };
    for (name, a, want) in [
        (
            "atomic_local_unaligned",
            awith(&|a| a.local_addr += 4),
            "EFAULT",
        ),
        (
            "atomic_local_unaligned_1",
            awith(&|a| a.local_addr += 1),
            "EFAULT",
        ),
        (
            "atomic_remote_unaligned",
            awith(&|a| a.remote_addr = 4),
            "EINVAL",
        ),
        (
            "atomic_remote_unaligned_cswp",
            awith(&|a| {
                a.remote_addr = 2;
                a.op = AtomicOp::Cswp {
                    compare: 0,
                    swap: 1,
                }
            }),
            "EINVAL",
        ),
        (
            "atomic_both_unaligned",
            awith(&|a| {
                a.local_addr += 4;
                a.remote_addr = 4;
            }),
            "EFAULT",
        ),
        (
            "atomic_remote_unaligned_by_cookie_offset",
            awith(&|a| a.cookie = odd),
            "EINVAL",
        ),
        (
            "atomic_local_unmapped",
            awith(&|a| a.local_addr = fa),
            "EFAULT",
        ),
        (
            "atomic_local_read_only",
            awith(&|a| a.local_addr = ra),
            "EFAULT",
        ),
        ("atomic_local_null", awith(&|a| a.local_addr = 0), "EFAULT"),
    ] {
        r.expect(name, &asend(e, &a), want);
    }
    // The registration at page offset 4: its user address + 4 is 8-aligned.
    cmem.write_u64(8192 + 4096 + 8, 41);
    let res = atomic_op(
        &e.s,
        &e.ca,
        &awith(&|a| {
            a.cookie = odd;
            a.remote_addr = 4;
        }),
        b"odd",
        None,
    );
    r.expect(
        "atomic_aligned_in_odd_registration",
        &format!(
            "{} {} note={} value={}",
            res_obs(&res),
            got(&e.c),
            one_note(&e.s),
            cmem.read_u64(8192 + 4096 + 8)
        ),
        "OK got=odd note=OK#88 value=42",
    );
    for (name, a) in [
        ("atomic_remote_past_end", awith(&|a| a.remote_addr = 16)),
        (
            "atomic_remote_wraps",
            awith(&|a| a.remote_addr = u64::MAX - 7),
        ),
        ("atomic_freed_key", awith(&|a| a.cookie = freed)),
    ] {
        cmem.fill(0xEE);
        let res = atomic_op(&e.s, &e.ca, &a, b"never", None);
        let note = one_note(&e.s);
        r.expect(
            name,
            &format!(
                "{} note={note} client={} remote={}{}",
                res_obs(&res),
                nothing_or(&e.c, Duration::from_millis(200), "message"),
                same(&cmem.read(8192, 8192), &[0xEE; 8192]),
                leftovers(&e.c, &e.s)
            ),
            "OK note=REMOTE_ERROR#88 client=nothing remote=ok",
        );
    }
    cmem.write_u64(8192 + 8, 1);
    let res = atomic_op(&e.s, &e.ca, &awith(&|a| a.remote_addr = 8), b"last", None);
    r.expect(
        "atomic_last_word",
        &format!(
            "{} {} note={} value={}",
            res_obs(&res),
            got(&e.c),
            one_note(&e.s),
            cmem.read_u64(8192 + 8)
        ),
        "OK got=last note=OK#88 value=2",
    );

    // Combinations in one sendmsg.
    let iovs = encode_iovecs(&base.local);
    let args = RdmaArgs {
        cookie: other,
        remote: RdsIovec { addr: 0, bytes: 64 },
        local_vec_addr: iovs.as_ptr() as u64,
        nr_local: 1,
        flags: RDS_RDMA_READWRITE | RDS_RDMA_NOTIFY_ME,
        user_token: 99,
    };
    let mine =
        e.s.get_mr(smem.at(0), 64, 0)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let map = GetMrArgs {
        vec: RdsIovec {
            addr: smem.at(0),
            bytes: 64,
        },
        cookie_addr: 0,
        flags: 0,
    };
    // Ids taken around the bad calls below: a failed sendmsg takes none, even when it fails
    // because the id cannot be written (a silent op sends no message, so nothing arrives).
    let silent = with(&|o| o.flags = RDS_RDMA_READWRITE | RDS_RDMA_SILENT);
    let mut id_first = 0u64;
    let first = rdma_op(&e.s, &e.ca, &silent, b"", Some(&mut id_first), 0);
    let mut idv = 0u64;
    let idp = &mut idv as *mut u64 as u64;
    let combos: Vec<(&str, ControlBuf, &str)> = vec![
        (
            "combo_dest_and_args",
            {
                let mut c = ControlBuf::new();
                c.rdma_dest(mine).rdma_args(&args);
                c
            },
            "EINVAL",
        ),
        (
            "combo_args_and_dest",
            {
                let mut c = ControlBuf::new();
                c.rdma_args(&args).rdma_dest(mine);
                c
            },
            "EINVAL",
        ),
        (
            "combo_map_and_args",
            {
                let mut c = ControlBuf::new();
                c.rdma_map(&map).rdma_args(&args);
                c
            },
            "EINVAL",
        ),
        (
            "combo_two_args",
            {
                let mut c = ControlBuf::new();
                c.rdma_args(&args).rdma_args(&args);
                c
            },
            "EINVAL",
        ),
        (
            "combo_args_and_atomic",
            {
                let mut c = ControlBuf::new();
                c.rdma_args(&args).atomic(&abase);
                c
            },
            "EINVAL",
        ),
        (
            "combo_atomic_and_args",
            {
                let mut c = ControlBuf::new();
                c.atomic(&abase).rdma_args(&args);
                c
            },
            "EINVAL",
        ),
        (
            "combo_two_atomics",
            {
                let mut c = ControlBuf::new();
                c.atomic(&abase).atomic(&abase);
                c
            },
            "EINVAL",
        ),
        (
            "combo_atomic_and_dest",
            {
                let mut c = ControlBuf::new();
                c.atomic(&abase).rdma_dest(mine);
                c
            },
            "EINVAL",
        ),
        (
            "combo_map_and_atomic",
            {
                let mut c = ControlBuf::new();
                c.rdma_map(&map).atomic(&abase);
                c
            },
            "EINVAL",
        ),
        (
            "rdma_id_without_op",
            {
                let mut c = ControlBuf::new();
                c.rdma_id(idp);
                c
            },
            "EINVAL",
        ),
        (
            "rdma_id_with_dest_only",
            {
                let mut c = ControlBuf::new();
                c.rdma_dest(mine).rdma_id(idp);
                c
            },
            "EINVAL",
        ),
        (
            "rdma_id_twice",
            {
                let mut c = ControlBuf::new();
                c.rdma_args(&args).rdma_id(idp).rdma_id(idp);
                c
            },
            "EINVAL",
        ),
        (
            "rdma_id_truncated",
            {
                let mut c = ControlBuf::new();
                c.rdma_args(&args)
                    .push(SOL_RDS, librds::rdma::RDS_CMSG_RDMA_ID, &[0; 4]);
                c
            },
            "EINVAL",
        ),
        (
            "rdma_id_unmapped",
            {
                let mut c = ControlBuf::new();
                c.rdma_args(&args).rdma_id(fa);
                c
            },
            "EFAULT",
        ),
        (
            "rdma_id_read_only",
            {
                let mut c = ControlBuf::new();
                c.rdma_args(&args).rdma_id(ra);
                c
            },
            "EFAULT",
        ),
        (
            "args_truncated",
            {
                let mut c = ControlBuf::new();
                c.push(SOL_RDS, librds::RDS_CMSG_RDMA_ARGS, &args.encode()[..48]);
                c
            },
            "EINVAL",
        ),
    ];
    cmem.fill(0xEE);
    for (name, c, want) in combos {
        let res = send_ctl(&e.s, &e.ca, b"combo", &c, 0);
        std::thread::sleep(Duration::from_millis(20));
        r.expect(
            name,
            &format!(
                "{}{} data={}",
                res_obs(&res),
                leftovers(&e.c, &e.s),
                same(&cmem.read(0, 64), &[0xEE; 64])
            ),
            &format!("{want} data=ok"),
        );
    }
    r.expect("rdma_id_untouched", &idv.to_string(), "0");
    let mut id_next = 0u64;
    let next = rdma_op(&e.s, &e.ca, &silent, b"", Some(&mut id_next), 0);
    r.expect(
        "rdma_id_failed_calls_take_none",
        &format!(
            "{} {} next-first={}",
            res_obs(&first),
            res_obs(&next),
            id_next.wrapping_sub(id_first)
        ),
        "OK OK next-first=1",
    );

    // After all of it, a good operation works and the registrations are as they were.
    r.expect(
        "good_op_after_bad_input",
        &write_into(e, other, &smem, 64),
        "OK got=w note=OK",
    );
    for k in [other, acookie, odd] {
        let _ = e.c.free_mr(k, 0);
    }
    let _ = e.s.free_mr(mine, 0);
    r.expect(
        "bad_input_vmpin_back",
        &format!("vmpin={:+}{}", vmpin_kb() - lck0, leftovers(&e.c, &e.s)),
        "vmpin=+0",
    );
    Ok(())
}
