// SPDX-License-Identifier: GPL-2.0
/*
 * The KUnit suite of rds_rs. It runs when the module is loaded (after module init, so PF_RDS is
 * registered) and prints KTAP to the kernel log. Pure-logic cases are Rust functions
 * (rds/kunit.rs) returning 0 on success or the number of the first failed check; the socket
 * cases drive the family through the kernel's own socket API.
 */
#include <kunit/test.h>
#include <linux/net.h>
#include <linux/socket.h>
#include <net/net_namespace.h>
#include <net/sock.h>

int rds_rs_kunit_header_roundtrip(void);
int rds_rs_kunit_header_checksum(void);
int rds_rs_kunit_header_ext(void);
int rds_rs_kunit_cmsg(void);
int rds_rs_kunit_recv_account(void);

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

static struct kunit_case rds_rs_cases[] = {
	KUNIT_CASE(header_roundtrip),
	KUNIT_CASE(header_checksum),
	KUNIT_CASE(header_ext),
	KUNIT_CASE(cmsg_walk),
	KUNIT_CASE(recv_account),
	KUNIT_CASE(socket_seqpacket),
	KUNIT_CASE(socket_bad_type),
	KUNIT_CASE(socket_bad_protocol),
	{}
};

static struct kunit_suite rds_rs_suite = {
	.name = "rds_rs",
	.test_cases = rds_rs_cases,
};

kunit_test_suite(rds_rs_suite);
