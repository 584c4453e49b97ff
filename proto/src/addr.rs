//! Socket addresses: the address rules of Linux C RDS.
//!
//! This mirrors Linux 6.12 `net/rds/bind.c` (`rds_bind`),
//! `net/rds/af_rds.c` (`rds_connect`, `rds_getname`) and the destination
//! checks of `net/rds/send.c` (`rds_sendmsg`), together with the
//! helpers they use: `__ipv6_addr_type` / `ipv6_addr_type`
//! (`net/ipv6/addrconf_core.c`, `include/net/ipv6.h`) and
//! `ipv4_is_multicast` (`include/linux/in.h`). The kernel is assumed to be
//! built with `CONFIG_IPV6`, so `AF_INET6` addresses are accepted.
//!
//! RDS keeps every address as an IPv6 address, IPv4 ones v4-mapped
//! (`::ffff:a.b.c.d`); see [`Addr`].
//!
//! Byte order of the C socket addresses read and written here: `sa_family`
//! and `sin6_scope_id` are in native byte order; ports, addresses and
//! `sin6_flowinfo` are big-endian.
//!
//! | offset | `struct sockaddr_in`   | `struct sockaddr_in6`     |
//! |--------|------------------------|---------------------------|
//! | 0      | `sa_family_t sin_family` | `sa_family_t sin6_family` |
//! | 2      | `__be16 sin_port`      | `__be16 sin6_port`        |
//! | 4      | `struct in_addr sin_addr` | `__be32 sin6_flowinfo` |
//! | 8      | `sin_zero[8]`          | `struct in6_addr sin6_addr` |
//! | 24     |                        | `__u32 sin6_scope_id`     |
//! | size   | 16 ([`SOCKADDR_IN_LEN`]) | 28 ([`SOCKADDR_IN6_LEN`]) |

/// Address family `AF_UNSPEC`.
pub const AF_UNSPEC: u16 = 0;
/// Address family `AF_INET` (IPv4, `struct sockaddr_in`).
pub const AF_INET: u16 = 2;
/// Address family `AF_INET6` (IPv6, `struct sockaddr_in6`).
pub const AF_INET6: u16 = 10;

/// `sizeof(struct sockaddr_in)`.
pub const SOCKADDR_IN_LEN: usize = 16;
/// `sizeof(struct sockaddr_in6)`.
pub const SOCKADDR_IN6_LEN: usize = 28;

/// `offsetofend(struct sockaddr, sa_family)`: the shortest `addr_len`
/// `rds_bind` and `rds_connect` look at.
const FAMILY_LEN: usize = 2;

/// [`Addr::kind`] value of `::` (`IPV6_ADDR_ANY`); no bit set.
pub const IPV6_ADDR_ANY: u32 = 0x0000;
/// [`Addr::kind`] bit: a unicast address (`IPV6_ADDR_UNICAST`).
pub const IPV6_ADDR_UNICAST: u32 = 0x0001;
/// [`Addr::kind`] bit: a multicast address (`IPV6_ADDR_MULTICAST`).
pub const IPV6_ADDR_MULTICAST: u32 = 0x0002;
/// [`Addr::kind`] bit: `::1`, or a node-local (interface-local) multicast
/// address (`IPV6_ADDR_LOOPBACK`).
pub const IPV6_ADDR_LOOPBACK: u32 = 0x0010;
/// [`Addr::kind`] bit: a link-local unicast (`fe80::/10`) or multicast
/// address (`IPV6_ADDR_LINKLOCAL`).
pub const IPV6_ADDR_LINKLOCAL: u32 = 0x0020;
/// [`Addr::kind`] bit: a site-local unicast (`fec0::/10`) or multicast
/// address (`IPV6_ADDR_SITELOCAL`).
pub const IPV6_ADDR_SITELOCAL: u32 = 0x0040;
/// [`Addr::kind`] bit: an IPv4-compatible address `::a.b.c.d`
/// (`IPV6_ADDR_COMPATv4`).
pub const IPV6_ADDR_COMPATV4: u32 = 0x0080;
/// The bits of [`Addr::kind`] that encode a scope (`IPV6_ADDR_SCOPE_MASK`).
pub const IPV6_ADDR_SCOPE_MASK: u32 = 0x00f0;
/// [`Addr::kind`] bit: a v4-mapped address `::ffff:a.b.c.d`
/// (`IPV6_ADDR_MAPPED`).
pub const IPV6_ADDR_MAPPED: u32 = 0x1000;

/// Node-local scope (`IPV6_ADDR_SCOPE_NODELOCAL`); see [`Addr::scope`].
pub const IPV6_ADDR_SCOPE_NODELOCAL: u32 = 0x01;
/// Link-local scope (`IPV6_ADDR_SCOPE_LINKLOCAL`); see [`Addr::scope`].
pub const IPV6_ADDR_SCOPE_LINKLOCAL: u32 = 0x02;
/// Site-local scope (`IPV6_ADDR_SCOPE_SITELOCAL`); see [`Addr::scope`].
pub const IPV6_ADDR_SCOPE_SITELOCAL: u32 = 0x05;
/// Organization-local scope (`IPV6_ADDR_SCOPE_ORGLOCAL`); see
/// [`Addr::scope`].
pub const IPV6_ADDR_SCOPE_ORGLOCAL: u32 = 0x08;
/// Global scope (`IPV6_ADDR_SCOPE_GLOBAL`); see [`Addr::scope`].
pub const IPV6_ADDR_SCOPE_GLOBAL: u32 = 0x0e;

/// `INADDR_ANY`, 0.0.0.0.
const INADDR_ANY: [u8; 4] = [0, 0, 0, 0];
/// `INADDR_BROADCAST`, 255.255.255.255.
const INADDR_BROADCAST: [u8; 4] = [255, 255, 255, 255];
/// `IN_LOOPBACKNET`, the first octet of IPv4 loopback addresses.
const IN_LOOPBACKNET: u8 = 127;

/// Linux `ipv4_is_multicast`: 224.0.0.0/4.
const fn ipv4_is_multicast(a: [u8; 4]) -> bool {
    let [a0, ..] = a;
    a0 & 0xf0 == 0xe0
}

/// The `INADDR_ANY` / `INADDR_BROADCAST` / multicast test `rds_bind` and
/// `rds_connect` apply to IPv4 and v4-mapped addresses.
const fn ipv4_unusable(a: [u8; 4]) -> bool {
    u32::from_be_bytes(a) == u32::from_be_bytes(INADDR_ANY)
        || u32::from_be_bytes(a) == u32::from_be_bytes(INADDR_BROADCAST)
        || ipv4_is_multicast(a)
}

/// Linux `IPV6_ADDR_SCOPE_TYPE`: a scope as the high half of
/// [`Addr::kind_with_scope`]. `scope` is at most 0xf.
const fn scope_type(scope: u32) -> u32 {
    scope.wrapping_shl(16)
}

/// Linux `ipv6_addr_scope2type`: the type bits of a multicast address of
/// scope `scope`.
const fn scope2type(scope: u32) -> u32 {
    match scope {
        IPV6_ADDR_SCOPE_NODELOCAL => scope_type(IPV6_ADDR_SCOPE_NODELOCAL) | IPV6_ADDR_LOOPBACK,
        IPV6_ADDR_SCOPE_LINKLOCAL => scope_type(IPV6_ADDR_SCOPE_LINKLOCAL) | IPV6_ADDR_LINKLOCAL,
        IPV6_ADDR_SCOPE_SITELOCAL => scope_type(IPV6_ADDR_SCOPE_SITELOCAL) | IPV6_ADDR_SITELOCAL,
        _ => scope_type(scope),
    }
}

/// An RDS address: IPv6; IPv4 addresses are stored v4-mapped
/// (`::ffff:a.b.c.d`), as C RDS does.
///
/// The 16 bytes are the address in network order, as `struct in6_addr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Addr(pub [u8; 16]);

impl Addr {
    /// The unspecified address `::` (`in6addr_any`), which RDS uses for
    /// "not bound" and "not connected".
    pub const ANY: Addr = Addr([0; 16]);
    /// The IPv6 loopback address `::1` (`in6addr_loopback`).
    pub const LOOPBACK: Addr = Addr([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);

    /// The v4-mapped address `::ffff:a.b.c.d` of the IPv4 address `a`
    /// (network order), as Linux `ipv6_addr_set_v4mapped`.
    #[must_use]
    pub const fn from_v4(a: [u8; 4]) -> Addr {
        let [a0, a1, a2, a3] = a;
        Addr([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a0, a1, a2, a3])
    }

    /// The IPv4 address (network order) if this address is v4-mapped
    /// (Linux `ipv6_addr_v4mapped`), else `None`.
    #[must_use]
    pub const fn v4(&self) -> Option<[u8; 4]> {
        match self.0 {
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a0, a1, a2, a3] => Some([a0, a1, a2, a3]),
            _ => None,
        }
    }

    /// Whether this is `::` (Linux `ipv6_addr_any`).
    #[must_use]
    pub const fn is_any(&self) -> bool {
        u128::from_be_bytes(self.0) == 0
    }

    /// C `rds_trans_get_preferred`'s loopback test: v4-mapped with first
    /// octet 127 (`IN_LOOPBACKNET`), or `::1` (`ipv6_addr_loopback`). Such
    /// addresses are served by the loopback transport.
    #[must_use]
    pub const fn is_loopback(&self) -> bool {
        match self.v4() {
            Some([a0, ..]) => a0 == IN_LOOPBACKNET,
            None => u128::from_be_bytes(self.0) == 1,
        }
    }

    /// Linux `ipv6_addr_type`: the `IPV6_ADDR_*` bit set of this address,
    /// without the scope (the low 16 bits of [`Addr::kind_with_scope`]).
    ///
    /// This is what `rds_bind`, `rds_connect` and `rds_getname` test.
    #[must_use]
    pub const fn kind(&self) -> u32 {
        self.kind_with_scope() & 0xffff
    }

    /// Linux `__ipv6_addr_type`: the `IPV6_ADDR_*` bits of [`Addr::kind`]
    /// in the low 16 bits and the scope (`IPV6_ADDR_SCOPE_*`, see
    /// [`Addr::scope`]) in the high 16 bits (`IPV6_ADDR_SCOPE_TYPE`).
    #[must_use]
    pub const fn kind_with_scope(&self) -> u32 {
        let [b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15] = self.0;
        let w0 = u32::from_be_bytes([b0, b1, b2, b3]);
        let w1 = u32::from_be_bytes([b4, b5, b6, b7]);
        let w2 = u32::from_be_bytes([b8, b9, b10, b11]);
        let w3 = u32::from_be_bytes([b12, b13, b14, b15]);

        // Addresses whose first three bits are neither 000 nor 111 are all
        // global unicast.
        if w0 & 0xe000_0000 != 0 && w0 & 0xe000_0000 != 0xe000_0000 {
            return IPV6_ADDR_UNICAST | scope_type(IPV6_ADDR_SCOPE_GLOBAL);
        }
        if w0 & 0xff00_0000 == 0xff00_0000 {
            // Multicast; the scope is the low nibble of the second byte
            // (`IPV6_ADDR_MC_SCOPE`).
            return IPV6_ADDR_MULTICAST | scope2type((b1 & 0x0f) as u32);
        }
        if w0 & 0xffc0_0000 == 0xfe80_0000 {
            return IPV6_ADDR_LINKLOCAL | IPV6_ADDR_UNICAST | scope_type(IPV6_ADDR_SCOPE_LINKLOCAL);
        }
        if w0 & 0xffc0_0000 == 0xfec0_0000 {
            return IPV6_ADDR_SITELOCAL | IPV6_ADDR_UNICAST | scope_type(IPV6_ADDR_SCOPE_SITELOCAL);
        }
        if w0 & 0xfe00_0000 == 0xfc00_0000 {
            // Unique local addresses (RFC 4193).
            return IPV6_ADDR_UNICAST | scope_type(IPV6_ADDR_SCOPE_GLOBAL);
        }
        if w0 | w1 == 0 {
            if w2 == 0 {
                if w3 == 0 {
                    return IPV6_ADDR_ANY;
                }
                if w3 == 1 {
                    return IPV6_ADDR_LOOPBACK
                        | IPV6_ADDR_UNICAST
                        | scope_type(IPV6_ADDR_SCOPE_LINKLOCAL);
                }
                return IPV6_ADDR_COMPATV4 | IPV6_ADDR_UNICAST | scope_type(IPV6_ADDR_SCOPE_GLOBAL);
            }
            if w2 == 0x0000_ffff {
                return IPV6_ADDR_MAPPED | scope_type(IPV6_ADDR_SCOPE_GLOBAL);
            }
        }
        IPV6_ADDR_UNICAST | scope_type(IPV6_ADDR_SCOPE_GLOBAL)
    }

    /// The scope `__ipv6_addr_type` gives this address, one of the
    /// `IPV6_ADDR_SCOPE_*` values for unicast addresses or the 4-bit scope
    /// field of a multicast address; 0 for `::`.
    #[must_use]
    pub const fn scope(&self) -> u32 {
        self.kind_with_scope().wrapping_shr(16)
    }
}

/// A socket address as RDS keeps it: address, port (host order), IPv6 scope
/// id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SockAddr {
    /// The address; IPv4 addresses are v4-mapped.
    pub addr: Addr,
    /// The port, in host order.
    pub port: u16,
    /// The IPv6 scope id (interface index); non-zero only for link-local
    /// addresses, 0 otherwise.
    pub scope_id: u32,
}

/// Errors of address parsing; each maps to one errno of C RDS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrError {
    /// `EINVAL`: too short, an unusable address, or a missing or mismatched
    /// link-local scope id.
    Inval,
    /// `EDESTADDRREQ`: `rds_connect` to the IPv4 address `INADDR_ANY`.
    DestAddrReq,
    /// `EPROTOTYPE`: `rds_connect` to an IPv6 address that is neither
    /// unicast nor a usable v4-mapped address.
    ProtoType,
    /// `EAFNOSUPPORT`: `rds_connect` with a family other than `AF_INET` or
    /// `AF_INET6`.
    AfNoSupport,
    /// `EOPNOTSUPP`: `rds_sendmsg` to an IPv4 destination from an IPv6
    /// bound address, or the other way round.
    OpNotSupp,
}

impl AddrError {
    /// The positive errno C RDS returns (negated) for this error.
    #[must_use]
    pub const fn errno(self) -> i32 {
        match self {
            AddrError::Inval => 22,
            AddrError::DestAddrReq => 89,
            AddrError::ProtoType => 91,
            AddrError::AfNoSupport => 97,
            AddrError::OpNotSupp => 95,
        }
    }
}

impl core::fmt::Display for AddrError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AddrError::Inval => write!(f, "invalid socket address"),
            AddrError::DestAddrReq => write!(f, "destination address required"),
            AddrError::ProtoType => write!(f, "address type not usable by RDS"),
            AddrError::AfNoSupport => write!(f, "address family not supported"),
            AddrError::OpNotSupp => {
                write!(
                    f,
                    "IPv4 and IPv6 addresses mixed between source and destination"
                )
            }
        }
    }
}

impl core::error::Error for AddrError {}

/// A `struct sockaddr_in` read from the front of a buffer.
struct In {
    port: u16,
    addr: [u8; 4],
}

/// A `struct sockaddr_in6` read from the front of a buffer.
struct In6 {
    port: u16,
    addr: Addr,
    scope_id: u32,
}

/// The `sa_family` of `buf`, or `None` when `buf` is shorter than
/// `offsetofend(struct sockaddr, sa_family)`.
fn family(buf: &[u8]) -> Option<u16> {
    buf.first_chunk::<FAMILY_LEN>()
        .map(|f| u16::from_ne_bytes(*f))
}

/// Reads a `struct sockaddr_in`; `None` when `buf` is shorter. The family
/// and `sin_zero` are not looked at.
fn read_in(buf: &[u8]) -> Option<In> {
    let [_, _, p0, p1, a0, a1, a2, a3, ..] = *buf.first_chunk::<SOCKADDR_IN_LEN>()?;
    Some(In {
        port: u16::from_be_bytes([p0, p1]),
        addr: [a0, a1, a2, a3],
    })
}

/// Reads a `struct sockaddr_in6`; `None` when `buf` is shorter. The family
/// and `sin6_flowinfo` are not looked at.
fn read_in6(buf: &[u8]) -> Option<In6> {
    #[rustfmt::skip]
    let [
        _, _, p0, p1, _, _, _, _,
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15,
        s0, s1, s2, s3,
    ] = *buf.first_chunk::<SOCKADDR_IN6_LEN>()?;
    Some(In6 {
        port: u16::from_be_bytes([p0, p1]),
        addr: Addr([
            a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15,
        ]),
        scope_id: u32::from_ne_bytes([s0, s1, s2, s3]),
    })
}

/// The check `rds_bind` and `rds_connect` share for an IPv6 address: it must
/// be unicast, or v4-mapped with a usable IPv4 address. Returns the address
/// type, or `err` when the address is refused.
fn check_in6(addr: &Addr, err: AddrError) -> Result<u32, AddrError> {
    let kind = addr.kind();
    if kind & IPV6_ADDR_UNICAST == 0 {
        if kind & IPV6_ADDR_MAPPED == 0 {
            return Err(err);
        }
        match addr.v4() {
            Some(a) if !ipv4_unusable(a) => {}
            _ => return Err(err),
        }
    }
    Ok(kind)
}

/// `rds_bind`'s checks on the sockaddr bytes user space passed (the kernel
/// has copied them; `buf.len()` is `addr_len`).
///
/// In C order:
/// - `addr_len` < 2: [`AddrError::Inval`];
/// - `AF_INET`: `addr_len` < 16, or the address is `INADDR_ANY`,
///   `INADDR_BROADCAST` or multicast (224.0.0.0/4): [`AddrError::Inval`];
///   otherwise the address is v4-mapped and the scope id is 0;
/// - `AF_INET6`: `addr_len` < 28, an address that is neither unicast nor
///   v4-mapped, or v4-mapped with one of the IPv4 addresses above, or a
///   link-local unicast address with scope id 0: [`AddrError::Inval`].
///   The returned scope id is `sin6_scope_id` for link-local addresses and 0
///   for all others (C ignores it there);
/// - any other family: [`AddrError::Inval`].
///
/// Bytes past the family's sockaddr size are ignored, as are `sin_zero` and
/// `sin6_flowinfo`. A port of 0 is accepted (C then picks a free port).
///
/// This covers the checks before `lock_sock`; the ones on the socket's state
/// that follow (already bound, and the scope check against a link-local
/// connected address) are in [`check_bind_scope`] and the caller.
///
/// # Errors
///
/// As listed above; all of them are [`AddrError::Inval`].
pub fn parse_bind(buf: &[u8]) -> Result<SockAddr, AddrError> {
    match family(buf).ok_or(AddrError::Inval)? {
        AF_INET => {
            let sin = read_in(buf).ok_or(AddrError::Inval)?;
            if ipv4_unusable(sin.addr) {
                return Err(AddrError::Inval);
            }
            Ok(SockAddr {
                addr: Addr::from_v4(sin.addr),
                port: sin.port,
                scope_id: 0,
            })
        }
        AF_INET6 => {
            let sin6 = read_in6(buf).ok_or(AddrError::Inval)?;
            let kind = check_in6(&sin6.addr, AddrError::Inval)?;
            let mut scope_id = 0;
            // The scope ID must be specified for link local address.
            if kind & IPV6_ADDR_LINKLOCAL != 0 {
                if sin6.scope_id == 0 {
                    return Err(AddrError::Inval);
                }
                scope_id = sin6.scope_id;
            }
            Ok(SockAddr {
                addr: sin6.addr,
                port: sin6.port,
                scope_id,
            })
        }
        _ => Err(AddrError::Inval),
    }
}

/// `rds_bind`'s scope check against the connected address, made after
/// [`parse_bind`] succeeded and the socket was found not yet bound.
///
/// - `scope_id`: the [`SockAddr::scope_id`] [`parse_bind`] returned;
/// - `connected`: whether the socket is connected (C `rs_conn_addr` is not
///   `::`);
/// - `bound_scope_id`: the socket's C `rs_bound_scope_id`, which a
///   link-local [`parse_connect`] sets (see there).
///
/// A socket connected to a link-local peer may only be bound to an address
/// of the same scope, unless either scope id is 0.
///
/// # Errors
///
/// [`AddrError::Inval`] when both scope ids are non-zero and differ on a
/// connected socket.
pub fn check_bind_scope(
    scope_id: u32,
    connected: bool,
    bound_scope_id: u32,
) -> Result<(), AddrError> {
    if connected && scope_id != 0 && bound_scope_id != 0 && scope_id != bound_scope_id {
        return Err(AddrError::Inval);
    }
    Ok(())
}

/// `rds_connect`'s checks on the sockaddr bytes user space passed
/// (`buf.len()` is `addr_len`).
///
/// `bound` describes the socket's local side exactly as C keeps it:
/// `Some(SockAddr { addr: rs_bound_addr, port: rs_bound_port, scope_id:
/// rs_bound_scope_id })`, or `None` when the socket is not bound (the same
/// as an `addr` of `::`). Its `scope_id` must be the socket's single C
/// `rs_bound_scope_id`, which both a successful bind (the scope id
/// [`parse_bind`] returned, 0 unless link-local) and a successful link-local
/// connect (the non-zero scope id this function returns) overwrite. Only
/// `bound.addr.is_any()` and `bound.scope_id` are looked at.
///
/// In C order:
/// - `addr_len` < 2: [`AddrError::Inval`];
/// - `AF_INET`: `addr_len` < 16: [`AddrError::Inval`]; `INADDR_ANY`:
///   [`AddrError::DestAddrReq`]; multicast or `INADDR_BROADCAST`:
///   [`AddrError::Inval`]; otherwise the address is v4-mapped and the scope
///   id is 0;
/// - `AF_INET6`: `addr_len` < 28: [`AddrError::Inval`]; an address that is
///   neither unicast nor v4-mapped (`::`, multicast), or v4-mapped with
///   `INADDR_ANY`, `INADDR_BROADCAST` or a multicast address:
///   [`AddrError::ProtoType`]; a link-local unicast address with scope id
///   0, or whose scope id differs from `bound.scope_id` while the socket is
///   bound and `bound.scope_id` is non-zero: [`AddrError::Inval`];
/// - any other family, `AF_UNSPEC` included: [`AddrError::AfNoSupport`].
///
/// On success the returned [`SockAddr::scope_id`] is `sin6_scope_id` for a
/// link-local address and 0 otherwise. When it is non-zero the caller must
/// store it as the socket's `rs_bound_scope_id`, as C does; when it is 0,
/// `rs_bound_scope_id` stays as it was.
///
/// # Errors
///
/// As listed above.
pub fn parse_connect(buf: &[u8], bound: Option<SockAddr>) -> Result<SockAddr, AddrError> {
    match family(buf).ok_or(AddrError::Inval)? {
        AF_INET => {
            let sin = read_in(buf).ok_or(AddrError::Inval)?;
            if sin.addr == INADDR_ANY {
                return Err(AddrError::DestAddrReq);
            }
            if ipv4_is_multicast(sin.addr) || sin.addr == INADDR_BROADCAST {
                return Err(AddrError::Inval);
            }
            Ok(SockAddr {
                addr: Addr::from_v4(sin.addr),
                port: sin.port,
                scope_id: 0,
            })
        }
        AF_INET6 => {
            let sin6 = read_in6(buf).ok_or(AddrError::Inval)?;
            let kind = check_in6(&sin6.addr, AddrError::ProtoType)?;
            let mut scope_id = 0;
            if kind & IPV6_ADDR_LINKLOCAL != 0 {
                // If the socket is already bound to a link-local address,
                // the peer must be on the same link.
                let bound_scope = match bound {
                    Some(b) if !b.addr.is_any() => b.scope_id,
                    _ => 0,
                };
                if sin6.scope_id == 0 || (bound_scope != 0 && sin6.scope_id != bound_scope) {
                    return Err(AddrError::Inval);
                }
                scope_id = sin6.scope_id;
            }
            Ok(SockAddr {
                addr: sin6.addr,
                port: sin6.port,
                scope_id,
            })
        }
        _ => Err(AddrError::AfNoSupport),
    }
}

/// Writes a zeroed `struct sockaddr_in` or `struct sockaddr_in6` of family
/// `family` and size `len` to `out`, which holds at least `len` bytes.
fn write_zeroed(out: &mut [u8], family: u16, len: usize) -> Option<usize> {
    let dst = out.get_mut(..len)?;
    dst.fill(0);
    *dst.first_chunk_mut::<FAMILY_LEN>()? = family.to_ne_bytes();
    Some(len)
}

/// `rds_getname`'s encoding of a bound or connected address: a
/// `struct sockaddr_in` (16 bytes) for a v4-mapped address, a
/// `struct sockaddr_in6` (28 bytes) otherwise, written to the front of
/// `out`. Returns the length written, or `None` when `out` is shorter than
/// [`SOCKADDR_IN6_LEN`] (checked whatever the family).
///
/// `sin_zero` and `sin6_flowinfo` are zero; `a.scope_id` is only written for
/// `AF_INET6`. C fills `sin6_scope_id` from `rs_bound_scope_id` for both the
/// local and the peer name, so the caller passes that as `a.scope_id`. Bytes
/// of `out` past the returned length are left as they were.
#[must_use]
pub fn encode_sockaddr(a: &SockAddr, out: &mut [u8]) -> Option<usize> {
    if out.len() < SOCKADDR_IN6_LEN {
        return None;
    }
    let [p0, p1] = a.port.to_be_bytes();
    match a.addr.v4() {
        Some([a0, a1, a2, a3]) => {
            let [f0, f1] = AF_INET.to_ne_bytes();
            #[rustfmt::skip]
            let sin: [u8; SOCKADDR_IN_LEN] = [
                f0, f1,                 // 0: sin_family
                p0, p1,                 // 2: sin_port
                a0, a1, a2, a3,         // 4: sin_addr
                0, 0, 0, 0, 0, 0, 0, 0, // 8: sin_zero
            ];
            *out.first_chunk_mut::<SOCKADDR_IN_LEN>()? = sin;
            Some(SOCKADDR_IN_LEN)
        }
        None => {
            let [f0, f1] = AF_INET6.to_ne_bytes();
            let [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15] = a.addr.0;
            let [s0, s1, s2, s3] = a.scope_id.to_ne_bytes();
            #[rustfmt::skip]
            let sin6: [u8; SOCKADDR_IN6_LEN] = [
                f0, f1,                 // 0: sin6_family
                p0, p1,                 // 2: sin6_port
                0, 0, 0, 0,             // 4: sin6_flowinfo
                a0, a1, a2, a3, a4, a5, a6, a7, // 8: sin6_addr
                a8, a9, a10, a11, a12, a13, a14, a15,
                s0, s1, s2, s3,         // 24: sin6_scope_id
            ];
            *out.first_chunk_mut::<SOCKADDR_IN6_LEN>()? = sin6;
            Some(SOCKADDR_IN6_LEN)
        }
    }
}

/// `rds_getname(peer = 0)` for a socket that is not bound, given the
/// address it is connected to (`None`, or an address of `::`, when not
/// connected):
/// - not connected: a zeroed `struct sockaddr_in` of family `AF_UNSPEC`,
///   length 16;
/// - connected to an address that is not v4-mapped: a zeroed
///   `struct sockaddr_in6` of family `AF_INET6`, length 28;
/// - connected to a v4-mapped address: a zeroed `struct sockaddr_in` of
///   family `AF_INET`, length 16.
///
/// Returns the length written, or `None` when `out` is shorter than
/// [`SOCKADDR_IN6_LEN`] (checked whatever the case). Bytes of `out` past the
/// returned length are left as they were.
#[must_use]
pub fn encode_unbound_local(conn: Option<SockAddr>, out: &mut [u8]) -> Option<usize> {
    if out.len() < SOCKADDR_IN6_LEN {
        return None;
    }
    match conn {
        Some(c) if !c.addr.is_any() => {
            if c.addr.kind() & IPV6_ADDR_MAPPED == 0 {
                write_zeroed(out, AF_INET6, SOCKADDR_IN6_LEN)
            } else {
                write_zeroed(out, AF_INET, SOCKADDR_IN_LEN)
            }
        }
        _ => write_zeroed(out, AF_UNSPEC, SOCKADDR_IN_LEN),
    }
}

/// `rds_sendmsg`'s checks on `msg_name` when `msg_namelen` is not 0 (the
/// kernel's copy; `name.len()` is `msg_namelen`).
///
/// In C order:
/// - `msg_namelen` < 16 (`sizeof(struct sockaddr_in)`), whatever the
///   family: [`AddrError::Inval`];
/// - `AF_INET`: `INADDR_ANY`, `INADDR_BROADCAST` or multicast
///   (224.0.0.0/4): [`AddrError::Inval`]; otherwise the address is
///   v4-mapped and the scope id is 0;
/// - `AF_INET6`: `msg_namelen` < 28, an address that is neither unicast
///   nor v4-mapped, or v4-mapped with one of the IPv4 addresses above, or a
///   link-local unicast address with scope id 0: [`AddrError::Inval`]. The
///   returned scope id is `sin6_scope_id` for link-local addresses and 0
///   for all others;
/// - any other family: [`AddrError::Inval`].
///
/// After the length check these are exactly [`parse_bind`]'s rules (C
/// repeats them). A port of 0 is accepted here.
///
/// When `msg_namelen` is 0, C uses the connected address and port and the
/// socket's `rs_bound_scope_id` instead, and neither this nor
/// [`check_send_dest`] applies.
///
/// # Errors
///
/// As listed above; all of them are [`AddrError::Inval`].
pub fn parse_send_dest(name: &[u8]) -> Result<SockAddr, AddrError> {
    if name.len() < SOCKADDR_IN_LEN {
        return Err(AddrError::Inval);
    }
    parse_bind(name)
}

/// `rds_sendmsg`'s checks of an explicit destination `dest` (from
/// [`parse_send_dest`]) against the socket's bound side `bound`
/// (`SockAddr { addr: rs_bound_addr, port: rs_bound_port, scope_id:
/// rs_bound_scope_id }`; only `addr` and `scope_id` are looked at).
///
/// The caller has already failed the send with `ENOTCONN` when
/// `bound.addr` or `dest.addr` is `::`, as C does first.
///
/// Returns the scope id to send with:
/// - `dest` is v4-mapped and `bound.addr` is not, or the other way round:
///   [`AddrError::OpNotSupp`];
/// - the scope ids are equal: that scope id;
/// - `dest.scope_id` is 0: `bound.scope_id`;
/// - `bound.scope_id` is non-zero (and differs): [`AddrError::Inval`]; a
///   socket bound to a link-local address only sends on its own link;
/// - otherwise (`bound.scope_id` is 0): `dest.scope_id`.
///
/// # Errors
///
/// As listed above.
pub fn check_send_dest(dest: &SockAddr, bound: &SockAddr) -> Result<u32, AddrError> {
    if dest.addr.v4().is_some() != bound.addr.v4().is_some() {
        return Err(AddrError::OpNotSupp);
    }
    if dest.scope_id == bound.scope_id || dest.scope_id == 0 {
        return Ok(bound.scope_id);
    }
    if bound.scope_id != 0 {
        return Err(AddrError::Inval);
    }
    Ok(dest.scope_id)
}
