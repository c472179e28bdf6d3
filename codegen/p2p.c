/* A program's point-to-point calls as NCCL runs them across processes (the
 * runtime's rule, runtime/cuda/cuda.c issue_p2p): each device's sends and
 * receives on its one communication stream, in program order, on the world
 * communicator; the consecutive ones (no other step between) as one
 * ncclGroupStart/End batch, whose calls progress together.  NCCL's send may
 * wait until its receive is posted (its rendezvous), so a program whose
 * devices would each wait for the other's later call deadlocks; the check
 * below finds that before a run starts. */
#include <stdio.h>
#include <stdlib.h>

#include "codegen.h"

static int is_p2p(const cg_step *st)
{
    return st->kind == CG_STEP_COMM &&
           (st->u.comm.op == IR_OP_SEND || st->u.comm.op == IR_OP_RECV);
}

static int64_t type_bytes(ir_dtype t)
{
    return t == IR_F16 || t == IR_BF16 ? 2 : t == IR_I64 ? 8 : t == IR_U8 ? 1 : 4;
}

/* whether a's buffer at ra and b's at rb overlap */
static int overlaps(const cg_comm *a, cg_ref ra, const cg_comm *b, cg_ref rb)
{
    int64_t na = a->count[0] * type_bytes(a->dtype), nb = b->count[0] * type_bytes(b->dtype);
    return ra.region == rb.region && ra.offset < rb.offset + nb && rb.offset < ra.offset + na;
}

static cg_ref buffer_of(const cg_comm *c)
{
    return c->op == IR_OP_SEND ? c->send[0] : c->recv[0];
}

/* The end of the batch of point-to-point steps that starts at step s: the
 * steps after it while they are sends or receives, up to one whose buffer
 * overlaps an earlier one's of the batch where either is a receive (the
 * calls of a group run in no order: a send of data just received, or a
 * receive into what a send still reads, as the memory plan may reuse it,
 * must wait). */
int cg_p2p_batch_end(const cg_step *steps, int n, int s)
{
    int e = s + 1;
    for (; e < n && is_p2p(&steps[e]); e++) {
        const cg_comm *c = &steps[e].u.comm;
        for (int t = s; t < e; t++) {
            const cg_comm *o = &steps[t].u.comm;
            if ((o->op == IR_OP_RECV || c->op == IR_OP_RECV) &&
                overlaps(o, buffer_of(o), c, buffer_of(c)))
                return e;
        }
    }
    return e;
}

typedef struct {
    const cg_step *steps;
    int n, pos, end;            /* the call at [pos, end): a batch or a collective */
    unsigned char *done;        /* by step: a point-to-point call matched */
} dev_state;

/* d's current call from its position: the next communication step's, or
 * none (pos = n). */
static void current(dev_state *D)
{
    while (D->pos < D->n && D->steps[D->pos].kind != CG_STEP_COMM)
        D->pos++;
    D->end = D->pos >= D->n                  ? D->pos
             : is_p2p(&D->steps[D->pos]) ? cg_p2p_batch_end(D->steps, D->n, D->pos)
                                         : D->pos + 1;
}

static const cg_comm *at(const dev_state *D)
{
    return D->pos < D->n ? &D->steps[D->pos].u.comm : NULL;
}

/* The step of e's current batch that matches point-to-point call c of
 * device d, or -1. */
static int partner(const dev_state *E, int d, const cg_comm *c)
{
    if (!at(E) || !is_p2p(&E->steps[E->pos]))
        return -1;
    for (int t = E->pos; t < E->end; t++) {
        const cg_comm *o = &E->steps[t].u.comm;
        if (o->id == c->id && o->op != c->op && o->peer == d)
            return t;
    }
    return -1;
}

/* whether every member of collective c (d's current call) is at it */
static int gathered(const dev_state *S, int nd, const cg_comm *c)
{
    for (int i = 0; i < c->ngroup; i++) {
        int e = (int)c->group[i];
        const cg_comm *o = e >= 0 && e < nd ? at(&S[e]) : NULL;
        if (!o || S[e].end != S[e].pos + 1 || o->op != c->op || o->id != c->id)
            return 0;
    }
    return 1;
}

static void describe(const cg_step *st, int s, char *out, size_t len)
{
    const cg_comm *c = &st->u.comm;
    if (c->op == IR_OP_SEND || c->op == IR_OP_RECV)
        snprintf(out, len, "step %d, %s #%lld %s device %d", s, c->op == IR_OP_SEND ? "send" : "recv",
                 (long long)c->id, c->op == IR_OP_SEND ? "to" : "from", c->peer);
    else
        snprintf(out, len, "step %d, %s #%lld", s, ir_ops[c->op].name, (long long)c->id);
}

/* 0 when every device's communication calls (the run's, or with init the
 * init steps') finish as above; else -1 with the devices' calls that wait
 * for each other in err. */
int cg_p2p_order_check(const cg_program *p, int init, char *err, size_t errlen)
{
    int nd = p->ndevices, rc = 0;
    dev_state S[64];
    if (nd > 64)
        return 0;
    for (int d = 0; d < nd; d++) {
        const cg_device *D = &p->devices[d];
        S[d] = (dev_state){init ? D->init : D->steps, init ? D->ninit : D->nsteps, 0, 0, NULL};
        S[d].done = calloc((size_t)S[d].n + 1, 1);
        current(&S[d]);
    }
    for (;;) {
        int progress = 0, left = 0;
        unsigned char ready[64] = {0};
        for (int d = 0; d < nd; d++) { /* the calls matched now */
            dev_state *D = &S[d];
            left += D->pos < D->n;
            for (int s = D->pos; s < D->end && is_p2p(&D->steps[D->pos]); s++) {
                const cg_comm *c = &D->steps[s].u.comm;
                int t = c->peer >= 0 && c->peer < nd && !D->done[s] ? partner(&S[c->peer], d, c) : -1;
                if (t >= 0)
                    D->done[s] = S[c->peer].done[t] = 1, progress = 1;
            }
        }
        if (!left)
            break;
        for (int d = 0; d < nd; d++) {
            dev_state *D = &S[d];
            if (D->pos >= D->n)
                continue;
            if (is_p2p(&D->steps[D->pos])) {
                ready[d] = 1;
                for (int s = D->pos; s < D->end; s++)
                    ready[d] &= D->done[s];
            } else {
                ready[d] = gathered(S, nd, at(D));
            }
        }
        for (int d = 0; d < nd; d++)
            if (ready[d]) {
                S[d].pos = S[d].end;
                current(&S[d]);
                progress = 1;
            }
        if (progress)
            continue;
        size_t k = (size_t)snprintf(err, errlen, "the program's %s would deadlock under NCCL, "
                                    "each call waiting for another's:", init ? "init steps" : "run");
        for (int d = 0; d < nd && k < errlen; d++) {
            int s = S[d].pos;
            while (s < S[d].end - 1 && S[d].done[s])
                s++;
            char what[128];
            if (s >= S[d].n)
                continue;
            describe(&S[d].steps[s], s, what, sizeof what);
            k += (size_t)snprintf(err + k, errlen - k, " device %d at %s;", d, what);
        }
        if (k < errlen && k > 0)
            err[k - 1] = 0;
        rc = -1;
        break;
    }
    for (int d = 0; d < nd; d++)
        free(S[d].done);
    return rc;
}
