#!/usr/bin/env python3
"""ibcount.py RSDIR CDIR [--md]: exact instructions per exchange by function, rds_rs against C.

Each DIR holds the plugin's snapshots tb.txt.N (tbcount.c with LBPLUG_TRIGGER=ksys_sync),
kallsyms.txt and prof.log (ibprof.sh). The three `sync`s around the short and the long
rds-pingpong run are the three snapshots A, B, C found as: C-B is the largest window, A the
snapshot before B. The measured window is (C-B)-(B-A) per translation block, the exchanges
sent(long)-sent(short) from the two summaries."""
import sys, bisect, collections, re, subprocess, glob, os

def snapshots(d):
    fs = sorted(glob.glob(f'{d}/tb.txt.*'), key=lambda f: int(f.rsplit('.', 1)[1]))
    return fs

def read_tb(f):
    c = collections.Counter(); n = {}
    for l in open(f):
        v, k, x = l.split(); v = int(v, 16)
        c[(v, int(k))] += int(x)
    return c

def total(c):
    return sum(k[1] * x for k, x in c.items())

def demangle(names):
    out = subprocess.run(['c++filt'], input='\n'.join(names), capture_output=True, text=True).stdout.split('\n')
    res = {}
    for a, b in zip(names, out):
        b = re.sub(r'\[[0-9a-f]{16}\]', '', b)
        res[a] = b
    return res

def load(d):
    fs = snapshots(d)
    tbs = [read_tb(f) for f in fs]
    tots = [total(t) for t in tbs]
    wins = [tots[i + 1] - tots[i] for i in range(len(tots) - 1)]
    j = max(range(len(wins)), key=lambda i: wins[i])  # window B->C is tbs[j]..tbs[j+1]
    A, B, C = tbs[j - 1], tbs[j], tbs[j + 1]
    delta = collections.Counter()
    for k in set(A) | set(B) | set(C):
        x = C.get(k, 0) - 2 * B.get(k, 0) + A.get(k, 0)
        if x: delta[k] = x
    log = open(f'{d}/prof.log').read()
    sent = {m.group(1): int(m.group(2)) for m in re.finditer(r'^(short|long) summary: .* sent=(\d+)', log, re.M)}
    rate = {m.group(1): float(m.group(2)) for m in re.finditer(r'^(short|long) summary: .* req_per_s=([\d.]+)', log, re.M)}
    ex = sent['long'] - sent['short']
    syms = []
    for l in open(f'{d}/kallsyms.txt'):
        p = l.split()
        if len(p) < 3 or p[1].lower() not in 'tw': continue
        a = int(p[0], 16)
        if a == 0: continue
        syms.append((a, p[2], p[3].strip('[]') if len(p) > 3 else ''))
    syms.sort(); addrs = [s[0] for s in syms]
    per = collections.Counter(); entry = collections.Counter()
    for (v, n), x in delta.items():
        if v < 0xffff000000000000:
            per[('[user]', '')] += n * x; continue
        i = bisect.bisect_right(addrs, v) - 1
        if i < 0: per[('?', '')] += n * x; continue
        a, name, mod = syms[i]
        per[(name, mod)] += n * x
        if v == a: entry[(name, mod)] += x
    info = dict(fs=fs, snaps=(j - 1, j, j + 1), tots=tots, ex=ex, sent=sent, rate=rate,
                wtot=sum(per.values()))
    return per, entry, info

# Steps: first match wins; regexes on the demangled name (anchored at its start)
P = lambda *a: '^(' + '|'.join(a) + ')'
KSTEPS = [
    (P(r'\[user\]'), '0 user space (rds-pingpong)'),
    (P(r'entry_SYSCALL', 'do_syscall_64', 'syscall_', '__sys_', '__x64_sys_', 'x64_sys_call', 'fdget', 'import_ubuf',
       '_copy_(from|to)_(iter|user)', 'rep_movs_alternative', 'copy_page_(to|from)_iter', 'move_addr_to_kernel',
       r'\w*fpregs', 'switch_fpu_return', 'arch_exit_to_user', 'sock_(send|recv)msg', 'security_', 'lock_sock_nested',
       'release_sock', '__check_object_size', 'check_heap_object', '__virt_addr_valid', 'fput', '__fput'),
     '1 syscall entry/exit, user copies'),
    (P('rxe_poll_cq', 'rxe_cq_post', 'rxe_req_notify_cq', 'ib_poll_handler', '__ib_process_cq', 'ib_process_cq',
       'irq_poll', 'ib_comp_', 'ib_cq_'), '5 CQ polling and notification (rxe, ib_core)'),
    (P('rxe_', 'do_task', 'do_complete', 'copy_data', 'lookup_mr', 'check_keys', 'check_type_state', 'prepare_ack_packet',
       'post_one_recv', 'next_opcode', 'crc32', 'crypto_shash', 'find_gid', 'rdma_', 'ib_', 'xa_load', 'xas_',
       '__radix_tree_lookup', 'radix_tree_lookup', 'idr_find', 'execute', 'get_wqe', 'check_', 'send_data_in',
       'read_reply', 'acknowledge', 'send_ack', 'make_send_cqe', 'update_wqe', 'finish_packet', 'init_req_packet',
       'fill_packet', 'update_state', 'do_read', 'retransmit', 'rnr_nak', 'req_', 'resp_', 'comp_', 'get_req', 'get_srq',
       'write_data_in', 'process_flush'),
     '4 rxe and ib_core (work requests, packets, ICRC)'),
    (P('ip_', r'ip\d', '__ip', 'udp', '__udp', 'fib_', '__fib', '__netif', 'netif_', 'net_rx_action', '__napi_poll',
       'napi_', 'process_backlog', 'enqueue_to_backlog', 'skb_', '__skb', '__alloc_skb', 'alloc_skb', '__build_skb',
       'kmalloc_reserve', 'dev_', '__dev_', 'veth_', 'eth_', 'dst_', 'ipv4_', 'raw_local_deliver', 'siphash',
       'validate_xmit', 'netdev_', 'inet_', 'sk_skb', 'kfree_skb', 'consume_skb', 'make_kuid', 'map_id_range_down',
       'sock_wfree', 'neigh', 'rt_', 'sch_', 'qdisc', '__qdisc', 'pfifo', 'csum', '__kfree_skb', 'napi'),
     '4b network stack under rxe (UDP/IP/veth)'),
    (P('_raw_', 'queued_', 'native_queued'), '8 locks (spin/read/write, all callers)'),
    (P('process_one_work', '__queue_work', 'worker_', 'pwq_', 'kick_pool', 'queue_work_on', 'move_linked_works',
       'assign_work', 'clear_pending_if_disabled', 'workqueue_softirq_action', 'wq_worker', 'tasklet_', '__tasklet',
       'handle_softirqs', 'do_softirq', '__local_bh_enable', 'raise_softirq', 'run_ksoftirqd', 'smpboot_thread_fn',
       'kthread_', 'irq_exit', '__irq_exit', 'sysvec', 'asm_sysvec', 'irq_enter', 'insert_work', 'wake_up_worker',
       'need_more_worker', 'get_work_pool', 'set_work_pool', 'try_to_grab_pending', 'mod_delayed_work', '__queue_delayed',
       'delayed_work_timer', 'queue_delayed', 'rcu_work', 'flush_work', 'cancel_'),
     '7 workqueue, tasklet, softirq dispatch'),
    (P('__schedule', 'schedule', 'update_', 'pick_', 'enqueue', 'dequeue', '__enqueue', '__dequeue', 'vruntime',
       '__switch_to', 'set_next_task', 'put_prev_task', 'avg_vruntime', 'sched_', 'local_clock', 'place_entity',
       'finish_task_switch', 'check_preempt', 'ttwu', 'try_to_wake_up', 'wake_up', '__wake_up', 'autoremove_wake',
       'woken_wake', 'wait_woken', 'prepare_to_wait', 'finish_wait', 'rcu_', '__rcu_', 'switch_mm', 'wakeup_preempt',
       'ktime_get', '__mod_timer', 'dl_server', 'min_vruntime', '__cond_resched', '__usecs_to_jiffies', 'resched_',
       '__update_load', '__task_rq_lock', 'read_tsc', 'enter_lazy_tlb', '__rdgsbase', '__wrgsbase', 'cr4_update',
       'requeue_delayed', 'arch_scale', 'init_wait_entry', '__rb_insert_augmented', '__rb_erase_color', 'rb_next',
       'rb_erase', 'rb_insert', 'select_task_rq', 'task_', 'account_', 'cpuacct', 'psi_', 'hrtick', 'perf_',
       'raw_spin_rq', 'reweight', 'clear_buddies', 'do_idle', 'default_idle', 'cpuidle', 'arch_cpu_idle', 'tick_',
       'hrtimer', 'timer', 'lapic', 'clockevents', 'native_sched_clock', 'kvm_', 'mm_cid', 'prepare_task_switch',
       'set_task_cpu', 'migrate', 'detach_', 'attach_', 'io_schedule', 'calc_', 'note_gp', 'run_timer', 'call_timer',
       'idle_', 'do_nanosleep', 'update_entity_lag', 'update_deadline', 'kick_process', 'wake_q', '__calc_delta',
       'set_next_entity', 'put_prev_entity', 'pick_next_entity'),
     '6 scheduler, wakeups, context switches, timers'),
    (P('kmem_cache_', 'kfree', '__kmalloc', 'kmalloc', 'memset', 'memcpy', 'memcmp', '__free_pages', 'free_pages',
       'alloc_pages', '__alloc_pages', 'get_page_from_freelist', 'free_unref', '__slab', 'slab_', '___slab', 'put_cpu_partial',
       '__put_partials', 'allocate_slab', 'rmqueue', '__rmqueue', 'free_pcppages', 'page_', 'folio', '__folio',
       'mod_node_page', 'mod_zone', '__mod_', 'sg_init_table', 'sg_next', 'sized_strscpy', 'strscpy', 'get_random',
       'kvfree', 'kvmalloc', '__kvmalloc', 'krealloc', 'ksize', 'refill_obj', 'obj_cgroup', 'memcg', '__memcg',
       'mod_objcg', 'should_failslab', 'alloc_pages_mpol', 'policy_', 'pcpu_', 'percpu_', 'dma_', '__dma'),
     '9 allocator, memset/memcpy, misc library'),
]
RSTEPS = [
    # C (rds, rds_rdma) and rds_rs: (regex searched in the demangled name, step)
    (r'rds_rs_ib_wc|WcHandler|\bdone\b|send_done|recv_done|ack_done|cqe_handler|tasklet_fn|poll_rcq|poll_scq|'
     r'cq_comp_handler|complete_send|complete_recv|rds_ib_sub_signaled|rds_ib_send_unmap|rds_ib_is_unloading|'
     r'::sent\b|recycle|rds_message_put|rds_send_remove_from_sock|Outstanding|DmaMapping.*Drop|unmap', '5b RDS completion handlers'),
    (r'recvmsg|copy_to_user|inc_copy_to_user|rds_next_incoming|rds_cmsg_recv|rds_recvmsg_zcookie|put_zcookies|'
     r'rds_inc_put|rds_ib_inc_free|Payload.*copy|RecvQueue|::recv::.*take|rds_recv_rcvbuf_delta|zcookie', '3b RDS recvmsg'),
    (r'rds_ib_recv_refill|post_recv|rds_recv_incoming|incoming|deliver|fragment|Reassembly|rds_find_bound|jhash|'
     r'rds_inc_init|rds_ib_recv_cache_put|rds_ib_frag_free|rds_wake_sk_sleep|wake|RxSlot|from_page|'
     r'rds_ib_attempt_ack|attempt_ack|send_ack|rds_ib_set_ack|rds_ib_get_ack|credits_received|add_posted|'
     r'rds_ib_send_add_credits|rds_ib_advertise|ack_received|rds_send_path_drop_acked|drop_acked|bind|Bound|'
     r'PagePool|rds_ib_recv|rds_ib_process_recv|rx_', '3a RDS receive: reassembly, delivery, refill, acks'),
    (r'rds_send_xmit|rds_ib_xmit|xmit|::post\b|post_send|post_in_slot|reserve|signal_now|Credits|grab|'
     r'rds_ib_ring|WorkRing|ring|with_checksum|encode|Header|header|rds_message_addref|rds_message_populate_header|'
     r'rds_message_next_extension|kick|piggyback|rds_send_worker|send_worker|Worker|rds_ib_xmit_path_complete|'
     r'DmaMapping|dma|Inflight|SendSource|piece', '2b RDS transmit and post'),
    (r'sendmsg|from_user|rds_message_alloc|rds_message_copy_from_user|rds_page_remainder|rds_send_queue_rm|'
     r'conn_for|conn_lookup|rds_cong|cong|rds_sock_put|SpareBufs|Pool|scan_send_cmsgs|queue|Message|rds_send_sndbuf|'
     r'rds_conn', '2a RDS sendmsg (socket to queue)'),
]
RSOVR = [  # rds_rs functions whose names the patterns above would misplace
    (r'Family>::sendmsg|sendmsg_callback|send::settle$|make_message|admit_message|MsgBody>::set_head|from_user|scan_send_cmsgs|conn_for|Conn>::enqueue|wait_uncongested|cong_updated|sends_cong_maps|SpareBufs', '2a RDS sendmsg (socket to queue)'),
    (r'post_send::|rds_rs_ib_post_send|Conn>::next_message|Conn>::send_now|Payload>::segment|rds_rs_ib_map_|rds_rs_ib_sync_for_device|SendRdma|proto::rdma|IbConn as .*>::xmit|Conn>::xmit|xmit_ready', '2b RDS transmit and post'),
    (r'parse_frame|recv::queue_for|rds_rs_ib_sync_for_cpu|settle_acked|Conn>::rx_data|parse_bind|rds_rs_sk_wake|PathQp>::post_recv|rds_rs_ib_post_recv', '3a RDS receive: reassembly, delivery, refill, acks'),
    (r'rds_rs_sk_wait|recvmsg|Lock<rds_core::message::Owner', '3b RDS recvmsg'),
    (r'drop_in_place::<rds_core::message::(MsgBody|Store)>|Message>::to_pool|MsgPool|rds_rs_ib_done|recycle', '5b RDS completion handlers'),
    (r'drop_in_place::<kernel::sync::arc::Arc|sock_(hold|put|flag)__extern|rust_helper', '2c RDS other (refcounts, helpers)'),
]
def step(name, mod):
    if mod == 'rds_rs':
        for rx, s in RSOVR:
            if re.search(rx, name): return s
    if mod in ('rds', 'rds_rdma', 'rds_rs'):
        for rx, s in RSTEPS:
            if re.search(rx, name): return s
        return '2c RDS other (refcounts, helpers)'
    for rx, s in KSTEPS:
        if re.search(rx, name): return s
    if mod: return f'4 rxe and ib_core (work requests, packets, ICRC)' if mod in ('rdma_rxe', 'ib_core', 'rdma_cm') else f'9 other module {mod}'
    return '9 allocator, memset/memcpy, misc library'

def main():
    rsd, cd = sys.argv[1], sys.argv[2]
    md = '--md' in sys.argv
    R = load(rsd); C = load(cd)
    names = [k[0] for k in set(R[0]) | set(C[0])]
    dm = demangle([n for n in names if n.startswith('_R')])
    def disp(k):
        n, m = k
        n = dm.get(n, n)
        return n + (f' [{m}]' if m else '')
    for lab, (per, entry, info) in (('rs', R), ('C', C)):
        print(f'{lab}: snapshots {info["snaps"]} of {len(info["fs"])}, sent {info["sent"]}, exchanges {info["ex"]}, '
              f'window instructions {info["wtot"]}, per exchange {info["wtot"]/info["ex"]:.1f}; '
              f'rates {info["rate"]} -> 1e9/rate {[round(1e9/r) for r in info["rate"].values()]}')
    keys = set(R[0]) | set(C[0])
    rows = []
    for k in keys:
        r = R[0].get(k, 0) / R[2]['ex']; c = C[0].get(k, 0) / C[2]['ex']
        rows.append((k, r, c))
    # steps
    st = collections.defaultdict(lambda: [0.0, 0.0])
    for k, r, c in rows:
        s = step(dm.get(k[0], k[0]), k[1]); st[s][0] += r; st[s][1] += c
    print('\n| step | rds_rs | C | rs - C |\n|---|---:|---:|---:|')
    for s, (r, c) in sorted(st.items()):
        print(f'| {s} | {r:,.0f} | {c:,.0f} | {r-c:+,.0f} |')
    tr = sum(r for _, r, _ in rows); tc = sum(c for _, _, c in rows)
    print(f'| total | {tr:,.0f} | {tc:,.0f} | {tr-tc:+,.0f} |')
    # per step, functions
    lim = float(os.environ.get('MIN', '20'))
    for s in sorted(st):
        print(f'\n### {s}\n\n| function | rds_rs | C | rs - C |\n|---|---:|---:|---:|')
        sr = [(k, r, c) for k, r, c in rows if step(dm.get(k[0], k[0]), k[1]) == s]
        sr.sort(key=lambda x: -max(x[1], x[2]))
        rest = [0.0, 0.0]
        for k, r, c in sr:
            if max(r, c) >= lim:
                print(f'| `{disp(k)[:120]}` | {r:,.1f} | {c:,.1f} | {r-c:+,.1f} |')
            else:
                rest[0] += r; rest[1] += c
        print(f'| (others, each < {lim:g}) | {rest[0]:,.1f} | {rest[1]:,.1f} | {rest[0]-rest[1]:+,.1f} |')
    print('\n## biggest differences by function (rs - C)\n\n| function | rds_rs | C | rs - C |\n|---|---:|---:|---:|')
    rows.sort(key=lambda x: -abs(x[1] - x[2]))
    for k, r, c in rows[:40]:
        print(f'| `{disp(k)[:120]}` | {r:,.1f} | {c:,.1f} | {r-c:+,.1f} |')
    # calls per exchange for some entries
    if '--calls' in sys.argv:
        print('\n## entries per exchange (function entered at its first instruction)\n')
        ent = [(k, R[1].get(k, 0) / R[2]['ex'], C[1].get(k, 0) / C[2]['ex']) for k in set(R[1]) | set(C[1])]
        ent.sort(key=lambda x: -max(x[1], x[2]))
        for k, r, c in ent[:600]:
            print(f'{r:8.3f} {c:8.3f}  {disp(k)[:120]}')

if __name__ == "__main__":
    main()
