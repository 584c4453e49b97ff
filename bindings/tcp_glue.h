/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C glue of rds_rs's TCP transport (bindings/tcp_glue.c): kernel TCP sockets (create, bind,
 * connect, listen, accept, send, release), their callbacks (data ready, write space, state
 * change) routed to Rust, reading with tcp_read_sock, and the per-namespace hooks. The rules of
 * use are documented on the Rust wrappers in bindings/tcp.rs.
 */
#ifndef RDS_RS_TCP_GLUE_H
#define RDS_RS_TCP_GLUE_H

#include <linux/types.h>

struct socket;
struct sk_buff;
struct page;
struct net;

/* The callbacks of an attached socket call these (Rust), with the context given to
 * rds_rs_tcp_attach, under the socket's sk_callback_lock (read side, BH disabled). */
void rds_rs_tcp_cb_data_ready(void *ctx, struct socket *sock);
void rds_rs_tcp_cb_write_space(void *ctx, struct socket *sock, bool room);
void rds_rs_tcp_cb_state_change(void *ctx, struct socket *sock, int state);
/* A listening socket's data_ready: a connection may be waiting to be accepted. */
void rds_rs_tcp_cb_listen_ready(void *ctx);
/* rds_rs_tcp_read's actor: `len` bytes of `skb` from `off`; returns how many it took, and sets
 * *stop to end the read after them. */
size_t rds_rs_tcp_cb_recv(void *arg, const struct sk_buff *skb, unsigned int off, size_t len,
			  bool *stop);

/* Per-namespace hooks (Rust): init creates the listener, exit tears it down. */
int rds_rs_tcp_net_init(struct net *net);
void rds_rs_tcp_net_exit(struct net *net);
/* A namespace's net.rds.tcp.rds_tcp_{snd,rcv}buf was written (Rust): its connections reset. */
void rds_rs_tcp_cb_sysctl_changed(struct net *net);
/* The namespace's buffer sizes for new sockets (0: autotuning). */
void rds_rs_tcp_bufsizes(struct net *net, int *sndbuf, int *rcvbuf);
int rds_rs_tcp_pernet_register(void);
void rds_rs_tcp_pernet_unregister(void);

/* Sockets. `addr` is an IPv6 address (v4-mapped for IPv4) in network order. */
int rds_rs_tcp_create(struct net *net, bool v6, struct socket **out);
void rds_rs_tcp_tune(struct socket *sock, int sndbuf, int rcvbuf);
int rds_rs_tcp_bind(struct socket *sock, const u8 addr[16], u16 port, u32 scope_id);
int rds_rs_tcp_connect(struct socket *sock, const u8 addr[16], u16 port, u32 scope_id);
int rds_rs_tcp_listen(struct socket *sock, int backlog);
int rds_rs_tcp_accept(struct socket *lsock, struct socket **out);
void rds_rs_tcp_reset(struct socket *sock);
void rds_rs_tcp_release(struct socket *sock);
int rds_rs_tcp_state(struct socket *sock);
u32 rds_rs_tcp_snd_una(struct socket *sock);
u32 rds_rs_tcp_write_seq(struct socket *sock);
/* Local and peer address and port (host order), and the bound device of a connected socket. */
void rds_rs_tcp_names(struct socket *sock, u8 laddr[16], u16 *lport, u8 faddr[16], u16 *fport,
		      u32 *dev_if);

/* Callbacks: attach installs ours with `ctx`, listen_attach a listener's. Detach restores the
 * saved ones; when it returns no callback runs with `ctx` any more. */
int rds_rs_tcp_attach(struct socket *sock, void *ctx);
int rds_rs_tcp_listen_attach(struct socket *sock, void *ctx);
void *rds_rs_tcp_detach(struct socket *sock);

/* Reads what the socket has queued through rds_rs_tcp_cb_recv (in a callback of the socket, or
 * with lock_sock held by rds_rs_tcp_read_locked). */
int rds_rs_tcp_read(struct socket *sock, void *arg);
int rds_rs_tcp_read_locked(struct socket *sock, void *arg);
/* Reads (if `arg`) and shuts the socket down both ways under one hold of its lock; see the .c. */
int rds_rs_tcp_read_shutdown(struct socket *sock, void *arg);
/* Copies bytes of an skb handed to the actor. */
int rds_rs_tcp_skb_copy(const struct sk_buff *skb, unsigned int off, void *dst, size_t len);
/* A new skb holding `len` bytes of `skb` from `off` (sharing its pages), allocated atomically;
 * NULL when memory runs out. */
struct sk_buff *rds_rs_tcp_skb_extract(const struct sk_buff *skb, unsigned int off, size_t len);
/* Chains of extracted skbs, linked through `next`: frees `skb` and those after it. */
void rds_rs_tcp_skb_free_chain(struct sk_buff *skb);
/* Links `next` after `tail` (the last of a chain). */
void rds_rs_tcp_skb_link(struct sk_buff *tail, struct sk_buff *next);
/* The skb after `skb` in its chain (NULL at the end), and the bytes `skb` holds. */
struct sk_buff *rds_rs_tcp_skb_next(const struct sk_buff *skb);
unsigned int rds_rs_tcp_skb_len(const struct sk_buff *skb);
/* Copies `len` bytes of `skb` from `off` to a recvmsg's iovecs; returns the bytes copied (short
 * when user memory faults). */
size_t rds_rs_msg_copy_skb(struct msghdr *msg, const struct sk_buff *skb, unsigned int off,
			   size_t len);
int rds_rs_tcp_skb_copy_to_page(const struct sk_buff *skb, unsigned int off, struct page *page,
				size_t page_off, size_t len);

/* Sets or clears TCP_CORK (takes the socket lock). */
void rds_rs_tcp_set_cork(struct socket *sock, bool on);

/* Sends without blocking: the number of bytes taken, -EAGAIN when none fit. `more`: more of
 * the same message follows (MSG_MORE). Pages are handed to TCP by reference. */
int rds_rs_tcp_send_bytes(struct socket *sock, const void *buf, size_t len, bool more);
/* A piece of a page for rds_rs_tcp_send_pages: `len` bytes at `off`, inside the page. */
struct rds_rs_page_ref {
	struct page *page;
	unsigned int off;
	unsigned int len;
};

/* The most pieces one rds_rs_tcp_send_pages takes. */
#define RDS_RS_TCP_PAGE_BATCH 16

int rds_rs_tcp_send_pages(struct socket *sock, const struct rds_rs_page_ref *refs, unsigned int nr,
			  bool more);

/* Whether `addr` (with IPv6 scope `scope_id`) is an address of this host in `net`. */
bool rds_rs_tcp_addr_local(struct net *net, const u8 addr[16], u32 scope_id);
void rds_rs_tcp_port_range(struct net *net, int *low, int *high);

#endif
