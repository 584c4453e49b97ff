//! `rds_sendmsg`'s destination rules (net/rds/send.c): the `msg_name`
//! checks and the checks against the bound address.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use rds_proto::{
    check_send_dest, parse_bind, parse_connect, parse_send_dest, Addr, AddrError, SockAddr,
    AF_INET, AF_INET6, AF_UNSPEC, SOCKADDR_IN6_LEN, SOCKADDR_IN_LEN,
};

use AddrError::{Inval, OpNotSupp};

// --- helpers ---------------------------------------------------------------

fn ip4(s: &str) -> [u8; 4] {
    s.parse::<Ipv4Addr>().unwrap().octets()
}

fn ip6(s: &str) -> Addr {
    Addr(s.parse::<Ipv6Addr>().unwrap().octets())
}

fn sin_fam(family: u16, port: u16, addr: [u8; 4]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&family.to_ne_bytes());
    v.extend_from_slice(&port.to_be_bytes());
    v.extend_from_slice(&addr);
    v.extend_from_slice(&[0xa5; 8]);
    v
}

fn sin(port: u16, addr: &str) -> Vec<u8> {
    sin_fam(AF_INET, port, ip4(addr))
}

fn sin6(port: u16, addr: &str, scope_id: u32) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&AF_INET6.to_ne_bytes());
    v.extend_from_slice(&port.to_be_bytes());
    v.extend_from_slice(&[0x12, 0x34, 0x56, 0x78]); // flowinfo, ignored
    v.extend_from_slice(&ip6(addr).0);
    v.extend_from_slice(&scope_id.to_ne_bytes());
    v
}

fn sa(addr: Addr, port: u16, scope_id: u32) -> SockAddr {
    SockAddr {
        addr,
        port,
        scope_id,
    }
}

fn v4(s: &str) -> Addr {
    Addr::from_v4(ip4(s))
}

// --- msg_name -------------------------------------------------------------------

#[test]
fn errno_and_text() {
    assert_eq!(OpNotSupp.errno(), 95);
    assert!(!OpNotSupp.to_string().is_empty());
    assert_eq!(Inval.errno(), 22);
}

#[test]
fn ipv4_destinations() {
    assert_eq!(
        parse_send_dest(&sin(4000, "10.0.0.1")),
        Ok(sa(v4("10.0.0.1"), 4000, 0))
    );
    assert_eq!(
        parse_send_dest(&sin(0, "127.0.0.1")),
        Ok(sa(v4("127.0.0.1"), 0, 0))
    );
    for bad in ["0.0.0.0", "255.255.255.255", "224.0.0.1", "239.255.255.255"] {
        assert_eq!(parse_send_dest(&sin(1, bad)), Err(Inval), "{bad}");
    }
    // Extra bytes are ignored.
    let mut long = sin(4000, "10.0.0.1");
    long.extend([0xff; 20]);
    assert_eq!(parse_send_dest(&long), Ok(sa(v4("10.0.0.1"), 4000, 0)));
}

#[test]
fn shorter_than_sockaddr_in_is_einval_whatever_the_family() {
    // `namelen < sizeof(*usin)` comes before the family switch, so even a
    // 2..15-byte name (which rds_bind would judge by family first) is EINVAL.
    for n in 0..SOCKADDR_IN_LEN {
        assert_eq!(
            parse_send_dest(&sin(1, "10.0.0.1")[..n]),
            Err(Inval),
            "len {n}"
        );
        assert_eq!(
            parse_send_dest(&sin6(1, "::1", 0)[..n]),
            Err(Inval),
            "len {n}"
        );
    }
    // AF_INET6 also needs the full sockaddr_in6.
    for n in SOCKADDR_IN_LEN..SOCKADDR_IN6_LEN {
        assert_eq!(
            parse_send_dest(&sin6(1, "2001:db8::1", 0)[..n]),
            Err(Inval),
            "len {n}"
        );
    }
}

#[test]
fn ipv6_destinations() {
    assert_eq!(
        parse_send_dest(&sin6(4000, "2001:db8::1", 0)),
        Ok(sa(ip6("2001:db8::1"), 4000, 0))
    );
    // The scope id of a non-link-local address is not kept.
    assert_eq!(
        parse_send_dest(&sin6(4000, "2001:db8::1", 7)),
        Ok(sa(ip6("2001:db8::1"), 4000, 0))
    );
    assert_eq!(
        parse_send_dest(&sin6(4000, "::1", 0)),
        Ok(sa(Addr::LOOPBACK, 4000, 0))
    );
    // Link-local: scope id required and kept.
    assert_eq!(parse_send_dest(&sin6(4000, "fe80::1", 0)), Err(Inval));
    assert_eq!(
        parse_send_dest(&sin6(4000, "fe80::1", 3)),
        Ok(sa(ip6("fe80::1"), 4000, 3))
    );
    // v4-mapped: usable IPv4 only.
    assert_eq!(
        parse_send_dest(&sin6(4000, "::ffff:10.0.0.1", 9)),
        Ok(sa(v4("10.0.0.1"), 4000, 0))
    );
    for bad in [
        "::ffff:0.0.0.0",
        "::ffff:255.255.255.255",
        "::ffff:224.0.0.1",
        "::",
        "ff02::1",
        "ff0e::1",
    ] {
        // rds_connect says EPROTOTYPE for these; rds_sendmsg says EINVAL.
        assert_eq!(parse_send_dest(&sin6(1, bad, 1)), Err(Inval), "{bad}");
    }
}

#[test]
fn other_families_are_einval() {
    // rds_connect says EAFNOSUPPORT; rds_sendmsg says EINVAL.
    for fam in [AF_UNSPEC, 1, 3, 17, u16::MAX] {
        let mut name = sin_fam(fam, 1, ip4("10.0.0.1"));
        assert_eq!(parse_send_dest(&name), Err(Inval), "family {fam}");
        name.resize(SOCKADDR_IN6_LEN, 0);
        assert_eq!(parse_send_dest(&name), Err(Inval), "family {fam}");
        assert_eq!(parse_connect(&name, None), Err(AddrError::AfNoSupport));
    }
}

// --- against the bound address ---------------------------------------------------

#[test]
fn families_must_match() {
    let b4 = sa(v4("10.0.0.1"), 4000, 0);
    let b6 = sa(ip6("2001:db8::1"), 4000, 0);
    assert_eq!(
        check_send_dest(&sa(ip6("2001:db8::2"), 1, 0), &b4),
        Err(OpNotSupp)
    );
    assert_eq!(
        check_send_dest(&sa(v4("10.0.0.2"), 1, 0), &b6),
        Err(OpNotSupp)
    );
    assert_eq!(check_send_dest(&sa(v4("10.0.0.2"), 1, 0), &b4), Ok(0));
    assert_eq!(check_send_dest(&sa(ip6("2001:db8::2"), 1, 0), &b6), Ok(0));
    // ::1 is not v4-mapped.
    assert_eq!(
        check_send_dest(&sa(Addr::LOOPBACK, 1, 0), &b4),
        Err(OpNotSupp)
    );
    // The family check comes before the scope check.
    let ll = sa(ip6("fe80::1"), 1, 5);
    assert_eq!(
        check_send_dest(&ll, &sa(v4("10.0.0.1"), 1, 9)),
        Err(OpNotSupp)
    );
}

#[test]
fn scope_rules() {
    let dest = |scope| sa(ip6("fe80::2"), 1, scope);
    let bound = |scope| sa(ip6("fe80::1"), 4000, scope);
    let global = |scope| sa(ip6("2001:db8::1"), 4000, scope);
    // Same scope.
    assert_eq!(check_send_dest(&dest(3), &bound(3)), Ok(3));
    assert_eq!(
        check_send_dest(&sa(ip6("2001:db8::2"), 1, 0), &global(0)),
        Ok(0)
    );
    // Destination without a scope (not link-local): the bound scope.
    assert_eq!(
        check_send_dest(&sa(ip6("2001:db8::2"), 1, 0), &bound(3)),
        Ok(3)
    );
    // Bound to a link-local address: only its own link.
    assert_eq!(check_send_dest(&dest(4), &bound(3)), Err(Inval));
    // Bound without a scope: the destination's.
    assert_eq!(check_send_dest(&dest(4), &global(0)), Ok(4));
}

// --- properties -----------------------------------------------------------------

fn any_name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..=40),
        (any::<u16>(), any::<[u8; 4]>(), 0usize..=20).prop_map(|(p, a, n)| {
            let mut v = sin_fam(AF_INET, p, a);
            v.truncate(n);
            v
        }),
        (any::<u16>(), any::<[u8; 16]>(), any::<u32>(), 0usize..=30).prop_map(|(p, a, s, n)| {
            let mut v = sin6(p, "::", s);
            v[8..24].copy_from_slice(&a);
            v.truncate(n);
            v
        }),
    ]
}

fn any_sockaddr() -> impl Strategy<Value = SockAddr> {
    (
        prop_oneof![
            any::<[u8; 4]>().prop_map(Addr::from_v4),
            any::<[u8; 16]>().prop_map(Addr),
        ],
        any::<u16>(),
        prop_oneof![Just(0u32), 1u32..4, any::<u32>()],
    )
        .prop_map(|(addr, port, scope_id)| SockAddr {
            addr,
            port,
            scope_id,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn send_dest_is_bind_rules_after_the_length_check(name in any_name()) {
        let r = parse_send_dest(&name);
        if name.len() < SOCKADDR_IN_LEN {
            prop_assert_eq!(r, Err(Inval));
        } else {
            prop_assert_eq!(r, parse_bind(&name));
        }
        if let Err(e) = r {
            prop_assert_eq!(e, Inval);
        }
    }

    #[test]
    fn check_send_dest_matches_c(dest in any_sockaddr(), bound in any_sockaddr()) {
        let r = check_send_dest(&dest, &bound);
        // The C code, transcribed.
        let want = if dest.addr.v4().is_some() ^ bound.addr.v4().is_some() {
            Err(OpNotSupp)
        } else {
            let mut scope_id = dest.scope_id;
            let mut res = Ok(());
            if scope_id != bound.scope_id {
                if scope_id == 0 {
                    scope_id = bound.scope_id;
                } else if bound.scope_id != 0 {
                    res = Err(Inval);
                }
            }
            res.map(|()| scope_id)
        };
        prop_assert_eq!(r, want);
    }
}
