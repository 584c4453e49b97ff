// SPDX-License-Identifier: GPL-2.0

//! The Rust cases of the module's KUnit suite (the suite itself is `rds/kunit.c`).
//!
//! Each case runs pure protocol logic as compiled into the module, the same code the host tests
//! exercise, to catch differences between the kernel and host builds (target, flags, `core`).
//! A case returns 0 on success, or the number of the first check that failed.

use crate::proto::{verify_checksum, Ext, Header, HeaderError, FLAG_ACK_REQUIRED, HEADER_LEN};
use kernel::ffi::c_int;

/// Runs checks in order and returns the 1-based index of the first that fails, or 0.
fn first_failure(checks: &[bool]) -> c_int {
    checks
        .iter()
        .position(|ok| !ok)
        .map_or(0, |i| c_int::try_from(i + 1).unwrap_or(c_int::MAX))
}

fn sample() -> Header {
    Header {
        sequence: 0x0102_0304_0506_0708,
        ack: 0x1112_1314_1516_1718,
        len: 0x2122_2324,
        sport: 0x3132,
        dport: 0x4142,
        flags: FLAG_ACK_REQUIRED,
        credit: 7,
        csum: 0,
        exthdr: [0; 16],
    }
}

#[no_mangle]
extern "C" fn rds_rs_kunit_header_roundtrip() -> c_int {
    let h = sample();
    let wire = h.encode();
    first_failure(&[
        wire[..8] == [1, 2, 3, 4, 5, 6, 7, 8],
        wire[16..20] == [0x21, 0x22, 0x23, 0x24],
        wire[20..24] == [0x31, 0x32, 0x41, 0x42],
        wire[24] == FLAG_ACK_REQUIRED && wire[25] == 7,
        Header::decode(&wire) == Ok(h),
        Header::decode(&wire[..HEADER_LEN - 1]) == Err(HeaderError::TooShort),
    ])
}

#[no_mangle]
extern "C" fn rds_rs_kunit_header_checksum() -> c_int {
    let h = sample().with_checksum();
    let wire = h.encode();
    let mut flipped = wire;
    flipped[5] ^= 0x10;
    first_failure(&[
        h.csum != 0,
        verify_checksum(&wire),
        !verify_checksum(&flipped),
        verify_checksum(&sample().encode()),
    ])
}

#[no_mangle]
extern "C" fn rds_rs_kunit_header_ext() -> c_int {
    let mut h = sample();
    let added = h
        .add_ext(Ext::RdmaDest {
            rkey: 0xdead_beef,
            offset: 0x10,
        })
        .is_ok()
        && h.add_ext(Ext::Version(0x0301)).is_ok();
    let mut exts = h.exts();
    first_failure(&[
        added,
        exts.next()
            == Some(Ok(Ext::RdmaDest {
                rkey: 0xdead_beef,
                offset: 0x10,
            })),
        exts.next() == Some(Ok(Ext::Version(0x0301))),
        exts.next().is_none(),
        h.add_ext(Ext::RdmaDest { rkey: 1, offset: 2 }).is_err(),
    ])
}
