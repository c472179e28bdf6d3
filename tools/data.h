/* Data sets of gnc train and gnc eval (docs/train.md, "Data"): IDX files
 * (below), and named arrays (further down), which the loop feeds alike.
 *
 * Data sets in IDX files (MNIST, Fashion-MNIST), gzipped or not.
 *
 * A split is two files in one folder: "<prefix>-images-idx3-ubyte" (u8 [n, h, w])
 * and "<prefix>-labels-idx1-ubyte" (u8 [n]), each optionally ending in ".gz".
 * Loading checks every header field and size against the data actually read, so
 * a truncated, corrupt or mismatched file is an error with a message, never a
 * crash.  Batches are scaled to [0, 1] floats, in a seeded shuffled order. */
#ifndef GNC_DATA_H
#define GNC_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"

typedef struct {
    int64_t n;            /* examples */
    int64_t h, w;         /* image size */
    uint8_t *images;      /* [n, h, w] */
    uint8_t *labels;      /* [n] */
} cli_dataset;

/* Loads split prefix ("train" or "t10k") from dir.  Returns 0, or -1 with a
 * message naming the file and the problem. */
int cli_dataset_load(cli_dataset *ds, const char *dir, const char *prefix, char *err,
                    size_t errlen);
void cli_dataset_free(cli_dataset *ds);

/* The largest label + 1. */
int cli_dataset_classes(const cli_dataset *ds);

/* A permutation of 0..n-1 for (seed, epoch): the same inputs give the same order
 * on every machine. */
void cli_dataset_order(int64_t *order, int64_t n, uint64_t seed, uint64_t epoch);

/* Copies examples order[first .. first+count) as floats in [0, 1] into images
 * ([count, 1, h, w]) and their labels into labels. */
void cli_dataset_batch(const cli_dataset *ds, const int64_t *order, int64_t first, int64_t count,
                      float *images, int32_t *labels);

/* Data sets of named arrays (docs/train.md, "Data sets"): a folder of
 * NAME.npy files (or its train/ and test/ subfolders), a safetensors file
 * (tensors NAME, or train.NAME and test.NAME), or a token stream (--tokens)
 * cut into windows.  An array's first dimension is the sample; sample k of
 * an array is its sample-shaped block at element offset + k * stride (a token
 * stream's windows overlap: stride seq, offset 0 for tokens, 1 for next). */
#define CLI_MAX_ARRAYS 64

typedef struct {
    char name[64];
    ir_type sample;             /* one sample's dtype and shape */
    const void *data;
    int64_t offset, stride;     /* in elements */
    int scale;                  /* u8 into a float input as x / 255 (IDX images) */
} cli_array;

typedef struct {
    int64_t n;                  /* samples */
    int narrays;
    cli_array a[CLI_MAX_ARRAYS];
    const char *what;           /* "training", "test": for messages */
    void *owned[CLI_MAX_ARRAYS + 1];
    int nowned;
    int64_t stream;             /* a token stream: its length in tokens (else 0) */
} cli_data;

/* Loads --data PATH (a folder of .npy files or a safetensors file) into
 * train and test: the explicit test split where there is one, else the last
 * test_fraction of the samples (test then borrows train's arrays).  0, or -1
 * with a message naming the array and the problem. */
int cli_data_load(const char *path, double test_fraction, cli_data *train, cli_data *test,
                  char *err, size_t errlen);
/* Loads --tokens FILE (text: a token per byte; .npy: integer ids [N]) and
 * cuts it: the last test_fraction of the stream is test's, each split cut
 * into windows of seq + 1 tokens starting every seq tokens, arrays "tokens"
 * (w[0:seq]) and "next" (w[1:seq+1]).  *max_id gets the largest id. */
int cli_data_tokens(const char *path, double test_fraction, int64_t seq, cli_data *train,
                    cli_data *test, int64_t *max_id, char *err, size_t errlen);
/* A view of an IDX data set: images (scaled) as `image`, labels as `label`. */
void cli_data_from_idx(cli_data *d, const cli_dataset *ds, const char *image, const char *label);
const cli_array *cli_data_find(const cli_data *d, const char *name);
/* Copies sample order[first + b] (first + b without order) of a, for b in
 * [0, count), into dst as dtype (f32 for every float dtype, as the runtime's
 * host copies hold them). */
void cli_array_gather(const cli_array *a, const int64_t *order, int64_t first, int64_t count,
                      ir_dtype dtype, void *dst);
void cli_data_free(cli_data *d);

#endif
