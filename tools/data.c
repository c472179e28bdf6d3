/* IDX data sets: see data.h.  zlib's gzread reads gzipped and plain files alike. */
#include "data.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base.h"
#include "checkpoint.h"
#include "npy.h"

/* Finds dir/name or dir/name.gz; writes the path used into path. */
static int find(const char *dir, const char *name, char *path, size_t len)
{
    snprintf(path, len, "%s/%s", dir, name);
    if (access(path, R_OK) == 0)
        return 1;
    snprintf(path, len, "%s/%s.gz", dir, name);
    return access(path, R_OK) == 0;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads an unsigned-byte IDX file of the given rank; dims[] gets its sizes and
 * *data a malloc'd copy of the payload. */
static int read_idx(const char *path, int rank, int64_t *dims, uint8_t **data, char *err,
                    size_t errlen)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return base_fail(err, errlen, "%s: is a directory, not an IDX file", path);
    gzFile f = gzopen(path, "rb");
    if (!f)
        return base_fail(err, errlen, "%s: %s", path, errno ? strerror(errno) : "cannot open");
    unsigned char head[4 + 4 * 3];
    int rc = -1;
    *data = NULL;
    int got = gzread(f, head, (unsigned)(4 + 4 * rank));
    if (got != 4 + 4 * rank) {
        base_fail(err, errlen, "%s: %s", path, got < 0 ? "corrupt gzip data" : "truncated header");
        goto done;
    }
    if (head[0] != 0 || head[1] != 0 || head[2] != 0x08) {
        base_fail(err, errlen, "%s: not an unsigned-byte IDX file (bad magic)", path);
        goto done;
    }
    if (head[3] != rank) {
        base_fail(err, errlen, "%s: has %d dimensions, expected %d", path, head[3], rank);
        goto done;
    }
    uint64_t total = 1; /* at most 16 GiB: checked before each product */
    for (int i = 0; i < rank; i++) {
        dims[i] = be32(head + 4 + 4 * i);
        if (dims[i] == 0 || (uint64_t)dims[i] > ((uint64_t)1 << 34) / total) {
            base_fail(err, errlen, "%s: %s", path, dims[i] ? "too large (16 GiB or more)"
                                                           : "has a zero dimension");
            goto done;
        }
        total *= (uint64_t)dims[i];
    }
    /* The buffer grows as the data arrives (doubling from 1 MiB, to the size the
     * header promises at most): a short file that promises gigabytes costs what
     * it holds, not what it promises. */
    uint64_t cap = 0;
    for (uint64_t off = 0; off < total;) {
        if (off == cap) {
            uint64_t step = cap ? cap : 1u << 20;
            cap = total - cap < step ? total : cap + step;
            uint8_t *grown = base_realloc(*data, (size_t)cap);
            if (!grown) {
                base_fail(err, errlen, "%s: out of memory", path);
                goto done;
            }
            *data = grown;
        }
        unsigned chunk = cap - off > (1u << 30) ? 1u << 30 : (unsigned)(cap - off);
        int n = gzread(f, *data + off, chunk);
        if (n <= 0) {
            base_fail(err, errlen, "%s: %s", path, n < 0 ? "corrupt gzip data"
                      : "truncated: fewer bytes than the header promises");
            goto done;
        }
        off += (uint64_t)n;
    }
    unsigned char extra;
    if (gzread(f, &extra, 1) != 0) {
        base_fail(err, errlen, "%s: has trailing bytes after the data the header describes", path);
        goto done;
    }
    rc = 0;
done:
    gzclose(f);
    if (rc) {
        base_free(*data);
        *data = NULL;
    }
    return rc;
}

int cli_dataset_load(cli_dataset *ds, const char *dir, const char *prefix, char *err,
                    size_t errlen)
{
    char ipath[4096], lpath[4096], name[256];
    int64_t idims[3] = {0}, ldims[1] = {0};
    memset(ds, 0, sizeof *ds);
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
    if (!find(dir, name, ipath, sizeof ipath)) {
        snprintf(err, errlen, "%s/%s[.gz]: not found", dir, name);
        return -1;
    }
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
    if (!find(dir, name, lpath, sizeof lpath)) {
        snprintf(err, errlen, "%s/%s[.gz]: not found", dir, name);
        return -1;
    }
    if (read_idx(ipath, 3, idims, &ds->images, err, errlen) ||
        read_idx(lpath, 1, ldims, &ds->labels, err, errlen)) {
        cli_dataset_free(ds);
        return -1;
    }
    if (idims[0] != ldims[0]) {
        snprintf(err, errlen, "%s holds %lld images but %s holds %lld labels", ipath,
                 (long long)idims[0], lpath, (long long)ldims[0]);
        cli_dataset_free(ds);
        return -1;
    }
    ds->n = idims[0];
    ds->h = idims[1];
    ds->w = idims[2];
    return 0;
}

void cli_dataset_free(cli_dataset *ds)
{
    base_free(ds->images);
    base_free(ds->labels);
    memset(ds, 0, sizeof *ds);
}

int cli_dataset_classes(const cli_dataset *ds)
{
    int max = -1;
    for (int64_t i = 0; i < ds->n; i++)
        if (ds->labels[i] > max)
            max = ds->labels[i];
    return max + 1;
}

/* The next of the stream at state *s. */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t x = base_splitmix64(*s);
    *s += BASE_GOLDEN_GAMMA;
    return x;
}

void cli_dataset_order(int64_t *order, int64_t n, uint64_t seed, uint64_t epoch)
{
    uint64_t s = seed * 0x2545f4914f6cdd1dull ^ (epoch + 1) * 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    for (int64_t i = n - 1; i > 0; i--) { /* Fisher-Yates; the modulo bias is < 2^-40 */
        int64_t j = (int64_t)(splitmix64(&s) % (uint64_t)(i + 1));
        int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

void cli_dataset_batch(const cli_dataset *ds, const int64_t *order, int64_t first, int64_t count,
                      float *images, int32_t *labels)
{
    int64_t size = ds->h * ds->w;
    for (int64_t b = 0; b < count; b++) {
        int64_t k = order ? order[first + b] : first + b;
        const uint8_t *src = ds->images + k * size;
        float *dst = images + b * size;
        for (int64_t i = 0; i < size; i++)
            dst[i] = (float)src[i] / 255.0f; /* as torch: x.float() / 255 */
        labels[b] = ds->labels[k];
    }
}

/* Data sets of named arrays: see data.h. */

/* Adds an array whole of shape [n, ...] to d (taking data, base_malloc'd, when
 * own); every array of d holds as many samples. */
static int add_array(cli_data *d, const char *name, const char *from, const ir_type *whole,
                     void *data, int own, char *err, size_t errlen)
{
    if (own)
        d->owned[d->nowned++] = data;
    if (whole->rank < 1)
        return base_fail(err, errlen, "%s: the array '%s' is a scalar; it needs a leading sample "
                         "dimension", from, name);
    if (d->narrays == CLI_MAX_ARRAYS)
        return base_fail(err, errlen, "%s: more than %d arrays", from, CLI_MAX_ARRAYS);
    if (strlen(name) >= sizeof d->a[0].name)
        return base_fail(err, errlen, "%s: the array name '%.40s...' is too long", from, name);
    for (int i = 0; i < d->narrays; i++)
        if (strcmp(d->a[i].name, name) == 0) /* train.NAME and NAME */
            return base_fail(err, errlen, "%s: the array '%s' is given twice", from, name);
    if (d->narrays && whole->dims[0] != d->n)
        return base_fail(err, errlen, "%s: the array '%s' holds %lld samples, but '%s' holds %lld: "
                         "every array needs one entry per sample", from, name,
                         (long long)whole->dims[0], d->a[0].name, (long long)d->n);
    cli_array *a = &d->a[d->narrays++];
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    a->sample.dtype = whole->dtype;
    a->sample.rank = whole->rank - 1;
    for (int i = 1; i < whole->rank; i++)
        a->sample.dims[i - 1] = whole->dims[i];
    a->data = data;
    a->stride = ir_type_numel(&a->sample);
    d->n = whole->dims[0];
    return 0;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

/* Every NAME.npy of dir, as array NAME; 0 with *found the count. */
static int load_npy_dir(const char *dir, cli_data *d, int *found, char *err, size_t errlen)
{
    DIR *dp = opendir(dir);
    *found = 0;
    if (!dp)
        return base_fail(err, errlen, "%s: %s", dir, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(dp))) {
        char path[4096], name[256];
        if (!ends_with(e->d_name, ".npy") || strlen(e->d_name) == 4)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(name, sizeof name, "%.*s", (int)(strlen(e->d_name) - 4), e->d_name);
        ir_type t;
        void *data;
        if (npy_load(path, &t, &data, err, errlen) != 0 ||
            add_array(d, name, path, &t, data, 1, err, errlen) != 0)
            rc = -1;
        (*found)++;
    }
    closedir(dp);
    return rc;
}

/* A safetensors file (rt_safetensors_read: as strict as a checkpoint, from
 * a file, a pipe or a device).  Tensors train.NAME go to train, test.NAME
 * to test, NAME to train. */
static int load_safetensors(const char *path, cli_data *train, cli_data *test, char *err,
                            size_t errlen)
{
    static const struct { const char *s; ir_dtype t; } dts[] = {
        {"F32", IR_F32}, {"I32", IR_I32}, {"I64", IR_I64}, {"U8", IR_U8}};
    rt_safetensors st;
    if (rt_safetensors_read(path, &st, err, errlen) != 0)
        return -1;
    int rc = 0;
    for (int k = 0; k < st.n && !rc; k++) {
        const rt_st_tensor *e = &st.t[k];
        ir_type t = {IR_F32, e->rank, {0}};
        size_t i = 0;
        while (i < sizeof dts / sizeof *dts && strcmp(e->dtype, dts[i].s) != 0)
            i++;
        if (i == sizeof dts / sizeof *dts) {
            rc = base_fail(err, errlen, "%s: the tensor '%s' has dtype %s; gnc reads F32, I32, "
                           "I64 and U8", path, e->name, e->dtype);
            break;
        }
        t.dtype = dts[i].t;
        uint64_t numel = 1;
        for (int d = 0; d < e->rank; d++) {
            t.dims[d] = e->dims[d];
            if (e->dims[d] > 0 && numel > (uint64_t)IR_MAX_NUMEL / (uint64_t)e->dims[d]) {
                rc = base_fail(err, errlen, "%s: the tensor '%s' has more than %lld elements",
                               path, e->name, (long long)IR_MAX_NUMEL);
                break;
            }
            numel *= (uint64_t)e->dims[d];
        }
        void *data = rc ? NULL : base_malloc(e->bytes ? e->bytes : 1);
        if (!rc && !data)
            rc = base_fail(err, errlen, "%s: out of memory", path);
        if (rc)
            break;
        if (e->bytes)
            memcpy(data, e->data, e->bytes);
        const char *name = e->name;
        cli_data *d = train;
        if (strncmp(name, "train.", 6) == 0)
            name += 6;
        else if (strncmp(name, "test.", 5) == 0)
            name += 5, d = test;
        char from[4200];
        snprintf(from, sizeof from, "%s (%s)", path, d == test ? "test" : "train");
        rc = add_array(d, name, from, &t, data, 1, err, errlen);
    }
    rt_safetensors_free(&st);
    return rc;
}

/* Without a test split of its own, test is the last fraction of train. */
static void split(cli_data *train, cli_data *test, double fraction)
{
    int64_t ntest = (int64_t)((double)train->n * fraction);
    *test = *train;
    test->nowned = 0;
    test->n = ntest;
    train->n -= ntest;
    for (int i = 0; i < test->narrays; i++)
        test->a[i].offset += train->n * test->a[i].stride;
}

int cli_data_load(const char *path, double test_fraction, cli_data *train, cli_data *test,
                  char *err, size_t errlen)
{
    struct stat st;
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    train->what = "training", test->what = "test";
    int rc = -1, found = 0;
    if (stat(path, &st) != 0) {
        base_fail(err, errlen, "%s: %s", path, strerror(errno));
    } else if (!S_ISDIR(st.st_mode)) {
        rc = load_safetensors(path, train, test, err, errlen);
    } else {
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/train", path);
        if (stat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
            rc = load_npy_dir(sub, train, &found, err, errlen);
            snprintf(sub, sizeof sub, "%s/test", path);
            if (!rc && stat(sub, &st) == 0 && S_ISDIR(st.st_mode))
                rc = load_npy_dir(sub, test, &found, err, errlen);
        } else {
            rc = load_npy_dir(path, train, &found, err, errlen);
        }
    }
    if (!rc && !train->narrays)
        rc = base_fail(err, errlen, "%s: holds no training arrays (NAME.npy, or tensors in a "
                       "safetensors file)", path);
    if (!rc && !test->narrays)
        split(train, test, test_fraction);
    test->what = "test";
    return rc;
}

int cli_data_tokens(const char *path, double test_fraction, int64_t seq, cli_data *train,
                    cli_data *test, int64_t *max_id, char *err, size_t errlen)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    ir_type t = {IR_U8, 1, {0}};
    void *data = NULL;
    if (ends_with(path, ".npy")) {
        if (npy_load(path, &t, &data, err, errlen) != 0)
            return -1;
        if (t.rank != 1 || ir_is_float(t.dtype)) {
            base_free(data);
            char b[128];
            return base_fail(err, errlen, "%s: a token stream is integer ids [N], not %s", path,
                             ir_type_str(&t, b, sizeof b));
        }
    } else {
        struct stat st;
        FILE *f = fopen(path, "rb");
        if (!f || fstat(fileno(f), &st) != 0 || S_ISDIR(st.st_mode)) {
            int e = errno;
            if (f)
                fclose(f);
            return base_fail(err, errlen, "%s: %s", path, f ? "is a directory" : strerror(e));
        }
        if (!S_ISREG(st.st_mode)) { /* a pipe or a device: read to its end (1 GiB at most) */
            fclose(f);
            size_t len;
            const char *why = NULL;
            if (!(data = base_read_file(path, &len, &why)))
                return base_fail(err, errlen, "%s: %s", path, why);
            t.dims[0] = (int64_t)len;
        } else {
            t.dims[0] = st.st_size;
            data = base_malloc((size_t)st.st_size + 1);
            size_t got = data ? fread(data, 1, (size_t)st.st_size, f) : 0;
            fclose(f);
            if (!data || got != (size_t)st.st_size) {
                base_free(data);
                return base_fail(err, errlen, "%s: %s", path,
                                 data ? "cannot read" : "out of memory");
            }
        }
    }
    train->owned[train->nowned++] = data;
    int64_t len = t.dims[0];
    *max_id = 0;
    for (int64_t i = 0; i < len; i++) {
        int64_t v = t.dtype == IR_U8 ? ((uint8_t *)data)[i] : t.dtype == IR_I32
                  ? ((int32_t *)data)[i] : ((int64_t *)data)[i];
        if (v < 0)
            return base_fail(err, errlen, "%s: token %lld is %lld: ids are 0 or more", path,
                             (long long)i, (long long)v);
        *max_id = v > *max_id ? v : *max_id;
    }
    int64_t cut = len - (int64_t)((double)len * test_fraction);
    if (cut < seq + 1)
        return base_fail(err, errlen, "%s: its training part holds %lld tokens, fewer than one "
                         "window of seq + 1 = %lld", path, (long long)cut, (long long)seq + 1);
    cli_data *ds[2] = {train, test};
    for (int s = 0; s < 2; s++) {
        cli_data *d = ds[s];
        int64_t from = s ? cut : 0, to = s ? len : cut;
        d->what = s ? "test" : "training";
        d->stream = to - from;
        d->n = to - from > seq ? (to - from - 1) / seq : 0;
        d->narrays = 2;
        for (int k = 0; k < 2; k++) {
            cli_array *a = &d->a[k];
            snprintf(a->name, sizeof a->name, "%s", k ? "next" : "tokens");
            a->sample = (ir_type){t.dtype, 1, {seq}};
            a->data = (const char *)data + (size_t)from * ir_host_size(t.dtype);
            a->offset = k;
            a->stride = seq;
        }
    }
    return 0;
}

void cli_data_from_idx(cli_data *d, const cli_dataset *ds, const char *image, const char *label)
{
    memset(d, 0, sizeof *d);
    d->n = ds->n;
    d->narrays = 2;
    snprintf(d->a[0].name, sizeof d->a[0].name, "%s", image);
    d->a[0].sample = (ir_type){IR_U8, 3, {1, ds->h, ds->w}};
    d->a[0].data = ds->images;
    d->a[0].stride = ds->h * ds->w;
    d->a[0].scale = 1;
    snprintf(d->a[1].name, sizeof d->a[1].name, "%s", label);
    d->a[1].sample = (ir_type){IR_U8, 0, {0}};
    d->a[1].data = ds->labels;
    d->a[1].stride = 1;
}

const cli_array *cli_data_find(const cli_data *d, const char *name)
{
    for (int i = 0; i < d->narrays; i++)
        if (strcmp(d->a[i].name, name) == 0)
            return &d->a[i];
    return NULL;
}

void cli_array_gather(const cli_array *a, const int64_t *order, int64_t first, int64_t count,
                      ir_dtype dtype, void *dst)
{
    int64_t size = ir_type_numel(&a->sample);
    size_t es = ir_host_size(a->sample.dtype);
    for (int64_t b = 0; b < count; b++) {
        int64_t k = order ? order[first + b] : first + b;
        const void *src = (const char *)a->data + (size_t)(a->offset + k * a->stride) * es;
        if (ir_is_float(dtype)) {
            float *o = (float *)dst + b * size;
            if (a->sample.dtype == IR_U8)
                for (int64_t i = 0; i < size; i++)
                    o[i] = a->scale ? (float)((const uint8_t *)src)[i] / 255.0f
                                    : (float)((const uint8_t *)src)[i]; /* as torch: x.float() / 255 */
            else
                memcpy(o, src, (size_t)size * sizeof *o);
            continue;
        }
        for (int64_t i = 0; i < size; i++) {
            int64_t v = a->sample.dtype == IR_U8 ? ((const uint8_t *)src)[i]
                      : a->sample.dtype == IR_I32 ? ((const int32_t *)src)[i]
                      : ((const int64_t *)src)[i];
            if (dtype == IR_I64)
                ((int64_t *)dst)[b * size + i] = v;
            else if (dtype == IR_I32)
                ((int32_t *)dst)[b * size + i] = (int32_t)v;
            else
                ((uint8_t *)dst)[b * size + i] = (uint8_t)v;
        }
    }
}

void cli_data_free(cli_data *d)
{
    for (int i = 0; i < d->nowned; i++)
        base_free(d->owned[i]);
    memset(d, 0, sizeof *d);
}
