/* Point-to-point calls as NCCL runs them across processes (codegen/p2p.c),
 * on programs built here, step by step:
 *
 *   1. two devices each sending, then computing, then receiving: each send
 *      waits for a receive the other has not reached, which the check finds
 *      and says (devices, steps, messages); the same calls without the
 *      compute step between them are one group each and finish;
 *   2. a 3-stage relay and a collective between point-to-point batches
 *      finish; a collective that one device reaches only after a receive
 *      that waits on it does not;
 *   3. a batch ends before a receive into what a send of the batch reads, or
 *      a send of what a receive of the batch writes (a group's calls run in
 *      no order), and not before a send and a receive of distinct buffers.
 *
 *   test_p2p */
#include <stdio.h>
#include <string.h>

#include "codegen.h"

static int passed, failed;

static void check(int ok, const char *what, const char *detail)
{
    if (ok) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "FAIL: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    }
}

enum { MAXSTEPS = 16 };

typedef struct {
    cg_step steps[4][MAXSTEPS];
    cg_device devices[4];
    cg_ref refs[4][MAXSTEPS];
    int64_t counts[4][MAXSTEPS];
    int64_t groups[4][MAXSTEPS][4];
    cg_program p;
} prog;

static void init(prog *P, int nd)
{
    memset(P, 0, sizeof *P);
    P->p.ndevices = nd;
    P->p.devices = P->devices;
    for (int d = 0; d < nd; d++)
        P->devices[d].steps = P->steps[d];
}

static cg_step *add(prog *P, int d, cg_step_kind kind)
{
    cg_device *D = &P->devices[d];
    cg_step *st = &P->steps[d][D->nsteps++];
    st->kind = kind;
    st->wait = -1;
    return st;
}

static void compute(prog *P, int d) { add(P, d, CG_STEP_KERNEL); }

/* A communication step of device d: op, message or collective id, over the
 * n devices of group, 16 floats at offset of the arena. */
static cg_comm *comm(prog *P, int d, ir_op op, int64_t id, int n, const int64_t *group,
                     int64_t offset)
{
    int s = P->devices[d].nsteps;
    cg_comm *c = &add(P, d, CG_STEP_COMM)->u.comm;
    c->op = op;
    c->id = id;
    c->ngroup = n;
    memcpy(P->groups[d][s], group, (size_t)n * sizeof *group);
    c->group = P->groups[d][s];
    c->ntensors = 1;
    P->refs[d][s] = (cg_ref){CG_ARENA, offset};
    P->counts[d][s] = 16;
    c->send = c->recv = &P->refs[d][s];
    c->count = &P->counts[d][s];
    c->dtype = IR_F32;
    return c;
}

/* message id from device d to peer (send) or from peer to d (recv) */
static void p2p(prog *P, int d, ir_op op, int peer, int64_t id, int64_t offset)
{
    int64_t pair[2] = {op == IR_OP_SEND ? d : peer, op == IR_OP_SEND ? peer : d};
    comm(P, d, op, id, 2, pair, offset)->peer = peer;
}

static void all_reduce(prog *P, int d, int64_t id, int n, const int64_t *group)
{
    comm(P, d, IR_OP_ALL_REDUCE, id, n, group, 4096);
}

static void crossing(void)
{
    char err[1024] = "";
    prog P;
    init(&P, 2);
    for (int d = 0; d < 2; d++) {
        p2p(&P, d, IR_OP_SEND, 1 - d, 1 + d, 0);
        compute(&P, d);
        p2p(&P, d, IR_OP_RECV, 1 - d, 2 - d, 256);
    }
    check(cg_p2p_order_check(&P.p, 0, err, sizeof err) == -1 &&
          strstr(err, "would deadlock under NCCL") &&
          strstr(err, "device 0 at step 0, send #1 to device 1") &&
          strstr(err, "device 1 at step 0, send #2 to device 0"),
          "crossing sends with a step between them deadlock", err);
    init(&P, 2);
    for (int d = 0; d < 2; d++) {
        compute(&P, d);
        p2p(&P, d, IR_OP_SEND, 1 - d, 1 + d, 0);
        p2p(&P, d, IR_OP_RECV, 1 - d, 2 - d, 256);
        compute(&P, d);
    }
    check(cg_p2p_batch_end(P.steps[0], P.devices[0].nsteps, 1) == 3, "a send and a receive: one batch",
          NULL);
    err[0] = 0;
    check(cg_p2p_order_check(&P.p, 0, err, sizeof err) == 0, "crossing sends in one group finish", err);
    check(cg_p2p_order_check(&P.p, 1, err, sizeof err) == 0, "no init steps: nothing waits", err);
}

static void relays_and_collectives(void)
{
    char err[1024] = "";
    prog P;
    init(&P, 3);
    p2p(&P, 0, IR_OP_SEND, 1, 1, 0);
    p2p(&P, 1, IR_OP_RECV, 0, 1, 0);
    compute(&P, 1);
    p2p(&P, 1, IR_OP_SEND, 2, 2, 256);
    p2p(&P, 2, IR_OP_RECV, 1, 2, 0);
    const int64_t all[3] = {0, 1, 2};
    for (int d = 0; d < 3; d++)
        all_reduce(&P, d, 3, 3, all);
    p2p(&P, 2, IR_OP_SEND, 0, 4, 0);
    p2p(&P, 0, IR_OP_RECV, 2, 4, 0);
    check(cg_p2p_order_check(&P.p, 0, err, sizeof err) == 0, "a relay, a collective, a send back",
          err);
    /* device 0 reaches the all_reduce only after a receive that device 2
       sends only after the all_reduce */
    init(&P, 3);
    p2p(&P, 0, IR_OP_RECV, 2, 1, 0);
    for (int d = 0; d < 3; d++)
        all_reduce(&P, d, 2, 3, all);
    p2p(&P, 2, IR_OP_SEND, 0, 1, 0);
    check(cg_p2p_order_check(&P.p, 0, err, sizeof err) == -1 &&
          strstr(err, "device 0 at step 0, recv #1 from device 2") &&
          strstr(err, "device 1 at step 0, all_reduce #2"),
          "a receive before a collective its send follows", err);
}

static void batches(void)
{
    prog P;
    init(&P, 2);
    p2p(&P, 0, IR_OP_SEND, 1, 1, 0);
    p2p(&P, 0, IR_OP_RECV, 1, 2, 32); /* into the send's last 32 bytes */
    p2p(&P, 0, IR_OP_SEND, 1, 3, 512);
    p2p(&P, 0, IR_OP_SEND, 1, 4, 256);
    p2p(&P, 0, IR_OP_RECV, 1, 5, 512); /* into what send #3 reads */
    p2p(&P, 0, IR_OP_SEND, 1, 6, 1024);
    p2p(&P, 0, IR_OP_RECV, 1, 7, 1024 + 64); /* a send's buffer, disjoint */
    p2p(&P, 0, IR_OP_SEND, 1, 8, 1024 + 64); /* what receive #7 writes */
    int n = P.devices[0].nsteps;
    check(cg_p2p_batch_end(P.steps[0], n, 0) == 1, "a receive into what a send reads: a new batch",
          NULL);
    check(cg_p2p_batch_end(P.steps[0], n, 1) == 4, "a receive, then two sends of other buffers",
          NULL);
    check(cg_p2p_batch_end(P.steps[0], n, 4) == 7, "send #6 and receive #7: disjoint", NULL);
    check(cg_p2p_batch_end(P.steps[0], n, 6) == 7, "a send of what a receive writes: a new batch",
          NULL);
}

int main(void)
{
    crossing();
    relays_and_collectives();
    batches();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
