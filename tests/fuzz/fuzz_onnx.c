/* libFuzzer target for the ONNX importer (frontend/onnx/, fe_load_onnx), which
 * reads models of unknown origin: the input bytes are a .onnx file.  There is
 * no entry point from memory, so each input is written to model.onnx in a
 * private empty folder (made once, removed at exit): external data is read
 * from the model's folder, where the fuzzer can name nothing of the host's but
 * the model itself.  Each input is imported twice, with a symbolic "batch"
 * given by -D and without, and read once as a TensorProto file
 * (fe_onnx_read_tensor, the conformance suite's .pb files).  A graph that
 * comes back is verified and printed (to /dev/null); the diagnostics are
 * rendered (to /dev/null).  A crash, a sanitizer report, a leak, a timeout, a
 * returned graph that fails ir_verify, or a refusal without an error on the
 * diag (without a message, for a tensor) is a bug.
 *
 * Build and run: bash tools/fuzz.sh SECONDS onnx (see tests/fuzz/fuzz.cmake);
 * the seeds are small valid models written by tests/onnx/hostile_gen.py --seeds
 * and two of the PyTorch exports of tests/onnx/models/. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "diag.h"
#include "frontend.h"
#include "fuzz_files.h"
#include "ir.h"
#include "onnx.h"

static char dir[64], path[96];
static FILE *devnull;

static void clean_up(void)
{
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    snprintf(dir, sizeof dir, "/tmp/fuzz_onnx.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("fuzz_onnx: mkdtemp");
        abort();
    }
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    devnull = fopen("/dev/null", "w");
    if (!devnull)
        abort();
    atexit(clean_up);
    return 0;
}

static void import(const fe_options *opt)
{
    diag d;
    diag_init(&d);
    ir_graph *g = fe_load_onnx(path, opt, &d);
    if (g) {
        /* the importer promises a graph that verifies, as the .net frontend does */
        if (ir_verify(g, &d) > 0) {
            diag_print(&d, stderr);
            fputs("fuzz_onnx: the importer returned a graph that does not verify\n", stderr);
            abort();
        }
        ir_print(g, devnull);
        ir_graph_free(g);
    } else if (d.nerrors == 0) {
        diag_print(&d, stderr);
        fputs("fuzz_onnx: the importer refused the model without an error\n", stderr);
        abort();
    }
    diag_print(&d, devnull);
    diag_free(&d);
}

static void read_tensor(void)
{
    ir_type t;
    void *data = NULL;
    char name[256], err[4096] = "";
    if (fe_onnx_read_tensor(path, &t, &data, name, sizeof name, err, sizeof err) == 0) {
        /* the elements are all there: touching the last byte is no overflow */
        size_t bytes = ir_type_bytes(&t);
        if (bytes > 0 && data)
            fprintf(devnull, "%s %d\n", name, ((const unsigned char *)data)[bytes - 1]);
        base_free(data);
    } else if (err[0] == '\0') {
        fputs("fuzz_onnx: a tensor refused without a message\n", stderr);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fuzz_write_file(path, data, size) != 0)
        return 0;
    static const char *const names[] = {"batch"}, *const values[] = {"2"};
    const fe_options with = {NULL, 1, names, values}, without = {NULL, 0, NULL, NULL};
    import(&with);
    import(&without);
    read_tensor();
    return 0;
}
