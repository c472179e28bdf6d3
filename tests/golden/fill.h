/* The test data of the PyTorch golden files: every tensor is filled by a formula
 * of its gnc name, the same as fill() in tests/golden/gen_golden.py, so the files
 * need not store inputs or weights.  Floats in [-1, 1) scaled by the name's
 * suffix (running_var around 1, biases small, weights by 1/sqrt(fan_in)); i32 and
 * i64 tensors hold class labels (i * 7 + 3) mod 10. */
#ifndef GNC_TEST_FILL_H
#define GNC_TEST_FILL_H

#include "ir.h"

/* Fills data (the executor's buffer of v) with v's test data. */
void golden_fill(const ir_value *v, void *data);

#endif
