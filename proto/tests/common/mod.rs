//! Strategies shared by the host test crates of rds-proto.

use proptest::prelude::*;
use rds_proto::Ext;

/// Any extension header, of every known type.
pub(crate) fn any_ext() -> impl Strategy<Value = Ext> {
    prop_oneof![
        any::<u32>().prop_map(Ext::Version),
        any::<u32>().prop_map(|rkey| Ext::Rdma { rkey }),
        (any::<u32>(), any::<u32>()).prop_map(|(rkey, offset)| Ext::RdmaDest { rkey, offset }),
        any::<u16>().prop_map(Ext::Npaths),
        any::<u32>().prop_map(Ext::GenNum),
        any::<u8>().prop_map(Ext::SportIdx),
    ]
}
