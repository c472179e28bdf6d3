/* NumPy .npy reading and writing for the gnc command. */
#ifndef GNC_NPY_H
#define GNC_NPY_H

#include <stddef.h>

#include "ir.h"

/* Reads path ("-": standard input) into out, which holds want's elements
 * (float32 for float dtypes).  The file's dtype and shape must match want
 * exactly. */
int npy_read(const char *path, const ir_type *want, void *out, char *err, size_t errlen);
/* Reads path whole, whatever its shape: *t gets its dtype (f32, i32, i64 or
 * u8, as its numpy dtype says) and shape, *data the elements (base_malloc'd;
 * base_free it). */
int npy_load(const char *path, ir_type *t, void **data, char *err, size_t errlen);
/* Writes atomically (a temporary file renamed into place). */
int npy_write(const char *path, const ir_type *t, const void *data, char *err, size_t errlen);

#endif
