/* Elaboration: runs a model's compile-time program and emits its graph.
 *
 * Expects: programs parsed by fe_parse.  Steps: load the main file and its imports
 * (each once, cycles rejected), collecting consts, defs and models in one global
 * namespace; bind the chosen model's parameters (defaults, then -D overrides);
 * execute its body statement by statement.  Compile-time values (ints, floats,
 * bools, strings, lists) are computed here; every tensor operation becomes an IR
 * node typed by ir_infer, so a shape error is reported at the DSL call that
 * caused it, with a note for each enclosing def call.
 *
 * Guarantees: the returned graph verifies; parameter names follow the rule in
 * docs/dsl.md ("Naming"); after an error, elaboration goes on with a poison value
 * (V_ERROR) that silences follow-on errors, and NULL is returned. */
#include "elab.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CALL_DEPTH 64
#define MAX_EVAL_DEPTH 256  /* nested expressions, across def calls: C stack frames */
#define MAX_STEPS 1000000L  /* statements + loop iterations + def calls + nodes, to stop
                               runaway loops: a step costs up to about 0.5 KB and 3 us */
#define MAX_NUMEL ((int64_t)1 << 37)  /* elements of one tensor (1 TiB of i64): sizes
                                         computed from its dims cannot overflow */

typedef struct binding {
    const char *name;
    val v;
    ir_loc loc;
    int is_const;
    struct binding *next;
} binding;

typedef struct {
    binding *vars;
} env;

/* A top-level declaration: a const, def or model. */
typedef struct global {
    const char *name;
    ast *decl;            /* AST_CONST, AST_DEF or AST_MODEL */
    val v;                /* consts: the value */
    struct global *next;
} global;

typedef struct module {
    char *key;            /* the resolved path: one load per file */
    int loading;          /* on the import stack */
    struct module *next;
} module;

/* A naming scope: one per model body and def call.  The names used in it are
 * kept in elab's claims, by full path. */
typedef struct counter {
    const char *base;     /* "relu", "conv2d", a def's name */
    int64_t next;         /* every base<k> with k < next is taken */
    struct counter *next_base;
} counter;

typedef struct scope {
    const char *path;     /* "" for the model body, "layer1.block0" inside */
    counter *counters;
    struct scope *parent;
} scope;

/* A name claimed in a scope, by full path: as a name holds no '.', the path
 * stands for the scope and the name in it. */
typedef struct {
    const char *path;
    ir_loc loc;
} claim;

typedef struct {
    ir_loc loc;           /* the call site */
    const char *name;     /* the def called */
} frame;

typedef struct fileref {
    const char *diag_name, *graph_name;
    struct fileref *next;
} fileref;

struct elab {
    diag *d;
    base_arena *arena;
    ir_graph *g;
    global *globals;
    module *modules;
    scope *scope;
    frame frames[MAX_CALL_DEPTH];
    int depth;
    int in_model;         /* statements input/output/loss are allowed */
    fileref *files;
    long steps;
    int out_of_steps;
    int errors0;          /* d->nerrors when elaboration began */
    int eval_depth;       /* nested eval calls */
    claim *claims;        /* open-addressing hash set of claimed paths */
    size_t nclaims, cap_claims;
};

/* ---------------------------------------------------------------- basics */

static void *alloc(elab *e, size_t n) { return base_arena_alloc(&e->arena, n); }
void *el_alloc(elab *e, size_t n) { return alloc(e, n); }

static char *fmt(elab *e, const char *f, ...) DIAG_PRINTF(2, 3);
static char *fmt(elab *e, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    char *s = alloc(e, (size_t)n + 1);
    va_start(ap, f);
    vsnprintf(s, (size_t)n + 1, f, ap);
    va_end(ap);
    return s;
}

val error_val(void) { return (val){.k = V_ERROR}; }
val tensor_val(ir_value *t) { return (val){.k = V_TENSOR, .t = t}; }
static val int_val(int64_t i) { return (val){.k = V_INT, .i = i}; }
static val float_val(double f) { return (val){.k = V_FLOAT, .f = f}; }
static val bool_val(int b) { return (val){.k = V_BOOL, .i = b != 0}; }

ir_graph *el_graph(elab *e) { return e->g; }

const char *val_kind_name(const val *v)
{
    static const char *const names[] = {"nothing", "error", "int", "float", "bool", "string",
                                        "list", "tuple", "tensor", "initializer"};
    return names[v->k];
}

/* A description of v for messages: "int 3", "tensor f32[2, 3]". */
static const char *describe(elab *e, const val *v)
{
    char buf[128];
    switch (v->k) {
    case V_INT: return fmt(e, "int %lld", (long long)v->i);
    case V_FLOAT: return fmt(e, "float %g", v->f);
    case V_BOOL: return v->i ? "bool true" : "bool false";
    case V_STR: return fmt(e, "string \"%s\"", v->s);
    case V_TENSOR: return fmt(e, "tensor %s", ir_type_str(&v->t->type, buf, sizeof buf));
    case V_LIST: return fmt(e, "list of %d", v->n);
    case V_TUPLE: return fmt(e, "%d values", v->n);
    default: return val_kind_name(v);
    }
}

void el_error(elab *e, ir_loc loc, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    diag_vreport(e->d, DIAG_ERROR, loc, f, ap);
    va_end(ap);
    for (int i = e->depth - 1; i >= 0; i--)
        diag_note(e->d, e->frames[i].loc, "in call to '%s'", e->frames[i].name);
}

ir_loc el_loc(elab *e, ir_loc loc)
{
    if (!loc.file)
        return loc;
    for (fileref *f = e->files; f; f = f->next)
        if (f->diag_name == loc.file) {
            loc.file = f->graph_name;
            return loc;
        }
    fileref *f = alloc(e, sizeof *f);
    f->diag_name = loc.file;
    f->graph_name = ir_strdup(e->g, loc.file);
    f->next = e->files;
    e->files = f;
    loc.file = f->graph_name;
    return loc;
}

static int step(elab *e, ir_loc loc)
{
    /* past the diag's error limit nothing more is shown: stop, rather than run on
       through, say, an exponential tree of failing recursive calls */
    if (e->d->max_errors && e->d->nerrors - e->errors0 > e->d->max_errors)
        return 0;
    if (++e->steps <= MAX_STEPS)
        return 1;
    if (!e->out_of_steps)
        el_error(e, loc, "elaboration takes more than %ld steps; is a loop too long?",
                 MAX_STEPS);
    e->out_of_steps = 1;
    return 0;
}

/* Whether t has more than MAX_NUMEL elements, computed without overflow: dims
 * come from the user, and the IR multiplies them freely. */
static int too_large(const ir_type *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] > MAX_NUMEL || __builtin_mul_overflow(n, t->dims[i], &n) || n > MAX_NUMEL)
            return 1;
    return 0;
}

/* ---------------------------------------------------------------- names */

static binding *env_find(env *en, const char *name)
{
    for (binding *b = en ? en->vars : NULL; b; b = b->next)
        if (strcmp(b->name, name) == 0)
            return b;
    return NULL;
}

static global *global_find(elab *e, const char *name)
{
    for (global *g = e->globals; g; g = g->next)
        if (strcmp(g->name, name) == 0)
            return g;
    return NULL;
}

static void env_set(elab *e, env *en, const char *name, val v, ir_loc loc, int is_const)
{
    binding *b = env_find(en, name);
    if (b && b->is_const) {
        el_error(e, loc, "cannot assign to constant '%s'", name);
        return;
    }
    if (!b) {   /* a new local: it shadows a global of that name (a const too) */
        b = alloc(e, sizeof *b);
        b->name = name;
        b->next = en->vars;
        en->vars = b;
    }
    b->v = v;
    b->loc = loc;
    b->is_const = is_const;
}

/* Every name visible from en, for did-you-mean suggestions. */
static int visible_names(elab *e, env *en, const char **out, int max, int with_builtins)
{
    int n = 0;
    for (binding *b = en ? en->vars : NULL; b && n < max; b = b->next)
        out[n++] = b->name;
    for (global *g = e->globals; g && n < max; g = g->next)
        out[n++] = g->name;
    for (const builtin *b = fe_builtins; with_builtins && b->name && n < max; b++)
        out[n++] = b->name;
    return n;
}

static void unknown_name(elab *e, env *en, ir_loc loc, const char *what, const char *name,
                         int calls)
{
    const char *cands[512];
    int n = visible_names(e, en, cands, 512, calls);
    const char *s = diag_suggest(name, cands, n);
    if (s)
        el_error(e, loc, "unknown %s '%s'; did you mean '%s'?", what, name, s);
    else
        el_error(e, loc, "unknown %s '%s'", what, name);
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot of path in the claims: where it is, or the empty slot for it. */
static claim *claim_slot(claim *claims, size_t cap, const char *path)
{
    for (size_t i = hash_str(path) & (cap - 1);; i = (i + 1) & (cap - 1))
        if (!claims[i].path || strcmp(claims[i].path, path) == 0)
            return &claims[i];
}

static const claim *claim_find(elab *e, const char *path)
{
    if (!e->cap_claims)
        return NULL;
    claim *c = claim_slot(e->claims, e->cap_claims, path);
    return c->path ? c : NULL;
}

static void claim_add(elab *e, const char *path, ir_loc loc)
{
    if (2 * (e->nclaims + 1) > e->cap_claims) {
        size_t cap = e->cap_claims ? 2 * e->cap_claims : 256;
        claim *t = alloc(e, cap * sizeof *t);
        for (size_t i = 0; i < e->cap_claims; i++)
            if (e->claims[i].path)
                *claim_slot(t, cap, e->claims[i].path) = e->claims[i];
        e->claims = t;
        e->cap_claims = cap;
    }
    *claim_slot(e->claims, e->cap_claims, path) = (claim){path, loc};
    e->nclaims++;
}

/* The full name of a layer or def call in the current scope: the explicit
 * name = "..." if given, else base followed by the first free number.  Names
 * are never released, so the first free number is never below the last one
 * given for base: the search starts there, and a scope of n names costs O(n). */
static const char *scope_name(elab *e, const char *explicit_, const char *base, ir_loc loc)
{
    scope *s = e->scope;
    const char *path;
    if (explicit_) {
        path = s->path[0] ? fmt(e, "%s.%s", s->path, explicit_) : explicit_;
        const claim *c = claim_find(e, path);
        if (c) {
            el_error(e, loc, "name '%s' is already used in this scope", explicit_);
            diag_note(e->d, c->loc, "first used here");
            return NULL;
        }
    } else {
        counter *n = s->counters;
        while (n && strcmp(n->base, base) != 0)
            n = n->next_base;
        if (!n) {
            n = alloc(e, sizeof *n);
            n->base = base;
            n->next_base = s->counters;
            s->counters = n;
        }
        for (;; n->next++) {
            path = s->path[0] ? fmt(e, "%s.%s%lld", s->path, base, (long long)n->next)
                              : fmt(e, "%s%lld", base, (long long)n->next);
            if (!claim_find(e, path))
                break;
        }
        n->next++;
    }
    claim_add(e, path, loc);
    return path;
}

const char *el_auto_name(elab *e, const char *base, ir_loc loc)
{
    if (!e->scope) {
        el_error(e, loc, "%s makes a tensor; tensors exist only inside a model or def", base);
        return NULL;
    }
    return scope_name(e, NULL, base, loc);
}

const char *el_scope_name(elab *e, const char *name, ir_loc loc)
{
    if (!e->scope) {
        el_error(e, loc, "parameters exist only inside a model or def");
        return NULL;
    }
    return scope_name(e, name, NULL, loc);
}

/* Expands {name} in a name = "..." string with compile-time values in scope. */
static const char *interpolate(elab *e, env *en, const char *s, ir_loc loc, int path)
{
    size_t cap = strlen(s) + 64, len = 0;
    char *out = base_xmalloc(cap);
    for (const char *p = s; *p;) {
        char piece[64];
        const char *add = piece;
        size_t addlen;
        if (*p == '{') {
            const char *end = strchr(p, '}');
            if (!end) {
                el_error(e, loc, "unterminated '{' in name \"%s\"", s);
                base_free(out);
                return NULL;
            }
            const char *key = fmt(e, "%.*s", (int)(end - p - 1), p + 1);
            binding *b = env_find(en, key);
            global *g = b ? NULL : global_find(e, key);
            const val *v = b ? &b->v : g && g->decl->kind == AST_CONST ? &g->v : NULL;
            if (!v) {
                unknown_name(e, en, loc, "name", key, 0);
                base_free(out);
                return NULL;
            }
            if (v->k == V_INT)
                snprintf(piece, sizeof piece, "%lld", (long long)v->i);
            else if (v->k == V_STR)
                add = v->s;
            else if (v->k == V_BOOL)
                add = v->i ? "true" : "false";
            else if (v->k == V_FLOAT)
                snprintf(piece, sizeof piece, "%g", v->f);
            else {
                if (v->k != V_ERROR)
                    el_error(e, loc, "cannot put %s '%s' in a name", describe(e, v), key);
                base_free(out);
                return NULL;
            }
            addlen = strlen(add);
            p = end + 1;
        } else {
            add = p;
            addlen = 1;
            p++;
        }
        if (len + addlen + 1 > cap) {
            cap = 2 * (len + addlen + 1);
            out = base_xrealloc(out, cap);
        }
        memcpy(out + len, add, addlen);
        len += addlen;
    }
    out[len] = '\0';
    if (len == 0 || (!path && strchr(out, '.')) ||
        (path && (out[0] == '.' || out[len - 1] == '.' || strstr(out, "..")))) {
        el_error(e, loc, path ? "a path must be names joined by '.', got \"%s\""
                              : "a name must be non-empty and contain no '.', got \"%s\"", out);
        base_free(out);
        return NULL;
    }
    const char *r = fmt(e, "%s", out);
    base_free(out);
    return r;
}

/* ---------------------------------------------------------------- arguments */

static int arg_fail(elab *e, call *c, int i, const char *want)
{
    if (c->args[i].v.k != V_ERROR) {
        const builtin *b = fe_builtin_lookup(c->fn);
        const char *p = b->params;
        for (int k = 0; k < i; k++)
            p = strchr(p, ',') + 2;
        size_t len = strcspn(p, ",=");
        el_error(e, c->args[i].loc, "%s argument '%.*s' must be %s, got %s", c->fn, (int)len,
                 p, want, describe(e, &c->args[i].v));
    }
    return 0;
}

int arg_given(const call *c, int i) { return c->args[i].v.k != V_NONE; }

ir_value *arg_tensor(elab *e, call *c, int i)
{
    if (c->args[i].v.k == V_TENSOR)
        return c->args[i].v.t;
    arg_fail(e, c, i, "a tensor");
    return NULL;
}

int arg_int(elab *e, call *c, int i, int64_t *out)
{
    if (c->args[i].v.k != V_INT)
        return arg_fail(e, c, i, "an integer");
    *out = c->args[i].v.i;
    return 1;
}

int arg_float(elab *e, call *c, int i, double *out)
{
    const val *v = &c->args[i].v;
    if (v->k == V_INT)
        *out = (double)v->i;
    else if (v->k == V_FLOAT)
        *out = v->f;
    else
        return arg_fail(e, c, i, "a number");
    return 1;
}

int arg_bool(elab *e, call *c, int i, int *out)
{
    if (c->args[i].v.k != V_BOOL)
        return arg_fail(e, c, i, "true or false");
    *out = (int)c->args[i].v.i;
    return 1;
}

int arg_ints(elab *e, call *c, int i, int64_t *out, int max, int *n)
{
    const val *v = &c->args[i].v;
    if (v->k != V_LIST || v->n > max)
        return arg_fail(e, c, i, fmt(e, "a list of at most %d integers", max));
    for (int k = 0; k < v->n; k++) {
        if (v->items[k].k != V_INT)
            return arg_fail(e, c, i, "a list of integers");
        out[k] = v->items[k].i;
    }
    *n = v->n;
    return 1;
}

int arg_pair(elab *e, call *c, int i, int64_t out[2])
{
    const val *v = &c->args[i].v;
    if (v->k == V_INT) {
        out[0] = out[1] = v->i;
        return 1;
    }
    if (v->k == V_LIST && v->n == 2 && v->items[0].k == V_INT && v->items[1].k == V_INT) {
        out[0] = v->items[0].i;
        out[1] = v->items[1].i;
        return 1;
    }
    return arg_fail(e, c, i, "an integer or a list of two");
}

/* ---------------------------------------------------------------- emitting IR */

ir_node *node_begin(elab *e, call *c, ir_op op, int nin, ir_value **in)
{
    int nout = ir_ops[op].nout > 1 ? ir_ops[op].nout : 1; /* attention: out and lse */
    return ir_node_new(e->g, op, nin, in, nout, c->path, el_loc(e, c->loc));
}

val node_end(elab *e, call *c, ir_node *n)
{
    char err[256];
    ir_type t[IR_MAX_RESULTS];
    if (!step(e, c->loc))
        return error_val();
    ir_set_attr_defaults(e->g, n);
    if (!ir_infer(n, t, err, sizeof err)) {
        el_error(e, c->loc, "%s", err);
        return error_val();
    }
    for (int i = 0; i < n->nout; i++) {
        if (too_large(&t[i])) {
            char buf[128];
            el_error(e, c->loc, "%s would make a tensor %s, which is too large", c->fn,
                     ir_type_str(&t[i], buf, sizeof buf));
            return error_val();
        }
        n->out[i]->type = t[i];
    }
    ir_append(e->g, n);
    return tensor_val(n->out[0]);
}

/* fan_in and fan_out of a weight, as torch.nn.init computes them */
static void fans(const ir_type *t, double *fan_in, double *fan_out)
{
    double receptive = 1;
    for (int i = 2; i < t->rank; i++)
        receptive *= (double)t->dims[i];
    *fan_in = (t->rank > 1 ? (double)t->dims[1] : (double)t->dims[0]) * receptive;
    *fan_out = (double)t->dims[0] * receptive;
}

ir_value *make_param(elab *e, call *c, const char *suffix, ir_value_kind kind, ir_type t,
                     val init, init_kind dflt)
{
    if (c->share) { /* another call's parameter, of this type */
        /* PATH in the call's scope, else in each enclosing one, else whole */
        const char *name = NULL;
        ir_value *v = NULL;
        size_t scope = strrchr(c->path, '.') ? (size_t)(strrchr(c->path, '.') - c->path) : 0;
        for (;;) {
            name = fmt(e, "%.*s%s%s%s%s", (int)scope, c->path, scope ? "." : "", c->share,
                       suffix ? "." : "", suffix ? suffix : "");
            if ((v = ir_find_value(e->g, name)) != NULL || scope == 0)
                break;
            while (scope > 0 && c->path[--scope] != '.')
                ;
        }
        char want[128], got[128];
        if (c->shared < 0)  /* refused already */
            return NULL;
        c->shared = 1;
        if (kind != IR_VALUE_PARAM) {
            c->shared = -1;
            el_error(e, c->share_loc, "%s cannot share: its '%s' is a buffer, which each call "
                     "updates", c->fn, suffix);
            return NULL;
        }
        if (!v || v->kind != IR_VALUE_PARAM) {
            el_error(e, c->share_loc, "share = \"%s\": there is no parameter '%s' (yet)",
                     c->share, name);
            return NULL;
        }
        if (!ir_type_eq(&v->type, &t)) {
            el_error(e, c->share_loc, "share = \"%s\": '%s' is %s, this %s needs %s", c->share,
                     name, ir_type_str(&v->type, got, sizeof got), c->fn,
                     ir_type_str(&t, want, sizeof want));
            return NULL;
        }
        return v;
    }
    const char *name = suffix ? fmt(e, "%s.%s", c->path, suffix) : c->path;
    if (too_large(&t)) {
        char buf[128];
        el_error(e, c->loc, "parameter '%s' would be %s, which is too large", name,
                 ir_type_str(&t, buf, sizeof buf));
        return NULL;
    }
    if (!ir_claim_name(e->g, name)) {
        el_error(e, c->loc, "parameter '%s' is defined twice", name);
        return NULL;
    }
    init_kind k = init.k == V_INIT ? (init_kind)init.i : dflt;
    double fan_in, fan_out;
    fans(&t, &fan_in, &fan_out);
    ir_init in = {IR_INIT_ZEROS, 0, 0, 0, NULL};
    switch (k) {
    case INIT_ZEROS: in.kind = IR_INIT_ZEROS; break;
    case INIT_ONES: in.kind = IR_INIT_ONES; break;
    case INIT_NORMAL: in = (ir_init){IR_INIT_NORMAL, init.f2, init.f, 0, NULL}; break;
    case INIT_UNIFORM: in = (ir_init){IR_INIT_UNIFORM, init.f, init.f2, 0, NULL}; break;
    case INIT_KAIMING:
    case INIT_KAIMING_UNIFORM:
    case INIT_XAVIER:
    case INIT_XAVIER_NORMAL:
        if (t.rank < 2) {
            el_error(e, c->loc, "%s initialization of '%s' needs a weight of rank 2 or more",
                     k == INIT_KAIMING || k == INIT_KAIMING_UNIFORM ? "kaiming" : "xavier",
                     name);
            return NULL;
        }
        if (k == INIT_KAIMING)
            in = (ir_init){IR_INIT_NORMAL, 0, sqrt(2.0 / fan_in), 0, NULL};
        else if (k == INIT_KAIMING_UNIFORM)
            in = (ir_init){IR_INIT_UNIFORM, -sqrt(6.0 / fan_in), sqrt(6.0 / fan_in), 0, NULL};
        else if (k == INIT_XAVIER)
            in = (ir_init){IR_INIT_UNIFORM, -sqrt(6.0 / (fan_in + fan_out)),
                           sqrt(6.0 / (fan_in + fan_out)), 0, NULL};
        else
            in = (ir_init){IR_INIT_NORMAL, 0, sqrt(2.0 / (fan_in + fan_out)), 0, NULL};
        break;
    case INIT_TORCH_DEFAULT:
        /* kaiming_uniform(a=sqrt(5)) for weights and the matching bias bound both
           come to 1/sqrt(fan_in); a bias's fan_in is its weight's, passed in f */
        in = (ir_init){IR_INIT_UNIFORM, -1.0 / sqrt(init.f > 0 ? init.f : fan_in),
                       1.0 / sqrt(init.f > 0 ? init.f : fan_in), 0, NULL};
        break;
    }
    if (in.kind == IR_INIT_UNIFORM && !(in.a < in.b)) {
        el_error(e, c->loc, "uniform initializer of '%s' needs low < high, got %g and %g",
                 name, in.a, in.b);
        return NULL;
    }
    if (in.kind == IR_INIT_NORMAL && !(in.b >= 0)) {
        el_error(e, c->loc, "normal initializer of '%s' needs std >= 0, got %g", name, in.b);
        return NULL;
    }
    return ir_add_param(e->g, kind, name, t, in, el_loc(e, c->loc));
}

/* ---------------------------------------------------------------- expressions */

static val eval(elab *e, env *en, ast *x);
static val call_expr(elab *e, env *en, ast *x);

static int is_num(const val *v) { return v->k == V_INT || v->k == V_FLOAT; }
static double num(const val *v) { return v->k == V_INT ? (double)v->i : v->f; }

static int truth(elab *e, const val *v, ir_loc loc, int *out)
{
    if (v->k == V_BOOL || v->k == V_INT) {
        *out = v->i != 0;
        return 1;
    }
    if (v->k != V_ERROR)
        el_error(e, loc, "expected a condition (bool or int), got %s", describe(e, v));
    return 0;
}

/* tensor (op) scalar: the scalar becomes a rank-0 const of the tensor's dtype */
ir_value *el_scalar(elab *e, const val *v, ir_dtype dtype, ir_loc loc)
{
    if (!ir_is_float(dtype)) {
        el_error(e, loc, "arithmetic takes floating-point tensors, got an %s one: gnc has no "
                 "integer arithmetic", ir_dtype_name(dtype));
        return NULL;
    }
    call c = {.fn = "const", .loc = loc, .path = scope_name(e, NULL, "const", loc)};
    ir_node *n = node_begin(e, &c, IR_OP_CONST, 0, NULL);
    ir_set_float(e->g, n, "value", num(v));
    n->out[0]->type = (ir_type){dtype, 0, {0}};
    val r = node_end(e, &c, n);
    return r.k == V_TENSOR ? r.t : NULL;
}

/* tensor ** number: pow with that exponent */
static val tensor_pow(elab *e, val a, val b, ir_loc loc)
{
    if (a.k != V_TENSOR || !is_num(&b)) {
        el_error(e, loc, "** on tensors takes a tensor base and a number exponent, got %s ** %s",
                 describe(e, &a), describe(e, &b));
        return error_val();
    }
    call c = {.fn = "pow", .loc = loc, .path = scope_name(e, NULL, "pow", loc)};
    ir_node *n = node_begin(e, &c, IR_OP_POW, 1, &a.t);
    ir_set_float(e->g, n, "p", num(&b));
    return node_end(e, &c, n);
}

static val tensor_binary(elab *e, int op, val a, val b, ir_loc loc)
{
    ir_op o;
    switch (op) {
    case '+': o = IR_OP_ADD; break;
    case '-': o = IR_OP_SUB; break;
    case '*': o = IR_OP_MUL; break;
    case '/': o = IR_OP_DIV; break;
    case '>': o = IR_OP_GT; break;
    case '<': o = IR_OP_LT; break;
    case AST_OP_GE: o = IR_OP_GE; break;
    case AST_OP_LE: o = IR_OP_LE; break;
    case AST_OP_EQ: o = IR_OP_EQ; break;
    case AST_OP_NE: o = IR_OP_NE; break;
    case AST_OP_POW: return tensor_pow(e, a, b, loc);
    default:
        el_error(e, loc, "operator is not defined on tensors (only + - * / **, comparisons)");
        return error_val();
    }
    const char *name = ir_ops[o].name;
    ir_value *in[2];
    val *vs[2] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        val *v = vs[i], *other = vs[1 - i];
        if (v->k == V_TENSOR)
            in[i] = v->t;
        else if (is_num(v))
            in[i] = el_scalar(e, v, other->t->type.dtype, loc);
        else {
            el_error(e, loc, "cannot combine %s with %s", describe(e, &a), describe(e, &b));
            return error_val();
        }
        if (!in[i])
            return error_val();
    }
    call c = {.fn = name, .loc = loc, .path = scope_name(e, NULL, name, loc)};
    return node_end(e, &c, node_begin(e, &c, o, 2, in));
}

static val arith(elab *e, int op, val a, val b, ir_loc loc)
{
    if (a.k == V_ERROR || b.k == V_ERROR)
        return error_val();
    if (a.k == V_TENSOR || b.k == V_TENSOR)
        return tensor_binary(e, op, a, b, loc);

    if (op == AST_OP_AND || op == AST_OP_OR) {
        int x, y;
        if (!truth(e, &a, loc, &x) || !truth(e, &b, loc, &y))
            return error_val();
        return bool_val(op == AST_OP_AND ? x && y : x || y);
    }
    if ((op == AST_OP_EQ || op == AST_OP_NE) && a.k == V_STR && b.k == V_STR)
        return bool_val((strcmp(a.s, b.s) == 0) == (op == AST_OP_EQ));
    if ((op == AST_OP_EQ || op == AST_OP_NE) && a.k == V_BOOL && b.k == V_BOOL)
        return bool_val((a.i == b.i) == (op == AST_OP_EQ));
    if (!is_num(&a) || !is_num(&b)) {
        el_error(e, loc, "operator does not apply to %s and %s", describe(e, &a),
                 describe(e, &b));
        return error_val();
    }
    if (a.k == V_INT && b.k == V_INT) {
        int64_t x = a.i, y = b.i, r = 0;
        int overflow = 0;
        switch (op) {
        case '+': overflow = __builtin_add_overflow(x, y, &r); break;
        case '-': overflow = __builtin_sub_overflow(x, y, &r); break;
        case '*': overflow = __builtin_mul_overflow(x, y, &r); break;
        case AST_OP_POW:
            if (y < 0)  /* a float, as Python's 2 ** -1 */
                return float_val(pow((double)x, (double)y));
            r = 1;   /* by squaring: x ** y in log2(y) steps */
            for (int64_t base = x, k = y; k > 0 && !overflow; k >>= 1) {
                if (k & 1)
                    overflow = __builtin_mul_overflow(r, base, &r);
                if (k > 1 && !overflow)
                    overflow = __builtin_mul_overflow(base, base, &base);
            }
            break;
        case '/':
        case '%':
            if (y == 0) {
                el_error(e, loc, "integer division by zero");
                return error_val();
            }
            if (x == INT64_MIN && y == -1)
                overflow = 1;
            else
                r = op == '/' ? x / y : x % y;
            break;
        case '<': return bool_val(x < y);
        case '>': return bool_val(x > y);
        case AST_OP_LE: return bool_val(x <= y);
        case AST_OP_GE: return bool_val(x >= y);
        case AST_OP_EQ: return bool_val(x == y);
        case AST_OP_NE: return bool_val(x != y);
        }
        if (overflow) {
            el_error(e, loc, "integer overflow in compile-time arithmetic");
            return error_val();
        }
        return int_val(r);
    }
    double x = num(&a), y = num(&b);
    switch (op) {
    case '+': return float_val(x + y);
    case '-': return float_val(x - y);
    case '*': return float_val(x * y);
    case '/': return float_val(x / y);
    case '%': return float_val(fmod(x, y));
    case AST_OP_POW:
        if (x < 0 && y != floor(y)) {
            el_error(e, loc, "%g ** %g is not a real number", x, y);
            return error_val();
        }
        return float_val(pow(x, y));
    case '<': return bool_val(x < y);
    case '>': return bool_val(x > y);
    case AST_OP_LE: return bool_val(x <= y);
    case AST_OP_GE: return bool_val(x >= y);
    case AST_OP_EQ: return bool_val(x == y);
    case AST_OP_NE: return bool_val(x != y);
    }
    return error_val();
}

/* Bare initializer names stand for their call without arguments. */
static int init_name(const char *name, val *out)
{
    static const struct { const char *name; init_kind k; } inits[] = {
        {"zeros", INIT_ZEROS}, {"ones", INIT_ONES}, {"kaiming", INIT_KAIMING},
        {"kaiming_uniform", INIT_KAIMING_UNIFORM}, {"xavier", INIT_XAVIER},
        {"xavier_normal", INIT_XAVIER_NORMAL},
    };
    for (size_t i = 0; i < sizeof inits / sizeof inits[0]; i++)
        if (strcmp(inits[i].name, name) == 0) {
            *out = (val){.k = V_INIT, .i = inits[i].k};
            return 1;
        }
    return 0;
}

static val eval_expr(elab *e, env *en, ast *x);

/* eval recurses on the C stack, through def calls too: its depth is bounded. */
/* The items of a[...] evaluated: integers, ranges start:stop:step (each
 * bound SUB_NONE when left out) and "..."; reports and returns 0 on another
 * kind of value. */
static int subscripts(elab *e, env *en, ast *x, subscript *out)
{
    int ok = 1;
    for (int k = 0; k < x->n; k++) {
        ast *it = x->items[k];
        subscript *s = &out[k];
        *s = (subscript){SUB_INDEX, 0, {SUB_NONE, SUB_NONE, SUB_NONE}, it->loc};
        if (it->kind == AST_ELLIPSIS) {
            s->kind = SUB_ELLIPSIS;
            continue;
        }
        if (it->kind != AST_RANGE) {
            val v = eval(e, en, it);
            if (v.k == V_INT)
                s->index = v.i;
            else if (v.k != V_ERROR)
                el_error(e, it->loc, "an index must be an integer, got %s%s", describe(e, &v),
                         v.k == V_TENSOR ? " (to gather rows by a tensor of indices, use "
                         "embedding)" : "");
            ok &= v.k == V_INT;
            continue;
        }
        s->kind = SUB_RANGE;
        ast *bound[3] = {it->a, it->b, it->c};
        for (int b = 0; b < 3; b++) {
            if (!bound[b])
                continue;
            val v = eval(e, en, bound[b]);
            if (v.k == V_INT)
                s->range[b] = v.i;
            else if (v.k != V_ERROR)
                el_error(e, bound[b]->loc, "a slice %s must be an integer, got %s",
                         b == 2 ? "step" : "bound", describe(e, &v));
            ok &= v.k == V_INT;
        }
    }
    return ok;
}

/* a[...]: an element or a slice of a list (Python's), or of a tensor
 * (PyTorch's basic indexing, shaping.c) */
static val index_expr(elab *e, env *en, ast *x)
{
    val a = eval(e, en, x->a);
    subscript *s = alloc(e, (size_t)x->n * sizeof *s);
    if (!subscripts(e, en, x, s) || a.k == V_ERROR)
        return error_val();
    if (a.k == V_TENSOR)
        return el_index(e, a.t, s, x->n, x->loc);
    if (a.k != V_LIST) {
        el_error(e, x->loc, "only lists and tensors can be indexed, got %s", describe(e, &a));
        return error_val();
    }
    if (x->n != 1 || s[0].kind == SUB_ELLIPSIS) {
        el_error(e, x->n != 1 ? x->items[1]->loc : s[0].loc,
                 "a list takes one index or range, as in xs[i] or xs[a:b]");
        return error_val();
    }
    if (s[0].kind == SUB_INDEX) {
        int64_t k = s[0].index < 0 ? s[0].index + a.n : s[0].index;
        if (k < 0 || k >= a.n) {
            el_error(e, s[0].loc, "index %lld is out of range for a list of %d",
                     (long long)s[0].index, a.n);
            return error_val();
        }
        return a.items[k];
    }
    int64_t start, count, step;
    if (!el_range(e, &s[0], a.n, 1, &start, &count, &step))
        return error_val();
    val v = {.k = V_LIST, .n = (int)count, .items = alloc(e, (size_t)(count + 1) * sizeof(val))};
    for (int64_t k = 0; k < count; k++)
        v.items[k] = a.items[start + k * step];
    return v;
}

static val eval(elab *e, env *en, ast *x)
{
    if (e->eval_depth >= MAX_EVAL_DEPTH) {
        el_error(e, x->loc, "expressions and calls nest more than %d deep", MAX_EVAL_DEPTH);
        return error_val();
    }
    e->eval_depth++;
    val v = eval_expr(e, en, x);
    e->eval_depth--;
    return v;
}

static val eval_expr(elab *e, env *en, ast *x)
{
    switch (x->kind) {
    case AST_INT: return int_val(x->ival);
    case AST_FLOAT: return float_val(x->fval);
    case AST_BOOL: return bool_val((int)x->ival);
    case AST_STRING: return (val){.k = V_STR, .s = x->str};
    case AST_NAME: {
        binding *b = env_find(en, x->str);
        if (b)
            return b->v;
        global *g = global_find(e, x->str);
        if (g && g->decl->kind == AST_CONST)
            return g->v;
        val v;
        if (init_name(x->str, &v))
            return v;
        if (g || fe_builtin_lookup(x->str))
            el_error(e, x->loc, "'%s' is a function; call it with ( )", x->str);
        else
            unknown_name(e, en, x->loc, "name", x->str, 0);
        return error_val();
    }
    case AST_LIST: {
        val v = {.k = V_LIST, .n = x->n, .items = alloc(e, (size_t)(x->n + 1) * sizeof(val))};
        for (int i = 0; i < x->n; i++) {
            v.items[i] = eval(e, en, x->items[i]);
            if (v.items[i].k == V_ERROR)
                return error_val();
            if (v.items[i].k == V_NONE || v.items[i].k == V_TUPLE) {
                el_error(e, x->items[i]->loc, "a list element must be a single value");
                return error_val();
            }
        }
        return v;
    }
    case AST_UNARY: {
        val a = eval(e, en, x->a);
        if (a.k == V_ERROR)
            return error_val();
        if (x->op == '!') {
            int t;
            return truth(e, &a, x->loc, &t) ? bool_val(!t) : error_val();
        }
        if (a.k == V_INT) {
            if (a.i == INT64_MIN) {
                el_error(e, x->loc, "integer overflow in compile-time arithmetic");
                return error_val();
            }
            return int_val(-a.i);
        }
        if (a.k == V_FLOAT)
            return float_val(-a.f);
        if (a.k == V_TENSOR) {
            call c = {.fn = "neg", .loc = x->loc, .path = scope_name(e, NULL, "neg", x->loc)};
            return node_end(e, &c, node_begin(e, &c, IR_OP_NEG, 1, &a.t));
        }
        el_error(e, x->loc, "cannot negate %s", describe(e, &a));
        return error_val();
    }
    case AST_BINARY: {
        val a = eval(e, en, x->a);
        /* && and || short-circuit, so a guard like `k > 0 && s[k - 1] ...` works */
        if ((x->op == AST_OP_AND || x->op == AST_OP_OR) && a.k != V_ERROR) {
            int t;
            if (!truth(e, &a, x->a->loc, &t))
                return error_val();
            if (t == (x->op == AST_OP_OR))
                return bool_val(t);
        }
        val b = eval(e, en, x->b);
        return arith(e, x->op, a, b, x->loc);
    }
    case AST_MEMBER: {
        val a = eval(e, en, x->a);
        if (a.k == V_ERROR)
            return a;
        if (a.k != V_TENSOR) {
            el_error(e, x->loc, "'.%s' needs a tensor, got %s", x->str, describe(e, &a));
            return error_val();
        }
        if (strcmp(x->str, "rank") == 0)
            return int_val(a.t->type.rank);
        if (strcmp(x->str, "shape") == 0) {
            val v = {.k = V_LIST, .n = a.t->type.rank,
                     .items = alloc(e, (size_t)(a.t->type.rank + 1) * sizeof(val))};
            for (int i = 0; i < v.n; i++)
                v.items[i] = int_val(a.t->type.dims[i]);
            return v;
        }
        static const char *const members[] = {"shape", "rank"};
        const char *s = diag_suggest(x->str, members, 2);
        el_error(e, x->loc, "a tensor has no member '%s'%s%s%s", x->str,
                 s ? "; did you mean '" : "", s ? s : "", s ? "'?" : " (it has shape and rank)");
        return error_val();
    }
    case AST_INDEX:
        return index_expr(e, en, x);
    case AST_CALL:
        return call_expr(e, en, x);
    default:
        el_error(e, x->loc, "not an expression");
        return error_val();
    }
}

/* ---------------------------------------------------------------- calls */

/* The parameter a PyTorch user means by a keyword of PyTorch's (padding,
 * kernel_size, ...), when the callee has it; else NULL. */
static const char *pytorch_alias(const char *key, const char *const *names, int nparams)
{
    static const char *const aliases[][2] = {
        {"padding", "pad"},       {"kernel_size", "kernel"}, {"out_channels", "channels"},
        {"out_features", "units"}, {"dim", "axis"},          {"num_embeddings", "num"},
        {"embedding_dim", "dim"}, {"normalized_shape", "dims"}, {"output_size", "size"},
    };
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
        if (strcmp(key, aliases[i][0]) == 0)
            for (int k = 0; k < nparams; k++)
                if (strcmp(names[k], aliases[i][1]) == 0)
                    return names[k];
    return NULL;
}

/* The keywords every call may take besides its parameters: name = "..."
 * (its scope's name) and share = "..." (a layer's parameters are another
 * call's); NULL when not given, loc where given. */
typedef struct {
    const char *name, *share;
    ir_loc name_loc, share_loc;
} naming;

/* Binds a call's arguments to nparams parameters named names[]; missing ones
 * stay V_NONE with loc = the call.  Reports and returns 0 on a mismatch. */
static int bind_args(elab *e, env *en, ast *x, const char *fn, int nparams,
                     const char *const *names, arg *out, naming *nm)
{
    int ok = 1, npos = 0;
    for (int i = 0; i < nparams; i++)
        out[i] = (arg){{.k = V_NONE}, x->loc};
    nm->name_loc = nm->share_loc = x->loc;
    for (int i = 0; i < x->n; i++) {
        ast *a = x->items[i];
        int slot;
        if (a->kind == AST_KWARG &&
            (strcmp(a->str, "name") == 0 || strcmp(a->str, "share") == 0)) {
            int share = a->str[0] == 's';
            val v = eval(e, en, a->a);
            if (v.k == V_STR) {
                *(share ? &nm->share : &nm->name) = v.s;
                *(share ? &nm->share_loc : &nm->name_loc) = a->a->loc;
            } else {
                if (v.k != V_ERROR)
                    el_error(e, a->a->loc, "%s must be a string, got %s", a->str,
                             describe(e, &v));
                ok = 0;
            }
            continue;
        }
        if (a->kind == AST_KWARG) {
            for (slot = 0; slot < nparams && strcmp(names[slot], a->str) != 0; slot++)
                ;
            if (slot == nparams) {
                const char *s = pytorch_alias(a->str, names, nparams);
                if (!s)
                    s = diag_suggest(a->str, names, nparams);
                if (s)
                    el_error(e, a->loc, "%s has no parameter '%s'; did you mean '%s'?", fn,
                             a->str, s);
                else
                    el_error(e, a->loc, "%s has no parameter '%s'", fn, a->str);
                ok = 0;
                continue;
            }
            if (out[slot].v.k != V_NONE) {
                el_error(e, a->loc, "argument '%s' of %s is given twice", a->str, fn);
                ok = 0;
                continue;
            }
            a = a->a;
        } else {
            if (npos >= nparams) {
                el_error(e, a->loc, "%s takes at most %d positional argument%s, got %d", fn,
                         nparams, nparams == 1 ? "" : "s", npos + 1);
                return 0;
            }
            slot = npos++;
        }
        out[slot].v = eval(e, en, a);
        out[slot].loc = a->loc;
        if (out[slot].v.k == V_ERROR)
            ok = 0;
        else if (out[slot].v.k == V_NONE || out[slot].v.k == V_TUPLE) {
            el_error(e, a->loc, "an argument must be a single value, got %s",
                     describe(e, &out[slot].v));
            ok = 0;
        }
    }
    return ok;
}

/* Splits a built-in's parameter spec "x, kernel, stride=1, init=?" into names
 * and default literals. */
static int parse_spec(elab *e, const char *spec, const char **names, const char **defaults)
{
    int n = 0;
    for (const char *p = spec; *p;) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        names[n] = fmt(e, "%.*s", (int)((eq ? eq : p + len) - p), p);
        defaults[n] = eq ? fmt(e, "%.*s", (int)(p + len - eq - 1), eq + 1) : NULL;
        n++;
        p += len;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return n;
}

static val literal(const char *s)
{
    if (strcmp(s, "?") == 0)
        return (val){.k = V_NONE};
    if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0)
        return bool_val(s[0] == 't');
    if (strpbrk(s, ".e"))
        return float_val(strtod(s, NULL));
    return int_val(strtoll(s, NULL, 10));
}

static val call_builtin(elab *e, env *en, ast *x, const builtin *b)
{
    const char *names[16], *defaults[16];
    arg args[16];
    naming nm = {0};
    int n = parse_spec(e, b->params, names, defaults);
    if (!bind_args(e, en, x, b->name, n, names, args, &nm))
        return error_val();
    const char *explicit_ = nm.name;
    ir_loc name_loc = nm.name_loc;
    for (int i = 0; i < n; i++) {
        if (args[i].v.k != V_NONE)
            continue;
        if (!defaults[i]) {
            el_error(e, x->loc, "%s is missing argument '%s'", b->name, names[i]);
            return error_val();
        }
        args[i].v = literal(defaults[i]);
    }
    if (explicit_ && !b->layer) {
        el_error(e, name_loc, "%s takes no name", b->name);
        return error_val();
    }
    call c = {.fn = b->name, .loc = x->loc, .args = args, .share_loc = nm.share_loc};
    if (nm.share && b->layer && !(c.share = interpolate(e, en, nm.share, nm.share_loc, 1)))
        return error_val();
    /* a built-in whose first parameter is a name (param's) expands its {key}s
       as name = "..." does: one rule for every name a model writes */
    if (n > 0 && strcmp(names[0], "name") == 0 && args[0].v.k == V_STR &&
        !(args[0].v.s = interpolate(e, en, args[0].v.s, args[0].loc, 0)))
        return error_val();
    if (b->layer && !e->scope) {
        el_error(e, x->loc, "%s makes a tensor; tensors exist only inside a model or def",
                 b->name);
        return error_val();
    }
    if (b->layer) {
        if (explicit_) {
            explicit_ = interpolate(e, en, explicit_, name_loc, 0);
            if (!explicit_)
                return error_val();
        }
        c.path = scope_name(e, explicit_, b->name, explicit_ ? name_loc : x->loc);
        if (!c.path)
            return error_val();
    }
    val r = b->fn(e, &c);
    if (nm.share && !c.shared && r.k != V_ERROR) {
        el_error(e, nm.share_loc, "%s has no parameters to share", b->name);
        return error_val();
    }
    return r;
}

static int exec_block(elab *e, env *en, ast *block, val *ret);

static val call_def(elab *e, env *caller, ast *x, ast *def)
{
    const char *names[64];
    arg args[64];
    const char *explicit_ = NULL;
    ir_loc name_loc = x->loc;
    if (!e->scope) { /* a const's value or a model parameter's default */
        el_error(e, x->loc, "'%s' is called outside a model; a def runs only inside a "
                 "model or another def", def->str);
        return error_val();
    }
    if (!step(e, x->loc)) /* defaults can call defs too: `def f(a = f(), b = f())` */
        return error_val();
    if (def->n > 64) {
        el_error(e, def->loc, "a def takes at most 64 parameters");
        return error_val();
    }
    for (int i = 0; i < def->n; i++)
        names[i] = def->items[i]->str;
    naming nm = {0};
    if (!bind_args(e, caller, x, def->str, def->n, names, args, &nm))
        return error_val();
    if (nm.share) {
        el_error(e, nm.share_loc, "share applies to a layer's call, not to a def's ('%s')",
                 def->str);
        return error_val();
    }
    explicit_ = nm.name;
    name_loc = nm.name_loc;
    if (e->depth == MAX_CALL_DEPTH) {
        el_error(e, x->loc, "calls nest more than %d deep; is '%s' recursive?", MAX_CALL_DEPTH,
                 def->str);
        return error_val();
    }
    if (explicit_) {
        explicit_ = interpolate(e, caller, explicit_, name_loc, 0);
        if (!explicit_)
            return error_val();
    }
    const char *path = scope_name(e, explicit_, def->str, explicit_ ? name_loc : x->loc);
    if (!path)
        return error_val();

    e->frames[e->depth++] = (frame){x->loc, def->str};
    env callee = {NULL};
    int ok = 1;
    for (int i = 0; i < def->n; i++) {
        val v = args[i].v;
        if (v.k == V_NONE) {
            if (!def->items[i]->a) {
                e->depth--;
                el_error(e, x->loc, "%s is missing argument '%s'", def->str, names[i]);
                return error_val();
            }
            v = eval(e, &callee, def->items[i]->a);
            ok &= v.k != V_ERROR;
        }
        env_set(e, &callee, names[i], v, def->items[i]->loc, 0);
    }
    val ret = {.k = V_NONE};
    if (ok) {
        scope s = {path, NULL, e->scope};
        e->scope = &s;
        exec_block(e, &callee, def->c, &ret);
        e->scope = s.parent;
    } else {
        ret = error_val();
    }
    e->depth--;
    return ret;
}

static val call_expr(elab *e, env *en, ast *x)
{
    global *g = global_find(e, x->str);
    if (g && g->decl->kind == AST_DEF)
        return call_def(e, en, x, g->decl);
    const builtin *b = fe_builtin_lookup(x->str);
    if (b)
        return call_builtin(e, en, x, b);
    if (g && g->decl->kind == AST_MODEL) {
        el_error(e, x->loc, "'%s' is a model and cannot be called; make it a def", x->str);
        return error_val();
    }
    if (env_find(en, x->str) || g) {
        el_error(e, x->loc, "'%s' is not a function", x->str);
        return error_val();
    }
    const char *cands[512];
    int n = 0;
    for (global *q = e->globals; q && n < 500; q = q->next)
        if (q->decl->kind == AST_DEF)
            cands[n++] = q->name;
    for (const builtin *q = fe_builtins; q->name && n < 512; q++)
        cands[n++] = q->name;
    const char *s = diag_suggest(x->str, cands, n);
    if (s)
        el_error(e, x->loc, "unknown function '%s'; did you mean '%s'?", x->str, s);
    else
        el_error(e, x->loc, "unknown function '%s'", x->str);
    return error_val();
}

/* ---------------------------------------------------------------- statements */

static void exec_assign(elab *e, env *en, ast *x)
{
    val v = eval(e, en, x->a);
    if (v.k == V_NONE) {
        el_error(e, x->a->loc, "the right-hand side has no value%s",
                 x->a->kind == AST_CALL ? " (the def returns nothing)" : "");
        v = error_val();
    }
    if (x->n == 1) {
        if (v.k == V_TUPLE) {
            el_error(e, x->loc, "%d values returned; unpack them as in 'a, b = ...'", v.n);
            v = error_val();
        }
        env_set(e, en, x->items[0]->str, v, x->items[0]->loc, 0);
        return;
    }
    int many = v.k == V_TUPLE || v.k == V_LIST; /* a, b = split(x, 2) as in Python */
    if (!many && v.k != V_ERROR) {
        el_error(e, x->loc, "cannot unpack %s into %d names", describe(e, &v), x->n);
        v = error_val();
    } else if (many && v.n != x->n) {
        el_error(e, x->loc, "cannot unpack %d values into %d names", v.n, x->n);
        v = error_val();
        many = 0;
    }
    for (int i = 0; i < x->n; i++)
        env_set(e, en, x->items[i]->str, many ? v.items[i] : v, x->items[i]->loc, 0);
}

static void exec_input(elab *e, env *en, ast *x)
{
    int dt = ir_dtype_lookup(x->b->str);
    if (dt < 0) {
        static const char *const dtypes[] = {"f32", "f16", "bf16", "i32", "i64", "u8"};
        const char *s = diag_suggest(x->b->str, dtypes, 6);
        el_error(e, x->b->loc, "unknown dtype '%s'%s%s%s", x->b->str,
                 s ? "; did you mean '" : " (f32, f16, bf16, i32, i64 or u8)", s ? s : "",
                 s ? "'?" : "");
        env_set(e, en, x->str, error_val(), x->loc, 0);
        return;
    }
    ir_type t = {(ir_dtype)dt, x->n, {0}};
    int ok = 1;
    if (x->n > IR_MAX_RANK) {
        el_error(e, x->loc, "input '%s' has rank %d; the maximum is %d", x->str, x->n,
                 IR_MAX_RANK);
        ok = 0;
    }
    for (int i = 0; ok && i < x->n; i++) {
        val v = eval(e, en, x->items[i]);
        if (v.k == V_ERROR)
            ok = 0;
        else if (v.k != V_INT || v.i < 1) {
            el_error(e, x->items[i]->loc, "a dimension must be a positive integer, got %s",
                     describe(e, &v));
            ok = 0;
        } else {
            t.dims[i] = v.i;
        }
    }
    if (ok && too_large(&t)) {
        el_error(e, x->loc, "input '%s' is too large", x->str);
        ok = 0;
    }
    if (ok && !ir_claim_name(e->g, x->str)) {
        el_error(e, x->loc, "input '%s' is declared twice", x->str);
        ok = 0;
    }
    val v = ok ? tensor_val(ir_add_input(e->g, x->str, t, el_loc(e, x->loc))) : error_val();
    env_set(e, en, x->str, v, x->loc, 0);
}

static void exec_output(elab *e, env *en, ast *x)
{
    val v;
    if (x->a) {
        v = eval(e, en, x->a);
        env_set(e, en, x->str, v, x->loc, 0);
    } else {
        binding *b = env_find(en, x->str);
        if (!b) {
            unknown_name(e, en, x->loc, "name", x->str, 0);
            return;
        }
        v = b->v;
    }
    if (v.k == V_ERROR)
        return;
    if (v.k != V_TENSOR) {
        el_error(e, x->loc, "output '%s' must be a tensor, got %s", x->str, describe(e, &v));
        return;
    }
    for (int i = 0; i < e->g->noutputs; i++)
        if (strcmp(e->g->outputs[i].name, x->str) == 0) {
            el_error(e, x->loc, "output '%s' is declared twice", x->str);
            return;
        }
    ir_add_output(e->g, x->str, v.t, el_loc(e, x->loc));
}

static void exec_loss(elab *e, env *en, ast *x)
{
    val v = eval(e, en, x->a);
    if (v.k == V_ERROR)
        return;
    char buf[128];
    if (v.k != V_TENSOR || v.t->type.rank != 0 || v.t->type.dtype != IR_F32) {
        el_error(e, x->a->loc, "the loss must be an f32 scalar, got %s%s", describe(e, &v),
                 v.k == V_TENSOR && v.t->type.rank ? " (reduce it, e.g. with cross_entropy)" : "");
        (void)buf;
        return;
    }
    if (e->g->loss) {
        el_error(e, x->loc, "a model has one loss");
        return;
    }
    e->g->loss = v.t;
}

/* Runs a statement; returns 1 after a return statement (with its value in ret). */
static int exec_stmt(elab *e, env *en, ast *x, val *ret)
{
    if (!step(e, x->loc))
        return 1;
    switch (x->kind) {
    case AST_ASSIGN:
        exec_assign(e, en, x);
        return 0;
    case AST_CONST: {
        val v = eval(e, en, x->a);
        if (v.k == V_TENSOR) {
            el_error(e, x->loc, "a const must be a compile-time value, not a tensor");
            v = error_val();
        }
        if (env_find(en, x->str)) {
            el_error(e, x->loc, "'%s' is already defined", x->str);
            return 0;
        }
        env_set(e, en, x->str, v, x->loc, 1);
        return 0;
    }
    case AST_IF: {
        val c = eval(e, en, x->a);
        int t;
        if (c.k == V_TENSOR) {
            el_error(e, x->a->loc, "an if condition must be known at compile time, got %s",
                     describe(e, &c));
            return 0;
        }
        if (!truth(e, &c, x->a->loc, &t))
            return 0;
        if (t)
            return exec_block(e, en, x->b, ret);
        if (x->c)
            return x->c->kind == AST_IF ? exec_stmt(e, en, x->c, ret) : exec_block(e, en, x->c, ret);
        return 0;
    }
    case AST_FOR: {
        val a = eval(e, en, x->a), b = eval(e, en, x->b);
        if (a.k == V_ERROR || b.k == V_ERROR)
            return 0;
        if (a.k != V_INT || b.k != V_INT) {
            el_error(e, x->a->loc, "a for range must be two integers, got %s and %s",
                     describe(e, &a), describe(e, &b));
            return 0;
        }
        for (int64_t i = a.i; i < b.i; i++) {
            if (!step(e, x->loc))
                return 1;
            env_set(e, en, x->str, int_val(i), x->loc, 0);
            if (exec_block(e, en, x->c, ret))
                return 1;
        }
        return 0;
    }
    case AST_RETURN: {
        if (e->depth == 0) {
            el_error(e, x->loc, "return outside a def");
            return 0;
        }
        val v = {.k = V_TUPLE, .n = x->n, .items = alloc(e, (size_t)x->n * sizeof(val))};
        for (int i = 0; i < x->n; i++) {
            v.items[i] = eval(e, en, x->items[i]);
            if (v.items[i].k == V_ERROR)
                v = error_val();
            if (v.k == V_ERROR)
                break;
        }
        *ret = v.k == V_TUPLE && v.n == 1 ? v.items[0] : v;
        return 1;
    }
    case AST_INPUT:
    case AST_OUTPUT:
    case AST_LOSS:
        if (!e->in_model || e->depth > 0) {
            el_error(e, x->loc, "%s is only allowed in a model body",
                     x->kind == AST_INPUT ? "input" : x->kind == AST_OUTPUT ? "output" : "loss");
            return 0;
        }
        if (x->kind == AST_INPUT)
            exec_input(e, en, x);
        else if (x->kind == AST_OUTPUT)
            exec_output(e, en, x);
        else
            exec_loss(e, en, x);
        return 0;
    default:
        el_error(e, x->loc, "not a statement");
        return 0;
    }
}

static int exec_block(elab *e, env *en, ast *block, val *ret)
{
    for (int i = 0; i < block->n; i++)
        if (exec_stmt(e, en, block->items[i], ret))
            return 1;
    return 0;
}

/* ---------------------------------------------------------------- files */

static int load_file(elab *e, const char *path, ir_loc from);

static void declare(elab *e, ast *decl)
{
    global *prev = global_find(e, decl->str);
    if (prev) {
        el_error(e, decl->loc, "'%s' is defined twice", decl->str);
        diag_note(e->d, prev->decl->loc, "first defined here");
        return;
    }
    if (decl->kind == AST_DEF && fe_builtin_lookup(decl->str)) {
        el_error(e, decl->loc, "'%s' is a built-in operation and cannot be redefined",
                 decl->str);
        return;
    }
    global *g = alloc(e, sizeof *g);
    g->name = decl->str;
    g->decl = decl;
    if (decl->kind == AST_CONST) {
        g->v = eval(e, NULL, decl->a);
        if (g->v.k == V_TENSOR) {
            el_error(e, decl->loc, "a const must be a compile-time value, not a tensor");
            g->v = error_val();
        }
    }
    g->next = e->globals;
    e->globals = g;
}

/* Parses one file's text and declares what it holds; imports load recursively. */
static int load_text(elab *e, const char *file, const char *text, size_t len)
{
    fe_parse_state p = {&e->arena, e->d, file, 0, 1, 1, NULL};
    ast *prog = fe_parse(&p, text, len);
    if (!prog)
        return 0;
    int ok = 1;
    for (int i = 0; i < prog->n; i++) {
        ast *x = prog->items[i];
        if (x->kind == AST_IMPORT) {
            const char *slash = strrchr(file, '/');
            const char *path = x->str[0] == '/' || !slash ? x->str
                               : fmt(e, "%.*s/%s", (int)(slash - file), file, x->str);
            ok &= load_file(e, path, x->loc);
        } else {
            declare(e, x);
        }
    }
    return ok;
}

/* realpath's answer, or NULL; in memory the stages own (a jump to a catch
 * frees it) */
static char *real_path(const char *path)
{
    char *r = realpath(path, NULL);
    if (!r)
        return NULL;
    char *own = base_strdup(r);
    base_free(r);
    if (!own)
        base_oom();
    return own;
}

static int load_file(elab *e, const char *path, ir_loc from)
{
    char *real = real_path(path);
    const char *key = real ? real : path;
    for (module *m = e->modules; m; m = m->next)
        if (strcmp(m->key, key) == 0) {
            if (m->loading)
                el_error(e, from, "import cycle: '%s' imports itself, directly or "
                                  "through other files", path);
            base_free(real);
            return !m->loading;
        }
    size_t len;
    const char *why = NULL;
    char *text = base_read_file(path, &len, &why);
    if (!text) {
        if (from.file)
            el_error(e, from, "cannot import '%s': %s", path, why);
        else
            diag_error(e->d, (ir_loc){path, 0, 0}, "cannot read file: %s", why);
        base_free(real);
        return 0;
    }
    module *m = alloc(e, sizeof *m);
    m->key = (char *)fmt(e, "%s", key);
    m->loading = 1;
    m->next = e->modules;
    e->modules = m;
    base_free(real);
    const char *file = diag_add_source(e->d, path, text, len);
    int ok = load_text(e, file, text, len);
    base_free(text);
    m->loading = 0;
    return ok;
}

/* ---------------------------------------------------------------- models */

/* A -D value: an int, float, bool or quoted string literal. */
static int parse_define(const char *s, val *out)
{
    char *end;
    errno = 0;
    long long i = strtoll(s, &end, 10);
    if (*s && !*end && errno == 0) {
        *out = int_val(i);
        return 1;
    }
    double f = strtod(s, &end);
    if (*s && !*end && errno == 0) {
        *out = float_val(f);
        return 1;
    }
    if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
        *out = bool_val(s[0] == 't');
        return 1;
    }
    size_t n = strlen(s);
    if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
        *out = (val){.k = V_STR, .s = s};
        return 2;
    }
    return 0;
}

static ir_graph *elaborate_model(elab *e, const fe_options *opt)
{
    global *model = NULL;
    for (global *g = e->globals; g; g = g->next) /* the list is newest first */
        if (g->decl->kind == AST_MODEL && (!opt->model || strcmp(g->name, opt->model) == 0) &&
            (!model || opt->model))
            model = g;
    if (!model) {
        if (opt->model)
            diag_error(e->d, (ir_loc){0}, "no model named '%s'", opt->model);
        else
            diag_error(e->d, (ir_loc){0}, "no model in the file");
        return NULL;
    }
    ast *m = model->decl;
    ir_graph_free(e->g);
    e->g = ir_graph_new(m->str);
    env en = {NULL};
    for (int i = 0; i < opt->ndefines; i++) {
        int k;
        for (k = 0; k < m->n && strcmp(m->items[k]->str, opt->define_names[i]) != 0; k++)
            ;
        if (k == m->n) {
            const char *names[64];
            int n = 0;
            for (; n < m->n && n < 64; n++)
                names[n] = m->items[n]->str;
            const char *s = diag_suggest(opt->define_names[i], names, n);
            diag_error(e->d, (ir_loc){0}, "-D %s: model '%s' has no parameter '%s'%s%s%s",
                       opt->define_names[i], m->str, opt->define_names[i],
                       s ? "; did you mean '" : "", s ? s : "", s ? "'?" : "");
        }
    }
    for (int i = 0; i < m->n; i++) {
        ast *p = m->items[i];
        val v = {.k = V_NONE};
        for (int k = opt->ndefines - 1; k >= 0; k--)
            if (strcmp(opt->define_names[k], p->str) == 0) {
                int kind = parse_define(opt->define_values[k], &v);
                if (kind == 2)
                    v.s = fmt(e, "%.*s", (int)strlen(v.s) - 2, v.s + 1);
                if (!kind) {
                    diag_error(e->d, (ir_loc){0}, "-D %s=%s: the value must be a number, "
                               "true, false or a \"string\"", p->str, opt->define_values[k]);
                    v = error_val();
                }
                break;
            }
        if (v.k == V_NONE && p->a)
            v = eval(e, &en, p->a);
        if (v.k == V_NONE) {
            el_error(e, p->loc, "model parameter '%s' has no value: give it a default or "
                                "pass -D %s=...", p->str, p->str);
            v = error_val();
        }
        env_set(e, &en, p->str, v, p->loc, 0);
    }
    if (e->d->nerrors > e->errors0)
        return NULL;
    scope s = {"", NULL, NULL};
    e->scope = &s;
    e->in_model = 1;
    val ret;
    exec_block(e, &en, m->c, &ret);
    e->in_model = 0;
    e->scope = NULL;
    if (e->d->nerrors == e->errors0 && e->g->noutputs == 0 && !e->g->loss)
        el_error(e, m->loc, "model '%s' has no output and no loss", m->str);
    if (e->d->nerrors > e->errors0)
        return NULL;
    ir_graph *g = e->g;
    e->g = NULL;
    return g;
}

static ir_graph *run(elab *e, const fe_options *opt)
{
    fe_options none = {0};
    ir_graph *g = NULL;
    if (e->d->nerrors == e->errors0)
        g = elaborate_model(e, opt ? opt : &none);
    ir_graph_free(e->g);
    base_arena_free(&e->arena);
    return g;
}

ir_graph *fe_load_file(const char *path, const fe_options *opt, diag *d)
{
    elab e = {.d = d, .errors0 = d->nerrors};
    e.g = ir_graph_new("scratch");
    int before = d->nerrors;
    load_file(&e, path, (ir_loc){0});
    if (d->nerrors > before) {
        ir_graph_free(e.g);
        base_arena_free(&e.arena);
        return NULL;
    }
    return run(&e, opt);
}

ir_graph *fe_load_string(const char *name, const char *text, size_t len,
                         const fe_options *opt, diag *d)
{
    elab e = {.d = d, .errors0 = d->nerrors};
    e.g = ir_graph_new("scratch");
    int before = d->nerrors;
    module *m = alloc(&e, sizeof *m);
    char *real = real_path(name);
    m->key = (char *)fmt(&e, "%s", real ? real : name);
    base_free(real);
    m->loading = 1;
    e.modules = m;
    load_text(&e, diag_add_source(d, name, text, len), text, len);
    m->loading = 0;
    if (d->nerrors > before) {
        ir_graph_free(e.g);
        base_arena_free(&e.arena);
        return NULL;
    }
    return run(&e, opt);
}
