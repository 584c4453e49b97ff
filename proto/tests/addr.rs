//! Socket-address rules: `rds_bind`, `rds_connect`, `rds_getname` and
//! `__ipv6_addr_type`.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use rds_proto::{
    check_bind_scope, encode_sockaddr, encode_unbound_local, parse_bind, parse_connect, Addr,
    AddrError, SockAddr, AF_INET, AF_INET6, AF_UNSPEC, IPV6_ADDR_ANY, IPV6_ADDR_COMPATV4,
    IPV6_ADDR_LINKLOCAL, IPV6_ADDR_LOOPBACK, IPV6_ADDR_MAPPED, IPV6_ADDR_MULTICAST,
    IPV6_ADDR_SCOPE_GLOBAL, IPV6_ADDR_SCOPE_LINKLOCAL, IPV6_ADDR_SCOPE_MASK,
    IPV6_ADDR_SCOPE_NODELOCAL, IPV6_ADDR_SCOPE_ORGLOCAL, IPV6_ADDR_SCOPE_SITELOCAL,
    IPV6_ADDR_SITELOCAL, IPV6_ADDR_UNICAST, SOCKADDR_IN6_LEN, SOCKADDR_IN_LEN,
};

// --- helpers ---------------------------------------------------------------

/// An IPv4 address in network order, from dotted-quad text.
fn ip4(s: &str) -> [u8; 4] {
    s.parse::<Ipv4Addr>().unwrap().octets()
}

/// An RDS address from IPv6 text.
fn ip6(s: &str) -> Addr {
    Addr(s.parse::<Ipv6Addr>().unwrap().octets())
}

/// A `struct sockaddr_in` as user space lays it out; `sin_zero` is filled
/// with garbage, which C ignores.
fn sin_fam(family: u16, port: u16, addr: [u8; 4]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&family.to_ne_bytes());
    v.extend_from_slice(&port.to_be_bytes());
    v.extend_from_slice(&addr);
    v.extend_from_slice(&[0xa5; 8]);
    assert_eq!(v.len(), SOCKADDR_IN_LEN);
    v
}

fn sin(port: u16, addr: &str) -> Vec<u8> {
    sin_fam(AF_INET, port, ip4(addr))
}

/// A `struct sockaddr_in6` as user space lays it out; `sin6_flowinfo` is
/// garbage, which C ignores.
fn sin6_fam(family: u16, port: u16, addr: Addr, scope_id: u32) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&family.to_ne_bytes());
    v.extend_from_slice(&port.to_be_bytes());
    v.extend_from_slice(&0x1234_5678u32.to_be_bytes());
    v.extend_from_slice(&addr.0);
    v.extend_from_slice(&scope_id.to_ne_bytes());
    assert_eq!(v.len(), SOCKADDR_IN6_LEN);
    v
}

fn sin6(port: u16, addr: &str, scope_id: u32) -> Vec<u8> {
    sin6_fam(AF_INET6, port, ip6(addr), scope_id)
}

fn sa(addr: Addr, port: u16, scope_id: u32) -> SockAddr {
    SockAddr {
        addr,
        port,
        scope_id,
    }
}

fn sa4(addr: &str, port: u16) -> SockAddr {
    sa(Addr::from_v4(ip4(addr)), port, 0)
}

fn sa6(addr: &str, port: u16, scope_id: u32) -> SockAddr {
    sa(ip6(addr), port, scope_id)
}

use AddrError::{AfNoSupport, DestAddrReq, Inval, ProtoType};

// --- Addr --------------------------------------------------------------------

#[test]
fn addr_basics() {
    assert_eq!(Addr::ANY, Addr([0; 16]));
    assert_eq!(Addr::default(), Addr::ANY);
    assert!(Addr::ANY.is_any());
    assert_eq!(Addr::LOOPBACK, ip6("::1"));
    assert!(!ip6("::1").is_any());
    assert!(!Addr::from_v4([0, 0, 0, 0]).is_any());

    assert_eq!(Addr::from_v4(ip4("10.1.2.3")), ip6("::ffff:10.1.2.3"));
    assert_eq!(ip6("::ffff:10.1.2.3").v4(), Some(ip4("10.1.2.3")));
    assert_eq!(ip6("::ffff:0.0.0.0").v4(), Some([0, 0, 0, 0]));
    assert_eq!(ip6("::10.1.2.3").v4(), None);
    assert_eq!(ip6("::fffe:10.1.2.3").v4(), None);
    assert_eq!(ip6("1::ffff:10.1.2.3").v4(), None);
    assert_eq!(ip6("::1:ffff:10.1.2.3").v4(), None);
    assert_eq!(Addr::ANY.v4(), None);
}

#[test]
fn loopback_matches_rds_trans_get_preferred() {
    for yes in [
        "::1",
        "::ffff:127.0.0.1",
        "::ffff:127.255.255.255",
        "::ffff:127.0.0.0",
    ] {
        assert!(ip6(yes).is_loopback(), "{yes}");
    }
    for no in [
        "::",
        "::2",
        "::127.0.0.1",
        "::ffff:128.0.0.1",
        "::ffff:126.255.255.255",
        "::ffff:10.0.0.1",
        "::ffff:0.0.0.1",
        "fe80::1",
        "ff01::1",
        "1::1",
    ] {
        assert!(!ip6(no).is_loopback(), "{no}");
    }
}

/// `IPV6_ADDR_SCOPE_TYPE`.
const fn st(scope: u32) -> u32 {
    scope << 16
}

/// Expected `__ipv6_addr_type` of representative addresses, worked out by
/// hand from `net/ipv6/addrconf_core.c`.
const KINDS: &[(&str, u32)] = &[
    // The "any" and special low addresses.
    ("::", IPV6_ADDR_ANY),
    (
        "::1",
        IPV6_ADDR_LOOPBACK | IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_LINKLOCAL),
    ),
    (
        "::2",
        IPV6_ADDR_COMPATV4 | IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL),
    ),
    (
        "::1.2.3.4",
        IPV6_ADDR_COMPATV4 | IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL),
    ),
    (
        "::255.255.255.255",
        IPV6_ADDR_COMPATV4 | IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL),
    ),
    (
        "::ffff:1.2.3.4",
        IPV6_ADDR_MAPPED | st(IPV6_ADDR_SCOPE_GLOBAL),
    ),
    (
        "::ffff:0.0.0.0",
        IPV6_ADDR_MAPPED | st(IPV6_ADDR_SCOPE_GLOBAL),
    ),
    (
        "::ffff:224.0.0.1",
        IPV6_ADDR_MAPPED | st(IPV6_ADDR_SCOPE_GLOBAL),
    ),
    // Word 2 neither 0 nor 0x0000ffff, or word 1 non-zero: plain unicast.
    (
        "::fffe:1.2.3.4",
        IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL),
    ),
    (
        "::1:ffff:1.2.3.4",
        IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL),
    ),
    (
        "::1:0:0:0:1",
        IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL),
    ),
    ("0:0:0:1::", IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL)),
    ("100::", IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL)),
    (
        "1fff:ffff::",
        IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL),
    ),
    // First three bits neither 000 nor 111.
    ("2000::", IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL)),
    (
        "2001:db8::1",
        IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL),
    ),
    ("4000::", IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL)),
    (
        "dfff:ffff::",
        IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL),
    ),
    // 111 prefixes that are none of the special ones.
    ("e000::", IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL)),
    ("fbff::1", IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL)),
    ("fe00::1", IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL)),
    (
        "fe7f:ffff::",
        IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL),
    ),
    // Unique local (RFC 4193).
    ("fc00::", IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL)),
    (
        "fd12:3456::1",
        IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_GLOBAL),
    ),
    // Link-local and site-local unicast (/10).
    (
        "fe80::1",
        IPV6_ADDR_LINKLOCAL | IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_LINKLOCAL),
    ),
    (
        "febf:ffff::",
        IPV6_ADDR_LINKLOCAL | IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_LINKLOCAL),
    ),
    (
        "fec0::1",
        IPV6_ADDR_SITELOCAL | IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_SITELOCAL),
    ),
    (
        "feff:ffff::",
        IPV6_ADDR_SITELOCAL | IPV6_ADDR_UNICAST | st(IPV6_ADDR_SCOPE_SITELOCAL),
    ),
    // Multicast: ipv6_addr_scope2type of the low nibble of byte 1.
    ("ff00::", IPV6_ADDR_MULTICAST),
    (
        "ff01::1",
        IPV6_ADDR_MULTICAST | IPV6_ADDR_LOOPBACK | st(IPV6_ADDR_SCOPE_NODELOCAL),
    ),
    (
        "ff02::1",
        IPV6_ADDR_MULTICAST | IPV6_ADDR_LINKLOCAL | st(IPV6_ADDR_SCOPE_LINKLOCAL),
    ),
    (
        "ff12::1",
        IPV6_ADDR_MULTICAST | IPV6_ADDR_LINKLOCAL | st(IPV6_ADDR_SCOPE_LINKLOCAL),
    ),
    ("ff03::1", IPV6_ADDR_MULTICAST | st(3)),
    ("ff04::1", IPV6_ADDR_MULTICAST | st(4)),
    (
        "ff05::1",
        IPV6_ADDR_MULTICAST | IPV6_ADDR_SITELOCAL | st(IPV6_ADDR_SCOPE_SITELOCAL),
    ),
    (
        "ff08::1",
        IPV6_ADDR_MULTICAST | st(IPV6_ADDR_SCOPE_ORGLOCAL),
    ),
    ("ff0e::1", IPV6_ADDR_MULTICAST | st(IPV6_ADDR_SCOPE_GLOBAL)),
    (
        "ff3e::8000:1",
        IPV6_ADDR_MULTICAST | st(IPV6_ADDR_SCOPE_GLOBAL),
    ),
    ("ff0f::1", IPV6_ADDR_MULTICAST | st(0xf)),
    ("ffff:ffff::", IPV6_ADDR_MULTICAST | st(0xf)),
];

#[test]
fn kind_of_representative_addresses() {
    for &(text, full) in KINDS {
        let a = ip6(text);
        assert_eq!(a.kind_with_scope(), full, "__ipv6_addr_type({text})");
        assert_eq!(a.kind(), full & 0xffff, "ipv6_addr_type({text})");
        assert_eq!(a.scope(), full >> 16, "scope of {text}");
        // And the reference model below agrees.
        assert_eq!(model_type(a), full, "model of {text}");
    }
}

#[test]
fn kind_scope_bits() {
    assert_eq!(ip6("::1").kind() & IPV6_ADDR_SCOPE_MASK, IPV6_ADDR_LOOPBACK);
    assert_eq!(
        ip6("fe80::1").kind() & IPV6_ADDR_SCOPE_MASK,
        IPV6_ADDR_LINKLOCAL
    );
    assert_eq!(ip6("2001:db8::1").kind() & IPV6_ADDR_SCOPE_MASK, 0);
    assert_eq!(Addr::ANY.scope(), 0);
    assert_eq!(ip6("::1").scope(), IPV6_ADDR_SCOPE_LINKLOCAL);
}

/// A second, independent transcription of `__ipv6_addr_type`, on the
/// address as one 128-bit big-endian number.
fn model_type(a: Addr) -> u32 {
    let x = u128::from_be_bytes(a.0);
    let top = |bits: u32| (x >> (128 - bits)) as u32;
    let global = IPV6_ADDR_SCOPE_GLOBAL << 16;
    match top(3) {
        0b000 | 0b111 => {}
        _ => return IPV6_ADDR_UNICAST | global,
    }
    if top(8) == 0xff {
        let scope = top(16) & 0xf;
        let extra = match scope {
            1 => IPV6_ADDR_LOOPBACK,
            2 => IPV6_ADDR_LINKLOCAL,
            5 => IPV6_ADDR_SITELOCAL,
            _ => 0,
        };
        return IPV6_ADDR_MULTICAST | extra | (scope << 16);
    }
    if top(10) == 0b11_1111_1010 {
        return IPV6_ADDR_LINKLOCAL | IPV6_ADDR_UNICAST | (IPV6_ADDR_SCOPE_LINKLOCAL << 16);
    }
    if top(10) == 0b11_1111_1011 {
        return IPV6_ADDR_SITELOCAL | IPV6_ADDR_UNICAST | (IPV6_ADDR_SCOPE_SITELOCAL << 16);
    }
    if top(7) == 0b111_1110 {
        return IPV6_ADDR_UNICAST | global;
    }
    if x >> 64 == 0 {
        if x >> 32 == 0 {
            return match x {
                0 => IPV6_ADDR_ANY,
                1 => IPV6_ADDR_LOOPBACK | IPV6_ADDR_UNICAST | (IPV6_ADDR_SCOPE_LINKLOCAL << 16),
                _ => IPV6_ADDR_COMPATV4 | IPV6_ADDR_UNICAST | global,
            };
        }
        if x >> 32 == 0xffff {
            return IPV6_ADDR_MAPPED | global;
        }
    }
    IPV6_ADDR_UNICAST | global
}

// --- errors ------------------------------------------------------------------

#[test]
fn errnos() {
    assert_eq!(Inval.errno(), 22);
    assert_eq!(DestAddrReq.errno(), 89);
    assert_eq!(ProtoType.errno(), 91);
    assert_eq!(AfNoSupport.errno(), 97);
    for e in [Inval, DestAddrReq, ProtoType, AfNoSupport] {
        assert!(!e.to_string().is_empty());
    }
}

// --- parse_bind ----------------------------------------------------------------

#[test]
fn bind_shorter_than_family() {
    assert_eq!(parse_bind(&[]), Err(Inval));
    assert_eq!(parse_bind(&AF_INET.to_ne_bytes()[..1]), Err(Inval));
    assert_eq!(parse_bind(&AF_INET6.to_ne_bytes()[..1]), Err(Inval));
}

#[test]
fn bind_v4_every_short_length() {
    let full = sin(4000, "10.0.0.1");
    for len in 2..SOCKADDR_IN_LEN {
        assert_eq!(parse_bind(&full[..len]), Err(Inval), "addr_len {len}");
    }
    assert_eq!(parse_bind(&full), Ok(sa4("10.0.0.1", 4000)));
}

#[test]
fn bind_v4_longer_buffer_ignores_the_tail() {
    let mut buf = sin(4000, "10.0.0.1");
    buf.extend_from_slice(&[0xee; 112]);
    assert_eq!(buf.len(), 128);
    assert_eq!(parse_bind(&buf), Ok(sa4("10.0.0.1", 4000)));
}

#[test]
fn bind_v4_refused_addresses() {
    for a in [
        "0.0.0.0",
        "255.255.255.255",
        "224.0.0.0",
        "224.0.0.1",
        "230.1.2.3",
        "239.255.255.255",
    ] {
        assert_eq!(parse_bind(&sin(4000, a)), Err(Inval), "{a}");
    }
}

#[test]
fn bind_v4_accepted_addresses() {
    for a in [
        "0.0.0.1",
        "10.0.0.1",
        "127.0.0.1",
        "223.255.255.255",
        "240.0.0.0",
        "255.255.255.254",
        "192.168.1.255",
    ] {
        assert_eq!(parse_bind(&sin(7, a)), Ok(sa4(a, 7)), "{a}");
    }
    // Port 0 asks for any port; it is C rds_add_bound's job to pick one.
    assert_eq!(parse_bind(&sin(0, "10.0.0.1")), Ok(sa4("10.0.0.1", 0)));
    assert_eq!(
        parse_bind(&sin(0xfedc, "10.0.0.1")),
        Ok(sa4("10.0.0.1", 0xfedc))
    );
}

#[test]
fn bind_v6_every_short_length() {
    let full = sin6(4000, "2001:db8::1", 0);
    for len in 2..SOCKADDR_IN6_LEN {
        assert_eq!(parse_bind(&full[..len]), Err(Inval), "addr_len {len}");
    }
    assert_eq!(parse_bind(&full), Ok(sa6("2001:db8::1", 4000, 0)));
    let mut long = full.clone();
    long.extend_from_slice(&[0xee; 100]);
    assert_eq!(parse_bind(&long), Ok(sa6("2001:db8::1", 4000, 0)));
}

#[test]
fn bind_v6_refused_addresses() {
    for (a, scope) in [
        ("::", 0),
        ("::", 3),
        ("ff02::1", 0),
        ("ff02::1", 3),
        ("ff01::1", 0),
        ("ff0e::1", 0),
        ("ff05::2", 0),
        ("::ffff:0.0.0.0", 0),
        ("::ffff:255.255.255.255", 0),
        ("::ffff:224.0.0.1", 0),
        ("::ffff:239.255.255.255", 0),
        // Link-local without a scope id.
        ("fe80::1", 0),
        ("febf::1", 0),
    ] {
        assert_eq!(parse_bind(&sin6(4000, a, scope)), Err(Inval), "{a}%{scope}");
    }
}

#[test]
fn bind_v6_accepted_addresses() {
    // Non-link-local: any scope id passed is dropped (C keeps scope_id 0).
    for a in [
        "2001:db8::1",
        "::1",
        "::1.2.3.4",
        "::2",
        "fd00::1",
        "fc00::",
        "fec0::1",
        "e000::1",
        "::fffe:1.2.3.4",
    ] {
        for scope in [0, 9] {
            assert_eq!(
                parse_bind(&sin6(4000, a, scope)),
                Ok(sa6(a, 4000, 0)),
                "{a}%{scope}"
            );
        }
    }
    // Link-local keeps its scope id.
    assert_eq!(
        parse_bind(&sin6(4000, "fe80::1", 3)),
        Ok(sa6("fe80::1", 4000, 3))
    );
    assert_eq!(
        parse_bind(&sin6(1, "fe80::1", u32::MAX)),
        Ok(sa6("fe80::1", 1, u32::MAX))
    );
}

#[test]
fn bind_v6_mapped_is_the_same_as_v4() {
    for a in ["10.0.0.1", "127.0.0.1", "240.0.0.1", "0.0.0.1"] {
        let mapped = format!("::ffff:{a}");
        let got = parse_bind(&sin6(4000, &mapped, 5));
        assert_eq!(got, Ok(sa4(a, 4000)), "{mapped}");
        assert_eq!(got, parse_bind(&sin(4000, a)));
    }
}

#[test]
fn bind_unknown_families() {
    // AF_UNSPEC, AF_UNIX, AF_AX25, AF_RDS, byte-swapped AF_INET/AF_INET6, ...
    for fam in [
        AF_UNSPEC,
        1,
        3,
        21,
        AF_INET.swap_bytes(),
        AF_INET6.swap_bytes(),
        0xffff,
    ] {
        assert_eq!(
            parse_bind(&sin_fam(fam, 4000, ip4("10.0.0.1"))),
            Err(Inval),
            "family {fam}"
        );
        assert_eq!(
            parse_bind(&sin6_fam(fam, 4000, ip6("2001:db8::1"), 0)),
            Err(Inval),
            "family {fam}"
        );
        assert_eq!(parse_bind(&fam.to_ne_bytes()), Err(Inval));
    }
}

#[test]
fn bind_scope_against_connected_peer() {
    // Not connected: anything goes.
    assert_eq!(check_bind_scope(3, false, 4), Ok(()));
    // Connected, either scope 0: fine.
    assert_eq!(check_bind_scope(0, true, 4), Ok(()));
    assert_eq!(check_bind_scope(3, true, 0), Ok(()));
    assert_eq!(check_bind_scope(0, true, 0), Ok(()));
    // Connected, same scope: fine; different: EINVAL.
    assert_eq!(check_bind_scope(3, true, 3), Ok(()));
    assert_eq!(check_bind_scope(3, true, 4), Err(Inval));
}

// --- parse_connect -------------------------------------------------------------

#[test]
fn connect_shorter_than_family() {
    assert_eq!(parse_connect(&[], None), Err(Inval));
    assert_eq!(parse_connect(&[AF_INET as u8], None), Err(Inval));
    assert_eq!(parse_connect(&[0], None), Err(Inval));
}

#[test]
fn connect_v4_every_short_length() {
    // Length is checked before the address: a short INADDR_ANY is EINVAL.
    for a in ["10.0.0.1", "0.0.0.0"] {
        let full = sin(4000, a);
        for len in 2..SOCKADDR_IN_LEN {
            assert_eq!(parse_connect(&full[..len], None), Err(Inval), "{a} {len}");
        }
    }
    assert_eq!(
        parse_connect(&sin(4000, "10.0.0.1"), None),
        Ok(sa4("10.0.0.1", 4000))
    );
}

#[test]
fn connect_v4_addresses() {
    assert_eq!(parse_connect(&sin(4000, "0.0.0.0"), None), Err(DestAddrReq));
    for a in [
        "255.255.255.255",
        "224.0.0.0",
        "224.0.0.1",
        "239.255.255.255",
    ] {
        assert_eq!(parse_connect(&sin(4000, a), None), Err(Inval), "{a}");
    }
    for a in [
        "0.0.0.1",
        "10.0.0.1",
        "127.0.0.1",
        "223.255.255.255",
        "240.0.0.0",
        "255.255.255.254",
    ] {
        assert_eq!(parse_connect(&sin(9, a), None), Ok(sa4(a, 9)), "{a}");
    }
    let mut long = sin(9, "10.0.0.1");
    long.extend_from_slice(&[1; 20]);
    assert_eq!(parse_connect(&long, None), Ok(sa4("10.0.0.1", 9)));
    // IPv4 ignores the bound scope.
    let bound = sa6("fe80::2", 1, 7);
    assert_eq!(
        parse_connect(&sin(9, "10.0.0.1"), Some(bound)),
        Ok(sa4("10.0.0.1", 9))
    );
}

#[test]
fn connect_v6_every_short_length() {
    for a in ["2001:db8::1", "::"] {
        let full = sin6(4000, a, 0);
        for len in 2..SOCKADDR_IN6_LEN {
            assert_eq!(parse_connect(&full[..len], None), Err(Inval), "{a} {len}");
        }
    }
    assert_eq!(
        parse_connect(&sin6(4000, "2001:db8::1", 0), None),
        Ok(sa6("2001:db8::1", 4000, 0))
    );
}

#[test]
fn connect_v6_refused_types() {
    for a in [
        "::",
        "ff02::1",
        "ff01::1",
        "ff0e::1",
        "::ffff:0.0.0.0",
        "::ffff:255.255.255.255",
        "::ffff:224.0.0.1",
        "::ffff:239.0.0.1",
    ] {
        for scope in [0, 3] {
            assert_eq!(
                parse_connect(&sin6(4000, a, scope), None),
                Err(ProtoType),
                "{a}%{scope}"
            );
        }
    }
}

#[test]
fn connect_v6_accepted() {
    for a in [
        "2001:db8::1",
        "::1",
        "::1.2.3.4",
        "fd00::1",
        "fec0::1",
        "::fffe:1.2.3.4",
    ] {
        for scope in [0, 6] {
            // Non-link-local: the scope id is dropped and the bound scope
            // does not matter.
            assert_eq!(
                parse_connect(&sin6(4000, a, scope), Some(sa6("fe80::9", 1, 3))),
                Ok(sa6(a, 4000, 0)),
                "{a}%{scope}"
            );
        }
    }
    assert_eq!(
        parse_connect(&sin6(4000, "::ffff:10.0.0.1", 4), None),
        Ok(sa4("10.0.0.1", 4000))
    );
}

#[test]
fn connect_link_local_scope_rules() {
    let peer = |scope| sin6(4000, "fe80::1", scope);
    let ok = |scope| Ok(sa6("fe80::1", 4000, scope));

    // A link-local peer needs a scope id, whatever the socket's state.
    for bound in [None, Some(sa6("fe80::2", 1, 4)), Some(sa4("10.0.0.1", 1))] {
        assert_eq!(parse_connect(&peer(0), bound), Err(Inval));
    }
    // Not bound (None, or bound address ::): any scope; a stale
    // rs_bound_scope_id from an earlier connect does not count.
    assert_eq!(parse_connect(&peer(4), None), ok(4));
    assert_eq!(parse_connect(&peer(4), Some(sa(Addr::ANY, 0, 7))), ok(4));
    // Bound with rs_bound_scope_id 0 (a non-link-local address): any scope.
    assert_eq!(parse_connect(&peer(4), Some(sa4("10.0.0.1", 1))), ok(4));
    assert_eq!(
        parse_connect(&peer(4), Some(sa6("2001:db8::1", 1, 0))),
        ok(4)
    );
    // Bound to a link-local address: the same scope only.
    assert_eq!(parse_connect(&peer(4), Some(sa6("fe80::2", 1, 4))), ok(4));
    assert_eq!(
        parse_connect(&peer(5), Some(sa6("fe80::2", 1, 4))),
        Err(Inval)
    );
    // Bound to a global address, then connected to a link-local peer of
    // scope 4 (C set rs_bound_scope_id = 4): a peer of another scope is
    // refused.
    assert_eq!(
        parse_connect(&peer(5), Some(sa6("2001:db8::1", 1, 4))),
        Err(Inval)
    );
    assert_eq!(
        parse_connect(&peer(4), Some(sa6("2001:db8::1", 1, 4))),
        ok(4)
    );
}

#[test]
fn connect_unknown_families() {
    for fam in [
        AF_UNSPEC,
        1,
        3,
        21,
        AF_INET.swap_bytes(),
        AF_INET6.swap_bytes(),
        0xffff,
    ] {
        // The family is looked at before the length.
        assert_eq!(
            parse_connect(&fam.to_ne_bytes(), None),
            Err(AfNoSupport),
            "{fam}"
        );
        assert_eq!(
            parse_connect(&sin_fam(fam, 1, ip4("10.0.0.1")), None),
            Err(AfNoSupport)
        );
        assert_eq!(
            parse_connect(&sin6_fam(fam, 1, ip6("2001:db8::1"), 0), None),
            Err(AfNoSupport)
        );
    }
}

// --- encoding ------------------------------------------------------------------

#[test]
fn encode_v4_layout() {
    let mut out = [0xaa_u8; 40];
    let a = sa(Addr::from_v4([10, 1, 2, 3]), 0x1234, 99);
    assert_eq!(encode_sockaddr(&a, &mut out), Some(SOCKADDR_IN_LEN));
    let mut want = Vec::new();
    want.extend_from_slice(&AF_INET.to_ne_bytes());
    want.extend_from_slice(&[0x12, 0x34, 10, 1, 2, 3]);
    want.extend_from_slice(&[0; 8]);
    assert_eq!(&out[..16], &want[..]);
    // Past the returned length, untouched.
    assert!(out[16..].iter().all(|&b| b == 0xaa));
}

#[test]
fn encode_v6_layout() {
    let mut out = [0xaa_u8; 30];
    let a = sa6("fe80::1:2", 0xabcd, 0x0102_0304);
    assert_eq!(encode_sockaddr(&a, &mut out), Some(SOCKADDR_IN6_LEN));
    let mut want = Vec::new();
    want.extend_from_slice(&AF_INET6.to_ne_bytes());
    want.extend_from_slice(&[0xab, 0xcd, 0, 0, 0, 0]);
    want.extend_from_slice(&ip6("fe80::1:2").0);
    want.extend_from_slice(&0x0102_0304u32.to_ne_bytes());
    assert_eq!(&out[..28], &want[..]);
    assert_eq!(&out[28..], &[0xaa, 0xaa]);
    // Also for `::` and compat addresses (not v4-mapped).
    for t in ["::", "::1.2.3.4", "::1"] {
        assert_eq!(
            encode_sockaddr(&sa6(t, 1, 0), &mut out),
            Some(SOCKADDR_IN6_LEN)
        );
        assert_eq!(u16::from_ne_bytes([out[0], out[1]]), AF_INET6);
    }
}

#[test]
fn encode_needs_room_for_sockaddr_in6() {
    for a in [sa4("10.0.0.1", 1), sa6("2001:db8::1", 1, 0)] {
        for len in 0..SOCKADDR_IN6_LEN {
            let mut out = vec![0x55; len];
            assert_eq!(encode_sockaddr(&a, &mut out), None, "{len}");
            assert!(out.iter().all(|&b| b == 0x55));
        }
        let mut out = [0; SOCKADDR_IN6_LEN];
        assert!(encode_sockaddr(&a, &mut out).is_some());
    }
}

#[test]
fn unbound_local_names() {
    let check = |conn: Option<SockAddr>, fam: u16, len: usize| {
        let mut out = [0xaa_u8; 32];
        assert_eq!(encode_unbound_local(conn, &mut out), Some(len), "{conn:?}");
        assert_eq!(u16::from_ne_bytes([out[0], out[1]]), fam, "{conn:?}");
        assert!(out[2..len].iter().all(|&b| b == 0), "{conn:?}");
        assert!(out[len..].iter().all(|&b| b == 0xaa), "{conn:?}");
    };
    check(None, AF_UNSPEC, SOCKADDR_IN_LEN);
    check(Some(SockAddr::default()), AF_UNSPEC, SOCKADDR_IN_LEN);
    check(Some(sa(Addr::ANY, 5, 5)), AF_UNSPEC, SOCKADDR_IN_LEN);
    check(Some(sa4("10.0.0.1", 5)), AF_INET, SOCKADDR_IN_LEN);
    check(Some(sa6("2001:db8::1", 5, 0)), AF_INET6, SOCKADDR_IN6_LEN);
    check(Some(sa6("fe80::1", 5, 3)), AF_INET6, SOCKADDR_IN6_LEN);
    check(Some(sa6("::1.2.3.4", 5, 0)), AF_INET6, SOCKADDR_IN6_LEN);

    for len in 0..SOCKADDR_IN6_LEN {
        let mut out = vec![0x55; len];
        assert_eq!(encode_unbound_local(None, &mut out), None);
        assert_eq!(
            encode_unbound_local(Some(sa4("10.0.0.1", 5)), &mut out),
            None
        );
        assert!(out.iter().all(|&b| b == 0x55));
    }
}

#[test]
fn round_trips() {
    let cases = [
        sa4("10.0.0.1", 4000),
        sa4("127.0.0.1", 0),
        sa4("255.255.255.254", u16::MAX),
        sa6("2001:db8::1", 4000, 0),
        sa6("::1", 1, 0),
        sa6("::1.2.3.4", 2, 0),
        sa6("fd00::1", 3, 0),
        sa6("fe80::1", 18634, 2),
        sa6("fe80::1", 1, u32::MAX),
    ];
    for a in cases {
        let mut out = [0; 128];
        let len = encode_sockaddr(&a, &mut out).unwrap();
        assert_eq!(parse_bind(&out[..len]), Ok(a), "bind {a:?}");
        assert_eq!(parse_connect(&out[..len], None), Ok(a), "connect {a:?}");
        // The whole buffer (addr_len 128) parses the same.
        assert_eq!(parse_bind(&out), Ok(a), "bind {a:?} (128)");
    }
}

// --- properties ------------------------------------------------------------------

/// Addresses biased toward the prefixes `__ipv6_addr_type` tells apart.
fn any_addr() -> impl Strategy<Value = Addr> {
    let v4 = prop_oneof![
        Just([0, 0, 0, 0]),
        Just([255, 255, 255, 255]),
        (224u8..240, any::<[u8; 3]>()).prop_map(|(a, [b, c, d])| [a, b, c, d]),
        (Just(127u8), any::<[u8; 3]>()).prop_map(|(a, [b, c, d])| [a, b, c, d]),
        any::<[u8; 4]>(),
    ];
    let prefixed = (
        prop::sample::select(vec![0x00u8, 0x01, 0x20, 0x3f, 0xe0, 0xfc, 0xfd, 0xfe, 0xff]),
        any::<[u8; 15]>(),
    )
        .prop_map(|(b0, rest)| {
            let mut a = [0; 16];
            a[0] = b0;
            a[1..].copy_from_slice(&rest);
            Addr(a)
        });
    prop_oneof![
        v4.clone().prop_map(Addr::from_v4),
        v4.prop_map(|[a, b, c, d]| Addr([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, a, b, c, d])),
        prefixed,
        any::<[u8; 16]>().prop_map(Addr),
        (any::<u8>(), any::<[u8; 14]>()).prop_map(|(b1, rest)| {
            // fe80::/10 and fec0::/10 with random low bits.
            let mut a = [0; 16];
            a[0] = 0xfe;
            a[1] = 0x80 | (b1 & 0x7f);
            a[2..].copy_from_slice(&rest);
            Addr(a)
        }),
        Just(Addr::ANY),
        Just(Addr::LOOPBACK),
    ]
}

fn any_sockaddr() -> impl Strategy<Value = SockAddr> {
    (
        any_addr(),
        any::<u16>(),
        prop_oneof![Just(0u32), 1u32..8, any::<u32>()],
    )
        .prop_map(|(addr, port, scope_id)| SockAddr {
            addr,
            port,
            scope_id,
        })
}

/// Raw sockaddr bytes: a likely family, then arbitrary bytes, of any length
/// up to `sizeof(struct sockaddr_storage)`.
fn any_sockaddr_bytes() -> impl Strategy<Value = Vec<u8>> {
    let fam = prop_oneof![Just(AF_INET), Just(AF_INET6), Just(AF_UNSPEC), any::<u16>()];
    let encoded = (any_sockaddr(), 0usize..=128, any::<[u8; 128]>()).prop_map(|(a, len, fill)| {
        let mut out = fill.to_vec();
        let _ = encode_sockaddr(&a, &mut out);
        out.truncate(len);
        out
    });
    prop_oneof![
        (fam, prop::collection::vec(any::<u8>(), 0..=126)).prop_map(|(f, rest)| {
            let mut v = f.to_ne_bytes().to_vec();
            v.extend(rest);
            v
        }),
        prop::collection::vec(any::<u8>(), 0..=40),
        encoded,
    ]
}

fn is_link_local_unicast(a: &Addr) -> bool {
    a.0[0] == 0xfe && a.0[1] & 0xc0 == 0x80
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn kind_matches_the_model(a in any_addr()) {
        prop_assert_eq!(a.kind_with_scope(), model_type(a));
        prop_assert_eq!(a.kind(), model_type(a) & 0xffff);
        prop_assert_eq!(a.kind() & IPV6_ADDR_MAPPED != 0, a.v4().is_some());
        let std = Ipv6Addr::from(a.0);
        prop_assert_eq!(a.v4(), std.to_ipv4_mapped().map(|v| v.octets()));
        prop_assert_eq!(a.is_any(), std.is_unspecified());
        if a.v4().is_none() {
            prop_assert_eq!(a.is_loopback(), std.is_loopback());
            prop_assert_eq!(a.kind() & IPV6_ADDR_MULTICAST != 0, std.is_multicast());
        }
    }

    #[test]
    fn v4_round_trips(v in any::<[u8; 4]>()) {
        prop_assert_eq!(Addr::from_v4(v).v4(), Some(v));
        prop_assert_eq!(Addr::from_v4(v).is_loopback(), v[0] == 127);
    }

    #[test]
    fn parsing_never_panics(
        buf in any_sockaddr_bytes(),
        bound in proptest::option::of(any_sockaddr()),
    ) {
        let b = parse_bind(&buf);
        let c = parse_connect(&buf, bound);
        // Accepted results are normalized as C stores them.
        for r in [b, c].into_iter().flatten() {
            prop_assert!(r.scope_id == 0 || is_link_local_unicast(&r.addr));
            prop_assert!(!r.addr.is_any());
        }
        // Under 2 bytes both are EINVAL; otherwise bind and connect agree on
        // acceptance, except that connect also checks the bound scope.
        if buf.len() < 2 {
            prop_assert_eq!(b, Err(Inval));
            prop_assert_eq!(c, Err(Inval));
        }
        if let Ok(c) = c {
            prop_assert_eq!(b, Ok(c));
        }
        if let (Ok(b), None) = (b, bound) {
            prop_assert_eq!(c, Ok(b));
        }
        // Short-circuit errors are ordered as in C.
        if let Err(e) = b {
            prop_assert_eq!(e, Inval);
        }
    }

    #[test]
    fn accepted_bind_encodes_and_reparses(buf in any_sockaddr_bytes()) {
        if let Ok(a) = parse_bind(&buf) {
            let mut out = [0u8; SOCKADDR_IN6_LEN];
            let len = encode_sockaddr(&a, &mut out).unwrap();
            prop_assert_eq!(len, if a.addr.v4().is_some() { 16 } else { 28 });
            prop_assert_eq!(parse_bind(&out[..len]), Ok(a));
            prop_assert_eq!(parse_connect(&out[..len], None), Ok(a));
        }
    }

    #[test]
    fn encoded_sockaddr_reparses_when_accepted(a in any_sockaddr(), tail in 0usize..=100) {
        let mut out = vec![0u8; SOCKADDR_IN6_LEN + tail];
        let len = encode_sockaddr(&a, &mut out).unwrap();
        let family = u16::from_ne_bytes([out[0], out[1]]);
        if a.addr.v4().is_some() {
            prop_assert_eq!((len, family), (SOCKADDR_IN_LEN, AF_INET));
        } else {
            prop_assert_eq!((len, family), (SOCKADDR_IN6_LEN, AF_INET6));
        }
        // The normal form parse_bind gives: no scope id off link-local, and
        // none for v4-mapped addresses (sockaddr_in has no scope id).
        let norm = SockAddr {
            scope_id: if is_link_local_unicast(&a.addr) { a.scope_id } else { 0 },
            ..a
        };
        for l in [len, out.len()] {
            if let Ok(p) = parse_bind(&out[..l]) {
                prop_assert_eq!(p, norm);
            }
            if let Ok(p) = parse_connect(&out[..l], None) {
                prop_assert_eq!(p, norm);
            }
        }
        let mut out2 = vec![0u8; SOCKADDR_IN6_LEN];
        prop_assert_eq!(encode_unbound_local(Some(a), &mut out2).is_some(), true);
    }
}
