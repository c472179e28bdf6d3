/* Data sets in IDX files (MNIST, Fashion-MNIST), gzipped or not.
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

#endif
