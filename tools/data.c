/* IDX data sets: see data.h.  zlib's gzread reads gzipped and plain files alike. */
#include "data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base.h"

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
