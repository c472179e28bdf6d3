/* safetensors checkpoints: see checkpoint.h.  The JSON header goes through cJSON. */
#include "checkpoint.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"

#define MAX_HEADER (100u << 20)   /* the limit the reference implementation uses */

/* Tensors saved: every value with state that training changes or needs. */
static int saved(const ir_value *v)
{
    return v->kind == IR_VALUE_PARAM || v->kind == IR_VALUE_BUFFER || v->kind == IR_VALUE_STATE;
}

static const char *st_dtype(ir_dtype t)
{
    switch (t) {
    case IR_I32: return "I32";
    case IR_I64: return "I64";
    case IR_U8: return "U8";
    default: return "F32";   /* the executor keeps every float as float32 */
    }
}

/* Bytes per element of a safetensors dtype, 0 for a name the format does
 * not define. */
static int st_dtype_bytes(const char *s)
{
    static const struct { const char *name; int bytes; } types[] = {
        {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2},
        {"U16", 2}, {"F16", 2}, {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4}, {"F64", 8},
        {"I64", 8}, {"U64", 8}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (strcmp(s, types[i].name) == 0)
            return types[i].bytes;
    return 0;
}

/* A JSON number that is a whole number in [0, 2^53]: *out. */
static int whole(const cJSON *j, uint64_t *out)
{
    if (!cJSON_IsNumber(j) || !(j->valuedouble >= 0) || j->valuedouble > 9007199254740992.0 ||
        j->valuedouble != (double)(uint64_t)j->valuedouble)
        return 0;
    *out = (uint64_t)j->valuedouble;
    return 1;
}

typedef struct {
    uint64_t lo, hi;
    const char *name;
} span;

static int by_lo(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : x->hi < y->hi ? -1 : x->hi > y->hi;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The header as the safetensors format has it, before any name is matched:
 * keys once each; __metadata__ an object of strings; each tensor a dtype the
 * format defines, a shape of whole numbers and data_offsets [lo, hi) of
 * whole numbers holding exactly its bytes; the tensors side by side, no two
 * sharing a byte, covering the data to its last byte.  data_size: the
 * data's bytes, or UNKNOWN_SIZE (a stream, read after the header: then
 * *data_end, the bytes the header promises, is what must follow).  0, or -1
 * with why. */
#define UNKNOWN_SIZE UINT64_MAX
static int check_header(const cJSON *root, uint64_t data_size, uint64_t *data_end,
                        const char *path, char *err, size_t errlen)
{
    int n = cJSON_GetArraySize(root), ns = 0, nk = 0;
    span *s = base_xcalloc((size_t)n + 1, sizeof *s);
    const char **keys = base_xcalloc((size_t)n + 1, sizeof *keys);
    const cJSON *t, *u;
    int rc = -1;
    cJSON_ArrayForEach(t, root) keys[nk++] = t->string;
    qsort(keys, (size_t)nk, sizeof *keys, by_name);
    for (int i = 1; i < nk; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0) {
            base_fail(err, errlen, "%s: the header names '%.80s' twice", path, keys[i]);
            goto done;
        }
    cJSON_ArrayForEach(t, root) {
        if (strcmp(t->string, "__metadata__") == 0) {
            const cJSON *kv;
            int strings = cJSON_IsObject(t);
            cJSON_ArrayForEach(kv, t) strings &= cJSON_IsString(kv);
            if (!strings) {
                base_fail(err, errlen, "%s: __metadata__ is not an object of strings", path);
                goto done;
            }
            continue;
        }
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
        uint64_t numel = 1, lo, hi, d;
        int es = cJSON_IsString(dt) ? st_dtype_bytes(dt->valuestring) : 0, ok = es > 0;
        ok = ok && cJSON_IsArray(shape) && cJSON_IsArray(offs) && cJSON_GetArraySize(offs) == 2 &&
             whole(cJSON_GetArrayItem(offs, 0), &lo) && whole(cJSON_GetArrayItem(offs, 1), &hi);
        for (u = ok ? shape->child : NULL; u; u = u->next) {
            ok = ok && whole(u, &d) && (d == 0 || numel <= ((uint64_t)1 << 53) / d);
            numel *= ok ? d : 1;
        }
        if (!ok || lo > hi || hi > data_size || hi - lo != numel * (uint64_t)es) {
            base_fail(err, errlen, "%s: tensor '%.80s': %s", path, t->string,
                      !ok ? "not a dtype of the format, a shape of whole numbers and two whole "
                            "data offsets"
                          : hi > data_size || lo > hi ? "its data offsets are outside the data"
                                                      : "its data offsets do not hold its shape");
            goto done;
        }
        s[ns++] = (span){lo, hi, t->string};
    }
    qsort(s, (size_t)ns, sizeof *s, by_lo);
    uint64_t end = 0;
    for (int i = 0; i < ns; i++) {
        if (s[i].lo < end) {
            base_fail(err, errlen, "%s: tensors '%.80s' and '%.80s' share bytes", path,
                      s[i - 1].name, s[i].name);
            goto done;
        }
        if (s[i].lo > end) {
            base_fail(err, errlen, "%s: data bytes [%llu, %llu) belong to no tensor", path,
                      (unsigned long long)end, (unsigned long long)s[i].lo);
            goto done;
        }
        end = s[i].hi;
    }
    if (data_size != UNKNOWN_SIZE && end != data_size) {
        base_fail(err, errlen, "%s: %llu bytes of data after the last tensor", path,
                  (unsigned long long)(data_size - end));
        goto done;
    }
    if (data_end)
        *data_end = end;
    rc = 0;
done:
    base_free(s);
    base_free(keys);
    return rc;
}

/* One tensor of a checkpoint: a param, buffer or state value of the graph, or
 * the whole tensor of a graph's shards (a tensor-parallel program), saved under
 * the whole's name so that the file is the single-device program's. */
typedef struct {
    const char *name;
    ir_type type;
    const ir_value *v;          /* the value, or the whole's first shard */
} entry;

/* The file's tensor of entry e: under its name, or else under the name it had
 * in the model it came from (ir_value.source: a PyTorch state_dict key). */
static const cJSON *tensor_of(const cJSON *root, const char *name, const char *source)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, name);
    return t || !source ? t : cJSON_GetObjectItemCaseSensitive(root, source);
}

/* The tensors of g's checkpoint, in the order of g->params (a whole at its
 * first shard); the parameters and buffers alone where weights.  Returns NULL
 * when memory runs out. */
static entry *entries_of(const ir_graph *g, int *n, int weights)
{
    entry *e = base_malloc((size_t)(g->nparams ? g->nparams : 1) * sizeof *e);
    *n = 0;
    if (!e)
        return NULL;
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        if (!saved(v) || (weights && v->kind == IR_VALUE_STATE))
            continue;
        int seen = 0;
        for (int j = 0; v->shard.of && j < *n && !seen; j++)
            seen = e[j].v->shard.of && strcmp(e[j].name, v->shard.of) == 0;
        if (!seen)
            e[(*n)++] = v->shard.of ? (entry){v->shard.of, v->shard.type, v}
                                    : (entry){v->name, v->type, v};
    }
    return e;
}

/* Shard s as [outer, size, inner] inside its whole's [outer, full, inner]. */
typedef struct {
    int64_t outer, size, full, inner, start;
} slab;

static slab slab_of(const ir_value *s)
{
    slab b = {1, s->type.dims[s->shard.axis], s->shard.type.dims[s->shard.axis], 1,
              s->shard.start};
    for (int k = 0; k < s->type.rank; k++)
        if (k < s->shard.axis)
            b.outer *= s->type.dims[k];
        else if (k > s->shard.axis)
            b.inner *= s->type.dims[k];
    return b;
}

static int assemble(const ir_graph *g, rt_exec *x, const entry *e, char *out, char *err,
                    size_t errlen);

int rt_exec_read_param(const ir_graph *g, rt_exec *x, const char *name, const ir_type *t,
                       void *out, char *err, size_t errlen)
{
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        if (v->shard.of ? strcmp(v->shard.of, name) != 0 : strcmp(v->name, name) != 0)
            continue;
        if (!ir_type_eq(v->shard.of ? &v->shard.type : &v->type, t))
            return base_fail(err, errlen, "%s has another type here", name);
        if (v->shard.of) {
            entry e = {v->shard.of, v->shard.type, v};
            return assemble(g, x, &e, out, err, errlen);
        }
        const void *src = rt_exec_data(x, v);
        if (!src)
            continue; /* a whole no device holds (its shards are the data) */
        memcpy(out, src, (size_t)ir_type_numel(t) * ir_host_size(t->dtype));
        return 0;
    }
    return base_fail(err, errlen, "the program holds no %s", name);
}

int rt_exec_write_param(const ir_graph *g, rt_exec *x, const char *name, const ir_type *t,
                        const void *in, char *err, size_t errlen)
{
    size_t es = ir_host_size(t->dtype);
    int found = 0;
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        if (!saved(v) || strcmp(v->shard.of ? v->shard.of : v->name, name) != 0)
            continue;
        if (!ir_type_eq(v->shard.of ? &v->shard.type : &v->type, t))
            return base_fail(err, errlen, "%s has another type here", name);
        char *dst = rt_exec_data(x, v);
        if (!dst)
            continue; /* a whole no device holds (its shards are the data), or another
                         rank's shard */
        slab b = v->shard.of ? slab_of(v) : (slab){1, 1, 1, ir_type_numel(&v->type), 0};
        size_t row = (size_t)(b.size * b.inner) * es;
        for (int64_t o = 0; o < b.outer; o++)
            memcpy(dst + (size_t)o * row,
                   (const char *)in + (size_t)((o * b.full + b.start) * b.inner) * es, row);
        found = 1;
    }
    return found ? 0 : base_fail(err, errlen, "the program holds no %s", name);
}

/* The whole tensor of entry e (a shard's) assembled from every shard of it in
 * g, into out.  Fails when the shards leave a part of it uncovered or a shard
 * has no data (no device holds it). */
static int assemble(const ir_graph *g, rt_exec *x, const entry *e, char *out, char *err,
                    size_t errlen)
{
    size_t es = ir_host_size(e->type.dtype);
    int64_t full = e->type.dims[e->v->shard.axis], covered = 0;
    char *seen = base_calloc((size_t)full, 1);
    if (!seen)
        return base_fail(err, errlen, "out of memory");
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *s = g->params[i];
        if (!saved(s) || !s->shard.of || strcmp(s->shard.of, e->name) != 0)
            continue;
        const char *src = rt_exec_data(x, s);
        if (!src) {
            base_free(seen);
            return base_fail(err, errlen, "no device holds %s, a shard of %s", s->name, e->name);
        }
        slab b = slab_of(s);
        size_t row = (size_t)(b.size * b.inner) * es;
        for (int64_t o = 0; o < b.outer; o++)
            memcpy(out + (size_t)((o * b.full + b.start) * b.inner) * es, src + (size_t)o * row,
                   row);
        for (int64_t k = b.start; k < b.start + b.size; k++)
            covered += !seen[k], seen[k] = 1;
    }
    base_free(seen);
    if (covered != full)
        return base_fail(err, errlen, "cannot save %s: its shards hold %lld of its %lld slices along "
                    "axis %d", e->name, (long long)covered, (long long)full, e->v->shard.axis);
    return 0;
}

/* The JSON header of the n tensors es with meta (NULL: out of memory), and
 * the size of the largest whole of a shard among them in *largest. */
static char *header_of(const entry *es, int n, const rt_ckpt_meta *meta, size_t *largest)
{
    cJSON *root = cJSON_CreateObject(), *md = cJSON_CreateObject();
    if (!root || !md) {
        cJSON_Delete(root);
        cJSON_Delete(md);
        return NULL;
    }
    cJSON_AddItemToObject(root, "__metadata__", md);
    for (int i = 0; meta && i < meta->n; i++)
        cJSON_AddStringToObject(md, meta->keys[i], meta->values[i]);
    size_t offset = 0;
    *largest = 0;
    for (int i = 0; i < n; i++) {
        const ir_type *ty = &es[i].type;
        size_t bytes = (size_t)ir_type_numel(ty) * ir_host_size(ty->dtype);
        if (es[i].v->shard.of && bytes > *largest)
            *largest = bytes;
        cJSON *t = cJSON_CreateObject(), *shape = cJSON_CreateArray(), *offs = cJSON_CreateArray();
        cJSON_AddStringToObject(t, "dtype", st_dtype(ty->dtype));
        for (int k = 0; k < ty->rank; k++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)ty->dims[k]));
        cJSON_AddItemToObject(t, "shape", shape);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(offset + bytes)));
        cJSON_AddItemToObject(t, "data_offsets", offs);
        cJSON_AddItemToObject(root, es[i].name, t);
        offset += bytes;
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return json;
}

int rt_checkpoint_save(const ir_graph *g, rt_exec *x, const char *path,
                       const rt_ckpt_meta *meta, char *err, size_t errlen)
{
    /* an MPI rank other than 0 holds only some (shards: assemble says which) */
    for (int i = 0; i < g->nparams; i++)
        if (saved(g->params[i]) && !g->params[i]->shard.of && !rt_exec_data(x, g->params[i]))
            return base_fail(err, errlen, "%s: this executor holds no copy of %s", path,
                        g->params[i]->name);
    int n;
    size_t largest = 0;
    entry *es = entries_of(g, &n, 0);
    char *json = es ? header_of(es, n, meta, &largest) : NULL;
    char *whole = largest ? base_malloc(largest) : NULL;
    int rc = -1;
    base_out o = {0};
    if (!json || (largest && !whole)) {
        base_fail(err, errlen, "%s: out of memory", path);
        goto done;
    }
    size_t hlen = strlen(json), padded = (hlen + 7) & ~(size_t)7;
    /* the wholes first: a shard that cannot be saved leaves no file behind */
    for (int i = 0; i < n; i++)
        if (es[i].v->shard.of && assemble(g, x, &es[i], whole, err, errlen) != 0)
            goto done;
    if (base_out_open(&o, path, err, errlen) != 0)
        goto done;
    int fd = fileno(o.f); /* written unbuffered, f never written through */
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    int bad = base_write_all(fd, len8, 8) || base_write_all(fd, json, hlen) ||
              base_write_all(fd, "        ", padded - hlen);
    for (int i = 0; !bad && i < n; i++) {
        size_t bytes = (size_t)ir_type_numel(&es[i].type) * ir_host_size(es[i].type.dtype);
        if (es[i].v->shard.of)
            bad = assemble(g, x, &es[i], whole, err, errlen) != 0 || base_write_all(fd, whole, bytes);
        else
            bad = base_write_all(fd, rt_exec_data(x, es[i].v), bytes);
    }
    if (bad) {
        base_fail(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        base_out_abandon(&o);
        goto done;
    }
    if (base_out_commit(&o, err, errlen) != 0)
        goto done;
    rc = 0;
done:
    base_free(json);
    base_free(whole);
    base_free(es);
    return rc;
}

int rt_checkpoint_encode_init(const ir_graph *g, uint64_t seed, void **out, size_t *size,
                              char *err, size_t errlen)
{
    int n;
    size_t largest = 0;
    entry *es = entries_of(g, &n, 0);
    char *json = es ? header_of(es, n, NULL, &largest) : NULL;
    size_t hlen = json ? strlen(json) : 0, padded = (hlen + 7) & ~(size_t)7, total = 8 + padded;
    for (int i = 0; json && i < n; i++)
        total += (size_t)ir_type_numel(&es[i].type) * ir_host_size(es[i].type.dtype);
    unsigned char *buf = json ? base_malloc(total) : NULL;
    if (!buf) {
        base_free(json);
        base_free(es);
        return base_fail(err, errlen, "out of memory");
    }
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, json, hlen);
    memset(buf + 8 + hlen, ' ', padded - hlen);
    unsigned char *at = buf + 8 + padded;
    for (int i = 0; i < n; i++) {
        /* the whole tensor, a shard's drawn as its whole (its name, its type) */
        ir_value whole = *es[i].v;
        whole.name = es[i].name;
        whole.type = es[i].type;
        whole.shard.of = NULL;
        size_t bytes = (size_t)ir_type_numel(&whole.type) * ir_host_size(whole.type.dtype);
        if (ir_is_float(whole.type.dtype))
            ir_init_fill(&whole, seed, (float *)at);
        else
            memset(at, 0, bytes); /* integer state starts at 0 */
        at += bytes;
    }
    base_free(json);
    base_free(es);
    *out = buf;
    *size = total;
    return 0;
}

/* Appends one line to the difference list in err. */
static void add_line(char *err, size_t errlen, int *count, const char *fmt, ...)
{
    size_t used = strlen(err);
    if (++*count > 20 || used + 2 >= errlen) {
        if (*count == 21 && used + 8 < errlen)
            strcat(err, "\n  ...");
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    err[used++] = '\n';
    vsnprintf(err + used, errlen - used, fmt, ap);
    va_end(ap);
}

static int shape_of(const cJSON *t, ir_type *out)
{
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
    if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > IR_MAX_RANK)
        return 0;
    out->rank = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, shape) {
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 9.0e15 ||
            d->valuedouble != (double)(int64_t)d->valuedouble)
            return 0;
        out->dims[out->rank++] = (int64_t)d->valuedouble;
    }
    return 1;
}

/* The 8-byte length and the JSON header that follows it, from f (read as
 * it arrives: a pipe or a device too), into *root; data_size: the bytes
 * after the header where known (a file or bytes), else UNKNOWN_SIZE.  The
 * header as check_header has it.  0, or -1 with why. */
static int read_header(FILE *f, uint64_t data_size_known, const char *path, cJSON **root,
                       uint64_t *hlen_out, uint64_t *data_end, char *err, size_t errlen)
{
    unsigned char len8[8];
    uint64_t hlen = 0;
    *root = NULL;
    if (fread(len8, 1, 8, f) != 8)
        return base_fail(err, errlen, "%s: not a safetensors file (shorter than its 8-byte "
                         "header length)", path);
    for (int i = 0; i < 8; i++)
        hlen |= (uint64_t)len8[i] << (8 * i);
    if (data_size_known != UNKNOWN_SIZE && (hlen < 2 || hlen > MAX_HEADER ||
                                            hlen > data_size_known))
        return base_fail(err, errlen, "%s: not a safetensors file (header length %llu for a "
                         "file of %llu bytes)", path, (unsigned long long)hlen,
                         (unsigned long long)data_size_known + 8);
    if (hlen < 2 || hlen > MAX_HEADER)
        return base_fail(err, errlen, "%s: not a safetensors file (a header length of %llu "
                         "bytes)", path, (unsigned long long)hlen);
    char *header = base_malloc(hlen + 1);
    if (!header)
        return base_fail(err, errlen, "%s: out of memory", path);
    if (fread(header, 1, hlen, f) != hlen) {
        base_free(header);
        return base_fail(err, errlen, "%s: truncated header", path);
    }
    header[hlen] = '\0';
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(header, hlen, &end, 0);
    int rc = -1;
    if (!cJSON_IsObject(j)) {
        base_fail(err, errlen, "%s: the header is not a JSON object", path);
        goto done;
    }
    while (end && end < header + hlen && *end == ' ') /* the padding writers add */
        end++;
    if (!end || end != header + hlen) {
        base_fail(err, errlen, "%s: the header has more after its JSON object", path);
        goto done;
    }
    uint64_t data = data_size_known == UNKNOWN_SIZE ? UNKNOWN_SIZE : data_size_known - hlen;
    if (check_header(j, data, data_end, path, err, errlen) != 0)
        goto done;
    *root = j, j = NULL;
    *hlen_out = hlen;
    rc = 0;
done:
    cJSON_Delete(j);
    base_free(header);
    return rc;
}

/* rt_checkpoint_load from f, a file or bytes, which messages call path; x
 * NULL: the checks alone; weights: the parameters and buffers alone
 * (rt_checkpoint_load_weights).  Closes f. */
static int load(const ir_graph *g, rt_exec *x, FILE *f, const char *path, int weights,
                rt_ckpt_meta *meta, char *err, size_t errlen)
{
    cJSON *root = NULL;
    int rc = -1;
    uint64_t hlen = 0;
    if (fseek(f, 0, SEEK_END) != 0) {
        base_fail(err, errlen, "%s: cannot seek", path);
        goto done;
    }
    long fsize = ftell(f);
    rewind(f);
    if (fsize < 8) {
        base_fail(err, errlen, "%s: not a safetensors file (shorter than its 8-byte header length)", path);
        goto done;
    }
    if (read_header(f, (uint64_t)fsize - 8, path, &root, &hlen, NULL, err, errlen) != 0)
        goto done;
    uint64_t data_size = (uint64_t)fsize - 8 - hlen;

    /* Compare the file's tensors with the graph's, collecting every difference. */
    int n;
    entry *es = entries_of(g, &n, weights);
    if (!es) {
        base_fail(err, errlen, "%s: out of memory", path);
        goto done;
    }
    snprintf(err, errlen, "%s does not match the model:", path);
    int ndiff = 0, training = 0;
    for (int i = 0; i < g->nparams && !weights; i++)
        training |= g->params[i]->kind == IR_VALUE_STATE;
    const cJSON *t;
    cJSON_ArrayForEach(t, root) {
        if (strcmp(t->string, "__metadata__") == 0)
            continue;
        int i = 0;
        while (i < n && strcmp(es[i].name, t->string) != 0 &&
               !(es[i].v->source && strcmp(es[i].v->source, t->string) == 0))
            i++;
        /* an inference graph takes the weights of a training checkpoint and
           leaves its optimizer state */
        if (i == n && training)
            add_line(err, errlen, &ndiff, "  %s: in the checkpoint, not in the model", t->string);
    }
    for (int i = 0; i < n; i++) {
        const char *name = es[i].name;
        const ir_type *ty = &es[i].type;
        t = tensor_of(root, name, es[i].v->source);
        char a[128], b[128];
        ir_type ft = {ty->dtype, 0, {0}};
        if (!t) {
            const char *src = es[i].v->source;
            if (src && strcmp(src, name) != 0)
                add_line(err, errlen, &ndiff, "  %s: in the model, not in the checkpoint (nor as "
                         "%s, its name in the model it came from)", name, src);
            else
                add_line(err, errlen, &ndiff, "  %s: in the model, not in the checkpoint", name);
            continue;
        }
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
        if (!cJSON_IsObject(t) || !cJSON_IsString(dt) || !shape_of(t, &ft) ||
            !cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2) {
            add_line(err, errlen, &ndiff, "  %s: malformed entry", name);
            continue;
        }
        if (strcmp(dt->valuestring, st_dtype(ty->dtype)) != 0 || !ir_type_eq(&ft, ty)) {
            /* the file's dtype by its own name, then its shape: [10, 784] */
            add_line(err, errlen, &ndiff, "  %s: %s %s in the checkpoint, %s in the model", name,
                     dt->valuestring, strchr(ir_type_str(&ft, a, sizeof a), '['),
                     ir_type_str(ty, b, sizeof b));
            continue;
        }
        double lo = cJSON_GetArrayItem(offs, 0)->valuedouble, hi = cJSON_GetArrayItem(offs, 1)->valuedouble;
        double bytes = (double)ir_type_numel(ty) * (double)ir_host_size(ty->dtype);
        if (!(lo >= 0 && hi <= (double)data_size && hi - lo == bytes))
            add_line(err, errlen, &ndiff, "  %s: data offsets [%.0f, %.0f) do not fit the file",
                     name, lo, hi);
    }
    if (ndiff || !x) {
        base_free(es);
        rc = ndiff ? -1 : (err[0] = '\0', 0);
        goto done;
    }

    /* Everything fits: read the data, each shard its slice of its whole, into
       the copies x holds (an MPI rank's executor holds some, and reads only
       those). */
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        if (!saved(v) || (weights && v->kind == IR_VALUE_STATE) || !rt_exec_data(x, v))
            continue;
        const char *name = v->shard.of ? v->shard.of : v->name;
        t = tensor_of(root, name, v->source);
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
        long lo = (long)cJSON_GetArrayItem(offs, 0)->valuedouble;
        size_t es_ = ir_host_size(v->type.dtype);
        slab b = v->shard.of ? slab_of(v) : (slab){1, 1, 1, ir_type_numel(&v->type), 0};
        size_t row = (size_t)(b.size * b.inner) * es_;
        char *dst = rt_exec_data(x, v);
        for (int64_t o = 0; o < b.outer; o++) {
            long at = 8 + (long)hlen + lo + (long)((o * b.full + b.start) * b.inner) * (long)es_;
            if (!dst || fseek(f, at, SEEK_SET) != 0 ||
                fread(dst + (size_t)o * row, 1, row, f) != row) {
                base_fail(err, errlen, "%s: cannot read the data of %s", path, v->name);
                base_free(es);
                goto done;
            }
        }
    }
    base_free(es);
    rt_exec_weights_changed(x);
    if (meta) {
        memset(meta, 0, sizeof *meta);
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(root, "__metadata__"), *kv;
        cJSON_ArrayForEach(kv, md)
            if (cJSON_IsString(kv))
                rt_ckpt_meta_set(meta, kv->string, kv->valuestring);
    }
    err[0] = '\0';
    rc = 0;
done:
    cJSON_Delete(root);
    fclose(f);
    return rc;
}

/* The file at path opened for reading, or NULL with why (a folder is not
 * what, a checkpoint or a safetensors file). */
static FILE *open_file(const char *path, const char *what, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return base_fail(err, errlen, "%s: is a directory, not %s", path, what), NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        base_fail(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    return f;
}

/* load() of the file at path. */
static int load_file(const ir_graph *g, rt_exec *x, const char *path, int weights,
                     rt_ckpt_meta *meta, char *err, size_t errlen)
{
    FILE *f = open_file(path, "a checkpoint", err, errlen);
    return f ? load(g, x, f, path, weights, meta, err, errlen) : -1;
}

int rt_checkpoint_load(const ir_graph *g, rt_exec *x, const char *path, rt_ckpt_meta *meta,
                       char *err, size_t errlen)
{
    return load_file(g, x, path, 0, meta, err, errlen);
}

int rt_checkpoint_load_weights(const ir_graph *g, rt_exec *x, const char *path, char *err,
                               size_t errlen)
{
    return load_file(g, x, path, 1, NULL, err, errlen);
}

int rt_checkpoint_load_bytes(const ir_graph *g, rt_exec *x, const void *data, size_t size,
                             const char *name, rt_ckpt_meta *meta, char *err, size_t errlen)
{
    FILE *f = size ? fmemopen((void *)data, size, "rb") : NULL;
    if (!f)
        return base_fail(err, errlen, "%s: not a safetensors file (%s)", name,
                         size ? strerror(errno) : "empty");
    return load(g, x, f, name, 0, meta, err, errlen);
}

int rt_safetensors_read(const char *path, rt_safetensors *st, char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    FILE *f = open_file(path, "a safetensors file", err, errlen);
    if (!f)
        return -1;
    struct stat sb;
    /* a regular file's size is known before anything is read; a pipe's or a
       device's is what its header promises, checked as the data arrives */
    uint64_t known = UNKNOWN_SIZE, hlen = 0, want = 0, have = 0;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode)) {
        if (sb.st_size < 8) {
            fclose(f);
            return base_fail(err, errlen, "%s: not a safetensors file (shorter than its 8-byte "
                             "header length)", path);
        }
        known = (uint64_t)sb.st_size - 8;
    }
    cJSON *root = NULL;
    int rc = -1;
    if (read_header(f, known, path, &root, &hlen, &want, err, errlen) != 0)
        goto done;
    for (uint64_t cap = 0; have < want;) {
        if (have == cap) {
            cap = want - cap > cap + (1u << 20) ? cap + cap + (1u << 20) : want;
            unsigned char *d = cap <= SIZE_MAX ? base_realloc(st->data, (size_t)cap) : NULL;
            if (!d) {
                base_fail(err, errlen, "%s: out of memory for %llu bytes of data", path,
                          (unsigned long long)want);
                goto done;
            }
            st->data = d;
        }
        size_t got = fread(st->data + have, 1, (size_t)(cap - have), f);
        if (got == 0)
            break;
        have += got;
    }
    if (have < want) {
        base_fail(err, errlen, "%s: truncated: its header promises %llu bytes of data, it "
                  "holds %llu", path, (unsigned long long)want, (unsigned long long)have);
        goto done;
    }
    if (fgetc(f) != EOF) {
        base_fail(err, errlen, "%s: bytes after the %llu bytes of data its header promises",
                  path, (unsigned long long)want);
        goto done;
    }
    st->t = base_xcalloc((size_t)cJSON_GetArraySize(root) + 1, sizeof *st->t);
    const cJSON *t, *u;
    cJSON_ArrayForEach(t, root) {
        if (strcmp(t->string, "__metadata__") == 0)
            continue;
        rt_st_tensor *e = &st->t[st->n++];
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
        e->name = t->string;
        e->dtype = cJSON_GetObjectItemCaseSensitive(t, "dtype")->valuestring;
        if (cJSON_GetArraySize(shape) > IR_MAX_RANK) {
            base_fail(err, errlen, "%s: tensor '%.80s' has %d dimensions; gnc holds at most %d",
                      path, e->name, cJSON_GetArraySize(shape), IR_MAX_RANK);
            goto done;
        }
        cJSON_ArrayForEach(u, shape) e->dims[e->rank++] = (int64_t)u->valuedouble;
        uint64_t lo = (uint64_t)cJSON_GetArrayItem(offs, 0)->valuedouble;
        e->bytes = (uint64_t)cJSON_GetArrayItem(offs, 1)->valuedouble - lo;
        e->data = st->data ? st->data + lo : NULL;
    }
    st->header = root, root = NULL;
    rc = 0;
done:
    cJSON_Delete(root);
    fclose(f);
    if (rc)
        rt_safetensors_free(st);
    return rc;
}

void rt_safetensors_free(rt_safetensors *st)
{
    cJSON_Delete(st->header);
    base_free(st->t);
    base_free(st->data);
    memset(st, 0, sizeof *st);
}

void rt_ckpt_meta_set(rt_ckpt_meta *m, const char *key, const char *value)
{
    int i;
    for (i = 0; i < m->n && strcmp(m->keys[i], key) != 0; i++)
        ;
    if (i == m->n) {
        if (m->n == m->cap) {
            m->cap = m->cap ? 2 * m->cap : 8;
            m->keys = base_xrealloc(m->keys, (size_t)m->cap * sizeof *m->keys);
            m->values = base_xrealloc(m->values, (size_t)m->cap * sizeof *m->values);
        }
        m->keys[m->n++] = base_xstrdup(key);
    } else {
        base_free(m->values[i]);
    }
    m->values[i] = base_xstrdup(value);
}

const char *rt_ckpt_meta_get(const rt_ckpt_meta *m, const char *key)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->keys[i], key) == 0)
            return m->values[i] ? m->values[i] : "";
    return NULL;
}

void rt_ckpt_meta_free(rt_ckpt_meta *m)
{
    for (int i = 0; i < m->n; i++) {
        base_free(m->keys[i]);
        base_free(m->values[i]);
    }
    base_free(m->keys);
    base_free(m->values);
    memset(m, 0, sizeof *m);
}
