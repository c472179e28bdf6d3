/* Plan files: a compiled program in one self-contained, versioned file
 * (docs/plan.md has the format byte by byte).
 *
 * A plan holds what the runtime needs to run a program and nothing it would
 * have to recompute: the partitioned, optimized program as canonical IR text
 * (parameters with their initializers and shards, inputs, outputs, the loss,
 * the updates of a training step), each device's arena size and every node
 * result's offset in it (the memory plan), and the strategy and flags it was
 * compiled with; with kernels, the CUDA backend's sections (each module's
 * generated source and its images, the timed library algorithms).  A loader
 * skips a section it does not know unless the section says it is required.
 *
 *   // given: const ir_graph *g, const mp_plan *mp, const rt_plan_kv *meta, int nmeta
 *   #include "exec.h"
 *   char err[512];
 *   rt_plan_write_program("a.gnc", g, mp, meta, nmeta, NULL, NULL, 0, err, sizeof err);   compile -o
 *   rt_plan *p = rt_plan_load("a.gnc", err, sizeof err);        NULL: err says why
 *   rt_exec *x = rt_exec_new_planned(p->g, p->mp->offset_by_id, p->mp->device_bytes,
 *                                    err, sizeof err);
 *   rt_exec_free(x);
 *   rt_plan_free(p);                                            after the executor
 *
 * The loader trusts nothing in the file: it checks every size, count and
 * offset with overflow-safe arithmetic, every checksum, the IR text (ir_parse,
 * ir_verify), the device counts against each other, and proves the memory plan
 * (every offset inside its arena, no two buffers overlapping while both are
 * live: mp_check).  Anything inconsistent is an error with a message, never an
 * assert or a crash.
 *
 * Writing is deterministic (the same program, plan and metadata give the same
 * bytes: no time, no address, a fixed order) and atomic (a temporary file
 * renamed into place).  The writer reads its own bytes back through the loader
 * before the rename, so a plan it leaves behind always loads. */
#ifndef GNC_PLAN_H
#define GNC_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "program.h"
#include "ir.h"
#include "passes.h"

#define RT_PLAN_MAGIC "\x89GNC\r\n\x1a\n"   /* 8 bytes, as PNG's: see docs/plan.md */
/* The format version: raised where an older loader would misread a file
 * (docs/plan.md, "Versions"), and where an op's attributes or their meaning
 * changed, since the program section is IR text: 2 since cross_entropy and
 * nll_loss took ignore_index and split, embedding padding_idx, the pools
 * ceil_mode (gnc 0.2.0). */
#define RT_PLAN_VERSION 2
#define RT_PLAN_HEADER_BYTES 40
#define RT_PLAN_ENTRY_BYTES 32           /* one entry of the section table */
#define RT_PLAN_MAX_SECTIONS 65536
#define RT_PLAN_MAX_META 64              /* key=value lines of the meta section */
#define RT_PLAN_MAX_BYTES ((uint64_t)1 << 36)   /* 64 GiB: larger files are refused */
#define RT_PLAN_ALL_DEVICES 0xffffffffu  /* a section's device: the whole program */

/* Header flags. */
#define RT_PLAN_TRAINING 1u              /* the program is a training step */

/* Section flags. */
#define RT_SECTION_REQUIRED 1u           /* a loader that does not know the kind refuses
                                            the plan instead of skipping the section */

/* Section kinds.  ORDER: rt_section_name in plan.c and the table in docs/plan.md. */
typedef enum {
    RT_SECTION_PROGRAM = 1,     /* the program as IR text (docs/ir.md); required */
    RT_SECTION_MEMORY = 2,      /* arena sizes and node results' offsets; required */
    RT_SECTION_META = 3,        /* key=value lines: strategy, flags, ...; optional */
    /* 4 .. 15: reserved for the core format */
    /* 16 .. 31: the CUDA backend's (18 to 21 reserved, their payloads not
       defined: docs/plan.md) */
    RT_SECTION_CUDA_SOURCE = 16,    /* the generated CUDA C, for NVRTC */
    RT_SECTION_KERNEL_IMAGE = 17,   /* a cubin or PTX module for one architecture */
    RT_SECTION_STEPS = 18,          /* one device's launch list: kernels with grid,
                                       block and arguments, library calls, copies,
                                       collectives */
    RT_SECTION_COMM_GROUPS = 19,    /* the collectives' NCCL groups */
    RT_SECTION_REGIONS = 20,        /* one device's regions beside its arena: parameters,
                                       inputs, workspace */
    RT_SECTION_WEIGHTS = 21,        /* weights to start from (safetensors), instead of
                                       the initializers */
    RT_SECTION_TUNING = 22          /* the library algorithms gnc compile --autotune timed
                                       fastest, a line per step (docs/plan.md) */
} rt_section_kind;

/* The name of a kind ("program", "kernel_image"), or NULL for an unknown one. */
const char *rt_section_name(uint32_t kind);
/* Whether this loader reads sections of kind (the CUDA ones in plan_cuda.c);
 * a required section of any other kind is refused. */
int rt_section_is_read(uint32_t kind);

/* An entry of the section table, as read. */
typedef struct {
    uint32_t kind, flags, device, crc;
    uint64_t offset, size;
} rt_plan_section;

/* A line of the meta section. */
typedef struct {
    const char *key, *value;
} rt_plan_kv;

/* One generated module as a plan stores it (sections cuda_source and
 * kernel_image), checked for form by the loader: its source's SHA-256 holds,
 * and it has a cubin for each architecture of the meta's archs, in that order,
 * then the PTX of the newest, each compiled from that source. */
typedef struct {
    unsigned char sha256[32];   /* of source */
    char *source;               /* NUL-terminated; source_len bytes before the NUL */
    size_t source_len;
    int nimages;
    cg_image *images;           /* arch, ptx, data, size */
} rt_plan_module;

typedef struct rt_plan {
    uint32_t version;
    uint64_t file_bytes;
    int ndevices;
    int training;               /* a training step: the program has updates */
    ir_graph *g;                /* the program, parsed and verified */
    mp_plan *mp;                /* its memory plan, proven: ndevices, device_bytes,
                                   offset_by_id (by g's value ids); no bufs */
    rt_plan_kv *meta;           /* the meta section's lines, in file order */
    int nmeta;
    rt_plan_section *sections;  /* the table, known kinds and skipped ones alike */
    int nsections;
    int nmodules;               /* the CUDA backend's modules; 0: the plan has none */
    rt_plan_module *modules;
    char *tuning;               /* the tuning section's text (NUL-terminated), or NULL;
                                   rt_plan_program checks and applies it */
    unsigned char *weights;     /* the weights section (a safetensors file that loads into
                                   g), which sessions start from, or NULL */
    size_t weights_size;
} rt_plan;

/* A section beside the program, memory and meta, for rt_plan_encode_with. */
typedef struct {
    uint32_t kind, flags, device;
    const void *data;
    size_t size;
} rt_plan_blob;

/* The bytes of the plan of program g (verified, memory plan mp from
 * mp_plan_graph and proven) with meta's lines in their order, into *data
 * (malloc'd, *size bytes).  Keys are 1 to 64 of [a-z0-9_.-], unique; values up
 * to 4096 bytes of printable ASCII.  The bytes are decoded again before they
 * are returned.  Returns 0, or -1 with a message. */
int rt_plan_encode(const ir_graph *g, const mp_plan *mp, const rt_plan_kv *meta, int nmeta,
                   unsigned char **data, size_t *size, char *err, size_t errlen);
/* As rt_plan_encode, with extra sections after the meta, in their order. */
int rt_plan_encode_with(const ir_graph *g, const mp_plan *mp, const rt_plan_kv *meta, int nmeta,
                        const rt_plan_blob *extra, int nextra, unsigned char **data,
                        size_t *size, char *err, size_t errlen);
/* The plan with cg's modules (sections cuda_source and kernel_image): cg must
 * be generated from this very plan's program and memory plan as a loader
 * decodes them, with the precision and archs of meta ("precision", "archs"),
 * and compiled (cg_compile: a cubin per arch and the PTX).  NULL cg: as
 * rt_plan_encode.  Writes path atomically, after reading the bytes back;
 * path "-": to standard output. */
int rt_plan_encode_program(const ir_graph *g, const mp_plan *mp, const rt_plan_kv *meta,
                           int nmeta, const cg_program *cg, unsigned char **data, size_t *size,
                           char *err, size_t errlen);
/* As rt_plan_encode_program, with extra sections after the CUDA ones (the
 * weights section). */
int rt_plan_encode_program_with(const ir_graph *g, const mp_plan *mp, const rt_plan_kv *meta,
                                int nmeta, const cg_program *cg, const rt_plan_blob *extra,
                                int nextra, unsigned char **data, size_t *size, char *err,
                                size_t errlen);
int rt_plan_write_program(const char *path, const ir_graph *g, const mp_plan *mp,
                          const rt_plan_kv *meta, int nmeta, const cg_program *cg,
                          const rt_plan_blob *extra, int nextra, char *err, size_t errlen);

/* The program a CUDA runtime runs: cg_generate on the plan's program and
 * memory plan with the precision and archs of its meta, each module's source
 * proven byte for byte equal to the stored one (so the stored images are the
 * compiles of exactly this source), and each module's images (a cubin per
 * arch, then PTX) attached from the file as copies (cg_module.images).
 * Returns NULL with a message when the plan has no kernels, when generation
 * fails, or when anything disagrees.  The program borrows p->g and p->mp: free
 * it (cg_program_free) before rt_plan_free(p). */
cg_program *rt_plan_program(const rt_plan *p, char *err, size_t errlen);

/* The architectures of a meta archs list ("sm_80,sm_90") into archs: how many,
 * or -1 when it is not 1 to CG_MAX_ARCHS distinct names sm_NN. */
int rt_plan_archs(const char *list, char archs[][16]);


/* Reads a plan from size bytes at data; name is the file's name in messages.
 * Returns NULL with a message ("NAME: section 2 (memory): ...") when anything
 * is wrong. */
rt_plan *rt_plan_decode(const void *data, size_t size, const char *name, char *err,
                        size_t errlen);
rt_plan *rt_plan_load(const char *path, char *err, size_t errlen);
void rt_plan_free(rt_plan *p);

/* The value of key in p's meta section, or NULL. */
const char *rt_plan_meta(const rt_plan *p, const char *key);

/* Whether data starts with the plan magic (at least 8 bytes). */
int rt_plan_is_plan(const void *data, size_t size);

/* For tests and the fuzzer: recomputes every checksum of the plan in data
 * (the header's and each section's whose bytes lie within size), so that a
 * changed byte reaches the checks behind them. */
void rt_plan_fix_checksums(unsigned char *data, size_t size);

#endif
