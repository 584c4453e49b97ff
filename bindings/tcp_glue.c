// SPDX-License-Identifier: GPL-2.0
/*
 * C glue of rds_rs's TCP transport; see tcp_glue.h. Every function here is a thin translation
 * of a kernel socket call (or a macro, or a field of struct tcp_sock) into a form the Rust
 * wrappers in bindings/tcp.rs can call; the rules of use are documented there.
 */
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/net.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/highmem.h>
#include <linux/uio.h>
#include <net/addrconf.h>
#include <net/inet_common.h>
#include <net/ip_fib.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <linux/sysctl.h>
#include <net/route.h>
#include <net/sock.h>
#include <net/tcp.h>
#include "tcp_glue.h"

/* What an attached socket's callbacks need: the Rust context and the callbacks replaced. */
struct rds_rs_tcp_cbs {
	void *ctx;
	void (*data_ready)(struct sock *sk);
	void (*write_space)(struct sock *sk);
	void (*state_change)(struct sock *sk);
};

/* The callbacks' state of `sk` (a listener's is marked not to be copied into its children). */
static struct rds_rs_tcp_cbs *rds_rs_tcp_cbs_of(struct sock *sk)
{
	return (struct rds_rs_tcp_cbs *)((uintptr_t)sk->sk_user_data & SK_USER_DATA_PTRMASK);
}

/* A namespace's /proc/sys/net/rds/tcp: the buffer sizes of new sockets (0: TCP's autotuning). */
struct rds_rs_tcp_net {
	struct net *net;
	int sndbuf;
	int rcvbuf;
	struct ctl_table *tbl;
	struct ctl_table_header *hdr;
};

static unsigned int rds_rs_tcp_netid;
static int rds_rs_tcp_min_sndbuf = SOCK_MIN_SNDBUF;
static int rds_rs_tcp_min_rcvbuf = SOCK_MIN_RCVBUF;

/* As C's rds_tcp_skbuf_handler: a new size resets the namespace's connections, which then
 * reconnect with it. */
static int rds_rs_tcp_skbuf_handler(struct rds_rs_tcp_net *rtn, const struct ctl_table *ctl,
				    int write, void *buffer, size_t *lenp, loff_t *fpos)
{
	int err = proc_dointvec_minmax(ctl, write, buffer, lenp, fpos);

	if (err < 0)
		return err;
	if (write)
		rds_rs_tcp_cb_sysctl_changed(rtn->net);
	return 0;
}

static int rds_rs_tcp_sndbuf_handler(const struct ctl_table *ctl, int write, void *buffer,
				     size_t *lenp, loff_t *fpos)
{
	return rds_rs_tcp_skbuf_handler(container_of(ctl->data, struct rds_rs_tcp_net, sndbuf),
					ctl, write, buffer, lenp, fpos);
}

static int rds_rs_tcp_rcvbuf_handler(const struct ctl_table *ctl, int write, void *buffer,
				     size_t *lenp, loff_t *fpos)
{
	return rds_rs_tcp_skbuf_handler(container_of(ctl->data, struct rds_rs_tcp_net, rcvbuf),
					ctl, write, buffer, lenp, fpos);
}

static const struct ctl_table rds_rs_tcp_sysctl_table[] = {
	{
		.procname = "rds_tcp_sndbuf",
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = rds_rs_tcp_sndbuf_handler,
		.extra1 = &rds_rs_tcp_min_sndbuf,
	},
	{
		.procname = "rds_tcp_rcvbuf",
		.maxlen = sizeof(int),
		.mode = 0644,
		.proc_handler = rds_rs_tcp_rcvbuf_handler,
		.extra1 = &rds_rs_tcp_min_rcvbuf,
	},
};

void rds_rs_tcp_bufsizes(struct net *net, int *sndbuf, int *rcvbuf)
{
	struct rds_rs_tcp_net *rtn = net_generic(net, rds_rs_tcp_netid);

	*sndbuf = READ_ONCE(rtn->sndbuf);
	*rcvbuf = READ_ONCE(rtn->rcvbuf);
}

static __net_init int rds_rs_tcp_pernet_init(struct net *net)
{
	struct rds_rs_tcp_net *rtn = net_generic(net, rds_rs_tcp_netid);
	struct ctl_table *tbl;
	int ret;

	rtn->sndbuf = 0;
	rtn->rcvbuf = 0;
	tbl = kmemdup(rds_rs_tcp_sysctl_table, sizeof(rds_rs_tcp_sysctl_table), GFP_KERNEL);
	if (!tbl)
		return -ENOMEM;
	rtn->net = net;
	tbl[0].data = &rtn->sndbuf;
	tbl[1].data = &rtn->rcvbuf;
	rtn->tbl = tbl;
	rtn->hdr = register_net_sysctl_sz(net, "net/rds/tcp", tbl,
					  ARRAY_SIZE(rds_rs_tcp_sysctl_table));
	if (!rtn->hdr) {
		kfree(tbl);
		return -ENOMEM;
	}
	ret = rds_rs_tcp_net_init(net);
	if (ret) {
		unregister_net_sysctl_table(rtn->hdr);
		kfree(tbl);
	}
	return ret;
}

static void __net_exit rds_rs_tcp_pernet_exit(struct net *net)
{
	struct rds_rs_tcp_net *rtn = net_generic(net, rds_rs_tcp_netid);

	unregister_net_sysctl_table(rtn->hdr);
	kfree(rtn->tbl);
	rds_rs_tcp_net_exit(net);
}

/* A pernet device, as C's rds_tcp: its exit runs before the namespace's devices go. */
static struct pernet_operations rds_rs_tcp_net_ops = {
	.init = rds_rs_tcp_pernet_init,
	.exit = rds_rs_tcp_pernet_exit,
	.id = &rds_rs_tcp_netid,
	.size = sizeof(struct rds_rs_tcp_net),
};

int rds_rs_tcp_pernet_register(void)
{
	return register_pernet_device(&rds_rs_tcp_net_ops);
}

void rds_rs_tcp_pernet_unregister(void)
{
	unregister_pernet_device(&rds_rs_tcp_net_ops);
}

static void rds_rs_tcp_sockaddr(struct sockaddr_storage *ss, int *len, const u8 addr[16],
				u16 port, u32 scope_id)
{
	memset(ss, 0, sizeof(*ss));
	if (ipv6_addr_v4mapped((const struct in6_addr *)addr)) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr.s_addr, addr + 12, 4);
		sin->sin_port = htons(port);
		*len = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, addr, 16);
		sin6->sin6_port = htons(port);
		sin6->sin6_scope_id = scope_id;
		*len = sizeof(*sin6);
	}
}

int rds_rs_tcp_create(struct net *net, bool v6, struct socket **out)
{
	struct socket *sock;
	int ret;

	ret = sock_create_kern(net, v6 ? PF_INET6 : PF_INET, SOCK_STREAM, IPPROTO_TCP, &sock);
	if (ret < 0)
		return ret;
	/* As C's rds_tcp_tune and rds_tcp_keepalive: no Nagle, keepalive after 5 s idle, probes
	 * every 5 s, 5 of them. */
	tcp_sock_set_nodelay(sock->sk);
	sock_set_keepalive(sock->sk);
	tcp_sock_set_keepcnt(sock->sk, 5);
	tcp_sock_set_keepidle(sock->sk, 5);
	tcp_sock_set_keepintvl(sock->sk, 5);
	*out = sock;
	return 0;
}

void rds_rs_tcp_tune(struct socket *sock, int sndbuf, int rcvbuf)
{
	struct sock *sk = sock->sk;

	lock_sock(sk);
	if (sndbuf > 0) {
		WRITE_ONCE(sk->sk_sndbuf, sndbuf);
		sk->sk_userlocks |= SOCK_SNDBUF_LOCK;
	}
	if (rcvbuf > 0) {
		WRITE_ONCE(sk->sk_rcvbuf, rcvbuf);
		sk->sk_userlocks |= SOCK_RCVBUF_LOCK;
	}
	release_sock(sk);
}

int rds_rs_tcp_bind(struct socket *sock, const u8 addr[16], u16 port, u32 scope_id)
{
	struct sockaddr_storage ss;
	int len;

	rds_rs_tcp_sockaddr(&ss, &len, addr, port, scope_id);
	if (sock->sk->sk_family == AF_INET6 && ss.ss_family == AF_INET) {
		/* An IPv6 socket binds the v4-mapped form. */
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		memset(&ss, 0, sizeof(ss));
		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, addr, 16);
		sin6->sin6_port = htons(port);
		len = sizeof(*sin6);
	}
	if (port)
		sock->sk->sk_reuse = SK_CAN_REUSE;
	return kernel_bind(sock, (struct sockaddr *)&ss, len);
}

int rds_rs_tcp_connect(struct socket *sock, const u8 addr[16], u16 port, u32 scope_id)
{
	struct sockaddr_storage ss;
	int len, ret;

	rds_rs_tcp_sockaddr(&ss, &len, addr, port, scope_id);
	ret = kernel_connect(sock, (struct sockaddr *)&ss, len, O_NONBLOCK);
	return ret == -EINPROGRESS ? 0 : ret;
}

int rds_rs_tcp_listen(struct socket *sock, int backlog)
{
	return kernel_listen(sock, backlog);
}

static void rds_rs_tcp_listen_data_ready(struct sock *sk);

int rds_rs_tcp_accept(struct socket *lsock, struct socket **out)
{
	void (*orig)(struct sock *sk) = NULL;
	struct rds_rs_tcp_cbs *lcbs;
	int ret = kernel_accept(lsock, out, O_NONBLOCK);

	if (ret == 0) {
		struct sock *sk = (*out)->sk;

		/* The child inherited the listener's data_ready: give it the original back. */
		read_lock_bh(&lsock->sk->sk_callback_lock);
		lcbs = rds_rs_tcp_cbs_of(lsock->sk);
		if (lcbs)
			orig = lcbs->data_ready;
		read_unlock_bh(&lsock->sk->sk_callback_lock);
		write_lock_bh(&sk->sk_callback_lock);
		if (orig && sk->sk_data_ready == rds_rs_tcp_listen_data_ready)
			sk->sk_data_ready = orig;
		write_unlock_bh(&sk->sk_callback_lock);
		tcp_sock_set_nodelay((*out)->sk);
		sock_set_keepalive((*out)->sk);
		tcp_sock_set_keepcnt((*out)->sk, 5);
		tcp_sock_set_keepidle((*out)->sk, 5);
		tcp_sock_set_keepintvl((*out)->sk, 5);
	}
	return ret;
}

/* As C's rst_nsk: no linger (a reset rather than TIME_WAIT), then shut down. */
void rds_rs_tcp_reset(struct socket *sock)
{
	sock_no_linger(sock->sk);
	kernel_sock_shutdown(sock, SHUT_RDWR);
}

void rds_rs_tcp_release(struct socket *sock)
{
	sock_release(sock);
}

int rds_rs_tcp_state(struct socket *sock)
{
	return READ_ONCE(sock->sk->sk_state);
}

u32 rds_rs_tcp_snd_una(struct socket *sock)
{
	return READ_ONCE(tcp_sk(sock->sk)->snd_una);
}

u32 rds_rs_tcp_write_seq(struct socket *sock)
{
	return READ_ONCE(tcp_sk(sock->sk)->write_seq);
}

void rds_rs_tcp_names(struct socket *sock, u8 laddr[16], u16 *lport, u8 faddr[16], u16 *fport,
		      u32 *dev_if)
{
	struct sock *sk = sock->sk;
	struct inet_sock *inet = inet_sk(sk);

#if IS_ENABLED(CONFIG_IPV6)
	if (sk->sk_family == AF_INET6) {
		memcpy(laddr, &sk->sk_v6_rcv_saddr, 16);
		memcpy(faddr, &sk->sk_v6_daddr, 16);
	} else
#endif
	{
		ipv6_addr_set_v4mapped(inet->inet_saddr, (struct in6_addr *)laddr);
		ipv6_addr_set_v4mapped(inet->inet_daddr, (struct in6_addr *)faddr);
	}
	*lport = ntohs(inet->inet_sport);
	*fport = ntohs(inet->inet_dport);
	*dev_if = READ_ONCE(sk->sk_bound_dev_if);
}

static void rds_rs_tcp_data_ready(struct sock *sk)
{
	void (*ready)(struct sock *sk) = NULL;
	struct rds_rs_tcp_cbs *cbs;

	read_lock_bh(&sk->sk_callback_lock);
	cbs = rds_rs_tcp_cbs_of(sk);
	if (cbs) {
		ready = cbs->data_ready;
		rds_rs_tcp_cb_data_ready(cbs->ctx, sk->sk_socket);
	} else {
		ready = sk->sk_data_ready;
	}
	read_unlock_bh(&sk->sk_callback_lock);
	if (ready && ready != rds_rs_tcp_data_ready)
		ready(sk);
}

static void rds_rs_tcp_write_space(struct sock *sk)
{
	void (*write_space)(struct sock *sk) = NULL;
	struct rds_rs_tcp_cbs *cbs;

	read_lock_bh(&sk->sk_callback_lock);
	cbs = rds_rs_tcp_cbs_of(sk);
	if (cbs) {
		write_space = cbs->write_space;
		rds_rs_tcp_cb_write_space(cbs->ctx, sk->sk_socket,
					  (refcount_read(&sk->sk_wmem_alloc) << 1) <=
						  READ_ONCE(sk->sk_sndbuf));
	} else {
		write_space = sk->sk_write_space;
	}
	read_unlock_bh(&sk->sk_callback_lock);
	if (write_space && write_space != rds_rs_tcp_write_space)
		write_space(sk);
	/* TCP calls write_space only while SOCK_NOSPACE is set: keep it set, so that every
	 * acknowledgement that frees room comes here (C does the same: the acknowledged sequence
	 * settles messages). */
	if (sk->sk_socket)
		set_bit(SOCK_NOSPACE, &sk->sk_socket->flags);
}

static void rds_rs_tcp_state_change(struct sock *sk)
{
	void (*state_change)(struct sock *sk) = NULL;
	struct rds_rs_tcp_cbs *cbs;

	read_lock_bh(&sk->sk_callback_lock);
	cbs = rds_rs_tcp_cbs_of(sk);
	if (cbs) {
		state_change = cbs->state_change;
		rds_rs_tcp_cb_state_change(cbs->ctx, sk->sk_socket, READ_ONCE(sk->sk_state));
	} else {
		state_change = sk->sk_state_change;
	}
	read_unlock_bh(&sk->sk_callback_lock);
	if (state_change && state_change != rds_rs_tcp_state_change)
		state_change(sk);
}

static void rds_rs_tcp_listen_data_ready(struct sock *sk)
{
	void (*ready)(struct sock *sk) = NULL;
	struct rds_rs_tcp_cbs *cbs;

	read_lock_bh(&sk->sk_callback_lock);
	cbs = rds_rs_tcp_cbs_of(sk);
	if (cbs) {
		ready = cbs->data_ready;
		/* Also called for a child that is established but not yet accepted: only the
		 * listener's own calls mean a connection waits. */
		if (sk->sk_state == TCP_LISTEN)
			rds_rs_tcp_cb_listen_ready(cbs->ctx);
	} else {
		ready = sk->sk_data_ready;
	}
	read_unlock_bh(&sk->sk_callback_lock);
	if (ready && ready != rds_rs_tcp_listen_data_ready)
		ready(sk);
}

static int rds_rs_tcp_attach_cbs(struct socket *sock, void *ctx, bool listener)
{
	struct sock *sk = sock->sk;
	struct rds_rs_tcp_cbs *cbs = kzalloc(sizeof(*cbs), GFP_KERNEL);

	if (!cbs)
		return -ENOMEM;
	cbs->ctx = ctx;
	write_lock_bh(&sk->sk_callback_lock);
	cbs->data_ready = sk->sk_data_ready;
	cbs->write_space = sk->sk_write_space;
	cbs->state_change = sk->sk_state_change;
	if (listener) {
		/* Not inherited by the connections it accepts (which get ours at accept). */
		__rcu_assign_sk_user_data_with_flags(sk, cbs, SK_USER_DATA_NOCOPY);
		sk->sk_data_ready = rds_rs_tcp_listen_data_ready;
	} else {
		sk->sk_user_data = cbs;
		sk->sk_data_ready = rds_rs_tcp_data_ready;
		sk->sk_write_space = rds_rs_tcp_write_space;
		sk->sk_state_change = rds_rs_tcp_state_change;
		set_bit(SOCK_NOSPACE, &sock->flags);
	}
	write_unlock_bh(&sk->sk_callback_lock);
	return 0;
}

int rds_rs_tcp_attach(struct socket *sock, void *ctx)
{
	return rds_rs_tcp_attach_cbs(sock, ctx, false);
}

int rds_rs_tcp_listen_attach(struct socket *sock, void *ctx)
{
	return rds_rs_tcp_attach_cbs(sock, ctx, true);
}

void *rds_rs_tcp_detach(struct socket *sock)
{
	struct sock *sk = sock->sk;
	struct rds_rs_tcp_cbs *cbs;
	void *ctx = NULL;

	/* The socket lock too, as C's rds_tcp_restore_callbacks: a reader in process context
	 * (rds_rs_tcp_read_locked) holds it. */
	lock_sock(sk);
	write_lock_bh(&sk->sk_callback_lock);
	cbs = rds_rs_tcp_cbs_of(sk);
	if (cbs) {
		sk->sk_user_data = NULL;
		sk->sk_data_ready = cbs->data_ready;
		sk->sk_write_space = cbs->write_space;
		sk->sk_state_change = cbs->state_change;
		ctx = cbs->ctx;
	}
	write_unlock_bh(&sk->sk_callback_lock);
	release_sock(sk);
	kfree(cbs);
	return ctx;
}

static int rds_rs_tcp_actor(read_descriptor_t *desc, struct sk_buff *skb, unsigned int off,
			    size_t len)
{
	bool stop = false;
	size_t used = rds_rs_tcp_cb_recv(desc->arg.data, skb, off, len, &stop);

	if (stop)
		desc->count = 0;
	return used;
}

int rds_rs_tcp_read(struct socket *sock, void *arg)
{
	read_descriptor_t desc = {
		.arg.data = arg,
		/* More than one skb per call (C's rds_tcp_read_sock). */
		.count = 1,
	};

	return tcp_read_sock(sock->sk, &desc, rds_rs_tcp_actor);
}

int rds_rs_tcp_read_locked(struct socket *sock, void *arg)
{
	int ret;

	lock_sock(sock->sk);
	ret = rds_rs_tcp_read(sock, arg);
	release_sock(sock->sk);
	return ret;
}

/* Reads what the socket holds through the actor (if `arg`), then shuts the socket down both
 * ways under the same lock: a segment that comes afterwards is answered with a reset instead of
 * being acknowledged (RFC 1122, tcp_rcv_state_process), so no byte TCP acknowledges to the peer
 * goes unread. The callbacks are detached already. */
int rds_rs_tcp_read_shutdown(struct socket *sock, void *arg)
{
	struct sock *sk = sock->sk;
	int ret = 0;

	lock_sock(sk);
	if (arg)
		ret = rds_rs_tcp_read(sock, arg);
	WRITE_ONCE(sk->sk_shutdown, sk->sk_shutdown | SHUTDOWN_MASK);
	if (sk->sk_prot->shutdown)
		sk->sk_prot->shutdown(sk, SEND_SHUTDOWN);
	release_sock(sk);
	return ret;
}

int rds_rs_tcp_skb_copy(const struct sk_buff *skb, unsigned int off, void *dst, size_t len)
{
	return skb_copy_bits(skb, off, dst, len);
}

struct sk_buff *rds_rs_tcp_skb_extract(const struct sk_buff *skb, unsigned int off, size_t len)
{
	/* pskb_extract clones (it does not write the original): the cast drops a const it lacks. */
	return pskb_extract((struct sk_buff *)skb, off, len, GFP_ATOMIC);
}

void rds_rs_tcp_skb_free_chain(struct sk_buff *skb)
{
	while (skb) {
		struct sk_buff *next = skb->next;

		skb->next = NULL;
		consume_skb(skb);
		skb = next;
	}
}

void rds_rs_tcp_skb_link(struct sk_buff *tail, struct sk_buff *next)
{
	tail->next = next;
}

struct sk_buff *rds_rs_tcp_skb_next(const struct sk_buff *skb)
{
	return skb->next;
}

unsigned int rds_rs_tcp_skb_len(const struct sk_buff *skb)
{
	return skb->len;
}

size_t rds_rs_msg_copy_skb(struct msghdr *msg, const struct sk_buff *skb, unsigned int off,
			   size_t len)
{
	size_t before = iov_iter_count(&msg->msg_iter);

	skb_copy_datagram_iter(skb, off, &msg->msg_iter, len);
	return before - iov_iter_count(&msg->msg_iter);
}

int rds_rs_tcp_skb_copy_to_page(const struct sk_buff *skb, unsigned int off, struct page *page,
				size_t page_off, size_t len)
{
	void *addr;
	int ret;

	if (page_off > PAGE_SIZE || len > PAGE_SIZE - page_off)
		return -EINVAL;
	addr = kmap_local_page(page);
	ret = skb_copy_bits(skb, off, addr + page_off, len);
	kunmap_local(addr);
	return ret;
}

void rds_rs_tcp_set_cork(struct socket *sock, bool on)
{
	tcp_sock_set_cork(sock->sk, on);
}

int rds_rs_tcp_send_bytes(struct socket *sock, const void *buf, size_t len, bool more)
{
	struct msghdr msg = {
		.msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL | (more ? MSG_MORE : 0),
	};
	struct kvec vec = {
		.iov_base = (void *)buf,
		.iov_len = len,
	};

	set_bit(SOCK_NOSPACE, &sock->flags);
	return kernel_sendmsg(sock, &msg, &vec, 1, len);
}

/* Hands `nr` pieces of pages to TCP by reference in one sendmsg (one socket lock, one push
 * decision): the payload pages of a message, so that TCP builds its segments from them
 * in one go (C sends page by page). */
int rds_rs_tcp_send_pages(struct socket *sock, const struct rds_rs_page_ref *refs, unsigned int nr,
			  bool more)
{
	struct msghdr msg = {
		.msg_flags = MSG_SPLICE_PAGES | MSG_DONTWAIT | MSG_NOSIGNAL | (more ? MSG_MORE : 0),
	};
	struct bio_vec bvec[RDS_RS_TCP_PAGE_BATCH];
	size_t len = 0;
	unsigned int i;

	if (nr == 0 || nr > RDS_RS_TCP_PAGE_BATCH)
		return -EINVAL;
	for (i = 0; i < nr; i++) {
		if (refs[i].off > PAGE_SIZE || refs[i].len > PAGE_SIZE - refs[i].off)
			return -EINVAL;
		bvec_set_page(&bvec[i], refs[i].page, refs[i].len, refs[i].off);
		len += refs[i].len;
	}
	set_bit(SOCK_NOSPACE, &sock->flags);
	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, bvec, nr, len);
	return sock_sendmsg(sock, &msg);
}

void rds_rs_tcp_port_range(struct net *net, int *low, int *high)
{
	inet_get_local_port_range(net, low, high);
}

bool rds_rs_tcp_addr_local(struct net *net, const u8 addr[16], u32 scope_id)
{
	const struct in6_addr *a = (const struct in6_addr *)addr;
	struct net_device *dev = NULL;
	bool ret;

	if (ipv6_addr_v4mapped(a))
		return inet_addr_type_table(net, a->s6_addr32[3], RT_TABLE_LOCAL) == RTN_LOCAL;
#if IS_ENABLED(CONFIG_IPV6)
	rcu_read_lock();
	if (scope_id) {
		dev = dev_get_by_index_rcu(net, scope_id);
		if (!dev) {
			rcu_read_unlock();
			return false;
		}
	}
	ret = ipv6_chk_addr(net, a, dev, 0);
	rcu_read_unlock();
	return ret;
#else
	return false;
#endif
}
