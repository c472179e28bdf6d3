/* The verifier: checks every invariant of a graph (ir.h) and reports each broken
 * one on the diag, at the location the graph records for it, naming the node or
 * value.  Passes may run it between steps; gnc runs it on every graph it loads.
 *
 * Steps:
 *   1. the node list: each node's prev is the node before it, head and tail are
 *      its ends, and nnodes counts it.  The walk follows next links and stops
 *      where one leads back to a node already seen, so a cycle ends it too;
 *   2. inputs, then parameters and buffers: kind, initializer, type, name, id;
 *   3. nodes in list order: the results belong to the node, the operands were
 *      defined before it, the attributes fit the op's schema, and ir_infer gives
 *      exactly the declared types;
 *   4. outputs, the loss, and the updates (each target a param, buffer or state,
 *      updated once, by a defined value of its type).
 * A value counts as defined once step 2, or the node computing it in step 3, has
 * passed it.  A node with an operand that is undefined or has a broken type is
 * not typed, so that one mistake gives one message, not one per use.
 */
#include "base.h"
#include "diag.h"
#include "ir.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>


/* ---- a hash map from pointers (or names) to ints; 0 means absent ---- */

typedef struct {
    const void **keys;
    int *vals;
    size_t cap, count;
    int by_name;        /* keys are strings, equal by content */
} map;

static uint64_t map_hash(const map *m, const void *k)
{
    if (m->by_name) {
        uint64_t h = 1469598103934665603ull;
        for (const unsigned char *s = k; *s; s++)
            h = (h ^ *s) * 1099511628211ull;
        return h;
    }
    uint64_t x = (uint64_t)(uintptr_t)k;
    x = (x ^ (x >> 33)) * 0xff51afd7ed558ccdull;
    return x ^ (x >> 33);
}

static size_t map_slot(const map *m, const void *k)
{
    size_t i = map_hash(m, k) & (m->cap - 1);
    while (m->keys[i] && (m->by_name ? strcmp(m->keys[i], k) != 0 : m->keys[i] != k))
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int map_get(const map *m, const void *k)
{
    if (!m->cap)
        return 0;
    size_t i = map_slot(m, k);
    return m->keys[i] ? m->vals[i] : 0;
}

static void map_put(map *m, const void *k, int v)
{
    if (2 * (m->count + 1) > m->cap) {
        map bigger = {NULL, NULL, m->cap ? 2 * m->cap : 64, 0, m->by_name};
        bigger.keys = base_xcalloc(bigger.cap, sizeof *bigger.keys);
        bigger.vals = base_xcalloc(bigger.cap, sizeof *bigger.vals);
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) {
                size_t j = map_slot(&bigger, m->keys[i]);
                bigger.keys[j] = m->keys[i];
                bigger.vals[j] = m->vals[i];
                bigger.count++;
            }
        base_free(m->keys);
        base_free(m->vals);
        *m = bigger;
    }
    size_t i = map_slot(m, k);
    if (!m->keys[i]) {
        m->keys[i] = k;
        m->count++;
    }
    m->vals[i] = v;
}

static void map_free(map *m)
{
    base_free(m->keys);
    base_free(m->vals);
}

/* ---- the verifier ---- */

enum { DEFINED = 1, BAD_TYPE = 2 };   /* values in `state` */

typedef struct {
    const ir_graph *g;
    diag *d;
    int errors;
    map pos;              /* node -> 1 + its index in the list */
    map state;            /* value -> DEFINED, or BAD_TYPE when its type is broken */
    map names;            /* value names seen */
    map outputs;          /* output names seen */
    unsigned char *ids;   /* ids seen, g->nvalues of them; NULL when too many */
} verifier;

DIAG_PRINTF(3, 4)
static void report(verifier *V, ir_loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_vreport(V->d, DIAG_ERROR, loc, fmt, ap);
    va_end(ap);
    V->errors++;
}


/* "%name" of a value, for messages. */
static const char *value_str(char *buf, size_t size, const ir_value *v)
{
    char nb[100];
    snprintf(buf, size, "%%%s", ir_name_str(nb, sizeof nb, v->name));
    return buf;
}

/* "%out (op)" of a node, named by its first result. */
static const char *node_str(char *buf, size_t size, const ir_node *n)
{
    char vb[112];
    const char *op = (unsigned)n->op < IR_NOPS ? ir_ops[n->op].name : "unknown op";
    if (n->nout >= 1 && n->out && n->out[0])
        snprintf(buf, size, "%s (%s)", value_str(vb, sizeof vb, n->out[0]), op);
    else
        snprintf(buf, size, "without results (%s)", op);
    return buf;
}

static const char *type_str(char *buf, size_t size, const ir_type *t)
{
    return ir_type_str(t, buf, size);
}

/* Whether t is a type the rest of the compiler can compute with; reports why not
 * as "WHO has ...". */
static int check_type(verifier *V, ir_loc loc, const char *who, const ir_type *t)
{
    char tb[256];
    if ((unsigned)t->dtype >= IR_NDTYPES) {
        report(V, loc, "%s has an unknown dtype (%d)", who, (int)t->dtype);
        return 0;
    }
    if (t->rank < 0 || t->rank > IR_MAX_RANK) {
        report(V, loc, "%s has rank %d; ranks go from 0 to %d", who, t->rank, IR_MAX_RANK);
        return 0;
    }
    int64_t numel = 1;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 1) {
            report(V, loc, "%s has type %s: dimensions must be positive", who,
                   type_str(tb, sizeof tb, t));
            return 0;
        }
    for (int i = 0; i < t->rank; i++)
        if (__builtin_mul_overflow(numel, t->dims[i], &numel) || numel > IR_MAX_NUMEL) {
            report(V, loc, "%s has type %s, more than 2^37 elements", who,
                   type_str(tb, sizeof tb, t));
            return 0;
        }
    return 1;
}

/* What every value in the graph needs: a unique, registered name, a unique id
 * in range and a sound type.  Returns whether the type is sound. */
static int check_value(verifier *V, ir_loc loc, const char *who, const ir_value *v)
{
    const ir_graph *g = V->g;
    if (!v->name || !*v->name) {
        report(V, loc, "%s has an empty name", who);
    } else if (map_get(&V->names, v->name)) {
        report(V, loc, "%s: another value has the same name", who);
    } else {
        map_put(&V->names, v->name, 1);
        if (ir_find_value(g, v->name) != v)
            report(V, loc, "%s is not registered under its name in the graph", who);
    }
    if (v->id < 0 || v->id >= g->nvalues)
        report(V, loc, "%s has id %d, outside 0..%d", who, v->id, g->nvalues - 1);
    else if (V->ids && V->ids[v->id]++)
        report(V, loc, "%s has id %d, which another value has too", who, v->id);
    return check_type(V, loc, who, &v->type);
}

static void check_list(verifier *V, const ir_node ***nodes, int *count)
{
    const ir_graph *g = V->g;
    char nb[160], pb[160];
    const ir_node *prev = NULL, *n;
    int cap = 0, cycle = 0;
    *nodes = NULL;
    *count = 0;
    for (n = g->head; n; prev = n, n = n->next) {
        if (map_get(&V->pos, n)) {
            report(V, prev->loc, "node list is broken: node %s links back to the earlier "
                   "node %s", node_str(pb, sizeof pb, prev), node_str(nb, sizeof nb, n));
            cycle = 1;
            break;
        }
        if (n->prev != prev && prev)
            report(V, n->loc, "node list is broken: node %s does not link back to node %s "
                   "before it", node_str(nb, sizeof nb, n), node_str(pb, sizeof pb, prev));
        else if (n->prev != prev)
            report(V, n->loc, "node list is broken: the first node %s has a predecessor",
                   node_str(nb, sizeof nb, n));
        if (*count == cap) {
            cap = cap ? 2 * cap : 64;
            const ir_node **bigger = base_xcalloc((size_t)cap, sizeof *bigger);
            if (*count)
                memcpy(bigger, *nodes, (size_t)*count * sizeof *bigger);
            base_free(*nodes);
            *nodes = bigger;
        }
        (*nodes)[(*count)++] = n;
        map_put(&V->pos, n, *count);
    }
    if (cycle)
        return;
    if (g->tail != prev)
        report(V, (ir_loc){0}, "node list is broken: the graph's tail is not its last node");
    if (g->nnodes != *count)
        report(V, (ir_loc){0}, "the graph counts %d nodes but its list holds %d", g->nnodes,
               *count);
    /* a fused node's members are consecutive: a group that ended never comes back */
    map ended = {0};
    for (int i = 0; i < *count; i++) {
        const ir_node *m = (*nodes)[i];
        if (m->group && map_get(&ended, (const void *)(intptr_t)m->group))
            report(V, m->loc, "node %s: its fused node (group %d) is not one run of nodes",
                   node_str(nb, sizeof nb, m), m->group);
        if (i && (*nodes)[i - 1]->group && (*nodes)[i - 1]->group != m->group)
            map_put(&ended, (const void *)(intptr_t)(*nodes)[i - 1]->group, 1);
    }
    map_free(&ended);
}

static void check_inputs(verifier *V)
{
    const ir_graph *g = V->g;
    char who[160], vb[112];
    for (int i = 0; i < g->ninputs; i++) {
        const ir_value *v = g->inputs[i];
        if (!v) {
            report(V, (ir_loc){0}, "input %d is missing", i);
            continue;
        }
        snprintf(who, sizeof who, "input %s", value_str(vb, sizeof vb, v));
        if (map_get(&V->state, v)) {
            report(V, v->loc, "%s is listed twice", who);
            continue;
        }
        if (v->kind != IR_VALUE_INPUT)
            report(V, v->loc, "%s is listed among the inputs but is not an input", who);
        if (v->init.kind != IR_INIT_NONE)
            report(V, v->loc, "%s has an initializer", who);
        map_put(&V->state, v, check_value(V, v->loc, who, v) ? DEFINED : BAD_TYPE);
    }
}

/* A shard's slice fits its whole tensor: same dtype and rank, the same
 * dimensions but along its axis, where [start, start + dims[axis]) lies inside
 * the whole's. */
static void check_shard(verifier *V, const char *who, const ir_value *v)
{
    const ir_shard *s = &v->shard;
    char tb[256], tb2[256], nb[100];
    if (!*s->of) {
        report(V, v->loc, "%s is a shard of a tensor without a name", who);
        return;
    }
    if (!check_type(V, v->loc, who, &s->type))
        return;
    int fits = s->type.dtype == v->type.dtype && s->type.rank == v->type.rank && s->axis >= 0 &&
               s->axis < v->type.rank && s->start >= 0 &&
               s->start <= s->type.dims[s->axis] - v->type.dims[s->axis];
    for (int k = 0; fits && k < v->type.rank; k++)
        fits = k == s->axis || s->type.dims[k] == v->type.dims[k];
    if (!fits)
        report(V, v->loc, "%s: %s is no slice of %s: %s at %lld along axis %d", who,
               type_str(tb, sizeof tb, &v->type), ir_name_str(nb, sizeof nb, s->of),
               type_str(tb2, sizeof tb2, &s->type), (long long)s->start, s->axis);
}

/* The shards of one whole tensor agree on its type and their axis, and no
 * parameter is named as a whole tensor is: a checkpoint holds the whole under
 * that name. */
static void check_wholes(verifier *V)
{
    const ir_graph *g = V->g;
    map whole = {.by_name = 1}; /* whole name -> 1 + index of its first shard */
    char vb[112], vb2[112], nb[100];
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        if (!v || !v->shard.of || !*v->shard.of)
            continue;
        int k = map_get(&whole, v->shard.of);
        if (!k) {
            map_put(&whole, v->shard.of, i + 1);
            continue;
        }
        const ir_value *u = g->params[k - 1];
        if (!ir_type_eq(&u->shard.type, &v->shard.type) || u->shard.axis != v->shard.axis)
            report(V, v->loc, "shards %s and %s of %s disagree on its type or their axis",
                   value_str(vb, sizeof vb, u), value_str(vb2, sizeof vb2, v),
                   ir_name_str(nb, sizeof nb, v->shard.of));
    }
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        int k = v && v->name ? map_get(&whole, v->name) : 0;
        if (k)
            report(V, v->loc, "%s has the name of the whole tensor that %s is a shard of",
                   value_str(vb, sizeof vb, v), value_str(vb2, sizeof vb2, g->params[k - 1]));
    }
    map_free(&whole);
}

static void check_params(verifier *V)
{
    const ir_graph *g = V->g;
    char who[160], vb[112], tb[256];
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        if (!v) {
            report(V, (ir_loc){0}, "parameter %d is missing", i);
            continue;
        }
        snprintf(who, sizeof who, "%s %s",
                 v->kind == IR_VALUE_BUFFER ? "buffer" : v->kind == IR_VALUE_STATE ? "state"
                                                                                  : "param",
                 value_str(vb, sizeof vb, v));
        if (map_get(&V->state, v)) {
            report(V, v->loc, "%s is listed twice", who);
            continue;
        }
        if (v->kind != IR_VALUE_PARAM && v->kind != IR_VALUE_BUFFER && v->kind != IR_VALUE_STATE)
            report(V, v->loc, "%s is listed among the parameters but is not one", who);
        double a = v->init.a, b = v->init.b;
        switch (v->init.kind) {
        case IR_INIT_NONE:
            report(V, v->loc, "%s has no initializer", who);
            break;
        case IR_INIT_ZEROS:
        case IR_INIT_ONES:
            break;
        case IR_INIT_DATA:
            if (!ir_is_float(v->type.dtype))
                report(V, v->loc, "%s: data initializers hold f32 values, not %s", who,
                       ir_dtype_name(v->type.dtype));
            break;
        case IR_INIT_UNIFORM: /* the frontend's rules; NaN fails them too */
            if (!(a < b))
                report(V, v->loc, "%s: uniform(a, b) needs a < b, got uniform(%g, %g)", who, a,
                       b);
            break;
        case IR_INIT_NORMAL:
            if (!(b >= 0))
                report(V, v->loc, "%s: normal(mean, std) needs std >= 0, got normal(%g, %g)",
                       who, a, b);
            break;
        default:
            report(V, v->loc, "%s has an unknown initializer (%d)", who, (int)v->init.kind);
        }
        const ir_type *whole = v->shard.of ? &v->shard.type : &v->type;
        if (v->init.zero_row < 0 || (v->init.zero_row > 0 &&
                                     (whole->rank < 1 || v->init.zero_row > whole->dims[0])))
            report(V, v->loc, "%s: zero_row(%lld) is not a row of %s", who,
                   (long long)(v->init.zero_row - 1), v->shard.of ? v->shard.of : "it");
        int sound = check_value(V, v->loc, who, v);
        ir_dtype dt = v->type.dtype;
        if (sound && dt != IR_F32 && dt != IR_F16 && dt != IR_BF16)
            report(V, v->loc, "%s must have a floating-point type, got %s", who,
                   type_str(tb, sizeof tb, &v->type));
        map_put(&V->state, v, sound ? DEFINED : BAD_TYPE);
        if (sound && v->shard.of)
            check_shard(V, who, v);
    }
    check_wholes(V);
}

static void check_node(verifier *V, const ir_node *n, int index)
{
    char ns[160], who[300], vb[112], tb[256], tb2[256], err[512];
    ir_loc loc = n->loc;
    node_str(ns, sizeof ns, n);
    if ((unsigned)n->op >= IR_NOPS) {
        report(V, loc, "node %s has an unknown op (%d)", ns, (int)n->op);
        return;
    }
    if (n->nout < 1 || !n->out) {
        report(V, loc, "node %s has no results", ns);
        return;
    }
    int sound = 1; /* operands and results fit for typing */
    if (n->nin < 0 || (n->nin > 0 && !n->in)) {
        report(V, loc, "node %s has a broken operand list", ns);
        sound = 0;
    }
    for (int i = 0; i < n->nout; i++) {
        const ir_value *v = n->out[i];
        if (!v) {
            report(V, loc, "node %s: result %d is missing", ns, i);
            sound = 0;
            continue;
        }
        snprintf(who, sizeof who, "node %s: result %s", ns, value_str(vb, sizeof vb, v));
        if (map_get(&V->state, v)) {
            report(V, loc, "%s is already defined before it", who);
            sound = 0;
            continue;
        }
        if (v->kind != IR_VALUE_NODE)
            report(V, loc, "%s is an input or parameter, not a node result", who);
        else if (v->def != n || v->def_index != i)
            report(V, loc, "%s records another node or index (%d) as its definition", who,
                   v->def_index);
        int ok = check_value(V, loc, who, v);
        sound &= ok;
        map_put(&V->state, v, ok ? DEFINED : BAD_TYPE);
    }
    for (int i = 0; i < n->nin && n->in; i++) {
        const ir_value *v = n->in[i];
        if (!v) {
            report(V, loc, "node %s: operand %d is missing", ns, i);
            sound = 0;
            continue;
        }
        /* the results are marked defined already: a use of one is a cycle */
        int own = v->kind == IR_VALUE_NODE && v->def == n;
        int st = map_get(&V->state, v);
        if (st && !own) {
            sound &= st == DEFINED;
            continue;
        }
        sound = 0;
        value_str(vb, sizeof vb, v);
        int def = v->kind == IR_VALUE_NODE && v->def ? map_get(&V->pos, v->def) : 0;
        if (own)
            report(V, loc, "node %s uses its own result %s", ns, vb);
        else if (def > index + 1)
            report(V, loc, "node %s: operand %s is used before its definition", ns, vb);
        else
            report(V, loc, "node %s: operand %s is not defined in the graph", ns, vb);
    }
    if (!sound)
        return;

    ir_type t[IR_MAX_RESULTS];
    if (!ir_check_attrs(n, err, sizeof err))
        report(V, loc, "node %s: %s", ns, err);
    else if (n->nout > IR_MAX_RESULTS || !ir_infer(n, t, err, sizeof err))
        report(V, loc, "node %s: %s", ns, n->nout > IR_MAX_RESULTS ? "too many results" : err);
    else
        for (int i = 0; i < n->nout; i++)
            if (!ir_type_eq(&t[i], &n->out[i]->type)) {
                report(V, loc, "node %s: declared type %s but operands give %s", ns,
                       type_str(tb, sizeof tb, &n->out[i]->type),
                       type_str(tb2, sizeof tb2, &t[i]));
                break;
            }
}

static void check_outputs(verifier *V)
{
    const ir_graph *g = V->g;
    char nb[100], vb[112];
    for (int i = 0; i < g->noutputs; i++) {
        const ir_output *o = &g->outputs[i];
        if (!o->name || !*o->name)
            report(V, o->loc, "output %d has an empty name", i);
        else if (map_get(&V->outputs, o->name))
            report(V, o->loc, "output name %s is used twice", ir_name_str(nb, sizeof nb, o->name));
        else
            map_put(&V->outputs, o->name, 1);
        if (!o->value)
            report(V, o->loc, "output %s has no value", ir_name_str(nb, sizeof nb, o->name));
        else if (!map_get(&V->state, o->value))
            report(V, o->loc, "output %s refers to %s, which is not defined in the graph",
                   ir_name_str(nb, sizeof nb, o->name), value_str(vb, sizeof vb, o->value));
    }
}

static int has(const ir_node *n, const char *key, ir_attr_kind kind)
{
    const ir_attr *a = ir_get_attr(n, key);
    return a && a->kind == kind;
}

/* A collective with the attributes the checks read (the schema check reports
 * the others). */
static int collective(const ir_node *n)
{
    return (n->op == IR_OP_ALL_REDUCE || n->op == IR_OP_ALL_GATHER ||
            n->op == IR_OP_REDUCE_SCATTER || n->op == IR_OP_BROADCAST) &&
           n->nin >= 1 && has(n, "id", IR_ATTR_INT) && has(n, "group", IR_ATTR_INTS);
}

static int cmp_id(const void *a, const void *b)
{
    int64_t x = ir_attr_int(*(const ir_node *const *)a, "id");
    int64_t y = ir_attr_int(*(const ir_node *const *)b, "id");
    return (x > y) - (x < y);
}

/* Whether a collective of that id is among the n sorted by id. */
static int has_id(const ir_node **sorted, int n, int64_t id)
{
    for (int lo = 0, hi = n; lo < hi;) {
        int mid = (lo + hi) / 2;
        int64_t m = ir_attr_int(sorted[mid], "id");
        if (m == id)
            return 1;
        if (m < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* Two devices issue the collectives they share in one order: each device's
 * sequence of collectives, kept to the ids the other also issues, must be the
 * same.  One message per pair of devices, at the first difference. */
static void check_collective_order(verifier *V, const ir_node **nodes, int count)
{
    int ndev = 0, total = 0;
    for (int i = 0; i < count; i++)
        if (collective(nodes[i])) {
            ndev = nodes[i]->device + 1 > ndev ? nodes[i]->device + 1 : ndev;
            total++;
        }
    if (ndev < 2)
        return;
    /* per device, its collectives in list order (seq) and sorted by id (by_id) */
    const ir_node **seq = base_xcalloc((size_t)total, sizeof *seq);
    const ir_node **by_id = base_xcalloc((size_t)total, sizeof *by_id);
    const ir_node **fd = base_xcalloc((size_t)total, sizeof *fd);
    const ir_node **fe = base_xcalloc((size_t)total, sizeof *fe);
    int *start = base_xcalloc((size_t)ndev + 1, sizeof *start);
    int *len = base_xcalloc((size_t)ndev, sizeof *len);
    for (int i = 0; i < count; i++)
        if (collective(nodes[i]))
            start[nodes[i]->device + 1]++;
    for (int d = 0; d < ndev; d++)
        start[d + 1] += start[d];
    for (int i = 0; i < count; i++)
        if (collective(nodes[i])) {
            int d = nodes[i]->device;
            seq[start[d] + len[d]++] = nodes[i];
        }
    memcpy(by_id, seq, (size_t)total * sizeof *seq);
    for (int d = 0; d < ndev; d++)
        qsort(by_id + start[d], (size_t)len[d], sizeof *by_id, cmp_id);
    for (int d = 0; d < ndev; d++)
        for (int e = d + 1; e < ndev; e++) {
            int nd = 0, ne = 0;
            for (int k = 0; k < len[d]; k++)
                if (has_id(by_id + start[e], len[e], ir_attr_int(seq[start[d] + k], "id")))
                    fd[nd++] = seq[start[d] + k];
            for (int k = 0; k < len[e]; k++)
                if (has_id(by_id + start[d], len[d], ir_attr_int(seq[start[e] + k], "id")))
                    fe[ne++] = seq[start[e] + k];
            for (int k = 0; k < nd && k < ne; k++) {
                int64_t a = ir_attr_int(fd[k], "id"), b = ir_attr_int(fe[k], "id");
                if (a != b) {
                    report(V, fe[k]->loc, "collectives %lld and %lld come in one order on device "
                           "%d and in the other on device %d", (long long)a, (long long)b, d, e);
                    break;
                }
            }
        }
    base_free(seq);
    base_free(by_id);
    base_free(fd);
    base_free(fe);
    base_free(start);
    base_free(len);
}

/* A send or recv with the attributes the checks read. */
static int p2p(const ir_node *n)
{
    return (n->op == IR_OP_SEND || n->op == IR_OP_RECV) && has(n, "id", IR_ATTR_INT) &&
           has(n, "peer", IR_ATTR_INT) && n->nout == 1 && n->nin == (n->op == IR_OP_SEND);
}

/* The blocking op device d stands at in the simulation, or NULL when done. */
#define AT(d) (pos[d] < start[(d) + 1] - start[d] ? ops[start[d] + pos[d]] : NULL)

/* Whether every device's blocking ops can finish as the executors run them
 * (ops.def, "Partitioned programs"): each device runs its nodes in list
 * order; a collective waits until every device of its group has reached it; a
 * recv waits until its send has run; a send never waits (it leaves its tensor
 * in the pair's mailbox, or an MPI_Isend).  The devices are played forward
 * until none can move.  Any still short of their end then wait on each other
 * in a cycle, which is reported with the op each one waits in.  Pairwise
 * agreement is not enough: device 0 may all-reduce, then send, while device 1
 * receives first; three devices may agree pair by pair and still wait in a
 * ring.  Run on an otherwise valid program only (every collective has its
 * group, every recv one send). */
static void check_progress(verifier *V, const ir_node **nodes, int count)
{
    int ndev = 0, total = 0;
    for (int i = 0; i < count; i++)
        if (collective(nodes[i]) || p2p(nodes[i])) {
            ndev = nodes[i]->device + 1 > ndev ? nodes[i]->device + 1 : ndev;
            total++;
        }
    if (ndev < 2)
        return;
    const ir_node **ops = base_xcalloc((size_t)total, sizeof *ops);
    int *start = base_xcalloc((size_t)ndev + 1, sizeof *start);
    int *pos = base_xcalloc((size_t)ndev, sizeof *pos);
    int *waits = base_xcalloc((size_t)ndev, sizeof *waits);
    for (int i = 0; i < count; i++)
        if (collective(nodes[i]) || p2p(nodes[i]))
            start[nodes[i]->device + 1]++;
    for (int d = 0; d < ndev; d++)
        start[d + 1] += start[d];
    for (int i = 0; i < count; i++)
        if (collective(nodes[i]) || p2p(nodes[i]))
            ops[start[nodes[i]->device] + pos[nodes[i]->device]++] = nodes[i];
    memset(pos, 0, (size_t)ndev * sizeof *pos);

    for (int moved = 1; moved;) {
        moved = 0;
        for (int d = 0; d < ndev; d++)
            for (const ir_node *n; (n = AT(d));) {
                if (n->op == IR_OP_RECV) {
                    /* its send is among the ops its sender has run */
                    int64_t id = ir_attr_int(n, "id");
                    int from = (int)ir_attr_int(n, "peer"), got = 0;
                    for (int k = 0; k < pos[from] && !got; k++) {
                        const ir_node *s = ops[start[from] + k];
                        got = s->op == IR_OP_SEND && ir_attr_int(s, "id") == id &&
                              ir_attr_int(s, "peer") == d;
                    }
                    if (!got)
                        break;
                } else if (n->op != IR_OP_SEND) {
                    int64_t id = ir_attr_int(n, "id");
                    int size, all = 1;
                    const int64_t *group = ir_attr_ints(n, "group", &size);
                    for (int r = 0; r < size && all; r++) {
                        const ir_node *m = AT(group[r]);
                        all = m && collective(m) && ir_attr_int(m, "id") == id;
                    }
                    if (!all)
                        break;
                    for (int r = 0; r < size; r++)
                        if (group[r] != d)
                            pos[group[r]]++;
                }
                pos[d]++;
                moved = 1;
            }
    }

    /* who waits for whom: a recv for its sender, a collective for the first
       device of its group not at it */
    int first = -1;
    for (int d = 0; d < ndev; d++) {
        const ir_node *n = AT(d);
        waits[d] = -1;
        if (!n)
            continue;
        first = first < 0 ? d : first;
        if (n->op == IR_OP_RECV) {
            waits[d] = (int)ir_attr_int(n, "peer");
        } else {
            int size;
            const int64_t *group = ir_attr_ints(n, "group", &size);
            for (int r = 0; r < size && waits[d] < 0; r++) {
                const ir_node *m = AT(group[r]);
                if (!(m && collective(m) && ir_attr_int(m, "id") == ir_attr_int(n, "id")))
                    waits[d] = (int)group[r];
            }
        }
    }
    if (first >= 0) {
        /* walk the waits from the first stuck device until one repeats: the
           devices from there on wait in a ring */
        int d = first;
        for (int steps = 0; steps < ndev && d >= 0 && AT(d); steps++)
            d = waits[d];
        char ring[600] = "", nb[160];
        if (d < 0 || !AT(d)) {  /* not reached on a valid program: say where it stops */
            report(V, AT(first)->loc, "the program would hang: device %d stops in %s", first,
                   node_str(nb, sizeof nb, AT(first)));
        } else {
            size_t len = 0;
            int e = d;
            do {
                const ir_node *n = AT(e);
                if (len < sizeof ring)
                    len += (size_t)snprintf(ring + len, sizeof ring - len,
                                            "%sdevice %d waits for device %d in %s, %s %lld",
                                            e == d ? "" : "; ", e, waits[e],
                                            node_str(nb, sizeof nb, n),
                                            collective(n) ? "collective" : "recv",
                                            (long long)ir_attr_int(n, "id"));
                e = waits[e];
            } while (e != d);
            report(V, AT(d)->loc, "the program would hang: %s", ring);
        }
    }
    base_free(ops);
    base_free(start);
    base_free(pos);
    base_free(waits);
}
#undef AT

/* Partitioned programs: each node reads results of its own device; the nodes
 * of a collective (one id) agree on op, attributes and operand type, sit on
 * exactly the devices of their group, and nothing reads their results before
 * the last of them (the reference executor runs a collective there); two
 * collectives that share devices come in the same order on all of them; every
 * send has one recv of its shape, after it.  So a partitioned program cannot
 * hang on a mismatched collective. */
static void check_devices(verifier *V, const ir_node **nodes, int count)
{
    char nb[160], mb[160];
    for (int i = 0; i < count; i++) {
        const ir_node *n = nodes[i];
        for (int k = 0; k < n->nin; k++) {
            const ir_value *v = n->in[k];
            if (v->kind == IR_VALUE_NODE && v->def && v->def->device != n->device)
                report(V, n->loc, "node %s on device %d reads %s of device %d",
                       node_str(nb, sizeof nb, n), n->device, v->name, v->def->device);
        }
    }
    for (int i = 0; i < count; i++) {
        const ir_node *n = nodes[i];
        if (!collective(n))
            continue;
        int64_t id = ir_attr_int(n, "id");
        int size;
        const int64_t *group = ir_attr_ints(n, "group", &size);
        int first_of_id = 1;
        for (int j = 0; j < i && first_of_id; j++)
            first_of_id = !(collective(nodes[j]) && ir_attr_int(nodes[j], "id") == id);
        if (!first_of_id)
            continue;
        /* the participants of this id */
        int seen = 0, last = i;
        for (int j = i; j < count; j++) {
            const ir_node *m = nodes[j];
            if (!collective(m) || ir_attr_int(m, "id") != id)
                continue;
            last = j;
            seen++;
            int rank = -1;
            for (int r = 0; r < size; r++)
                if (group[r] == m->device)
                    rank = r;
            int same = m->op == n->op && m->nattrs == n->nattrs && m->nin == n->nin;
            for (int k = 0; same && k < n->nin; k++)
                same = ir_type_eq(&m->in[k]->type, &n->in[k]->type);
            for (int a = 0; same && a < n->nattrs; a++) {
                const ir_attr *x = &n->attrs[a], *y = ir_get_attr(m, x->key);
                same = y && x->kind == y->kind && x->i == y->i &&
                       (x->kind != IR_ATTR_INTS ||
                        (x->n == y->n && !memcmp(x->ints, y->ints, (size_t)x->n * sizeof *x->ints)));
            }
            if (!same)
                report(V, m->loc, "collective %lld: node %s does not match node %s (op, "
                       "attributes or operand types)", (long long)id, node_str(nb, sizeof nb, m),
                       node_str(mb, sizeof mb, n));
            else if (rank < 0)
                report(V, m->loc, "collective %lld: node %s is on device %d, outside its group",
                       (long long)id, node_str(nb, sizeof nb, m), m->device);
            for (int j2 = i; j2 < j; j2++)
                if (collective(nodes[j2]) && ir_attr_int(nodes[j2], "id") == id &&
                    nodes[j2]->device == m->device)
                    report(V, m->loc, "collective %lld: device %d takes part twice",
                           (long long)id, m->device);
        }
        if (seen != size)
            report(V, n->loc, "collective %lld: %d of the %d devices of its group take part",
                   (long long)id, seen, size);
        /* nothing reads a participant's result before the last participant */
        for (int j = i; j <= last; j++) {
            const ir_node *m = nodes[j];
            for (int k = 0; k < m->nin; k++) {
                const ir_value *v = m->in[k];
                if (v->kind == IR_VALUE_NODE && v->def && collective(v->def) &&
                    ir_attr_int(v->def, "id") == id)
                    report(V, m->loc, "node %s reads the result of collective %lld before all "
                           "its devices have issued it", node_str(nb, sizeof nb, m),
                           (long long)id);
            }
        }
    }
    check_collective_order(V, nodes, count);
    /* sends and recvs pair up */
    for (int i = 0; i < count; i++) {
        const ir_node *n = nodes[i];
        if ((n->op != IR_OP_SEND && n->op != IR_OP_RECV) || !has(n, "id", IR_ATTR_INT) ||
            !has(n, "peer", IR_ATTR_INT) || n->nout != 1 || n->nin != (n->op == IR_OP_SEND))
            continue;
        int64_t id = ir_attr_int(n, "id"), peer = ir_attr_int(n, "peer");
        int matches = 0;
        for (int j = 0; j < count; j++) {
            const ir_node *m = nodes[j];
            if (m->op + n->op != IR_OP_SEND + IR_OP_RECV || m->op == n->op ||
                !has(m, "id", IR_ATTR_INT) || !has(m, "peer", IR_ATTR_INT) || m->nout != 1 ||
                m->nin != (m->op == IR_OP_SEND) || ir_attr_int(m, "id") != id || m->device != peer ||
                ir_attr_int(m, "peer") != n->device)
                continue;
            matches++;
            const ir_node *snd = n->op == IR_OP_SEND ? n : m, *rcv = n->op == IR_OP_SEND ? m : n;
            if (n->op == IR_OP_SEND && !ir_type_eq(&snd->in[0]->type, &rcv->out[0]->type))
                report(V, rcv->loc, "recv %lld: its type differs from what its send sends",
                       (long long)id);
            if (n->op == IR_OP_SEND && j < i)
                report(V, m->loc, "recv %lld comes before its send", (long long)id);
        }
        if (matches != 1)
            report(V, n->loc, "%s %lld on device %d has %d matching %s on device %lld",
                   ir_ops[n->op].name, (long long)id, n->device, matches,
                   n->op == IR_OP_SEND ? "recvs" : "sends", (long long)peer);
    }
    if (V->errors == 0)
        check_progress(V, nodes, count);
}

static void check_loss(verifier *V)
{
    const ir_value *v = V->g->loss;
    char vb[112], tb[256];
    if (!v)
        return;
    int st = map_get(&V->state, v);
    if (!st)
        report(V, v->loc, "the loss %s is not defined in the graph",
               value_str(vb, sizeof vb, v));
    else if (st == DEFINED && (v->type.dtype != IR_F32 || v->type.rank != 0))
        report(V, v->loc, "the loss %s must be an f32 scalar (f32[]), got %s",
               value_str(vb, sizeof vb, v), type_str(tb, sizeof tb, &v->type));
}

/* Each target is updated at most once per device (each device holds its own
 * copy), by a value of its type computed on that device. */
static void check_updates(verifier *V)
{
    const ir_graph *g = V->g;
    char vb[112], vb2[112], tb[256], tb2[256];
    map first = {0}; /* target -> 1 + the index of its first update */
    for (int i = 0; i < g->nupdates; i++) {
        const ir_update *u = &g->updates[i];
        const ir_value *t = u->target, *s = u->source;
        if (!t || !s) {
            report(V, (ir_loc){0}, "update %d lacks its target or source", i);
            continue;
        }
        value_str(vb, sizeof vb, t);
        int twice = 0, k = map_get(&first, t);
        for (int j = k ? k - 1 : i; j < i && !twice; j++)
            twice = g->updates[j].target == t && g->updates[j].device == u->device;
        if (!k)
            map_put(&first, t, i + 1);
        if (t->kind != IR_VALUE_PARAM && t->kind != IR_VALUE_BUFFER && t->kind != IR_VALUE_STATE)
            report(V, t->loc, "update of %s, which is not a param, buffer or state", vb);
        else if (twice && u->device)
            report(V, t->loc, "%s is updated twice on device %d", vb, u->device);
        else if (twice)
            report(V, t->loc, "%s is updated twice", vb);
        if (map_get(&V->state, s) != DEFINED)
            report(V, t->loc, "update of %s by %s, which is not defined in the graph", vb,
                   value_str(vb2, sizeof vb2, s));
        else if (!ir_type_eq(&t->type, &s->type))
            report(V, t->loc, "update of %s (%s) by %s of another type, %s", vb,
                   type_str(tb, sizeof tb, &t->type), value_str(vb2, sizeof vb2, s),
                   type_str(tb2, sizeof tb2, &s->type));
        else if (s->kind == IR_VALUE_NODE && s->def && s->def->device != u->device)
            report(V, t->loc, "update of %s on device %d by %s of device %d", vb, u->device,
                   value_str(vb2, sizeof vb2, s), s->def->device);
    }
    map_free(&first);
}

int ir_verify(const ir_graph *g, diag *d)
{
    verifier V = {.g = g, .d = d};
    V.names.by_name = V.outputs.by_name = 1;
    if (g->nvalues > 0)
        V.ids = base_xcalloc((size_t)g->nvalues, 1);

    const ir_node **nodes;
    int count;
    check_list(&V, &nodes, &count);
    check_inputs(&V);
    check_params(&V);
    for (int i = 0; i < count; i++)
        check_node(&V, nodes[i], i);
    check_devices(&V, nodes, count);
    check_outputs(&V);
    check_loss(&V);
    check_updates(&V);

    base_free(nodes);
    base_free(V.ids);
    map_free(&V.pos);
    map_free(&V.state);
    map_free(&V.names);
    map_free(&V.outputs);
    return V.errors;
}
