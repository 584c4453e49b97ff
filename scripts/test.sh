#!/usr/bin/env bash
# `make test`: every test of rds-rs, ending with one line "N passed, N failed".
#   1. set-up (idempotent), 2. host: lints and cargo tests, 3. the debug kernel and rds_rs.ko,
#   4. guests: the one-guest suite (KUnit, C-vs-Rust socket tests, load exclusion, leaks),
#      rds_rs against rds_rs over soft-RoCE and soft-iWARP in one guest, and rds_rs against the
#      in-tree C rds_rdma over soft-RoCE between the two guests.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"
cd "$top"
t0=$SECONDS
passed=0 failed=0
res=$top/target/test-run
rm -rf "$res"; mkdir -p "$res"

count() { # count NAME STATUS
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1"; fi
}
# stage TITLE: a step's title, with the time since make test began.
stage() { step "[+$((SECONDS - t0))s] $*"; }
finish() {
  echo "(make test took $((SECONDS - t0))s; results in $res)"
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
}

# host_checks: formatting, lints and the host's cargo tests (run while the guests run: they
# need nothing the guests need, and the guests leave cores idle while they wait).
host_checks() {
  stage "host: formatting and lints"
  cargo fmt --all --check > "$res/fmt.log" 2>&1; count cargo_fmt $? ; [ -s "$res/fmt.log" ] && head -20 "$res/fmt.log"
  # The module's own sources, formatted as the kernel's rustfmt config asks (generated code aside).
  rustfmt --check --edition 2021 --config-path "$top/rustfmt.toml" rds/*.rs rds_loop/*.rs rds_ib/*.rs rds_ib/ib/*.rs rds_tcp/*.rs rds_tcp/tcp/*.rs bindings/*.rs bindings/ib/*.rs > "$res/kfmt.log" 2>&1
  count module_rustfmt $?; [ -s "$res/kfmt.log" ] && head -20 "$res/kfmt.log"
  cargo clippy --workspace --all-targets --quiet -- -D warnings > "$res/clippy.log" 2>&1
  count cargo_clippy $?; grep -m20 -E '^(warning|error)' "$res/clippy.log"

  stage "host: cargo test"
  cargo test --workspace --quiet --no-fail-fast > "$res/cargo-test.log" 2>&1; local rc=$?
  hp=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\1/p' "$res/cargo-test.log" | paste -sd+ | bc)
  hf=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\2/p' "$res/cargo-test.log" | paste -sd+ | bc)
  passed=$((passed + ${hp:-0})); failed=$((failed + ${hf:-0}))
  echo "    host: ${hp:-0} passed, ${hf:-0} failed"
  if [ $rc -ne 0 ] && [ "${hf:-0}" -eq 0 ]; then count cargo_test_build $rc; tail -30 "$res/cargo-test.log"; fi
  grep -E '^(---- |thread .* panicked)' "$res/cargo-test.log" | head -20

  if [ -n "$kdir" ]; then
    # The build users get (no KUnit, no test hooks) must build cleanly too; the guests load
    # the test build (KUnit suite, debugfs hooks, loopback fault modes).
    stage "host: rds_rs.ko as users build it"
    bash "$here/module.sh" "$kdir" > /dev/null; count module_build $?
  fi
}

bash "$here/setup.sh" || { count setup 1; finish; }

# What the guests need first: the debug kernel, the test build of rds_rs.ko, the test
# programs and the misbehaving RDS/IB peer of ib-bad.sh (C against rdma-core; target/badpeer).
guests=
if kdir=$(bash "$here/kernel.sh" debug); then
  if ! module=$(bash "$here/module.sh" "$kdir" test); then count module_build_test 1
  elif ! cargo build --release --quiet -p rds-tests -p rds-tools; then count test_programs_build 1
  elif ! tests_bin=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/rds-tests \
       || [ ! -x "$tests_bin" ]; then count test_programs_present 1
  elif ! bash "$here/build-badpeer.sh" > /dev/null; then count badpeer_build 1
  else
    count module_build_test 0; count badpeer_build 0; guests=1
  fi
else
  count kernel_build 1; kdir=
fi
# The kernel's RDS selftest under netem faults and the full TCP mesh of 32 namespaces run on
# the leak kernel, the plain kernel plus kmemleak (no KASAN, no lockdep: the selftest's four
# runs take some 10 minutes there, five times that on the debug kernel, and the mesh's 3,968
# TCP connections overwhelm the debug kernel's one vCPU under TCG); the selftest's run without
# faults and a mesh of 12, in the debug guest tcp, are the ones with every checker on.
kleak= module_leak=
if [ -n "$guests" ]; then
  if ! kleak=$(bash "$here/kernel.sh" leak); then count kernel_build_leak 1; kleak=
  elif ! module_leak=$(bash "$here/module.sh" "$kleak" test); then count module_build_test_leak 1; kleak=
  fi
fi

# The guests, one vCPU each, side by side on the host's cores (harness.py pool); a guest
# that sleeps or waits leaves its share of the cores to the others:
#  a:    the C reference half of the paired suites (C rds.ko + rds_tcp.ko run the test
#        programs), then the in-tree C rds_rdma on soft-RoCE against guest b (rdma-pair.sh a);
#  b:    the rds_rs half of the same suites (KUnit, the same test programs, load exclusion),
#        then rds_rs on soft-RoCE against guest a's C (rdma-pair.sh b): each side's checking
#        client against the other's echo servers, IPv4 and IPv6, at the same time. a and b
#        run the same programs before they meet, so they meet at about the same time;
#        nothing with a lifetime starts before both are there;
#  core: rds_rs's own loopback suites (RDMA over loopback, queued messages, faults, hostile
#        users, the load test under the fault modes);
#  ib:   rds_rs against rds_rs over a veth pair with soft-RoCE and soft-iWARP, IPv4 and IPv6
#        (ib-one.sh), then a misbehaving raw-verbs peer over soft-iWARP (ib-bad.sh siw);
#  ibf:  faults under two streams (ib-faults.sh: the link down and up, the RDMA device
#        deleted and re-added), then the misbehaving peer over soft-RoCE (ib-bad.sh rxe);
#  tcp:  the kernel's RDS selftest against rds_rs over TCP (tcp-selftest.sh), the hostile
#        TCP peers, zero-copy and the transport-neutral suites over TCP (tcp-neutral.sh) for
#        rds_rs and for C's rds_tcp, then rds_rs against itself in a full mesh of namespaces,
#        all deleted with traffic in flight (tcp-mesh.sh, 12 namespaces here); tcpf: the same
#        on the leak kernel (plain plus kmemleak), under netem, without the transport-neutral
#        suites, with the mesh of 32 namespaces.
#  Three at a time: the pair, and beside it at nice 10 core, then ib; ibf when the pair ends.
#  (Four at a time, ib and ibf beside the pair from the start, is untried on a host at its
#  usual speed: Documentation/testing.md, "Time".)
#  Never two RDS implementations at once in a guest.
# The judge compares each check's C observation (from a) with its rds_rs one (from b).
# lockdep.prove_locking=0 on guest a only: the C reference modules trip lockdep on every
# RDS/IB accept in 6.12 (Documentation/c-rds-findings.md). Guest a runs nothing but the C
# modules; KASAN, kmemleak and the other detectors stay on. The guests where rds_rs runs keep
# lockdep on.
# The bound (GUEST_TIMEOUT) is the one safety net for every guest, well above what a busy
# host takes (Documentation/testing.md has the measured times); every wait inside is bounded
# by it or by its own, shorter bound counted from a point both sides have reached.
start_guests() {
stage "guests: C RDS and rds_rs side by side, rds_rs over RDMA, C RDS/IB against rds_rs (debug kernel)"
guests_t0=$((SECONDS - t0))
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pair=$top/tests/guest/rdma-pair.sh
guest=$top/tests/guest
mkdir -p "$res/a" "$res/b" "$res/core" "$res/ib" "$res/ibf" "$res/tcp" "$res/tcpf"
q() { printf '%q ' "$@"; }
steps() { # steps NAME CMD-LINES: the guest's commands as a script file (the command travels on
  # the kernel command line, virtme-ng's virtme.exec, base64, which x86 cuts at 2048 bytes).
  printf '%s\n' "$2" > "$res/$1/steps.sh"; echo "bash $(q "$res/$1/steps.sh")"
}
cmd_a=$(steps a "CHAINED=before $(q "$guest/suite.sh" "$res/a" "$kdir" "$module" "$tests_bin" c);
 CHAINED=after $(q "$pair" a "$res/a" "$kdir" "$module" "$tests_bin" 192.0.2.1 192.0.2.2 fd01::1 fd01::2 rxe "$res/b")")
cmd_b=$(steps b "CHAINED=before $(q "$guest/suite.sh" "$res/b" "$kdir" "$module" "$tests_bin" rs);
 CHAINED=after $(q "$pair" b "$res/b" "$kdir" "$module" "$tests_bin" 192.0.2.2 192.0.2.1 fd01::2 fd01::1 rxe "$res/a")")
cmd_core=$(steps core "$(q "$guest/suite.sh" "$res/core" "$kdir" "$module" "$tests_bin" rs-own)")
cmd_ib=$(steps ib "CHAINED=before $(q "$guest/ib-one.sh" "$res/ib" "$kdir" "$module" "$tests_bin");
 CHAINED=after $(q "$guest/ib-bad.sh" "$res/ib" "$kdir" "$module" "$tests_bin" siw)")
cmd_ibf=$(steps ibf "CHAINED=before $(q "$guest/ib-faults.sh" "$res/ibf" "$kdir" "$module" "$tests_bin");
 CHAINED=after $(q "$guest/ib-bad.sh" "$res/ibf" "$kdir" "$module" "$tests_bin" rxe)")
cmd_tcp=$(steps tcp "CHAINED=before TCP_NEUTRAL=1 $(q "$guest/tcp-selftest.sh" "$res/tcp" "$kdir" "$module" "$tests_bin" none);
 CHAINED=after $(q "$guest/tcp-mesh.sh" "$res/tcp" "$kdir" "$module" "$tests_bin" 12 8 900)")
tcpf=()
if [ -n "$kleak" ]; then
  cmd_tcpf=$(steps tcpf "CHAINED=before $(q "$guest/tcp-selftest.sh" "$res/tcpf" "$kleak" "$module_leak" "$tests_bin" \
    "-l 10;-c 10;-u 10;-l 10 -c 10 -u 10");
 CHAINED=after $(q "$guest/tcp-mesh.sh" "$res/tcpf" "$kleak" "$module_leak" "$tests_bin" 32 100 600)")
  tcpf=(--guest "tcpf=$cmd_tcpf" --guest-kernel "tcpf=$kleak")
fi
python3 tests/harness.py pool --kernel "$kdir" --out "$res" --timeout "${GUEST_TIMEOUT:-2400}" --most 3 --nice 10 \
  --port "$port" --append-a lockdep.prove_locking=0 --pair-a "$cmd_a" --pair-b "$cmd_b" \
  --guest "core=$cmd_core" --guest "ib=$cmd_ib" --guest "ibf=$cmd_ibf" --guest "tcp=$cmd_tcp" "${tcpf[@]}" \
  > "$res/pool.log" 2>&1 &
pool=$!
}

[ -n "$guests" ] && start_guests
# The host's checks take what the guests leave: on a fresh clone they compile the workspace
# (clippy, cargo test, the users' build of the module) for some six minutes of both cores,
# and beside the pair rounds that starved the guests' soft-RoCE link into retry exhaustion.
# The guests are already started; only what this shell starts from here on is reniced.
renice -n 19 -p $$ > /dev/null
host_checks
if [ -n "$guests" ]; then
  stage "waiting for the guests (started at +${guests_t0}s)"
  wait "$pool" || count harness_pool $?
  cat "$res/pool.log"
  python3 tests/harness.py times "$res"/{a,b,core,ib,ibf,tcp,tcpf} > "$res/times.txt"
  cat "$res"/{a,b}/meet-waits.txt 2>/dev/null | sed 's/^/    meeting /'
else
  finish
fi


stage "judging guest results"
# Results that must be there, whatever else the guests wrote.
expect=()
for impl in c:a rs:b; do
  g=${impl#*:}; impl=${impl%:*}
  for name in socket_seqpacket socket_dgram socket_seqpacket_protocol_1 socket_many_open; do
    expect+=(--expect "$res/$g/socket.$impl.tap:$name")
  done
  for name in bind_loopback bind_in_use bind_after_close connect_loopback getsockname6_bound; do
    expect+=(--expect "$res/$g/bind.$impl.tap:$name")
  done
  for name in recverr_get_after_set transport_after_bind settos_loopback gettos_default; do
    expect+=(--expect "$res/$g/sockopt.$impl.tap:$name")
  done
  for check in sendrecv:recv_v4_same_addr sendrecv:recv_v6 sendrecv:order_per_pair \
      sendrecv:msg_peek sendrecv:recv_exactly_1mib sendrecv:send_to_unbound_port \
      sendrecv:recv_iov_unmapped sendrecv:recv_name_unmapped \
      cmsg:cmsg_dest_and_args cmsg:controllen_1m_zeros cmsg:delivered_only_ok \
      poll:poll_after_arrival poll:poll_after_reading_all poll:poll_blocked_woken \
      sockopt2:cancel_after_delivery sockopt2:timestamp_cmsg sockopt2:rxpath_cmsg \
      info:info_sockets_list info:info_connections_list info:info_recv_messages_list \
      info:info_counter_delta_recv_delivered info:info_buffer_unmapped \
      ping:ping_loopback ping:ping_counters ping:ping_disabled_no_pong \
      sysctl:sysctl_ping_enable_default sysctl:sysctl_max_unacked_bytes_mode \
      netns-traffic:netns_send_to_other_namespace netns-traffic:netns_info_sockets_new \
      close-race:close_while_sending close-race:churn_threads \
      load:load_finished_in_time load:load_messages load:load_rcvbuf_accounting \
      load:load_workers_exit load:load_send_queues_empty load:load_sndbuf_settled \
      rdma-abi:get_mr_unbound rdma-abi:get_mr_optlen_31 rdma-abi:free_mr_optlen_15 \
      rdma-abi:dest_and_args rdma-abi:args_nr_local_1025 rdma-abi:args_remote_bytes_1m_plus_1 \
      rdma-abi:args_read_local_read_only rdma-abi:atomic_local_unaligned \
      rdma-abi:rdma_abi_nothing_delivered; do
    expect+=(--expect "$res/$g/${check%%:*}.$impl.tap:${check#*:}")
  done
done
expect+=(--expect "$res/a/netns-c.tap:netns_bind_same_port_other_namespace"
         --expect "$res/b/netns-rs.tap:netns_bind_same_port_other_namespace")
for impl in c:a rs:b; do
  g=${impl#*:}; impl=${impl%:*}
  for check in cong:cong_nonblocking_send cong:cong_update_cmsg cong:cong_blocking_send \
      ping-cross:ping_cross_address_pong; do
    expect+=(--expect "$res/$g/${check%%:*}-$impl.tap:${check#*:}")
  done
done
# A refused sender without the monitor, woken in poll: only where loopback congests (rds_rs).
for name in cong_plain_refused cong_plain_poll_after_refusal cong_plain_poll_woken; do
  expect+=(--expect "$res/b/cong-rs.tap:$name")
done
# RDMA over loopback (rds_rs only), and the registration rules paired with C's RDS/IB.
for name in write_1_1iov read_1m_512iov write_4k1_16iov remote_offset_tampered \
    rdma_map_then_write rdma_dest_then_read atomic_fadd atomic_cswp_hit atomic_cswp_miss \
    atomic_masked_fadd_fields16 atomic_masked_cswp_hit use_once_second_fails \
    rdma_after_invalidate free_mr_cookie_0_flush notify_many_in_one_recvmsg \
    notify_room_for_one no_notify_me_no_notification recverr_failure_notified \
    recverr_off_failure_silent silent_write_no_payload silent_write_with_payload \
    poll_pending_notification rdma_id_per_destination barrier_dontwait_not_reached \
    barrier_o_nonblock_not_reached barrier_blocking_woken barrier_many_ops \
    barrier_failed_op_completes cancel_notifications cancel_raises_mark barrier_never_issued \
    barrier_optlen_151 window_4096 close_sender_with_ops_queued close_owner_with_op_queued \
    get_mr_unbound get_mr_258_pages free_mr_twice free_mr_other_socket \
    rdma_dest_other_socket_cookie rdma_dest_freed_cookie args_nr_local_0 args_nr_local_1025 \
    args_iovecs_unmapped args_local_more_than_remote args_write_local_unmapped \
    args_read_local_read_only args_write_local_read_only remote_past_end_by_1 \
    remote_freed_key atomic_local_unaligned atomic_remote_unaligned combo_dest_and_args \
    combo_two_args combo_args_and_atomic rdma_id_without_op args_remote_bytes_over_1m \
    good_op_after_bad_input vmpin_after_close v6_write_4k rlimit_memlock_charged \
    rlimit_memlock_0_no_cap close_with_notification_and_registrations \
    barrier_one_call_many_completions rdma_write_held_target_untouched \
    rdma_write_data_in_place_on_arrival rdma_map_eagain_undone rdma_map_etimedout_undone \
    args_local_4g_minus_1 rdma_id_failed_calls_take_none many_destinations_ids \
    many_destinations_forgotten_barrier; do
  expect+=(--expect "$res/core/rdma-rs.tap:$name")
done
# Messages held on their connections (rds_rs only).
for name in queued_fill_until_full queued_full_dontwait queued_full_sndtimeo \
    queued_full_no_pollout queued_pollout_after_release queued_blocked_sender_woken \
    queued_blocked_sender_arrivals queued_cancel_refunds queued_cancel_other_destinations_arrive \
    queued_cancelled_never_arrive queued_info_send_messages queued_info6_send_messages \
    queued_info_empty_after_release queued_close_sender queued_close_receiver_release \
    queued_netns_held queued_after_netns_gone queued_burst_recycled; do
  expect+=(--expect "$res/core/queued-rs.tap:$name")
done
# The core under faults and hostile input (rds_rs only: the test build's hooks).
for name in faults_inject_good_checksum faults_inject_csum_0 faults_inject_ext_type_200 \
    faults_inject_bad_checksum faults_inject_len_above_1m faults_inject_len_above_payload \
    faults_inject_cong_map_ports faults_inject_rdma_ext_truncated faults_retrans_info_unacked \
    faults_retrans_info6_unacked faults_retrans_after_reset faults_retrans_received_once \
    faults_retrans_acked faults_rdma_resets_notified_once faults_rdma_resets_some_dropped \
    faults_rdma_resets_barrier faults_rdma_softirq_resets_notified_once \
    faults_rdma_softirq_resets_barrier faults_reap_idle_gone faults_reap_busy_kept \
    faults_reap_reconnect; do
  expect+=(--expect "$res/core/faults-rs.tap:$name")
done
for name in zero_byte_receiver_congests zero_byte_sender_fills memcg_sockets_charged \
    memcg_messages_charged memcg_max_refuses notify_limit_in_flight notify_limit_room_after_reading \
    cong_wait_nothing_pinned cong_wait_bounded_by_sndtimeo memlock_children_share_creator_limit \
    rkey_cookie_random_base rkey_guess_rate_limited rkey_limited_socket_right_key_fails \
    rkey_read_only_registration netns_cong_b_not_seen_by_a_monitor netns_cong_a_drain_notifies_a \
    tstamp_flag_race; do
  expect+=(--expect "$res/core/hostile-rs.tap:$name")
done
for mode in reset softirq softirq_reset; do
  for check in finished_in_time messages recv_queues_empty send_queues_empty sndbuf_settled \
      rcvbuf_accounting resets rdma_notified_once rdma_data rdma_barrier; do
    expect+=(--expect "$res/core/load-${mode//_/-}-rs.tap:load_${mode}_$check")
  done
done
for name in reg_zero_length reg_258_pages reg_unmapped reg_no_mlock_valid free_unknown_cookie \
    free_cookie_0_flush; do
  expect+=(--expect "$res/a/rdma-reg.c.tap:$name" --expect "$res/b/rdma-reg.rs.tap:$name")
done
for name in load_rs_while_c_loaded load_rs_after_c_unloaded; do
  expect+=(--expect "$res/b/exclusion.tap:$name")
done
for name in rmmod_with_open_sockets sockets_work_after_refused_unload; do
  expect+=(--expect "$res/a/unload.c.tap:$name" --expect "$res/b/unload.rs.tap:$name")
done
expect+=(--expect "$res/a/modparam.c.tap:rds_ib_retry_count"
         --expect "$res/b/modparam.rs.tap:rds_ib_retry_count")
# RDS over RDMA: rds_rs against itself in guest b (soft-RoCE, soft-iWARP; IPv4, IPv6), and C
# against rds_rs across the guests, each side's client.
ib_checks="connect pingpong_20 sizes_0_to_1m many_sockets_ports stream_300x8k tos_3_own_connection
  ping_port_0 info_tables"
for soft in rxe siw; do
  for fam in v4 v6; do
    for check in $ib_checks; do
      expect+=(--expect "$res/ib/ib-rs-$soft.tap:ib_rs_${soft}_${fam}_$check")
    done
    expect+=(--expect "$res/ib/ib-rs-$soft.tap:ib_${soft}_${fam}_echo_exit")
  done
  expect+=(--expect "$res/ib/ib-rs-$soft.tap:ib_${soft}_rmmod_with_connections")
  for check in recycle_warm recycle_steady; do
    expect+=(--expect "$res/ib/ib-rs-$soft.tap:ib_rs_${soft}_$check")
  done
done
# RDMA across rxe and siw, rds_rs at both ends (rds-tests ib-rdma; siw has no atomics).
rdma_ib="connect cookie_offset_keeps_page_offset write_at_remote_offset read_at_remote_offset
  write_remote_bytes_larger write_exact_end read_remote_bytes_larger write_then_message_in_place
  write_good write_forged_rkey write_good_after_reconnect write_read_only read_read_only
  write_stale_cookie write_use_once use_once_freed write_use_once_again write_good_at_end
  barrier_after_writes barrier_after_refused nothing_left"
rdma_rxe="atomic_fadd atomic_fadd_wraps atomic_cswp_hit atomic_cswp_miss atomic_masked_fadd_fields16
  atomic_masked_fadd_bit7 atomic_masked_fadd_mask0 atomic_masked_cswp_hit
  atomic_masked_cswp_miss atomic_host_byte_order atomic_fadd_sequence atomic_second_word"
rdma_siw="atomic_fadd_refused atomic_cswp_refused atomic_masked_fadd_refused atomic_target_unchanged
  rdma_map_send rdma_map_receiver_gets_cookie rdma_map_registers rdma_map_then_write
  rdma_map_free_by_owner rdma_map_freed rdma_map_without_cookie_addr rdma_dest_send
  rdma_dest_receiver_gets_cookie rdma_dest_then_read rdma_dest_twice get_mr_for_dest_then_write
  service_broken_get_mr service_broken_writes"
for size in 1:1 100:100 4k:4096 4k1:4097 64k:65536 1m:1048576; do
  for n in 1 2 16 512; do
    [ "$n" -gt "${size#*:}" ] && continue
    rdma_ib+=" write_${size%:*}_${n}iov read_${size%:*}_${n}iov"
  done
done
for fam in v4 v6; do
  for check in $rdma_ib $rdma_rxe; do expect+=(--expect "$res/ib/ib-rs-rxe.tap:ib_rdma_rxe_${fam}_$check"); done
  for check in $rdma_ib $rdma_siw; do expect+=(--expect "$res/ib/ib-rs-siw.tap:ib_rdma_siw_${fam}_$check"); done
done
# Registrations freed while the peer reads them (rds-tests ib-free-race; siw: the fences).
for check in free_mr_during_read free_mr_fenced; do
  for soft in rxe siw; do expect+=(--expect "$res/ib/ib-rs-$soft.tap:ib_rdma_${soft}_v4_$check"); done
done
for check in free_mr_fence_stalled read_after_stall; do
  expect+=(--expect "$res/ib/ib-rs-siw.tap:ib_rdma_siw_v4_$check")
done
# Registrations with no connection (rds-tests ib-mr): on rxe, and on siw by fast registration;
# revoked with their device (rds-tests ib-mr-revoke).
for soft in rxe siw; do
  for check in counted free_after get_mr_no_device nothing_left; do
    expect+=(--expect "$res/ib/ib-rs-$soft.tap:ib_mr_revoke_$check")
  done
done
mr_all="no_connection successive_keys_differ live_keys_distinct registered_counted free free_again
  free_invalidate deregistered_counted close_frees c_alloc_counted c_free_counted"
for k in read_only unaligned 1mib use_once; do mr_all+=" get_mr_$k cookie_offset_$k"; done
for fam in v4 v6; do
  for check in $mr_all; do expect+=(--expect "$res/ib/ib-rs-rxe.tap:ib_mr_rxe_${fam}_$check"); done
  for check in $mr_all atomic get_mr_257_pages; do
    expect+=(--expect "$res/ib/ib-rs-siw.tap:ib_mr_siw_${fam}_$check")
  done
done
for check in each_reported_once statuses_ok_or_dropped barrier_past_all old_cookie_after messages_once pinned_back; do
  expect+=(--expect "$res/ibf/ib-faults-rs.tap:ib_rdma_flood_$check")
done
# Faults mid-stream (ib-faults.sh) and the bad peer (ib-bad.sh; the scenario list is the
# script's).
for check in setup link_down_up rdma_link_readd stream_ab_exactly_once_in_order \
    stream_ba_exactly_once_in_order rdma_flood_link; do
  expect+=(--expect "$res/ibf/ib-faults-rs.tap:ib_fault_rxe_$check")
done
for soft in rxe siw; do
  for sc in setup background_start $(sed -n 's/^  "\([a-z_0-9]*\) .*/\1/p' "$top/tests/guest/ib-bad.sh") \
      background receiver rmmod; do
    expect+=(--expect "$res/$([ $soft = rxe ] && echo ibf || echo ib)/ib-bad-rs.tap:ib_bad_${soft}_$sc")
  done
done
# The rounds of rdma-pair.sh: rds_rs active (IPv4), C active (IPv6), both at once (TOS 7).
for run in b:rs_to_c_v4 a:c_to_rs_v6 a:c_to_rs_v4_tos7 b:rs_to_c_v4_tos7 a:c_to_rs_v6_tos7 \
    b:rs_to_c_v6_tos7; do
  g=${run%%:*} tag=${run#*:}; impl=${tag%%_*}
  for check in $ib_checks; do
    expect+=(--expect "$res/$g/ib-pair-$impl.tap:ib_${tag}_$check")
  done
done
# The project's rds-ping and rds-info -I on each side, then rounds 5 and 6: the peer's module
# reloaded mid-stream (C, then rds_rs).
for g in a:c b:rs; do
  for check in rds_ping rds_info_I; do
    expect+=(--expect "$res/${g%%:*}/ib-pair-${g#*:}.tap:ib_pair_${g#*:}_$check")
  done
done
expect+=(--expect "$res/a/harness.tap:pair_retry_count_c" --expect "$res/b/harness.tap:pair_retry_count_rs")
expect+=(--expect "$res/a/ib-pair-c.tap:ib_pair_reload_c" --expect "$res/b/ib-pair-rs.tap:ib_pair_reload_c_sender"
         --expect "$res/b/ib-pair-rs.tap:ib_pair_reload_rs" --expect "$res/a/ib-pair-c.tap:ib_pair_reload_rs_sender")
for g in a:c b:rs; do
  for fam in v4 v6; do
    expect+=(--expect "$res/${g%%:*}/ib-pair-${g#*:}.tap:ib_pair_${g#*:}_echo_$fam")
  done
done
# Round 7: RDMA both ways at once, each side's registrant and operator.
for role in registrant operator; do
  expect+=(--expect "$res/a/ib-pair-c.tap:ib_rdma_pair_c_with_rs_$role"
           --expect "$res/b/ib-pair-rs.tap:ib_rdma_pair_rs_with_c_$role")
done
# The kernel's RDS selftest against rds_rs's TCP transport: each run.
expect+=(--expect "$res/tcp/tcp-selftest.tap:tcp_selftest_none")
for cfg in l10 c10 u10 l10c10u10; do
  expect+=(--expect "$res/tcpf/tcp-selftest.tap:tcp_selftest_$cfg")
done
# Hostile peers over TCP from a raw socket, after the selftest runs, in both guests.
for g in tcp tcpf; do
  for case in h_len_over_1mib garbage truncated_header announce_1mib_then_silence silent all_paths_up \
      misplaced_path small_pieces large_pieces; do
    expect+=(--expect "$res/$g/tcp-hostile.tap:tcp_hostile_$case"
             --expect "$res/$g/tcp-hostile.tap:tcp_hostile_${case}_rds_after")
  done
  for case in rs_data rs_errors rs_local rs_ring_full c_data c_errors c_local; do
    expect+=(--expect "$res/$g/tcp-zcopy.tap:tcp_zcopy_$case")
  done
done
# The transport-neutral suites over TCP between two namespaces (tcp-neutral.sh, guest tcp),
# rds_rs and C's rds_tcp, paired by the judge.
for impl in c rs; do
  for check in sendrecv:tcp_paths_far4 sendrecv:tcp_paths_far4b sendrecv:tcp_paths_far6 \
      sendrecv:recv_v4_same_addr sendrecv:recv_v4_other_addr sendrecv:recv_v6 sendrecv:order_per_pair \
      sendrecv:recv_exactly_1mib sendrecv:send_to_unbound_port sendrecv:close_with_queued_messages \
      sendrecv:recv_name_unmapped \
      cmsg:tcp_paths_far4 cmsg:cmsg_dest_and_args cmsg:msg_zerocopy_with_cookie_tcp cmsg:delivered_only_ok \
      cong:tcp_paths_far4 cong:cong_nonblocking_send cong:cong_update_cmsg cong:cong_blocking_send \
      cong:cong_plain_refused cong:cong_plain_poll_woken \
      ping:tcp_paths_far4 ping:tcp_paths_far6 ping:ping_tcp ping:ping6_tcp ping:ping_counters \
      ping:ping_disabled_no_pong \
      info:tcp_paths_far4b info:tcp_paths_far6 info:info_sockets_list info:info6_sockets_list \
      info:info_connections_list info:info6_connections_list info:info_recv_messages_list \
      info:info_after_traffic_tcp_sockets info:info_counter_delta_recv_delivered; do
    expect+=(--expect "$res/tcp/${check%%:*}-tcp.$impl.tap:${check#*:}")
  done
done
# rds_rs against rds_rs over TCP in 32 namespaces, a full mesh, then every namespace deleted
# with traffic in flight (tcp-mesh.sh, after the selftest and the hostile peers; the debug
# kernel's guest 12 namespaces with 8 messages a pair, the leak kernel's 32 with 100; kmemleak
# in both).
for g in tcp tcpf; do
  for check in setup all_delivered exactly_once_in_order connections_tcp counters \
      netns_deleted_in_flight in_flight_arrivals_in_order netns_gone fresh_pair fresh_pair_gone rmmod; do
    expect+=(--expect "$res/$g/tcp-mesh.tap:tcp_mesh_$check")
  done
done
# C's rds_tcp against rds_rs's TCP transport, in the pair's last rounds.
for dir in c_to_rs:a rs_to_c:b; do
  g=${dir#*:}; d=${dir%:*}; impl=${d%%_*}
  for fam in v4 v6; do
    for check in connect pingpong_20 sizes_0_to_1m many_sockets_ports stream_300x8k tos_3_own_connection \
        ping_port_0 info_tables; do
      expect+=(--expect "$res/$g/ib-pair-$impl.tap:ib_tcp_${d}_${fam}_$check")
    done
    expect+=(--expect "$res/$g/ib-pair-$impl.tap:tcp_pair_${impl}_echo_$fam")
    expect+=(--expect "$res/$g/ib-pair-$impl.tap:tcp_pair_${impl}_paths_$fam")
  done
done
# Rounds 10-13 over TCP: the peer's module reloaded mid-stream (C, then rds_rs), side b's link
# cut and restored, forged resets into each side's stack; streams both ways in 12 and 13.
expect+=(--expect "$res/a/ib-pair-c.tap:tcp_pair_reload_c" --expect "$res/b/ib-pair-rs.tap:tcp_pair_reload_c_sender"
         --expect "$res/b/ib-pair-rs.tap:tcp_pair_reload_rs" --expect "$res/a/ib-pair-c.tap:tcp_pair_reload_rs_sender"
         --expect "$res/b/ib-pair-rs.tap:tcp_pair_cut_link")
for g in a:c b:rs; do
  for check in cut_IMPL_recv cut_IMPL_send rst_IMPL_injected rst_IMPL_recv rst_IMPL_send; do
    expect+=(--expect "$res/${g%%:*}/ib-pair-${g#*:}.tap:tcp_pair_${check/IMPL/${g#*:}}")
  done
done
python3 tests/harness.py judge --counts "$res/guest-counts" "${expect[@]}" \
  "$res/a" "$res/b" "$res/core" "$res/ib" "$res/ibf" "$res/tcp" "$res/tcpf"
if read -r gp gf < "$res/guest-counts"; then
  passed=$((passed + gp)); failed=$((failed + gf))
else
  count guest_judge 1
fi
finish
