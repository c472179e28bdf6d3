/* Checkpoints in the safetensors format (https://github.com/huggingface/safetensors):
 * an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
 * shape and byte range, then the raw little-endian data.  Files load in PyTorch
 * with safetensors.torch.load_file, and gnc reads files written by it.
 *
 * A gnc checkpoint holds every parameter, buffer and optimizer state tensor of a
 * graph under its IR name, and string metadata (step, epoch, seed, the model's
 * hash, ...) in "__metadata__".  A tensor-parallel program's shards of a weight
 * (ir_shard) are saved as the whole tensor under its name, assembled from the
 * shards, and loaded by splitting it into them: its checkpoints are those of the
 * single-device program, and either program loads the other's.  Writes are atomic: a temporary file is written,
 * flushed to disk and renamed over the old one, so a crash mid-write leaves the
 * previous checkpoint intact.  Reads check every size and offset; a file that
 * does not match the graph is refused with the list of differences. */
#ifndef GNC_CHECKPOINT_H
#define GNC_CHECKPOINT_H

#include <stddef.h>

#include "exec.h"
#include "ir.h"

/* The metadata's keys and values, as many as the file has; zero-initialized
 * empty; everything owned (rt_ckpt_meta_free). */
typedef struct {
    int n, cap;
    char **keys, **values;
} rt_ckpt_meta;

/* Saves every param, buffer and state value of g (run by x) with meta. */
int rt_checkpoint_save(const ir_graph *g, rt_exec *x, const char *path, const rt_ckpt_meta *meta, char *err,
                       size_t errlen);

/* Loads path into x's param, buffer and state values.  Every one of them must be
 * in the file with its shape, and, for a training graph (one with state), the
 * file must hold nothing else; an inference graph ignores the rest (a training
 * checkpoint's optimizer state).  Otherwise nothing is changed and err lists the
 * differences (several lines).  meta, if not NULL, receives the file's
 * metadata. */
/* The whole tensor of parameter, buffer or state name (of type t) in x's program
 * g, into out: its data, or its shards' assembled (a tensor-parallel program).
 * Returns 0, or -1 with a message. */
int rt_exec_read_param(const ir_graph *g, rt_exec *x, const char *name, const ir_type *t,
                       void *out, char *err, size_t errlen);
/* The reverse: the whole tensor in (of type t) into name's data in x, each
 * shard its slice, each copy x holds.  The caller then marks x's weights
 * changed (rt_exec_weights_changed, rt_session_push), which also copies them
 * to the devices that read them.  0, or -1 with a message. */
int rt_exec_write_param(const ir_graph *g, rt_exec *x, const char *name, const ir_type *t,
                        const void *in, char *err, size_t errlen);

int rt_checkpoint_load(const ir_graph *g, rt_exec *x, const char *path, rt_ckpt_meta *meta, char *err,
                       size_t errlen);
/* The weights alone: x's parameters and buffers from path, whose other tensors
 * (another run's optimizer state, PyTorch's num_batches_tracked) are ignored;
 * x's optimizer state is left as it is (a fresh run's zeros): training that
 * starts at step 0 from given weights.  The same checks and messages. */
int rt_checkpoint_load_weights(const ir_graph *g, rt_exec *x, const char *path, char *err,
                               size_t errlen);
/* The same from size bytes at data (a plan's weights section), which messages
 * call name; x NULL: only whether they would load into g (0, or -1 with the
 * differences). */
int rt_checkpoint_load_bytes(const ir_graph *g, rt_exec *x, const void *data, size_t size,
                             const char *name, rt_ckpt_meta *meta, char *err, size_t errlen);

/* The checkpoint of g's parameters, buffers and state as their initializers
 * give them for seed (ir_init_fill), in a new buffer (base_free it): the
 * weights an imported model (IR_INIT_DATA) carries into its plan file.  0,
 * or -1 with the reason in err. */
int rt_checkpoint_encode_init(const ir_graph *g, uint64_t seed, void **out, size_t *size,
                              char *err, size_t errlen);

/* A safetensors file read whole, with the checks rt_checkpoint_load makes
 * of its header (keys once each, dtypes of the format, whole-number shapes
 * and offsets, tensors side by side covering the data, no byte of two) and
 * nothing after the data: from a regular file, a pipe or a device, whose
 * data is read as it arrives up to what the header promises.  The tensors
 * in the header's order (at most IR_MAX_RANK dimensions), pointing into the
 * file's header and data, which st owns (rt_safetensors_free).  0, or -1
 * with why (st then empty). */
typedef struct {
    const char *name;
    const char *dtype;          /* the format's name: F32, BF16, I64, ... */
    int rank;
    int64_t dims[IR_MAX_RANK];
    const unsigned char *data;
    uint64_t bytes;
} rt_st_tensor;
typedef struct {
    int n;
    rt_st_tensor *t;
    void *header;               /* the parsed header (cJSON) */
    unsigned char *data;
} rt_safetensors;
int rt_safetensors_read(const char *path, rt_safetensors *st, char *err, size_t errlen);
void rt_safetensors_free(rt_safetensors *st);

void rt_ckpt_meta_set(rt_ckpt_meta *m, const char *key, const char *value);
const char *rt_ckpt_meta_get(const rt_ckpt_meta *m, const char *key);
void rt_ckpt_meta_free(rt_ckpt_meta *m);

#endif
