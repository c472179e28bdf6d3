/* libFuzzer target for the IDX data set reader (tools/data.c), which reads
 * files of unknown origin, plain or gzipped: the input bytes are one IDX file
 * as it lies on disk (a gzip stream among them: zlib's gzread reads both).
 * It is loaded as a split's images (rank 3) and, again, as its labels (rank
 * 1), each beside a well-formed partner file with as many examples as the
 * input's header says; then gzipped, under the ".gz" name, which must load to
 * the same result as the bytes themselves (unless they were a gzip stream
 * already).  A crash, a sanitizer report, a leak, a timeout, or a refusal
 * without a message is a bug; a split that loads must load again to the same
 * examples, and its batches, order and class count must be computable.
 *
 * Build and run: bash tools/fuzz.sh SECONDS idx (see tests/fuzz/fuzz.cmake);
 * the seeds, small IDX files plain and gzipped and the inputs that once failed
 * here, are written by each run (LLVMFuzzerInitialize: --seeds DIR). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data.h"
#include "fuzz_files.h"

#define MAX_PARTNER (1 << 20)   /* examples in a partner file at most */

static char dir[64];
static const char *const names[2] = {"train-labels-idx1-ubyte", "train-images-idx3-ubyte"};

/* Removes the files of dir/sub. */
static void clear(const char *sub)
{
    char path[256];
    for (int k = 0; k < 2; k++)
        for (int gz = 0; gz < 2; gz++) {
            snprintf(path, sizeof path, "%s/%s/%s%s", dir, sub, names[k], gz ? ".gz" : "");
            unlink(path);
        }
}

static void clean_up(void)
{
    char path[256];
    for (int k = 0; k < 2; k++) {
        clear(k ? "gz" : "plain");
        snprintf(path, sizeof path, "%s/%s", dir, k ? "gz" : "plain");
        rmdir(path);
    }
    rmdir(dir);
}

static int write_file(const char *path, const uint8_t *data, size_t size, int gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        if (!f)
            return -1;
        int ok = size == 0 || gzwrite(f, data, (unsigned)size) == (int)size;
        return gzclose(f) == Z_OK && ok ? 0 : -1;
    }
    return fuzz_write_file(path, data, size);
}

/* An IDX file of unsigned bytes: n examples of rank - 1 dimensions of size side,
 * example i holding (i * 7 + k) % 10 at byte k. */
static uint8_t *idx_file(int rank, uint32_t n, uint32_t side, size_t *size)
{
    size_t each = rank == 3 ? (size_t)side * side : 1, head = 4 + 4 * (size_t)rank;
    *size = head + n * each;
    uint8_t *b = malloc(*size);
    if (!b)
        abort();
    uint32_t dims[3] = {n, side, side};
    b[0] = b[1] = 0, b[2] = 0x08, b[3] = (uint8_t)rank;
    for (int d = 0; d < rank; d++)
        for (int k = 0; k < 4; k++)
            b[4 + 4 * d + k] = (uint8_t)(dims[d] >> (24 - 8 * k));
    for (size_t i = 0; i < n * each; i++)
        b[head + i] = (uint8_t)((i / each * 7 + i % each) % 10);
    return b;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    snprintf(dir, sizeof dir, "/tmp/fuzz_idx.%ld", (long)getpid());
    atexit(clean_up);
    /* --seeds DIR: write small IDX files there, plain and gzipped, then stop */
    for (int i = 1; i + 1 < *argc; i++)
        if (strcmp((*argv)[i], "--seeds") == 0) {
            static const struct { int rank; uint32_t n, side; } seeds[] = {
                {3, 3, 2}, {3, 2, 28}, {1, 3, 0}, {1, 40, 0}};
            for (size_t k = 0; k < sizeof seeds / sizeof *seeds; k++)
                for (int gz = 0; gz < 2; gz++) {
                    char path[4096];
                    size_t size;
                    uint8_t *b = idx_file(seeds[k].rank, seeds[k].n, seeds[k].side, &size);
                    snprintf(path, sizeof path, "%s/seed_idx%d_%u%s", (*argv)[i + 1],
                             seeds[k].rank, seeds[k].n, gz ? ".gz" : "");
                    if (write_file(path, b, size, gz) != 0) {
                        fprintf(stderr, "fuzz_idx: cannot write %s\n", path);
                        abort();
                    }
                    free(b);
                }
            /* a regression: 36 bytes whose header promises 4.5 GiB, which the
             * reader allocated before reading any (libFuzzer's malloc limit) */
            static const uint8_t promise[36] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0xc0, 0,
                                                0, 0, 0xc0, 0, 1, 2, 3};
            char path[4096];
            snprintf(path, sizeof path, "%s/seed_promise_beyond_file", (*argv)[i + 1]);
            if (write_file(path, promise, sizeof promise, 0) != 0)
                abort();
            exit(0);
        }
    return 0;
}

typedef struct {
    int rc;
    cli_dataset ds;
} result;

/* Loads split "train" from dir/sub, whose role file (images or labels) holds
 * the input (gzipped under the .gz name when gz) and whose other file is
 * well formed. */
static result load(const char *sub, int images, const uint8_t *data, size_t size, int gz)
{
    char d[128], path[256];
    snprintf(d, sizeof d, "%s/%s", dir, sub);
    mkdir(dir, 0777);
    mkdir(d, 0777);
    clear(sub); /* what an earlier input left */
    uint32_t n = 1; /* the partner holds as many examples as the input's header says */
    if (size >= 8) {
        n = (uint32_t)data[4] << 24 | (uint32_t)data[5] << 16 | (uint32_t)data[6] << 8 | data[7];
        if (n == 0 || n > MAX_PARTNER)
            n = 1;
    }
    size_t psize;
    uint8_t *partner = idx_file(images ? 1 : 3, n, 1, &psize);
    snprintf(path, sizeof path, "%s/%s", d, names[!images]);
    int ok = write_file(path, partner, psize, 0) == 0;
    free(partner);
    snprintf(path, sizeof path, "%s/%s%s", d, names[images], gz ? ".gz" : "");
    ok = ok && write_file(path, data, size, gz) == 0;
    if (!ok) {
        fprintf(stderr, "fuzz_idx: cannot write into %s\n", d);
        abort();
    }
    result r;
    char err[4096] = "";
    r.rc = cli_dataset_load(&r.ds, d, "train", err, sizeof err);
    if (r.rc != 0 && err[0] == '\0') {
        fputs("fuzz_idx: a data set was refused without a message\n", stderr);
        abort();
    }
    if (r.rc == 0 && (r.ds.n < 1 || r.ds.h < 1 || r.ds.w < 1 || !r.ds.images || !r.ds.labels)) {
        fputs("fuzz_idx: a data set loaded with an empty dimension\n", stderr);
        abort();
    }
    return r;
}

static int same(const result *a, const result *b)
{
    if (a->rc != b->rc)
        return 0;
    if (a->rc != 0)
        return 1;
    return a->ds.n == b->ds.n && a->ds.h == b->ds.h && a->ds.w == b->ds.w &&
           memcmp(a->ds.images, b->ds.images, (size_t)(a->ds.n * a->ds.h * a->ds.w)) == 0 &&
           memcmp(a->ds.labels, b->ds.labels, (size_t)a->ds.n) == 0;
}

/* What training does with a split: the classes, an epoch's order, a batch. */
static void use(const cli_dataset *ds)
{
    int classes = cli_dataset_classes(ds);
    if (classes < 1 || classes > 256)
        abort();
    int64_t n = ds->n < 4096 ? ds->n : 4096, count = n < 4 ? n : 4;
    cli_dataset part = *ds;
    part.n = n;
    int64_t *order = malloc((size_t)n * sizeof *order);
    float *images = malloc((size_t)(count * ds->h * ds->w) * sizeof *images);
    int32_t *labels = malloc((size_t)count * sizeof *labels);
    if (!order || !images || !labels)
        abort();
    cli_dataset_order(order, n, 7, 1);
    cli_dataset_batch(&part, order, n - count, count, images, labels);
    for (int64_t i = 0; i < count; i++)
        if (labels[i] < 0 || labels[i] >= classes || images[i * ds->h * ds->w] < 0.0f ||
            images[i * ds->h * ds->w] > 1.0f)
            abort();
    free(order);
    free(images);
    free(labels);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int gzip_stream = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    for (int images = 0; images < 2; images++) {
        result a = load("plain", images, data, size, 0);
        if (a.rc == 0) {
            use(&a.ds);
            result again = load("plain", images, data, size, 0);
            if (!same(&a, &again)) {
                fputs("fuzz_idx: a data set loads twice to different examples\n", stderr);
                abort();
            }
            cli_dataset_free(&again.ds);
        }
        result z = load("gz", images, data, size, 1);
        if (!gzip_stream && !same(&a, &z)) {
            fprintf(stderr, "fuzz_idx: the file and its gzip load differently (%d, %d)\n", a.rc,
                    z.rc);
            abort();
        }
        cli_dataset_free(&a.ds);
        cli_dataset_free(&z.ds);
    }
    return 0;
}
