#!/usr/bin/env bash
# Generate the Rust bindings rds-rs uses, against a configured and built kernel tree.
#   gen-bindings.sh KDIR OUTDIR
# Writes OUTDIR/raw_generated.rs (bindgen output) and OUTDIR/static_fns.c (C wrappers that make
# the static inline functions we bind callable from Rust). The clang flags are the ones the kernel
# used for its own bindings, so layouts match the kernel the module is built for.
set -euo pipefail
kdir=$1; out=$2
here=$(cd "$(dirname "$0")" && pwd)
cmdfile=$kdir/rust/bindings/.bindings_generated.rs.cmd
[ -f "$cmdfile" ] || { echo "gen-bindings: $cmdfile missing (kernel not built with Rust?)" >&2; exit 1; }
# The saved command is "savedcmd_... := BINDGEN header FLAGS -o out -- CLANG_FLAGS ; sed ...".
cflags=$(sed -n 's/^savedcmd_[^ ]* := //p' "$cmdfile" | sed 's/ ; .*//; s/.* -- //' \
  | tr ' ' '\n' | grep -v '^-Wp,-MMD' | tr '\n' ' ')
[ -n "$cflags" ] || { echo "gen-bindings: no clang flags found in $cmdfile" >&2; exit 1; }
params=$(grep -Ev '^#|^$' "$kdir/source/rust/bindgen_parameters")

fns='sock_register|sock_unregister|proto_register|proto_unregister|sk_alloc|sock_init_data'
fns+='|sock_no_.*|sock_create_kern|sock_release|sock_orphan|sock_put|sock_hold'
fns+='|ib_register_client|ib_unregister_client|ib_post_send|ib_post_recv|ib_poll_cq'
fns+='|ib_req_notify_cq|ib_alloc_cq|ib_free_cq|ib_dealloc_pd'
fns+='|rdma_destroy_id|rdma_bind_addr|rdma_listen|rdma_resolve_addr|rdma_resolve_route'
fns+='|rdma_connect|rdma_accept|rdma_disconnect|rdma_create_qp|rdma_destroy_qp|rds_rs_.*'
fns+='|sock_net|get_random_u16|put_cmsg|sock_recv_errqueue|sock_flag|sock_set_flag|sock_reset_flag'
fns+='|sock_i_ino|destroy_workqueue|drain_workqueue|msleep|call_rcu|rcu_barrier'
fns+='|_raw_spin_lock_bh|_raw_spin_unlock_bh|_raw_spin_lock|_raw_spin_unlock'
types='socket|sock|proto|proto_ops|net_proto_family|msghdr|sockaddr|ib_client|ib_device'
types+='|ib_send_wr|ib_recv_wr|ib_wc|ib_cq|ib_pd|ib_qp|ib_qp_init_attr|rdma_cm_id|rdma_cm_event'
types+='|rdma_conn_param|sock_type|sock_flags|wait_queue_head|poll_table_struct|file|workqueue_struct'
types+='|ib_cqe|rds_rs_ib_attrs|rds_rs_page_ref'
vars='SOCK_.*|AF_.*|PF_.*|SOL_.*|MSG_.*|E[A-Z0-9]*|init_net|RDS_RS_IB_.*|RDS_RS_TCP_.*|jiffies'

mkdir -p "$out"
cd "$kdir"
# shellcheck disable=SC2086
${BINDGEN:-bindgen} "$here/wrapper.h" $params --rust-target 1.68 \
  --use-core --with-derive-default --ctypes-prefix ffi --no-layout-tests --no-debug '.*' \
  --enable-function-attribute-detection \
  --allowlist-function "$fns" --allowlist-type "$types" --allowlist-var "$vars" \
  --experimental --wrap-static-fns --wrap-static-fns-path "$out/static_fns" \
  -o "$out/raw_generated.rs.tmp" -- $cflags -DMODULE -UKBUILD_MODNAME '-DKBUILD_MODNAME="rds_rs"' -I"$here"
mv "$out/raw_generated.rs.tmp" "$out/raw_generated.rs"
# Declare the wrappers before their definitions (the kernel builds with -Wmissing-prototypes).
c=$out/static_fns.c
{ sed -n '/^#include/p' "$c"; echo; sed -n 's/^\(.*__extern(.*)\) {.*}$/\1;/p' "$c"; sed '/^#include/d' "$c"; } > "$c.tmp"
mv "$c.tmp" "$c"
