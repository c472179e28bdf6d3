/* Graph construction and editing: see ir.h. */
#include "ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

_Noreturn void ir_assert_fail(const char *what, const char *file, int line)
{
    fprintf(stderr, "gnc: internal error at %s:%d: assertion '%s' failed\n", file, line, what);
    abort();
}

/* ---- arena ---- */

void *ir_alloc(ir_graph *g, size_t size) { return base_arena_alloc(&g->arena, size); }

const char *ir_strndup(ir_graph *g, const char *s, size_t n)
{
    char *p = ir_alloc(g, n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

const char *ir_strdup(ir_graph *g, const char *s)
{
    return ir_strndup(g, s, strlen(s));
}

/* Grows an arena-backed array of elem-sized items to hold at least n. */
static void *grow(ir_graph *g, void *arr, int *cap, int n, size_t elem)
{
    if (n <= *cap)
        return arr;
    int ncap = *cap ? *cap * 2 : 16;
    while (ncap < n)
        ncap *= 2;
    void *p = ir_alloc(g, (size_t)ncap * elem);
    if (arr)
        memcpy(p, arr, (size_t)*cap * elem);
    *cap = ncap;
    return p;
}

/* ---- value names: an open-addressing hash table ---- */

struct ir_names {
    int cap, count;
    ir_value **slots; /* NULL, or a value (its name is the key) */
    const char **reserved;   /* claimed names without a value yet */
    int64_t *next;    /* the table of bases (ir_unique_name): the next suffix to try */
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static struct ir_names *names_new(int cap)
{
    struct ir_names *t = base_xmalloc(sizeof *t);
    t->cap = cap;
    t->count = 0;
    t->slots = base_xcalloc((size_t)cap, sizeof *t->slots);
    t->reserved = base_xcalloc((size_t)cap, sizeof *t->reserved);
    t->next = base_xcalloc((size_t)cap, sizeof *t->next);
    return t;
}

static void names_free(struct ir_names *t)
{
    if (!t)
        return;
    base_free(t->slots);
    base_free(t->reserved);
    base_free(t->next);
    base_free(t);
}

/* Slot index for name: where it is, or the empty slot where it would go. */
static int names_slot(const struct ir_names *t, const char *name)
{
    int mask = t->cap - 1;
    for (int i = (int)(hash_str(name) & (uint64_t)mask);; i = (i + 1) & mask) {
        const char *k = t->reserved[i];
        if (!k || strcmp(k, name) == 0)
            return i;
    }
}

/* name's slot of *tp, made (the table grown first where half full). */
static int table_put(struct ir_names **tp, const char *name)
{
    struct ir_names *t = *tp;
    if (2 * (t->count + 1) > t->cap) {
        struct ir_names *bigger = names_new(t->cap * 2);
        for (int i = 0; i < t->cap; i++)
            if (t->reserved[i]) {
                int j = names_slot(bigger, t->reserved[i]);
                bigger->reserved[j] = t->reserved[i];
                bigger->slots[j] = t->slots[i];
                bigger->next[j] = t->next[i];
                bigger->count++;
            }
        names_free(t);
        *tp = t = bigger;
    }
    int i = names_slot(t, name);
    if (!t->reserved[i])
        t->count++;
    t->reserved[i] = name;
    return i;
}

static void names_put(ir_graph *g, const char *name, ir_value *v)
{
    int i = table_put(&g->names, name); /* before g->names is read: it may grow */
    g->names->slots[i] = v;
}

static int name_taken(const ir_graph *g, const char *name)
{
    return g->names->reserved[names_slot(g->names, name)] != NULL;
}

int ir_claim_name(ir_graph *g, const char *name)
{
    if (name_taken(g, name))
        return 0;
    names_put(g, ir_strdup(g, name), NULL);
    return 1;
}

const char *ir_unique_name(ir_graph *g, const char *base)
{
    if (!name_taken(g, base)) {
        const char *s = ir_strdup(g, base);
        names_put(g, s, NULL);
        return s;
    }
    /* base.K for the least K from the base's counter not taken: each name
       in constant time, however many share the base */
    int b = names_slot(g->bases, base);
    int64_t k = g->bases->reserved[b] ? g->bases->next[b] : 1;
    size_t len = strlen(base) + 24;
    char *buf = base_xmalloc(len);
    for (;; k++) {
        snprintf(buf, len, "%s.%lld", base, (long long)k);
        if (!name_taken(g, buf))
            break;
    }
    const char *s = ir_strdup(g, buf);
    base_free(buf);
    names_put(g, s, NULL);
    const char *key = g->bases->reserved[b] ? g->bases->reserved[b] : ir_strdup(g, base);
    int at = table_put(&g->bases, key);
    g->bases->next[at] = k + 1;
    return s;
}

ir_value *ir_find_value(const ir_graph *g, const char *name)
{
    const struct ir_names *t = g->names;
    int i = names_slot(t, name);
    return t->reserved[i] ? t->slots[i] : NULL;
}

/* ---- graphs ---- */

ir_graph *ir_graph_new(const char *name)
{
    ir_graph *g = base_xmalloc(sizeof *g);
    memset(g, 0, sizeof *g);
    g->names = names_new(256);
    g->bases = names_new(64);
    g->name = ir_strdup(g, name ? name : "model");
    return g;
}

int ir_graph_devices(const ir_graph *g)
{
    int n = 1;
    ir_for_each_node(g, x)
        n = x->device + 1 > n ? x->device + 1 : n;
    return n;
}

void ir_graph_free(ir_graph *g)
{
    if (!g)
        return;
    names_free(g->names);
    names_free(g->bases);
    base_arena_free(&g->arena);
    base_free(g);
}

void ir_graph_renumber(ir_graph *g)
{
    int id = 0;
    for (int i = 0; i < g->ninputs; i++)
        g->inputs[i]->id = id++;
    for (int i = 0; i < g->nparams; i++)
        g->params[i]->id = id++;
    for (ir_node *n = g->head; n; n = n->next)
        for (int i = 0; i < n->nout; i++)
            n->out[i]->id = id++;
    g->nvalues = id;
}

/* s in c's arena, the last string asked for kept (locations repeat a file) */
static const char *clone_str(ir_graph *c, const char *s, const char **last_in,
                             const char **last_out)
{
    if (!s)
        return NULL;
    if (s != *last_in)
        *last_in = s, *last_out = ir_strdup(c, s);
    return *last_out;
}

ir_graph *ir_graph_clone(const ir_graph *g)
{
    ir_graph *c = ir_graph_new(g->name);
    const char *in = NULL, *out = NULL;
    ir_value **map = base_xcalloc((size_t)g->nvalues + 1, sizeof *map);
#define VALUE(v) ((v) ? map[(v)->id] : NULL)
    /* every value reachable from the graph, at its id */
    const ir_value *const *lists[2] = {(const ir_value *const *)g->inputs,
                                       (const ir_value *const *)g->params};
    int counts[2] = {g->ninputs, g->nparams};
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < counts[l]; i++)
            map[lists[l][i]->id] = ir_alloc(c, sizeof(ir_value));
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nout; i++)
            map[n->out[i]->id] = ir_alloc(c, sizeof(ir_value));
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < counts[l]; i++) {
            ir_value *v = map[lists[l][i]->id];
            *v = *lists[l][i];
            v->name = ir_strdup(c, v->name);
            v->loc.file = clone_str(c, v->loc.file, &in, &out);
            v->shard.of = v->shard.of ? ir_strdup(c, v->shard.of) : NULL;
            v->source = v->source ? ir_strdup(c, v->source) : NULL;
            if (v->init.kind == IR_INIT_DATA && v->init.data) {
                const ir_type *whole = v->shard.of ? &v->shard.type : &v->type;
                size_t bytes = (size_t)ir_type_numel(whole) * sizeof(float);
                float *data = ir_alloc(c, bytes);
                memcpy(data, v->init.data, bytes);
                v->init.data = data;
            }
        }
    c->nvalues = g->nvalues;
    for (int i = 0; i < g->ninputs; i++) {
        c->inputs = grow(c, c->inputs, &c->cap_inputs, c->ninputs + 1, sizeof *c->inputs);
        c->inputs[c->ninputs++] = map[g->inputs[i]->id];
    }
    for (int i = 0; i < g->nparams; i++) {
        c->params = grow(c, c->params, &c->cap_params, c->nparams + 1, sizeof *c->params);
        c->params[c->nparams++] = map[g->params[i]->id];
    }
    ir_for_each_node(g, n) {
        ir_node *m = ir_alloc(c, sizeof *m);
        *m = *n;
        m->prev = m->next = NULL;
        m->loc.file = clone_str(c, n->loc.file, &in, &out);
        m->in = ir_alloc(c, (size_t)(n->nin ? n->nin : 1) * sizeof *m->in);
        m->out = ir_alloc(c, (size_t)n->nout * sizeof *m->out);
        for (int i = 0; i < n->nin; i++)
            m->in[i] = map[n->in[i]->id];
        for (int i = 0; i < n->nout; i++) {
            ir_value *v = m->out[i] = map[n->out[i]->id];
            *v = *n->out[i];
            v->name = ir_strdup(c, v->name);
            v->loc.file = clone_str(c, v->loc.file, &in, &out);
            v->shard.of = v->shard.of ? ir_strdup(c, v->shard.of) : NULL;
            v->def = m;
        }
        m->attrs = ir_alloc(c, (size_t)(n->nattrs ? n->nattrs : 1) * sizeof *m->attrs);
        for (int i = 0; i < n->nattrs; i++) {
            m->attrs[i] = n->attrs[i];
            m->attrs[i].key = ir_strdup(c, n->attrs[i].key);
            if (n->attrs[i].kind == IR_ATTR_INTS) {
                m->attrs[i].ints = ir_alloc(c, (size_t)(n->attrs[i].n ? n->attrs[i].n : 1) * 8);
                memcpy(m->attrs[i].ints, n->attrs[i].ints, (size_t)n->attrs[i].n * 8);
            }
        }
        ir_append(c, m);
    }
    for (int i = 0; i < g->noutputs; i++) {
        const ir_output *o = &g->outputs[i];
        ir_add_output(c, o->name, VALUE(o->value), o->loc);
        c->outputs[i].loc.file = clone_str(c, o->loc.file, &in, &out);
    }
    c->loss = VALUE(g->loss);
    for (int i = 0; i < g->nupdates; i++)
        ir_add_update_on(c, VALUE(g->updates[i].target), VALUE(g->updates[i].source),
                         g->updates[i].device);
    c->ngroups = g->ngroups;
    /* the names taken, those of values and those only claimed */
    const struct ir_names *t = g->names;
    for (int i = 0; i < t->cap; i++)
        if (t->reserved[i]) {
            ir_value *v = t->slots[i] ? map[t->slots[i]->id] : NULL;
            names_put(c, v ? v->name : ir_strdup(c, t->reserved[i]), v);
        }
#undef VALUE
    base_free(map);
    return c;
}

void ir_rename(ir_graph *g, ir_value *v, const char *base)
{
    const char *name = ir_unique_name(g, base);
    g->names->slots[names_slot(g->names, v->name)] = NULL; /* the old name stays taken */
    names_put(g, name, v);
    v->name = name;
}

static ir_value *new_value(ir_graph *g, ir_value_kind kind, const char *name, ir_type t,
                           ir_loc loc)
{
    ir_value *v = ir_alloc(g, sizeof *v);
    v->kind = kind;
    v->name = name;
    v->type = t;
    v->loc = loc;
    v->id = g->nvalues++;
    names_put(g, name, v);
    return v;
}

/* name is taken as is (the caller made sure it is free) */
ir_value *ir_add_input(ir_graph *g, const char *name, ir_type t, ir_loc loc)
{
    ir_value *v = new_value(g, IR_VALUE_INPUT, ir_strdup(g, name), t, loc);
    g->inputs = grow(g, g->inputs, &g->cap_inputs, g->ninputs + 1, sizeof *g->inputs);
    g->inputs[g->ninputs++] = v;
    return v;
}

ir_value *ir_add_param(ir_graph *g, ir_value_kind kind, const char *name, ir_type t,
                       ir_init init, ir_loc loc)
{
    IR_ASSERT(kind == IR_VALUE_PARAM || kind == IR_VALUE_BUFFER || kind == IR_VALUE_STATE);
    ir_value *v = new_value(g, kind, ir_strdup(g, name), t, loc);
    v->init = init;
    g->params = grow(g, g->params, &g->cap_params, g->nparams + 1, sizeof *g->params);
    g->params[g->nparams++] = v;
    return v;
}

void ir_add_output(ir_graph *g, const char *name, ir_value *v, ir_loc loc)
{
    g->outputs = grow(g, g->outputs, &g->cap_outputs, g->noutputs + 1, sizeof *g->outputs);
    g->outputs[g->noutputs++] = (ir_output){ir_strdup(g, name), v, loc};
}

void ir_set_shard(ir_graph *g, ir_value *v, const char *of, const ir_type *whole, int axis,
                  int64_t start)
{
    v->shard = (ir_shard){ir_strdup(g, of), *whole, axis, start};
}

int64_t ir_shard_index(const ir_value *v, int64_t i)
{
    const ir_shard *s = &v->shard;
    if (!s->of)
        return i;
    /* i = (outer, k, inner) in v's [outer, dims[axis], inner] view */
    int64_t inner = 1;
    for (int k = s->axis + 1; k < v->type.rank; k++)
        inner *= v->type.dims[k];
    int64_t size = v->type.dims[s->axis], full = s->type.dims[s->axis];
    int64_t outer = i / (size * inner), k = i / inner % size;
    return (outer * full + s->start + k) * inner + i % inner;
}

void ir_add_update_on(ir_graph *g, ir_value *target, ir_value *source, int device)
{
    g->updates = grow(g, g->updates, &g->cap_updates, g->nupdates + 1, sizeof *g->updates);
    g->updates[g->nupdates++] = (ir_update){target, source, device};
}

void ir_add_update(ir_graph *g, ir_value *target, ir_value *source)
{
    ir_add_update_on(g, target, source, 0);
}

ir_value *ir_value_new(ir_graph *g, const char *base, ir_loc loc)
{
    return new_value(g, IR_VALUE_NODE, ir_unique_name(g, base), (ir_type){0}, loc);
}

ir_node *ir_node_make(ir_graph *g, ir_op op, int nin, ir_value *const *in, int nout,
                      ir_value *const *out, ir_loc loc)
{
    IR_ASSERT(op >= 0 && op < IR_NOPS && nout >= 1);
    ir_node *n = ir_alloc(g, sizeof *n);
    n->op = op;
    n->nin = nin;
    n->in = ir_alloc(g, (size_t)(nin ? nin : 1) * sizeof *n->in);
    if (nin)
        memcpy(n->in, in, (size_t)nin * sizeof *n->in);
    n->nout = nout;
    n->out = ir_alloc(g, (size_t)nout * sizeof *n->out);
    n->loc = loc;
    for (int i = 0; i < nout; i++) {
        IR_ASSERT(out[i]->kind == IR_VALUE_NODE);
        n->out[i] = out[i];
        out[i]->def = n;
        out[i]->def_index = i;
    }
    return n;
}

ir_node *ir_node_new(ir_graph *g, ir_op op, int nin, ir_value *const *in, int nout,
                     const char *base, ir_loc loc)
{
    IR_ASSERT(nout >= 1 && nout <= IR_MAX_RESULTS);
    ir_value *out[IR_MAX_RESULTS];
    for (int i = 0; i < nout; i++)
        out[i] = ir_value_new(g, base ? base : ir_ops[op].name, loc);
    return ir_node_make(g, op, nin, in, nout, out, loc);
}

/* A node joins the graph with the attributes its op defaults (ops.def) that its
 * maker did not set: those an op gained later need no change to its makers. */
void ir_append(ir_graph *g, ir_node *n)
{
    ir_set_attr_defaults(g, n);
    n->prev = g->tail;
    n->next = NULL;
    if (g->tail)
        g->tail->next = n;
    else
        g->head = n;
    g->tail = n;
    g->nnodes++;
}

void ir_insert_before(ir_graph *g, ir_node *pos, ir_node *n)
{
    if (!pos) {
        ir_append(g, n);
        return;
    }
    ir_set_attr_defaults(g, n);
    n->next = pos;
    n->prev = pos->prev;
    if (pos->prev)
        pos->prev->next = n;
    else
        g->head = n;
    pos->prev = n;
    g->nnodes++;
}

void ir_erase(ir_graph *g, ir_node *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        g->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        g->tail = n->prev;
    n->prev = n->next = NULL;
    g->nnodes--;
}

int ir_erase_dead(ir_graph *g)
{
    int *uses = base_xcalloc((size_t)g->nvalues + 1, sizeof *uses), removed = 0;
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nin; i++)
            uses[n->in[i]->id]++;
    for (int i = 0; i < g->noutputs; i++)
        uses[g->outputs[i].value->id]++;
    if (g->loss)
        uses[g->loss->id]++;
    for (int i = 0; i < g->nupdates; i++)
        uses[g->updates[i].source->id]++;
    for (ir_node *n = g->tail, *prev; n; n = prev) {
        prev = n->prev;
        int live = ir_op_communicates(n->op); /* its peers wait for it */
        for (int i = 0; i < n->nout && !live; i++)
            live = uses[n->out[i]->id] > 0;
        if (live)
            continue;
        for (int i = 0; i < n->nin; i++)
            uses[n->in[i]->id]--;
        ir_erase(g, n);
        removed++;
    }
    base_free(uses);
    return removed;
}

void ir_replace_uses(ir_graph *g, ir_value *old, ir_value *new_)
{
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nin; i++)
            if (n->in[i] == old)
                n->in[i] = new_;
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].value == old)
            g->outputs[i].value = new_;
    if (g->loss == old)
        g->loss = new_;
    for (int i = 0; i < g->nupdates; i++)
        if (g->updates[i].source == old)
            g->updates[i].source = new_;
}

int ir_op_communicates(ir_op op)
{
    return op == IR_OP_ALL_REDUCE || op == IR_OP_ALL_GATHER || op == IR_OP_REDUCE_SCATTER ||
           op == IR_OP_BROADCAST || op == IR_OP_SEND || op == IR_OP_RECV;
}

void ir_weight_only(const ir_graph *g, unsigned char *flags)
{
    memset(flags, 0, (size_t)g->nvalues);
    if (g->nupdates)
        return;
    ir_for_each_node(g, n) {
        /* every operand a weight, a constant or computed from those; and at
           least one a weight (constants alone cost nothing to recompute) */
        int only = 1, reads_weight = 0;
        for (int i = 0; i < n->nin; i++) {
            const ir_value *v = n->in[i];
            int weight = v->kind == IR_VALUE_PARAM || v->kind == IR_VALUE_BUFFER ||
                         (v->kind == IR_VALUE_NODE && flags[v->id]);
            only &= weight || (v->kind == IR_VALUE_NODE && v->def->op == IR_OP_CONST);
            reads_weight |= weight;
        }
        for (int i = 0; i < n->nout; i++)
            flags[n->out[i]->id] = (unsigned char)(only && reads_weight);
    }
}

/* ---- attributes ---- */

static ir_attr *attr_slot(ir_graph *g, ir_node *n, const char *key)
{
    for (int i = 0; i < n->nattrs; i++)
        if (strcmp(n->attrs[i].key, key) == 0)
            return &n->attrs[i];
    ir_attr *a = ir_alloc(g, (size_t)(n->nattrs + 1) * sizeof *a);
    if (n->nattrs)
        memcpy(a, n->attrs, (size_t)n->nattrs * sizeof *a);
    n->attrs = a;
    a = &n->attrs[n->nattrs++];
    a->key = ir_strdup(g, key);
    return a;
}

void ir_set_int(ir_graph *g, ir_node *n, const char *key, int64_t v)
{
    ir_attr *a = attr_slot(g, n, key);
    a->kind = IR_ATTR_INT;
    a->i = v;
}

void ir_set_float(ir_graph *g, ir_node *n, const char *key, double v)
{
    ir_attr *a = attr_slot(g, n, key);
    a->kind = IR_ATTR_FLOAT;
    a->f = v;
}

void ir_set_ints(ir_graph *g, ir_node *n, const char *key, int count, const int64_t *v)
{
    ir_attr *a = attr_slot(g, n, key);
    a->kind = IR_ATTR_INTS;
    a->n = count;
    a->ints = ir_alloc(g, (size_t)(count ? count : 1) * sizeof *a->ints);
    if (count)
        memcpy(a->ints, v, (size_t)count * sizeof *v);
}

void ir_copy_attrs(ir_graph *g, ir_node *dst, const ir_node *src)
{
    for (int i = 0; i < src->nattrs; i++) {
        const ir_attr *a = &src->attrs[i];
        if (a->kind == IR_ATTR_INT)
            ir_set_int(g, dst, a->key, a->i);
        else if (a->kind == IR_ATTR_FLOAT)
            ir_set_float(g, dst, a->key, a->f);
        else
            ir_set_ints(g, dst, a->key, a->n, a->ints);
    }
}

const ir_attr *ir_get_attr(const ir_node *n, const char *key)
{
    for (int i = 0; i < n->nattrs; i++)
        if (strcmp(n->attrs[i].key, key) == 0)
            return &n->attrs[i];
    return NULL;
}

int64_t ir_attr_int(const ir_node *n, const char *key)
{
    const ir_attr *a = ir_get_attr(n, key);
    IR_ASSERT(a && a->kind == IR_ATTR_INT);
    return a->i;
}

double ir_attr_float(const ir_node *n, const char *key)
{
    const ir_attr *a = ir_get_attr(n, key);
    IR_ASSERT(a && (a->kind == IR_ATTR_FLOAT || a->kind == IR_ATTR_INT));
    return a->kind == IR_ATTR_FLOAT ? a->f : (double)a->i;
}

const int64_t *ir_attr_ints(const ir_node *n, const char *key, int *count)
{
    const ir_attr *a = ir_get_attr(n, key);
    IR_ASSERT(a && a->kind == IR_ATTR_INTS);
    if (count)
        *count = a->n;
    return a->ints;
}

/* ---- types ---- */

static const char *const dtype_names[IR_NDTYPES] = {"f32", "f16", "bf16", "i32", "i64", "u8"};
static const size_t dtype_sizes[IR_NDTYPES] = {4, 2, 2, 4, 8, 1};

static const char *const precision_names[PREC_COUNT] = {"fp32", "tf32", "bf16", "fp16"};

const char *ir_precision_name(ir_precision p)
{
    return (unsigned)p < PREC_COUNT ? precision_names[p] : "?";
}

int ir_precision_lookup(const char *name)
{
    for (int i = 0; name && i < PREC_COUNT; i++)
        if (strcmp(name, precision_names[i]) == 0)
            return i;
    return -1;
}

const char *ir_dtype_name(ir_dtype t)
{
    return (unsigned)t < IR_NDTYPES ? dtype_names[t] : "?";
}

int ir_dtype_lookup(const char *name)
{
    for (int i = 0; i < IR_NDTYPES; i++)
        if (strcmp(dtype_names[i], name) == 0)
            return i;
    return -1;
}

size_t ir_dtype_size(ir_dtype t)
{
    return dtype_sizes[t];
}

size_t ir_host_size(ir_dtype t)
{
    return ir_is_float(t) ? sizeof(float) : dtype_sizes[t];
}

int ir_type_eq(const ir_type *a, const ir_type *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank)
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return 0;
    return 1;
}

int64_t ir_type_numel(const ir_type *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

size_t ir_type_bytes(const ir_type *t)
{
    return (size_t)ir_type_numel(t) * dtype_sizes[t->dtype];
}

char *ir_type_str(const ir_type *t, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "%s[", ir_dtype_name(t->dtype));
    for (int i = 0; i < t->rank && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "",
                                 (long long)t->dims[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
    return buf;
}

/* ---- initializers: counter-based, so values depend on (seed, name, index) only ---- */

/* uniform in [0, 1) with 53 random bits */
static double unit(uint64_t key, uint64_t i)
{
    return (double)(base_splitmix64(key ^ base_splitmix64(i)) >> 11) * 0x1.0p-53;
}

void ir_init_fill(const ir_value *v, uint64_t seed, float *out)
{
    int64_t n = ir_type_numel(&v->type);
    uint64_t key = base_splitmix64(seed) ^ hash_str(v->shard.of ? v->shard.of : v->name);
    const ir_init *in = &v->init;
    switch (in->kind) {
    case IR_INIT_NONE:
    case IR_INIT_ZEROS:
        memset(out, 0, (size_t)n * sizeof *out);
        break;
    case IR_INIT_ONES:
        for (int64_t i = 0; i < n; i++)
            out[i] = 1.0f;
        break;
    case IR_INIT_UNIFORM:
        for (int64_t i = 0; i < n; i++) {
            uint64_t j = (uint64_t)ir_shard_index(v, i);
            out[i] = (float)(in->a + (in->b - in->a) * unit(key, j));
        }
        break;
    case IR_INIT_NORMAL:
        for (int64_t i = 0; i < n; i++) { /* Box-Muller on a pair of counters */
            uint64_t j = (uint64_t)ir_shard_index(v, i);
            double u1 = 1.0 - unit(key, 2 * j), u2 = unit(key, 2 * j + 1);
            double z = sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
            out[i] = (float)(in->a + in->b * z);
        }
        break;
    case IR_INIT_DATA: /* without its data (parsed IR text): zeros until a checkpoint loads */
        for (int64_t i = 0; i < n; i++)
            out[i] = in->data ? in->data[ir_shard_index(v, i)] : 0.0f;
        break;
    }
    if (in->zero_row > 0) { /* the row of the whole tensor, a shard's elements in it */
        const ir_type *whole = v->shard.of ? &v->shard.type : &v->type;
        int64_t row = ir_type_numel(whole) / whole->dims[0];
        for (int64_t i = 0; i < n; i++)
            if (ir_shard_index(v, i) / row == in->zero_row - 1)
                out[i] = 0.0f;
    }
}
