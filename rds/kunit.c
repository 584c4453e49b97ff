// SPDX-License-Identifier: GPL-2.0
/*
 * The KUnit suite of rds_rs. It runs when the module is loaded (after module init, so PF_RDS is
 * registered) and prints KTAP to the kernel log. Pure-logic cases are Rust functions
 * (rds/kunit.rs) returning 0 on success or the number of the first failed check; the socket
 * cases drive the family through the kernel's own socket API.
 */
#include <kunit/test.h>
#include <linux/in.h>
#include <linux/net.h>
#include <linux/socket.h>
#include <net/net_namespace.h>
#include <net/sock.h>

int rds_rs_kunit_header_roundtrip(void);
int rds_rs_kunit_header_checksum(void);
int rds_rs_kunit_header_ext(void);
int rds_rs_kunit_cmsg(void);
int rds_rs_kunit_recv_account(void);
int rds_rs_kunit_rdma_rules(void);
int rds_rs_kunit_passive_conn(void);
int rds_rs_kunit_lent_payload(void);
int rds_rs_kunit_cong_unbound(void);
int rds_rs_kunit_payload_stores(void);
int rds_rs_kunit_slot_cache(void);
u64 rds_rs_kunit_stat(unsigned int which);
unsigned int rds_rs_kunit_pool_msgs(void);
unsigned int rds_rs_kunit_pool_chunk_bytes(void);

/* Which counter rds_rs_kunit_stat() reads. */
enum { STAT_MSG_ALLOC, STAT_MSG_RECYCLED, STAT_PAYLOAD_ALLOC, STAT_PAYLOAD_RECYCLED };

static void header_roundtrip(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, 0, rds_rs_kunit_header_roundtrip());
}

static void header_checksum(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, 0, rds_rs_kunit_header_checksum());
}

static void header_ext(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, 0, rds_rs_kunit_header_ext());
}

static void cmsg_walk(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, 0, rds_rs_kunit_cmsg());
}

static void recv_account(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, 0, rds_rs_kunit_recv_account());
}

static void rdma_rules(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, 0, rds_rs_kunit_rdma_rules());
}

/* A connection created by an arriving peer (the passive side of a network transport). */
static void passive_conn(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, 0, rds_rs_kunit_passive_conn());
}

/* A congestion update from an address with no bound socket is an all-clear map. */
static void cong_unbound(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, 0, rds_rs_kunit_cong_unbound());
}

/* A payload in a transport's receive fragments, given back with its last user. */
static void lent_payload(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, 0, rds_rs_kunit_lent_payload());
}

/* Payloads of every size round-trip through each way of storing them. */
static void payload_stores(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, 0, rds_rs_kunit_payload_stores());
}

/* The memory of a delivered message is kept for the next one, within bounds. */
static void slot_cache(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, 0, rds_rs_kunit_slot_cache());
}

static void socket_seqpacket(struct kunit *test)
{
	struct socket *sock = NULL;

	KUNIT_ASSERT_EQ(test, 0, sock_create_kern(&init_net, PF_RDS, SOCK_SEQPACKET, 0, &sock));
	KUNIT_ASSERT_NOT_NULL(test, sock);
	KUNIT_ASSERT_NOT_NULL(test, sock->sk);
	KUNIT_EXPECT_EQ(test, (int)sock->sk->sk_family, PF_RDS);
	sock_release(sock);
}

static void socket_bad_type(struct kunit *test)
{
	static const int types[] = { SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_RDM };
	struct socket *sock;
	int i;

	for (i = 0; i < ARRAY_SIZE(types); i++) {
		sock = NULL;
		KUNIT_EXPECT_EQ(test, -ESOCKTNOSUPPORT,
				sock_create_kern(&init_net, PF_RDS, types[i], 0, &sock));
		KUNIT_EXPECT_NULL(test, sock);
	}
}

static void socket_bad_protocol(struct kunit *test)
{
	struct socket *sock = NULL;

	KUNIT_EXPECT_EQ(test, -ESOCKTNOSUPPORT,
			sock_create_kern(&init_net, PF_RDS, SOCK_SEQPACKET, 1, &sock));
	KUNIT_EXPECT_NULL(test, sock);
}

/* A message from one kernel socket to another over loopback, and an empty queue after it. */
static void loopback_send_recv(struct kunit *test)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
		.sin_port = htons(47001),
	};
	struct sockaddr_in sb = sa, from = {};
	struct socket *a = NULL, *b = NULL;
	char out[] = "hello from kunit", in[64] = {};
	struct msghdr msg = {};
	struct kvec iov;

	sb.sin_port = htons(47002);
	KUNIT_ASSERT_EQ(test, 0, sock_create_kern(&init_net, PF_RDS, SOCK_SEQPACKET, 0, &a));
	KUNIT_ASSERT_EQ(test, 0, sock_create_kern(&init_net, PF_RDS, SOCK_SEQPACKET, 0, &b));
	KUNIT_EXPECT_EQ(test, 0, kernel_bind(a, (struct sockaddr *)&sa, sizeof(sa)));
	KUNIT_EXPECT_EQ(test, 0, kernel_bind(b, (struct sockaddr *)&sb, sizeof(sb)));

	msg.msg_name = &sb;
	msg.msg_namelen = sizeof(sb);
	iov.iov_base = out;
	iov.iov_len = sizeof(out);
	KUNIT_EXPECT_EQ(test, (int)sizeof(out), kernel_sendmsg(a, &msg, &iov, 1, sizeof(out)));

	memset(&msg, 0, sizeof(msg));
	msg.msg_name = &from;
	msg.msg_namelen = sizeof(from);
	iov.iov_base = in;
	iov.iov_len = sizeof(in);
	KUNIT_EXPECT_EQ(test, (int)sizeof(out),
			kernel_recvmsg(b, &msg, &iov, 1, sizeof(in), MSG_DONTWAIT));
	KUNIT_EXPECT_MEMEQ(test, in, out, sizeof(out));
	KUNIT_EXPECT_EQ(test, (int)from.sin_port, (int)sa.sin_port);
	KUNIT_EXPECT_EQ(test, -EAGAIN, kernel_recvmsg(b, &msg, &iov, 1, sizeof(in), MSG_DONTWAIT));

	sock_release(a);
	sock_release(b);
}

/* Two bound kernel sockets on 127.0.0.1. */
static void pair(struct kunit *test, u16 pa, u16 pb, struct socket **a, struct socket **b,
		 struct sockaddr_in *sa, struct sockaddr_in *sb)
{
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa->sin_port = htons(pa);
	*sb = *sa;
	sb->sin_port = htons(pb);
	KUNIT_ASSERT_EQ(test, 0, sock_create_kern(&init_net, PF_RDS, SOCK_SEQPACKET, 0, a));
	KUNIT_ASSERT_EQ(test, 0, sock_create_kern(&init_net, PF_RDS, SOCK_SEQPACKET, 0, b));
	KUNIT_ASSERT_EQ(test, 0, kernel_bind(*a, (struct sockaddr *)sa, sizeof(*sa)));
	KUNIT_ASSERT_EQ(test, 0, kernel_bind(*b, (struct sockaddr *)sb, sizeof(*sb)));
}

/* Sends len bytes (filled with fill) from s to dest; the bytes sent or -errno. */
static int send_to(struct socket *s, struct sockaddr_in *dest, char *buf, size_t len, char fill)
{
	struct msghdr msg = { .msg_name = dest, .msg_namelen = sizeof(*dest) };
	struct kvec iov = { .iov_base = buf, .iov_len = len };

	memset(buf, fill, len);
	return kernel_sendmsg(s, &msg, &iov, 1, len);
}

/* Receives one message into buf without waiting; its length or -errno. */
static int recv_one(struct socket *s, char *buf, size_t len)
{
	struct msghdr msg = {};
	struct kvec iov = { .iov_base = buf, .iov_len = len };

	return kernel_recvmsg(s, &msg, &iov, 1, len, MSG_DONTWAIT);
}

/*
 * Request/response over loopback in steady state: once each socket has sent its first
 * messages (4 rounds), every message of the next n rounds comes from its sender's pool, with
 * its payload memory, and nothing is allocated per message. Requests of req bytes (more than
 * 64, so their payloads are not inside the message), 64-byte answers, each read at once; send
 * buffers that take a request of any size the cases use.
 */
static void steady_state(struct kunit *test, size_t req, int n, u16 pa, u16 pb)
{
	struct sockaddr_in sa, sb;
	struct socket *a = NULL, *b = NULL;
	u64 alloc, recycled, palloc, precycled;
	char *out, *in;
	int i;

	out = kunit_kzalloc(test, req, GFP_KERNEL);
	in = kunit_kzalloc(test, req, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, out);
	KUNIT_ASSERT_NOT_NULL(test, in);
	pair(test, pa, pb, &a, &b, &sa, &sb);
	WRITE_ONCE(a->sk->sk_sndbuf, 4 << 20);
	WRITE_ONCE(b->sk->sk_sndbuf, 4 << 20);
	for (i = 0; i < n + 4; i++) {
		if (i == 4) {
			alloc = rds_rs_kunit_stat(STAT_MSG_ALLOC);
			recycled = rds_rs_kunit_stat(STAT_MSG_RECYCLED);
			palloc = rds_rs_kunit_stat(STAT_PAYLOAD_ALLOC);
			precycled = rds_rs_kunit_stat(STAT_PAYLOAD_RECYCLED);
		}
		KUNIT_ASSERT_EQ(test, (int)req, send_to(a, &sb, out, req, (char)i));
		KUNIT_ASSERT_EQ(test, (int)req, recv_one(b, in, req));
		KUNIT_ASSERT_EQ(test, (int)(char)i, (int)in[0]);
		KUNIT_ASSERT_EQ(test, (int)(char)i, (int)in[req - 1]);
		KUNIT_ASSERT_EQ(test, 64, send_to(b, &sa, out, 64, (char)~i));
		KUNIT_ASSERT_EQ(test, 64, recv_one(a, in, req));
		KUNIT_ASSERT_EQ(test, (int)(char)~i, (int)in[63]);
	}
	KUNIT_EXPECT_EQ(test, 0ULL, rds_rs_kunit_stat(STAT_MSG_ALLOC) - alloc);
	KUNIT_EXPECT_EQ(test, (u64)(2 * n), rds_rs_kunit_stat(STAT_MSG_RECYCLED) - recycled);
	KUNIT_EXPECT_EQ(test, 0ULL, rds_rs_kunit_stat(STAT_PAYLOAD_ALLOC) - palloc);
	KUNIT_EXPECT_EQ(test, (u64)n, rds_rs_kunit_stat(STAT_PAYLOAD_RECYCLED) - precycled);
	sock_release(a);
	sock_release(b);
}

/* 1 KiB requests: the payload in a recycled buffer. */
static void msg_steady_state(struct kunit *test)
{
	steady_state(test, 1024, 100, 47003, 47004);
}

/*
 * A socket's pool keeps at most POOL_MSGS spares: of more messages coming back at once, the
 * rest are freed. Messages that come back after the sender closed are freed too (kmemleak,
 * after the guest unloads the module, says whether anything was kept).
 */
static void msg_pool_bounded(struct kunit *test)
{
	unsigned int most = rds_rs_kunit_pool_msgs(), n = most + 4, i;
	struct sockaddr_in sa, sb;
	struct socket *a = NULL, *b = NULL;
	u64 alloc, recycled;
	char buf[64];

	pair(test, 47005, 47006, &a, &b, &sa, &sb);
	for (i = 0; i < n; i++)
		KUNIT_ASSERT_EQ(test, 64, send_to(a, &sb, buf, 64, 'x'));
	for (i = 0; i < n; i++)
		KUNIT_ASSERT_EQ(test, 64, recv_one(b, buf, sizeof(buf)));
	alloc = rds_rs_kunit_stat(STAT_MSG_ALLOC);
	recycled = rds_rs_kunit_stat(STAT_MSG_RECYCLED);
	for (i = 0; i < n; i++)
		KUNIT_ASSERT_EQ(test, 64, send_to(a, &sb, buf, 64, 'y'));
	KUNIT_EXPECT_EQ(test, (u64)most, rds_rs_kunit_stat(STAT_MSG_RECYCLED) - recycled);
	KUNIT_EXPECT_EQ(test, (u64)(n - most), rds_rs_kunit_stat(STAT_MSG_ALLOC) - alloc);
	/* The sender goes first; its messages still queued at b come back to a closed pool. */
	sock_release(a);
	for (i = 0; i < n; i++)
		KUNIT_EXPECT_EQ(test, 64, recv_one(b, buf, sizeof(buf)));
	sock_release(b);
}

/* 128 KiB requests: the payload in recycled 16 KiB buffers. */
static void msg_steady_state_large(struct kunit *test)
{
	steady_state(test, 128 * 1024, 20, 47007, 47008);
}

/*
 * A pool keeps large payloads' buffers up to POOL_CHUNK_BYTES in all: of more 128 KiB messages
 * coming back at once, the rest are kept without their buffers, and the sender's next messages
 * of that size allocate for those only.
 */
static void msg_pool_chunks_bounded(struct kunit *test)
{
	const size_t big = 128 * 1024;
	unsigned int kept = rds_rs_kunit_pool_chunk_bytes() / big, n = kept + 2, i;
	struct sockaddr_in sa, sb;
	struct socket *a = NULL, *b = NULL;
	u64 palloc, precycled;
	char *buf;

	buf = kunit_kzalloc(test, big, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, buf);
	KUNIT_ASSERT_LT(test, n, rds_rs_kunit_pool_msgs());
	pair(test, 47009, 47010, &a, &b, &sa, &sb);
	/* A send buffer that takes a 128 KiB message, and room at b for all of them at once. */
	WRITE_ONCE(a->sk->sk_sndbuf, 16 << 20);
	WRITE_ONCE(b->sk->sk_rcvbuf, 16 << 20);
	for (i = 0; i < n; i++)
		KUNIT_ASSERT_EQ(test, (int)big, send_to(a, &sb, buf, big, 'x'));
	for (i = 0; i < n; i++)
		KUNIT_ASSERT_EQ(test, (int)big, recv_one(b, buf, big));
	palloc = rds_rs_kunit_stat(STAT_PAYLOAD_ALLOC);
	precycled = rds_rs_kunit_stat(STAT_PAYLOAD_RECYCLED);
	for (i = 0; i < n; i++)
		KUNIT_ASSERT_EQ(test, (int)big, send_to(a, &sb, buf, big, 'y'));
	KUNIT_EXPECT_EQ(test, (u64)kept, rds_rs_kunit_stat(STAT_PAYLOAD_RECYCLED) - precycled);
	KUNIT_EXPECT_EQ(test, (u64)(n - kept), rds_rs_kunit_stat(STAT_PAYLOAD_ALLOC) - palloc);
	/* The sender goes first; its messages still queued at b come back to a closed pool. */
	sock_release(a);
	for (i = 0; i < n; i++)
		KUNIT_EXPECT_EQ(test, (int)big, recv_one(b, buf, big));
	sock_release(b);
}

static struct kunit_case rds_rs_cases[] = {
	KUNIT_CASE(header_roundtrip),
	KUNIT_CASE(header_checksum),
	KUNIT_CASE(header_ext),
	KUNIT_CASE(cmsg_walk),
	KUNIT_CASE(recv_account),
	KUNIT_CASE(rdma_rules),
	KUNIT_CASE(passive_conn),
	KUNIT_CASE(lent_payload),
	KUNIT_CASE(cong_unbound),
	KUNIT_CASE(payload_stores),
	KUNIT_CASE(slot_cache),
	KUNIT_CASE(socket_seqpacket),
	KUNIT_CASE(socket_bad_type),
	KUNIT_CASE(socket_bad_protocol),
	KUNIT_CASE(loopback_send_recv),
	KUNIT_CASE(msg_steady_state),
	KUNIT_CASE(msg_pool_bounded),
	KUNIT_CASE(msg_steady_state_large),
	KUNIT_CASE(msg_pool_chunks_bounded),
	{}
};

static struct kunit_suite rds_rs_suite = {
	.name = "rds_rs",
	.test_cases = rds_rs_cases,
};

kunit_test_suite(rds_rs_suite);
