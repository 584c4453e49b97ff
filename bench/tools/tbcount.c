/* QEMU (7.2, plugin API v1) TCG plugin: counts the executions of each translation block.
 * Writes "vaddr ninsns count" lines (blocks executed at least once):
 *  - at exit, to $LBPLUG_OUT;
 *  - if $LBPLUG_TRIGGER is a guest virtual address (hex), each time a block starting there is
 *    executed, a snapshot of all counts so far to $LBPLUG_OUT.<n> (n = 1, 2, ...).
 * With LBPLUG_TRIGGER=<address of ksys_sync> a guest script marks a window with `sync`, and
 * the difference of two snapshots is the exact count of the window (the dump costs host time
 * only: under -icount the guest's clock counts guest instructions). */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
typedef uint64_t qemu_plugin_id_t;
__attribute__((visibility("default"))) int qemu_plugin_version = 1;
typedef struct qemu_info_t { const char *target_name; struct { int min; int cur; } version; bool system_emulation; union { struct { int smp_vcpus; int max_vcpus; } system; }; } qemu_info_t;
struct qemu_plugin_tb;
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr, uint64_t imm);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb, enum qemu_plugin_cb_flags flags, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);

struct ent { uint64_t vaddr; uint64_t n; uint64_t count; };
#define CHUNK 65536
static struct ent **chunks; static size_t nchunks, used;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t trigger; static int nsnap;

static void dump(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    pthread_mutex_lock(&lock);
    size_t n = used;
    pthread_mutex_unlock(&lock);
    for (size_t i = 0; i < n; i++) {
        struct ent *e = &chunks[i / CHUNK][i % CHUNK];
        if (e->count) fprintf(f, "%" PRIx64 " %" PRIu64 " %" PRIu64 "\n", e->vaddr, e->n, e->count);
    }
    fclose(f);
}

static void snap(unsigned int vcpu, void *p) {
    const char *path = getenv("LBPLUG_OUT");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s.%d", path ? path : "/tmp/lbplug/out.txt", ++nsnap);
    dump(buf);
}

static void trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    pthread_mutex_lock(&lock);
    if (used == nchunks * CHUNK) {
        chunks = realloc(chunks, (nchunks + 1) * sizeof(*chunks));
        chunks[nchunks++] = calloc(CHUNK, sizeof(struct ent));
    }
    struct ent *e = &chunks[used / CHUNK][used % CHUNK];
    e->vaddr = qemu_plugin_tb_vaddr(tb);
    e->n = qemu_plugin_tb_n_insns(tb);
    used++;
    pthread_mutex_unlock(&lock);
    if (trigger && e->vaddr == trigger)
        qemu_plugin_register_vcpu_tb_exec_cb(tb, snap, QEMU_PLUGIN_CB_NO_REGS, NULL);
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &e->count, 1);
}

static void atexit_cb(qemu_plugin_id_t id, void *p) {
    const char *path = getenv("LBPLUG_OUT");
    dump(path ? path : "/tmp/lbplug/out.txt");
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
    const char *t = getenv("LBPLUG_TRIGGER");
    if (t) trigger = strtoull(t, NULL, 16);
    qemu_plugin_register_vcpu_tb_trans_cb(id, trans);
    qemu_plugin_register_atexit_cb(id, atexit_cb, NULL);
    return 0;
}
