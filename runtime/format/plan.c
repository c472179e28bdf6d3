/* Plan files: see plan.h, and docs/plan.md for the format.
 *
 * The encoder lays a file out in one way only: the header, the section table,
 * then each section's bytes in table order, each starting at the next multiple
 * of 8, zeros between them and after the last.  The decoder demands exactly
 * that layout, so every byte of a file is covered by a check: the header and
 * the table by the header's CRC-32, a section's bytes by its own, the padding
 * by being zero.  A single flipped bit anywhere is therefore always caught.
 *
 * Decoding, in order: the header (magic, version, flags, counts, the file's
 * size, its CRC); each table entry (flags, device, place, CRC); the kinds
 * (one program, one memory plan, at most one meta; unknown ones skipped unless
 * required); the program (ir_parse, ir_verify, its device count and training
 * flag against the header); the memory plan (its counts against the header
 * and the program, every offset inside its arena, each arena the end of its
 * last buffer, then mp_check's proof that no two live buffers overlap); the
 * meta lines.  Sizes read from the file are uint64_t and are compared against
 * what is left of the file before anything is added to or multiplied by them,
 * so no arithmetic on them can overflow. */
#include "plan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base.h"
#include "checkpoint.h"
#include "diag.h"

#define META_MAX_KEY 64
#define META_MAX_VALUE 4096

/* ---- little-endian fields ---- */

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint32_t crc_of(const unsigned char *p, uint64_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    while (n > 0) { /* zlib takes uInt lengths */
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

/* The header's CRC: its first 36 bytes, then the table. */
static uint32_t header_crc(const unsigned char *data, uint32_t nsections)
{
    uLong c = crc32(0L, Z_NULL, 0);
    c = crc32(c, data, RT_PLAN_HEADER_BYTES - 4);
    c = crc32(c, data + RT_PLAN_HEADER_BYTES, (uInt)nsections * RT_PLAN_ENTRY_BYTES);
    return (uint32_t)c;
}

static uint64_t align8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

/* ORDER: rt_section_kind */
const char *rt_section_name(uint32_t kind)
{
    switch (kind) {
    case RT_SECTION_PROGRAM: return "program";
    case RT_SECTION_MEMORY: return "memory";
    case RT_SECTION_META: return "meta";
    case RT_SECTION_CUDA_SOURCE: return "cuda_source";
    case RT_SECTION_KERNEL_IMAGE: return "kernel_image";
    case RT_SECTION_STEPS: return "steps";
    case RT_SECTION_COMM_GROUPS: return "comm_groups";
    case RT_SECTION_REGIONS: return "regions";
    case RT_SECTION_WEIGHTS: return "weights";
    case RT_SECTION_TUNING: return "tuning";
    default: return NULL;
    }
}

int rt_section_is_read(uint32_t kind)
{
    return kind == RT_SECTION_PROGRAM || kind == RT_SECTION_MEMORY || kind == RT_SECTION_META ||
           kind == RT_SECTION_CUDA_SOURCE || kind == RT_SECTION_KERNEL_IMAGE ||
           kind == RT_SECTION_TUNING || kind == RT_SECTION_WEIGHTS;
}

int rt_plan_is_plan(const void *data, size_t size)
{
    return size >= 8 && memcmp(data, RT_PLAN_MAGIC, 8) == 0;
}

static int meta_key_ok(const char *k, size_t n)
{
    if (n == 0 || n > META_MAX_KEY)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' && k[i] <= '9') || k[i] == '_' ||
              k[i] == '.' || k[i] == '-'))
            return 0;
    return 1;
}

static int meta_value_ok(const char *v, size_t n)
{
    if (n > META_MAX_VALUE)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] < 0x20 || v[i] > 0x7e)
            return 0;
    return 1;
}

/* ---------------------------------------------------------------- writing */

typedef struct {
    uint32_t kind, flags, device;
    const unsigned char *data;
    size_t size;
} out_section;

int rt_plan_encode(const ir_graph *g, const mp_plan *mp, const rt_plan_kv *meta, int nmeta,
                   unsigned char **data, size_t *size, char *err, size_t errlen)
{
    return rt_plan_encode_with(g, mp, meta, nmeta, NULL, 0, data, size, err, errlen);
}

int rt_plan_encode_with(const ir_graph *g, const mp_plan *mp, const rt_plan_kv *meta, int nmeta,
                        const rt_plan_blob *extra, int nextra, unsigned char **data,
                        size_t *size, char *err, size_t errlen)
{
    *data = NULL;
    *size = 0;
    int ndev = ir_graph_devices(g);
    if (mp->ndevices != ndev)
        return base_fail(err, errlen, "the memory plan has %d devices, the program %d", mp->ndevices,
                    ndev);
    if (nmeta < 0 || nmeta > RT_PLAN_MAX_META)
        return base_fail(err, errlen, "%d meta lines, more than %d", nmeta, RT_PLAN_MAX_META);
    for (int i = 0; i < nmeta; i++) {
        if (!meta_key_ok(meta[i].key, strlen(meta[i].key)))
            return base_fail(err, errlen, "meta key '%s' is not 1 to %d of [a-z0-9_.-]", meta[i].key,
                        META_MAX_KEY);
        if (!meta_value_ok(meta[i].value, strlen(meta[i].value)))
            return base_fail(err, errlen, "meta value of %s is not up to %d bytes of printable ASCII",
                        meta[i].key, META_MAX_VALUE);
        for (int j = 0; j < i; j++)
            if (strcmp(meta[i].key, meta[j].key) == 0)
                return base_fail(err, errlen, "meta key %s given twice", meta[i].key);
    }

    /* the program */
    char *text = NULL;
    size_t text_len = 0;
    FILE *f = open_memstream(&text, &text_len);
    if (!f)
        return base_fail(err, errlen, "out of memory");
    ir_print(g, f);
    if (fclose(f) != 0 || !text) {
        base_free(text);
        return base_fail(err, errlen, "out of memory");
    }

    /* the memory plan */
    uint64_t nres = 0;
    ir_for_each_node(g, n)
        nres += (uint64_t)n->nout;
    size_t mem_len = 8 + 8 * (size_t)ndev + 8 + 8 * (size_t)nres;
    unsigned char *mem = base_calloc(1, mem_len);
    /* the meta lines */
    size_t meta_len = 0;
    for (int i = 0; i < nmeta; i++)
        meta_len += strlen(meta[i].key) + strlen(meta[i].value) + 2;
    char *mtext = base_malloc(meta_len + 1);
    if (!mem || !mtext) {
        base_free(text), base_free(mem), base_free(mtext);
        return base_fail(err, errlen, "out of memory");
    }
    put32(mem, (uint32_t)ndev);
    for (int d = 0; d < ndev; d++)
        put64(mem + 8 + 8 * (size_t)d, (uint64_t)mp->device_bytes[d]);
    unsigned char *p = mem + 8 + 8 * (size_t)ndev;
    put64(p, nres);
    p += 8;
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nout; i++, p += 8) {
            int id = n->out[i]->id;
            put64(p, (uint64_t)(id < mp->nvalues ? mp->offset_by_id[id] : -1));
        }
    char *m = mtext;
    for (int i = 0; i < nmeta; i++)
        m += sprintf(m, "%s=%s\n", meta[i].key, meta[i].value);

    if (nextra < 0 || nextra > RT_PLAN_MAX_SECTIONS - 3) {
        base_free(text), base_free(mem), base_free(mtext);
        return base_fail(err, errlen, "%d sections, more than a plan holds", nextra + 3);
    }
    out_section *secs = base_malloc((3 + (size_t)nextra) * sizeof *secs);
    if (!secs) {
        base_free(text), base_free(mem), base_free(mtext);
        return base_fail(err, errlen, "out of memory");
    }
    secs[0] = (out_section){RT_SECTION_PROGRAM, RT_SECTION_REQUIRED, RT_PLAN_ALL_DEVICES,
                            (const unsigned char *)text, text_len};
    secs[1] = (out_section){RT_SECTION_MEMORY, RT_SECTION_REQUIRED, RT_PLAN_ALL_DEVICES, mem,
                            mem_len};
    secs[2] = (out_section){RT_SECTION_META, 0, RT_PLAN_ALL_DEVICES,
                            (const unsigned char *)mtext, meta_len};
    for (int i = 0; i < nextra; i++)
        secs[3 + i] = (out_section){extra[i].kind, extra[i].flags, extra[i].device,
                                    extra[i].data, extra[i].size};
    uint32_t nsec = 3 + (uint32_t)nextra;
    uint64_t total = align8(RT_PLAN_HEADER_BYTES + (uint64_t)nsec * RT_PLAN_ENTRY_BYTES);
    for (uint32_t i = 0; i < nsec; i++)
        total = align8(total + secs[i].size);
    unsigned char *buf = base_calloc(1, (size_t)total);
    if (!buf) {
        base_free(text), base_free(mem), base_free(mtext), base_free(secs);
        return base_fail(err, errlen, "out of memory");
    }
    memcpy(buf, RT_PLAN_MAGIC, 8);
    put32(buf + 8, RT_PLAN_VERSION);
    put32(buf + 12, g->nupdates > 0 ? RT_PLAN_TRAINING : 0);
    put32(buf + 16, (uint32_t)ndev);
    put32(buf + 20, nsec);
    put64(buf + 24, total);
    uint64_t at = align8(RT_PLAN_HEADER_BYTES + (uint64_t)nsec * RT_PLAN_ENTRY_BYTES);
    for (uint32_t i = 0; i < nsec; i++) {
        unsigned char *e = buf + RT_PLAN_HEADER_BYTES + (size_t)i * RT_PLAN_ENTRY_BYTES;
        put32(e, secs[i].kind);
        put32(e + 4, secs[i].flags);
        put32(e + 8, secs[i].device);
        put32(e + 12, crc_of(secs[i].data, secs[i].size));
        put64(e + 16, at);
        put64(e + 24, secs[i].size);
        if (secs[i].size)
            memcpy(buf + at, secs[i].data, secs[i].size);
        at = align8(at + secs[i].size);
    }
    put32(buf + 36, header_crc(buf, nsec));
    base_free(text), base_free(mem), base_free(mtext), base_free(secs);

    /* what the loader would say about it: a plan that does not load is a bug here */
    char e2[512];
    rt_plan *back = rt_plan_decode(buf, (size_t)total, "the plan written", e2, sizeof e2);
    if (!back) {
        base_free(buf);
        return base_fail(err, errlen, "internal error: the plan does not load back: %s", e2);
    }
    rt_plan_free(back);
    *data = buf;
    *size = (size_t)total;
    return 0;
}

int rt_plan_write_program(const char *path, const ir_graph *g, const mp_plan *mp,
                          const rt_plan_kv *meta, int nmeta, const cg_program *cg,
                          const rt_plan_blob *extra, int nextra, char *err, size_t errlen)
{
    unsigned char *data;
    size_t size;
    if (rt_plan_encode_program_with(g, mp, meta, nmeta, cg, extra, nextra, &data, &size, err,
                                    errlen) != 0)
        return -1;
    if (strcmp(path, "-") == 0) { /* standard output */
        int bad = base_write_all(STDOUT_FILENO, data, size) != 0;
        base_free(data);
        return bad ? base_fail(err, errlen, "cannot write the plan to standard output: %s",
                               strerror(errno)) : 0;
    }
    base_out o;
    int rc = base_out_open(&o, path, err, errlen);
    if (rc == 0 && fwrite(data, 1, size, o.f) != size) {
        base_fail(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        base_out_abandon(&o);
        rc = -1;
    } else if (rc == 0) {
        rc = base_out_commit(&o, err, errlen);
    }
    base_free(data);
    return rc;
}

/* ---------------------------------------------------------------- reading */

/* The decoder's state: the bytes, the file's name, and where to say what. */
typedef struct {
    const unsigned char *data;
    uint64_t size;
    const char *name;
    char *err;
    size_t errlen;
} reader;

#define BAD(r, ...) (snprintf((r)->err, (r)->errlen, "%s: ", (r)->name), \
                     bad_more((r), __VA_ARGS__))

static int bad_more(reader *r, const char *fmt, ...) DIAG_PRINTF(2, 3);
static int bad_more(reader *r, const char *fmt, ...)
{
    size_t used = strlen(r->err);
    va_list ap;
    va_start(ap, fmt);
    if (used < r->errlen)
        vsnprintf(r->err + used, r->errlen - used, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *kind_str(uint32_t kind, char *buf, size_t len)
{
    const char *s = rt_section_name(kind);
    if (s)
        snprintf(buf, len, "%s", s);
    else
        snprintf(buf, len, "kind %u", kind);
    return buf;
}

/* The first message on d, as "LINE:COL: MESSAGE" (IR text) or "FILE:LINE:COL:
 * MESSAGE" (a location the text records). */
static void first_diag(const diag *d, char *buf, size_t len)
{
    snprintf(buf, len, "(no message)");
    for (int i = 0; i < d->n; i++) {
        const diag_entry *e = &d->entries[i];
        if (e->level != DIAG_ERROR)
            continue;
        if (e->loc.file)
            snprintf(buf, len, "%s:%d:%d: %s", e->loc.file, e->loc.line, e->loc.col, e->msg);
        else
            snprintf(buf, len, "%s", e->msg);
        return;
    }
}

static int read_program(reader *r, rt_plan *p, const rt_plan_section *s)
{
    diag d;
    diag_init(&d);
    char msg[400];
    p->g = ir_parse("program", (const char *)r->data + s->offset, (size_t)s->size, &d);
    if (!p->g) {
        first_diag(&d, msg, sizeof msg);
        diag_free(&d);
        return BAD(r, "section program: the IR text does not parse: %s", msg);
    }
    if (ir_verify(p->g, &d) > 0) {
        first_diag(&d, msg, sizeof msg);
        diag_free(&d);
        return BAD(r, "section program: the program does not verify: %s", msg);
    }
    diag_free(&d);
    int ndev = ir_graph_devices(p->g);
    if (ndev != p->ndevices)
        return BAD(r, "the header says %d device%s, but the program runs on %d", p->ndevices,
                   p->ndevices == 1 ? "" : "s", ndev);
    if ((p->g->nupdates > 0) != p->training)
        return BAD(r, "the header says %s, but the program %s", p->training
                   ? "a training step" : "an inference program", p->g->nupdates > 0
                   ? "updates its parameters (a training step)" : "has no updates");
    return 0;
}

static int read_memory(reader *r, rt_plan *p, const rt_plan_section *s)
{
    const unsigned char *m = r->data + s->offset;
    uint64_t size = s->size, ndev = (uint64_t)p->ndevices;
    if (size < 8)
        return BAD(r, "section memory: %llu bytes, too short for its counts",
                   (unsigned long long)size);
    if (get32(m) != ndev)
        return BAD(r, "section memory: %u devices, but the header says %d", get32(m),
                   p->ndevices);
    if (get32(m + 4) != 0)
        return BAD(r, "section memory: reserved field is %u, not 0", get32(m + 4));
    /* 8 x devices bytes of arenas, then the count of results: ndev is at most
       IR_MAX_DEVICES, so this is small */
    if (size - 8 < 8 * ndev + 8)
        return BAD(r, "section memory: %llu bytes, too short for %d arenas",
                   (unsigned long long)size, p->ndevices);
    uint64_t nres = get64(m + 8 + 8 * ndev), left = size - 16 - 8 * ndev;
    if (left % 8 != 0 || left / 8 != nres)
        return BAD(r, "section memory: %llu bytes after its counts, but %llu node results "
                   "take 8 bytes each", (unsigned long long)left, (unsigned long long)nres);
    uint64_t have = 0;
    ir_for_each_node(p->g, n)
        have += (uint64_t)n->nout;
    if (have != nres)
        return BAD(r, "section memory: offsets of %llu node results, but the program has %llu",
                   (unsigned long long)nres, (unsigned long long)have);

    mp_plan *mp = p->mp = base_calloc(1, sizeof *mp);
    if (!mp)
        return BAD(r, "out of memory");
    mp->ndevices = p->ndevices;
    mp->nvalues = p->g->nvalues;
    mp->device_bytes = base_calloc((size_t)ndev, sizeof *mp->device_bytes);
    mp->dev = base_calloc((size_t)ndev, sizeof *mp->dev);
    mp->offset_by_id = base_malloc(((size_t)p->g->nvalues + 1) * sizeof *mp->offset_by_id);
    int64_t *end = base_calloc((size_t)ndev, sizeof *end);
    if (!mp->device_bytes || !mp->dev || !mp->offset_by_id || !end) {
        base_free(end);
        return BAD(r, "out of memory");
    }
    for (int i = 0; i < p->g->nvalues; i++)
        mp->offset_by_id[i] = -1;
    int rc = -1;
    for (uint64_t d = 0; d < ndev; d++) {
        uint64_t a = get64(m + 8 + 8 * d);
        if (a > (uint64_t)INT64_MAX / 2) {
            BAD(r, "section memory: device %llu's arena of %llu bytes is beyond any memory",
                (unsigned long long)d, (unsigned long long)a);
            goto done;
        }
        mp->device_bytes[d] = mp->dev[d].arena_bytes = (int64_t)a;
    }
    const unsigned char *o = m + 16 + 8 * ndev;
    ir_for_each_node(p->g, n)
        for (int i = 0; i < n->nout; i++, o += 8) {
            const ir_value *v = n->out[i];
            uint64_t raw = get64(o);
            char nb[128];
            if (raw == UINT64_MAX) /* -1: a buffer of its own (mp_check says whether) */
                continue;
            int64_t arena = mp->device_bytes[n->device], bytes = mp_value_bytes(v);
            if (raw % MP_ALIGN != 0 || bytes > arena || raw > (uint64_t)(arena - bytes)) {
                BAD(r, "section memory: %%%s (%lld bytes) at offset %llu does not fit, aligned "
                    "to %d, in device %d's arena of %lld bytes",
                    ir_name_str(nb, sizeof nb, v->name), (long long)bytes,
                    (unsigned long long)raw, MP_ALIGN, n->device, (long long)arena);
                goto done;
            }
            mp->offset_by_id[v->id] = (int64_t)raw;
            if ((int64_t)raw + bytes > end[n->device])
                end[n->device] = (int64_t)raw + bytes;
        }
    for (int d = 0; d < p->ndevices; d++)
        if (end[d] != mp->device_bytes[d]) {
            BAD(r, "section memory: device %d's arena is %lld bytes, but its buffers end at %lld",
                d, (long long)mp->device_bytes[d], (long long)end[d]);
            goto done;
        }
    char why[400];
    if (mp_check(p->g, mp, why, sizeof why) != 0) {
        BAD(r, "section memory: the memory plan does not hold: %s (written by another gnc? "
            "compile the model again)", why);
        goto done;
    }
    mp->arena_bytes = 0;
    for (int d = 0; d < p->ndevices; d++)
        if (mp->device_bytes[d] > mp->arena_bytes)
            mp->arena_bytes = mp->device_bytes[d];
    rc = 0;
done:
    base_free(end);
    return rc;
}

static int read_meta(reader *r, rt_plan *p, const rt_plan_section *s)
{
    const char *t = (const char *)r->data + s->offset, *stop = t + s->size;
    if (s->size && stop[-1] != '\n')
        return BAD(r, "section meta: the last line does not end in a newline");
    int lines = 0;
    for (const char *q = t; q < stop; q++)
        lines += *q == '\n';
    if (lines > RT_PLAN_MAX_META)
        return BAD(r, "section meta: %d lines, more than %d", lines, RT_PLAN_MAX_META);
    p->meta = base_calloc((size_t)lines + 1, sizeof *p->meta);
    if (!p->meta)
        return BAD(r, "out of memory");
    for (int line = 1; t < stop; line++) {
        const char *nl = memchr(t, '\n', (size_t)(stop - t));
        const char *eq = memchr(t, '=', (size_t)(nl - t));
        if (!eq || !meta_key_ok(t, (size_t)(eq - t)) ||
            !meta_value_ok(eq + 1, (size_t)(nl - eq - 1)))
            return BAD(r, "section meta: line %d is not key=value (a key of [a-z0-9_.-], a "
                       "printable value)", line);
        char *k = base_strndup(t, (size_t)(eq - t));
        char *v = base_strndup(eq + 1, (size_t)(nl - eq - 1));
        p->meta[p->nmeta].key = k, p->meta[p->nmeta].value = v;
        if (k)
            p->nmeta++;
        else
            base_free(v);
        if (!k || !v)
            return BAD(r, "out of memory");
        for (int i = 0; i < p->nmeta - 1; i++)
            if (strcmp(p->meta[i].key, k) == 0)
                return BAD(r, "section meta: key %s on line %d is there before", k, line);
        t = nl + 1;
    }
    const char *dv = rt_plan_meta(p, "devices");
    char want[16];
    snprintf(want, sizeof want, "%d", p->ndevices);
    if (dv && strcmp(dv, want) != 0)
        return BAD(r, "section meta: devices=%s, but the header says %d", dv, p->ndevices);
    return 0;
}

/* The architectures of the meta's archs ("sm_80,sm_90"): 1 to CG_MAX_ARCHS
 * names sm_ and digits (an 'a' may end one), no name twice.  Returns how many,
 * or -1. */
int rt_plan_archs(const char *list, char archs[][16])
{
    int n = 0;
    for (const char *a = list; a && *a;) {
        size_t len = strcspn(a, ",");
        int ok = n < CG_MAX_ARCHS && len >= 4 && len < 16 && strncmp(a, "sm_", 3) == 0 &&
                 a[3] >= '1' && a[3] <= '9';
        for (size_t i = 3; ok && i < len; i++)
            ok = (a[i] >= '0' && a[i] <= '9') || (a[i] == 'a' && i == len - 1);
        if (!ok)
            return -1;
        memcpy(archs[n], a, len);
        archs[n][len] = 0;
        for (int j = 0; j < n; j++)
            if (strcmp(archs[j], archs[n]) == 0)
                return -1;
        n++;
        a += len;
        if (*a == ',' && !*++a)
            return -1;
    }
    return n > 0 ? n : -1;
}

/* The tuning section: at most one, the whole program's, after kernels, of
 * printable ASCII lines; what the lines say is checked by rt_plan_program,
 * against the steps it regenerates. */
static int read_tuning(reader *r, rt_plan *p)
{
    for (int i = 0; i < p->nsections; i++) {
        const rt_plan_section *s = &p->sections[i];
        if (s->kind != RT_SECTION_TUNING)
            continue;
        if (p->tuning)
            return BAD(r, "section %d: a second tuning section", i);
        if (!p->nmodules)
            return BAD(r, "section %d (tuning): a plan without kernels has nothing to tune", i);
        if (s->device != RT_PLAN_ALL_DEVICES)
            return BAD(r, "section %d (tuning) names device %u; it is the whole program's", i,
                       s->device);
        const unsigned char *b = r->data + s->offset;
        for (uint64_t k = 0; k < s->size; k++)
            if (b[k] != '\n' && (b[k] < 0x20 || b[k] > 0x7e))
                return BAD(r, "section %d (tuning): byte %llu is not printable ASCII", i,
                           (unsigned long long)k);
        p->tuning = base_malloc((size_t)s->size + 1);
        if (!p->tuning)
            return BAD(r, "out of memory");
        memcpy(p->tuning, b, (size_t)s->size);
        p->tuning[s->size] = '\0';
    }
    return 0;
}

/* The weights section: at most one, the whole program's, a safetensors file
 * that holds every parameter and buffer of the program with its shape (as
 * gnc run --weights takes one), kept for the sessions to start from. */
static int read_weights(reader *r, rt_plan *p)
{
    for (int i = 0; i < p->nsections; i++) {
        const rt_plan_section *s = &p->sections[i];
        if (s->kind != RT_SECTION_WEIGHTS)
            continue;
        if (p->weights)
            return BAD(r, "section %d: a second weights section", i);
        if (s->device != RT_PLAN_ALL_DEVICES)
            return BAD(r, "section %d (weights) names device %u; it is the whole program's", i,
                       s->device);
        char what[64], e[2048];
        snprintf(what, sizeof what, "section %d (weights)", i);
        if (rt_checkpoint_load_bytes(p->g, NULL, r->data + s->offset, (size_t)s->size, what,
                                     NULL, e, sizeof e) != 0)
            return BAD(r, "%s", e);
        if (!(p->weights = base_malloc((size_t)s->size)))
            return BAD(r, "out of memory");
        memcpy(p->weights, r->data + s->offset, (size_t)s->size);
        p->weights_size = (size_t)s->size;
    }
    return 0;
}

/* The CUDA backend's sections (docs/plan.md): cuda_source sections, one per
 * module in module order, then kernel_image sections, for each module a cubin
 * per arch of the meta's archs in that order and then the PTX of the newest;
 * each source's SHA-256 holds and each image names it.  rt_plan_program
 * proves the rest: that the sources are what the program generates. */
#define SRC_HEAD 40             /* module, reserved, SHA-256 */
#define IMG_HEAD 56             /* module, flags, target[16], SHA-256 */
static int read_cuda(reader *r, rt_plan *p)
{
    int nsrc = 0, nimg = 0;
    for (int i = 0; i < p->nsections; i++) {
        nsrc += p->sections[i].kind == RT_SECTION_CUDA_SOURCE;
        nimg += p->sections[i].kind == RT_SECTION_KERNEL_IMAGE;
    }
    if (!nsrc && !nimg)
        return 0;
    if (!nsrc)
        return BAD(r, "kernel images, but no cuda_source section");
    const char *list = rt_plan_meta(p, "archs"), *prec = rt_plan_meta(p, "precision");
    char archs[CG_MAX_ARCHS][16];
    int narchs = rt_plan_archs(list, archs);
    if (narchs < 0)
        return BAD(r, "kernels, but the meta's archs (%s) is not a list of sm_NN",
                   list ? list : "missing");
    if (!prec || ir_precision_lookup(prec) < 0)
        return BAD(r, "kernels, but the meta's precision (%s) is not fp32, tf32, bf16 or fp16",
                   prec ? prec : "missing");
    const char *conv = rt_plan_meta(p, "conv");
    if (conv && cg_conv_lookup(conv) < 0 && strcmp(conv, "auto") != 0)
        return BAD(r, "kernels, but the meta's conv (%s) is not cudnn, igemm, cudnn-nhwc or auto", conv);
    const char *layout = rt_plan_meta(p, "layout");
    if (layout && cg_layout_lookup(layout) < 0)
        return BAD(r, "kernels, but the meta's layout (%s) is not auto, nchw or nhwc", layout);
    const char *det = rt_plan_meta(p, "deterministic");
    if (det && strcmp(det, "1") != 0)
        return BAD(r, "kernels, but the meta's deterministic (%s) is not 1", det);
    int newest = 0;
    for (int a = 1; a < narchs; a++)
        if (atoi(archs[a] + 3) > atoi(archs[newest] + 3))
            newest = a;
    if ((uint64_t)nimg != (uint64_t)nsrc * (uint64_t)(narchs + 1))
        return BAD(r, "%d kernel images for %d modules, but each needs %d (a cubin per arch of "
                   "%s, and PTX)", nimg, nsrc, narchs + 1, list);
    p->modules = base_calloc((size_t)nsrc, sizeof *p->modules);
    if (!p->modules)
        return BAD(r, "out of memory");
    p->nmodules = nsrc;         /* rt_plan_free frees what is filled in */
    int m = 0, img = 0;         /* the next source; the next image of module m - ... */
    int mi = 0;                 /* the module whose images come next */
    for (int i = 0; i < p->nsections; i++) {
        const rt_plan_section *s = &p->sections[i];
        const unsigned char *b = r->data + s->offset;
        if (s->kind != RT_SECTION_CUDA_SOURCE && s->kind != RT_SECTION_KERNEL_IMAGE)
            continue;
        if (s->device != RT_PLAN_ALL_DEVICES || s->flags != 0)
            return BAD(r, "section %d (%s) must be the whole program's and optional", i,
                       rt_section_name(s->kind));
        if (s->kind == RT_SECTION_CUDA_SOURCE) {
            if (m == nsrc || mi > 0 || img > 0)
                return BAD(r, "section %d (cuda_source) after a kernel image", i);
            if (s->size < SRC_HEAD || get32(b) != (uint32_t)m || get32(b + 4) != 0)
                return BAD(r, "section %d (cuda_source): not module %d's source (%llu bytes, "
                           "a 40-byte head)", i, m, (unsigned long long)s->size);
            rt_plan_module *M = &p->modules[m];
            size_t n = (size_t)(s->size - SRC_HEAD);
            if (memchr(b + SRC_HEAD, 0, n))
                return BAD(r, "section %d (cuda_source): a NUL byte in module %d's source", i, m);
            cg_sha256_of(b + SRC_HEAD, n, M->sha256);
            if (memcmp(M->sha256, b + 8, 32) != 0)
                return BAD(r, "section %d (cuda_source): module %d's source does not match its "
                           "SHA-256", i, m);
            M->source = base_malloc(n + 1);
            M->images = base_calloc((size_t)narchs + 1, sizeof *M->images);
            if (!M->source || !M->images)
                return BAD(r, "out of memory");
            memcpy(M->source, b + SRC_HEAD, n);
            M->source[n] = 0;
            M->source_len = n;
            m++;
            continue;
        }
        /* image number img of module mi: cubins in arch order, then the PTX */
        if (m < nsrc)
            return BAD(r, "section %d (kernel_image) before every module's source", i);
        int ptx = img == narchs;
        const int a = ptx ? newest : img;
        char want[16];
        snprintf(want, sizeof want, "%s%s", ptx ? "compute_" : "", ptx ? archs[a] + 3 : archs[a]);
        if (s->size <= IMG_HEAD || get32(b) != (uint32_t)mi || get32(b + 4) != (uint32_t)ptx ||
            memcmp(b + 8, want, strlen(want)) != 0)
            return BAD(r, "section %d (kernel_image): not module %d's %s %s", i, mi,
                       ptx ? "PTX" : "cubin", want);
        for (int k = (int)strlen(want); k < 16; k++)
            if (b[8 + k] != 0)
                return BAD(r, "section %d (kernel_image): not module %d's %s %s", i, mi,
                           ptx ? "PTX" : "cubin", want);
        rt_plan_module *M = &p->modules[mi];
        if (memcmp(b + 24, M->sha256, 32) != 0)
            return BAD(r, "section %d (kernel_image): module %d's %s is not compiled from its "
                       "source (SHA-256)", i, mi, want);
        cg_image *I = &M->images[M->nimages];
        snprintf(I->arch, sizeof I->arch, "%s", want);
        I->ptx = ptx;
        I->size = (size_t)(s->size - IMG_HEAD);
        I->data = base_malloc(I->size);
        if (!I->data)
            return BAD(r, "out of memory");
        memcpy(I->data, b + IMG_HEAD, I->size);
        M->nimages++;
        if (++img == narchs + 1)
            img = 0, mi++;
    }
    return 0;
}

/* The writer meta line of a plan of another format version, for the message
 * that refuses it: its section table is read as this version lays it out,
 * every offset checked, nothing trusted; "an unknown gnc" where there is none. */
static void writer_of(const unsigned char *h, size_t nbytes, char *out, size_t outlen)
{
    snprintf(out, outlen, "an unknown gnc");
    uint32_t nsec = nbytes >= RT_PLAN_HEADER_BYTES ? get32(h + 20) : 0;
    for (uint64_t i = 0; i < nsec && RT_PLAN_HEADER_BYTES + (i + 1) * RT_PLAN_ENTRY_BYTES <= nbytes;
         i++) {
        const unsigned char *e = h + RT_PLAN_HEADER_BYTES + i * RT_PLAN_ENTRY_BYTES;
        uint64_t off = get64(e + 16), size = get64(e + 24);
        if (get32(e) != RT_SECTION_META || off > nbytes || size > nbytes - off)
            continue;
        const char *t = (const char *)h + off, *stop = t + size;
        while (t < stop) {
            const char *nl = memchr(t, '\n', (size_t)(stop - t));
            size_t len = (size_t)((nl ? nl : stop) - t);
            if (len > 7 && memcmp(t, "writer=", 7) == 0 && meta_value_ok(t + 7, len - 7)) {
                snprintf(out, outlen, "%.*s", (int)(len - 7 > 60 ? 60 : len - 7), t + 7);
                return;
            }
            t += len + 1;
        }
    }
}

rt_plan *rt_plan_decode(const void *bytes, size_t nbytes, const char *name, char *err,
                        size_t errlen)
{
    reader R = {bytes, nbytes, name ? name : "plan", err, errlen}, *r = &R;
    const unsigned char *h = bytes;
    rt_plan *p = base_calloc(1, sizeof *p);
    if (!p) {
        BAD(r, "out of memory");
        return NULL;
    }
    if (nbytes < 8 || memcmp(h, RT_PLAN_MAGIC, 8) != 0) {
        BAD(r, "not a gnc plan file (it does not start with the plan magic)");
        goto fail;
    }
    if (nbytes < RT_PLAN_HEADER_BYTES) {
        BAD(r, "truncated: %zu bytes, shorter than the %d-byte header", nbytes,
            RT_PLAN_HEADER_BYTES);
        goto fail;
    }
    p->version = get32(h + 8);
    if (p->version != RT_PLAN_VERSION) {
        char writer[64];
        writer_of(h, nbytes, writer, sizeof writer);
        BAD(r, "plan format version %u, written by %s; this gnc (%s) reads version %d: %s",
            p->version, writer, GNC_VERSION, RT_PLAN_VERSION,
            p->version < RT_PLAN_VERSION ? "compile the model again (gnc compile -o)"
                                         : "it needs a newer gnc");
        goto fail;
    }
    uint32_t flags = get32(h + 12), ndev = get32(h + 16), nsec = get32(h + 20);
    p->file_bytes = get64(h + 24);
    if (p->file_bytes != nbytes) {
        if (p->file_bytes > nbytes)
            BAD(r, "truncated: the header says %llu bytes, the file has %zu",
                (unsigned long long)p->file_bytes, nbytes);
        else
            BAD(r, "%zu bytes, but the header says %llu: bytes after the end",
                nbytes, (unsigned long long)p->file_bytes);
        goto fail;
    }
    if (nsec < 1 || nsec > RT_PLAN_MAX_SECTIONS) {
        BAD(r, "%u sections; a plan has 1 to %d", nsec, RT_PLAN_MAX_SECTIONS);
        goto fail;
    }
    uint64_t table_end = RT_PLAN_HEADER_BYTES + (uint64_t)nsec * RT_PLAN_ENTRY_BYTES;
    if (table_end > nbytes) {
        BAD(r, "truncated: the table of %u sections ends at byte %llu, after the file's end",
            nsec, (unsigned long long)table_end);
        goto fail;
    }
    uint32_t crc = header_crc(h, nsec);
    if (crc != get32(h + 36)) {
        BAD(r, "the header's checksum does not match (stored %08x, computed %08x): the file "
            "is corrupt", get32(h + 36), crc);
        goto fail;
    }
    if (flags & ~RT_PLAN_TRAINING) {
        BAD(r, "unknown header flags %#x", flags & ~RT_PLAN_TRAINING);
        goto fail;
    }
    if (get32(h + 32) != 0) {
        BAD(r, "the header's reserved field is %u, not 0", get32(h + 32));
        goto fail;
    }
    if (ndev < 1 || ndev > IR_MAX_DEVICES) {
        BAD(r, "%u devices; a plan has 1 to %d", ndev, IR_MAX_DEVICES);
        goto fail;
    }
    p->ndevices = (int)ndev;
    p->training = (flags & RT_PLAN_TRAINING) != 0;

    /* the table: the exact layout, every checksum */
    p->sections = base_calloc(nsec, sizeof *p->sections);
    if (!p->sections) {
        BAD(r, "out of memory");
        goto fail;
    }
    p->nsections = (int)nsec;
    uint64_t at = table_end;
    const rt_plan_section *program = NULL, *memory = NULL, *meta = NULL;
    for (uint32_t i = 0; i < nsec; i++) {
        const unsigned char *e = h + RT_PLAN_HEADER_BYTES + (size_t)i * RT_PLAN_ENTRY_BYTES;
        rt_plan_section *s = &p->sections[i];
        char kb[32];
        *s = (rt_plan_section){get32(e), get32(e + 4), get32(e + 8), get32(e + 12), get64(e + 16),
                               get64(e + 24)};
        kind_str(s->kind, kb, sizeof kb);
        if (align8(at) > nbytes) {
            BAD(r, "truncated: section %u (%s) would start at byte %llu, after the file's end "
                "(%zu bytes)", i, kb, (unsigned long long)align8(at), nbytes);
            goto fail;
        }
        for (uint64_t q = at; q < align8(at); q++)
            if (h[q] != 0) {
                BAD(r, "byte %llu, padding before section %u, is not 0",
                    (unsigned long long)q, i);
                goto fail;
            }
        at = align8(at);
        if (s->offset != at) {
            BAD(r, "section %u (%s) starts at byte %llu, not at %llu where it belongs", i, kb,
                (unsigned long long)s->offset, (unsigned long long)at);
            goto fail;
        }
        if (s->size > nbytes - at) {
            BAD(r, "truncated: section %u (%s) of %llu bytes at byte %llu runs past the end "
                "(%zu bytes)", i, kb, (unsigned long long)s->size, (unsigned long long)at,
                nbytes);
            goto fail;
        }
        if (s->flags & ~RT_SECTION_REQUIRED) {
            BAD(r, "section %u (%s): unknown flags %#x", i, kb, s->flags & ~RT_SECTION_REQUIRED);
            goto fail;
        }
        if (s->device != RT_PLAN_ALL_DEVICES && s->device >= ndev) {
            BAD(r, "section %u (%s) is for device %u, but the plan has %u", i, kb, s->device,
                ndev);
            goto fail;
        }
        uint32_t c = crc_of(h + at, s->size);
        if (c != s->crc) {
            BAD(r, "section %u (%s): checksum does not match (stored %08x, computed %08x): the "
                "file is corrupt", i, kb, s->crc, c);
            goto fail;
        }
        at += s->size;
        const rt_plan_section **slot = s->kind == RT_SECTION_PROGRAM ? &program
                                     : s->kind == RT_SECTION_MEMORY ? &memory
                                     : s->kind == RT_SECTION_META ? &meta : NULL;
        if (slot && *slot) {
            BAD(r, "section %u: a second %s section", i, kb);
            goto fail;
        }
        if (slot && s->device != RT_PLAN_ALL_DEVICES) {
            BAD(r, "section %u (%s) names device %u; it is the whole program's", i, kb,
                s->device);
            goto fail;
        }
        if (slot)
            *slot = s;
        else if ((s->flags & RT_SECTION_REQUIRED) && !rt_section_is_read(s->kind)) {
            if (!rt_section_name(s->kind))
                BAD(r, "section %u has kind %u, unknown to this gnc (plan format %d), and is "
                    "required: the plan needs a newer gnc", i, s->kind, RT_PLAN_VERSION);
            else
                BAD(r, "section %u (%s) is required, and this gnc does not read its kind "
                    "(reserved, its payload not defined yet): the plan needs a newer gnc", i, kb);
            goto fail;
        }
        /* kinds it does not read, optional: skipped */
    }
    if (align8(at) != nbytes) {
        BAD(r, "the last section ends at byte %llu, but the file has %zu",
            (unsigned long long)at, nbytes);
        goto fail;
    }
    for (uint64_t q = at; q < nbytes; q++)
        if (h[q] != 0) {
            BAD(r, "byte %llu, padding after the last section, is not 0", (unsigned long long)q);
            goto fail;
        }
    if (!program || !memory) {
        BAD(r, "no %s section", !program ? "program" : "memory");
        goto fail;
    }
    if (read_program(r, p, program) != 0 || read_memory(r, p, memory) != 0 ||
        (meta && read_meta(r, p, meta) != 0) || read_cuda(r, p) != 0 || read_tuning(r, p) != 0 ||
        read_weights(r, p) != 0)
        goto fail;
    return p;
fail:
    rt_plan_free(p);
    return NULL;
}

rt_plan *rt_plan_load(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        base_fail(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        if (f)
            fclose(f);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > RT_PLAN_MAX_BYTES) {
        base_fail(err, errlen, "%s: %s", path, !S_ISREG(st.st_mode) ? "not a regular file"
             : "larger than any plan gnc reads (64 GiB)");
        fclose(f);
        return NULL;
    }
    size_t n = (size_t)st.st_size;
    unsigned char *buf = base_malloc(n ? n : 1);
    if (!buf || fread(buf, 1, n, f) != n) {
        base_fail(err, errlen, "%s: %s", path, buf ? "cannot read the whole file" : "out of memory");
        base_free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    rt_plan *p = rt_plan_decode(buf, n, path, err, errlen);
    base_free(buf);
    return p;
}

void rt_plan_free(rt_plan *p)
{
    if (!p)
        return;
    mp_plan_free(p->mp);
    if (p->g)
        ir_graph_free(p->g);
    for (int i = 0; i < p->nmeta; i++) {
        base_free((char *)p->meta[i].key);
        base_free((char *)p->meta[i].value);
    }
    base_free(p->meta);
    base_free(p->sections);
    for (int m = 0; m < p->nmodules; m++) {
        base_free(p->modules[m].source);
        for (int i = 0; i < p->modules[m].nimages; i++)
            base_free(p->modules[m].images[i].data);
        base_free(p->modules[m].images);
    }
    base_free(p->modules);
    base_free(p->tuning);
    base_free(p->weights);
    base_free(p);
}

const char *rt_plan_meta(const rt_plan *p, const char *key)
{
    for (int i = 0; i < p->nmeta; i++)
        if (strcmp(p->meta[i].key, key) == 0)
            return p->meta[i].value;
    return NULL;
}

void rt_plan_fix_checksums(unsigned char *data, size_t size)
{
    if (size < RT_PLAN_HEADER_BYTES)
        return;
    uint32_t nsec = get32(data + 20);
    if (nsec > RT_PLAN_MAX_SECTIONS ||
        RT_PLAN_HEADER_BYTES + (uint64_t)nsec * RT_PLAN_ENTRY_BYTES > size)
        return;
    for (uint32_t i = 0; i < nsec; i++) {
        unsigned char *e = data + RT_PLAN_HEADER_BYTES + (size_t)i * RT_PLAN_ENTRY_BYTES;
        uint64_t off = get64(e + 16), len = get64(e + 24);
        if (off <= size && len <= size - off)
            put32(e + 12, crc_of(data + off, len));
    }
    put32(data + 36, header_crc(data, nsec));
}
