/* libFuzzer target for the safetensors checkpoint loader (runtime/format/checkpoint.c),
 * which reads headers from files of unknown origin: the input bytes are a
 * checkpoint file, loaded into two programs, a training step (its optimizer
 * state: the file must hold exactly its tensors) and an inference program (it
 * ignores what it does not hold).  Each input is loaded as it is, and again
 * with its first 8 bytes set to the length of the JSON they should count (to
 * the last '}' before a NUL), so that mutations reach the JSON.  A crash, a sanitizer
 * report, a leak, a timeout, or a refusal without a message is a bug; a
 * checkpoint that loads must save again to a file that loads with the same
 * bytes.
 *
 * Build and run: bash tools/fuzz.sh SECONDS checkpoint (see
 * tests/fuzz/fuzz.cmake); the seeds are checkpoints of these two programs,
 * which the first run writes (LLVMFuzzerInitialize: --seeds DIR). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "diag.h"
#include "exec.h"
#include "fuzz_files.h"
#include "ir.h"

static const char train_ir[] =
    "graph train {\n"
    "  input %x: f32[2, 3]\n"
    "  param %w: f32[4, 3] = uniform(-1.0, 1.0)\n"
    "  param %b: f32[4] = zeros\n"
    "  buffer %rm: f32[4] = zeros\n"
    "  state %w.m: f32[4, 3] = zeros\n"
    "  %y: f32[2, 4] = dense(%x, %w, %b)\n"
    "  output y = %y\n"
    "}\n";

static const char infer_ir[] =
    "graph infer {\n"
    "  input %x: f32[2, 3]\n"
    "  param %w: f32[4, 3] = uniform(-1.0, 1.0)\n"
    "  param %b: f32[4] = zeros\n"
    "  %y: f32[2, 4] = dense(%x, %w, %b)\n"
    "  output y = %y\n"
    "}\n";

typedef struct {
    ir_graph *g;
    rt_exec *x;
} program;

static program programs[2];
static char path[64], again[80];

static program make(const char *text)
{
    diag d;
    diag_init(&d);
    char err[512];
    program p = {ir_parse("fuzz.gir", text, strlen(text), &d), NULL};
    if (!p.g || ir_verify(p.g, &d) != 0 || !(p.x = rt_exec_new(p.g, err, sizeof err))) {
        diag_print(&d, stderr);
        fputs("fuzz_checkpoint: the programs do not build\n", stderr);
        abort();
    }
    diag_free(&d);
    return p;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    programs[0] = make(train_ir);
    programs[1] = make(infer_ir);
    snprintf(path, sizeof path, "/tmp/fuzz_checkpoint.%ld", (long)getpid());
    snprintf(again, sizeof again, "%s.again", path);
    /* --seeds DIR: write a checkpoint of each program there, then go on */
    for (int i = 1; i + 1 < *argc; i++)
        if (strcmp((*argv)[i], "--seeds") == 0) {
            char err[512], seed[4096];
            for (int k = 0; k < 2; k++) {
                rt_ckpt_meta meta = {0};
                rt_ckpt_meta_set(&meta, "step", "7");
                snprintf(seed, sizeof seed, "%s/seed_%s.safetensors", (*argv)[i + 1],
                         k ? "infer" : "train");
                if (rt_checkpoint_save(programs[k].g, programs[k].x, seed, &meta, err,
                                       sizeof err) != 0) {
                    fprintf(stderr, "fuzz_checkpoint: %s\n", err);
                    abort();
                }
                rt_ckpt_meta_free(&meta);
            }
            exit(0);
        }
    return 0;
}

static uint8_t *read_file(const char *from, size_t *size)
{
    FILE *f = fopen(from, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    uint8_t *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return b;
}

static void load(const uint8_t *data, size_t size)
{
    if (fuzz_write_file(path, data, size) != 0)
        return;
    for (int k = 0; k < 2; k++) {
        program *p = &programs[k];
        char err[4096] = "";
        rt_ckpt_meta meta;
        if (rt_checkpoint_load(p->g, p->x, path, &meta, err, sizeof err) != 0) {
            if (err[0] == '\0') {
                fputs("fuzz_checkpoint: a checkpoint was refused without a message\n", stderr);
                abort();
            }
            continue;
        }
        /* what loaded saves and loads again, to the same bytes */
        size_t n1, n2;
        uint8_t *a = NULL, *b = NULL;
        if (rt_checkpoint_save(p->g, p->x, again, &meta, err, sizeof err) != 0 ||
            !(a = read_file(again, &n1)) ||
            rt_checkpoint_load(p->g, p->x, again, NULL, err, sizeof err) != 0 ||
            rt_checkpoint_save(p->g, p->x, again, &meta, err, sizeof err) != 0 ||
            !(b = read_file(again, &n2)) || n1 != n2 || memcmp(a, b, n1) != 0) {
            fprintf(stderr, "fuzz_checkpoint: a loaded checkpoint does not save and load "
                    "again: %s\n", err);
            abort();
        }
        free(a);
        free(b);
        rt_ckpt_meta_free(&meta);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load(data, size);
    if (size >= 8) { /* the header's length set to what follows, to reach the JSON */
        uint64_t len = 0;
        for (int i = 0; i < 8; i++)
            len |= (uint64_t)data[i] << (8 * i);
        uint64_t fit = 0; /* to the last '}' before the first NUL: the JSON's end */
        for (size_t i = 8; i < size && data[i] != 0; i++)
            if (data[i] == '}')
                fit = i - 7;
        if (fit >= 2 && len != fit) {
            uint8_t *fixed = malloc(size);
            if (!fixed)
                return 0;
            memcpy(fixed, data, size);
            for (int i = 0; i < 8; i++)
                fixed[i] = (uint8_t)(fit >> (8 * i));
            load(fixed, size);
            free(fixed);
        }
    }
    return 0;
}
