/* The embedding API (include/gnc/gnc.h), through libgnc alone: this file sees
 * the public header and nothing else.
 *
 *   1. Plans: what loads and what does not (a missing file, bytes that are no
 *      plan, a corrupt plan), with the status of each; a plan's inputs and
 *      outputs as gnc_tensor_info.
 *   2. Sessions: devices (cpu; cuda without a driver, made certain by
 *      GNC_CUDA_LIBDIR=/nonexistent-gnc, or in a build without the toolkit;
 *      unknown names; the default);
 *      inputs and outputs by name with their sizes checked; runs that repeat
 *      to the same bits; seeds that change the parameters; a tensor-parallel
 *      plan on two virtual devices.
 *   3. Training: steps that lower the loss on a fixed batch; a checkpoint
 *      saved mid-way and loaded into a fresh session continues to the same
 *      bits; an inference session takes a training checkpoint's weights;
 *      checkpoints of another model and paths that cannot be written fail.
 *   4. Weights one at a time (test_weights): listed with their sources, read,
 *      written, across a tensor-parallel plan's shards; compile options loss
 *      and strategy.
 *   5. Misuse: runs of the wrong kind of plan, bad learning rates, NULLs
 *      (with and without an error to fill).
 *   6. Threads: sessions of one shared plan, each on its own thread at once
 *      (a training step on two virtual devices), reach the bits one session
 *      reaches alone; plans load on several threads at once.  The
 *      ThreadSanitizer build (tools/test.sh --tsan) runs this.
 *
 *   test_api PLANS_DIR   (tests/api/plans.sh writes the plans) */
#include <gnc/gnc.h>

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int passed, failed;

static void check(int ok, const char *fmt, ...)
{
    if (ok) {
        passed++;
        return;
    }
    failed++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static const char *dir;
static char *path(const char *name)
{
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static const gnc_session_options cpu = {.device = "cpu", .seed = 3};

/* Whether this machine may have a GPU (the rule device.h states, erring
 * towards yes): there the default device is cuda. */
static int gpu_here(void)
{
    return access("/dev/nvidia0", F_OK) == 0 || access("/proc/driver/nvidia/gpus", F_OK) == 0;
}

/* Every input of s's plan from a seeded sequence: floats in [0, 1), integers
 * in [0, 10).  The first failure's status (and err), else GNC_OK. */
static gnc_status feed_inputs(gnc_session *s, const gnc_plan *p, unsigned seed, gnc_error *err)
{
    gnc_status st = GNC_OK;
    for (int i = 0; i < gnc_plan_input_count(p) && st == GNC_OK; i++) {
        gnc_tensor_info t;
        gnc_plan_input(p, i, &t);
        unsigned char *b = malloc(t.bytes);
        size_t n = t.dtype == GNC_I64 ? t.bytes / 8 : t.dtype == GNC_U8 ? t.bytes : t.bytes / 4;
        unsigned x = seed * 2654435761u + (unsigned)i;
        for (size_t k = 0; k < n; k++) {
            x = x * 1664525u + 1013904223u;
            if (t.dtype == GNC_I32)
                ((int32_t *)b)[k] = (int32_t)(x >> 8) % 10;
            else if (t.dtype == GNC_I64)
                ((int64_t *)b)[k] = (int64_t)((x >> 8) % 10);
            else if (t.dtype == GNC_U8)
                b[k] = (unsigned char)((x >> 8) % 10);
            else
                ((float *)b)[k] = (float)(x >> 8) / 16777216.0f;
        }
        st = gnc_session_set_input(s, t.name, b, t.bytes, err);
        free(b);
    }
    return st;
}

static void feed(gnc_session *s, const gnc_plan *p, unsigned seed)
{
    gnc_error err;
    check(feed_inputs(s, p, seed, &err) == GNC_OK, "set inputs: %s", err.message);
}

static float *output(const gnc_session *s, const gnc_plan *p, int i, size_t *bytes)
{
    gnc_tensor_info t;
    gnc_error err;
    gnc_plan_output(p, i, &t);
    float *y = malloc(t.bytes);
    check(gnc_session_output(s, t.name, y, t.bytes, &err) == GNC_OK, "output %s: %s", t.name,
          err.message);
    *bytes = t.bytes;
    return y;
}

static void test_plans(void)
{
    gnc_error err;
    gnc_plan *p = (gnc_plan *)&err; /* set to NULL on failure */
    check(strcmp(gnc_version(), GNC_TEST_VERSION) == 0, "gnc_version");
    check(gnc_plan_load(&p, path("missing.gnc"), &err) == GNC_ERROR_IO && !p &&
          err.status == GNC_ERROR_IO && strstr(err.message, "missing.gnc: cannot read"),
          "a missing plan: IO, '%s'", err.message);
    check(gnc_plan_load_memory(&p, "hello, world", 12, &err) == GNC_ERROR_FORMAT &&
          strstr(err.message, "not a gnc plan file"), "bytes that are no plan: '%s'", err.message);
    check(gnc_plan_load_memory(&p, NULL, 0, &err) == GNC_ERROR_FORMAT, "no bytes at all");

    /* a plan corrupted in memory: its checksum says so */
    FILE *f = fopen(path("lenet.gnc"), "rb");
    static unsigned char buf[1 << 20]; /* a plan with kernels: about 80 KiB */
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    check(n > 100 && n < sizeof buf, "lenet.gnc is read (%zu bytes)", n);
    check(gnc_plan_load_memory(&p, buf, n, &err) == GNC_OK && p, "lenet.gnc from memory: %s",
          err.message);
    gnc_plan_free(p);
    buf[n / 2] ^= 0x10;
    check(gnc_plan_load_memory(&p, buf, n, &err) == GNC_ERROR_FORMAT &&
          strstr(err.message, "checksum does not match"), "a flipped bit: '%s'", err.message);
    check(gnc_plan_load_memory(&p, buf, n - 1, &err) == GNC_ERROR_FORMAT &&
          strstr(err.message, "truncated"), "a byte short: '%s'", err.message);

    check(gnc_plan_load(&p, path("lenet.gnc"), &err) == GNC_OK && err.status == GNC_OK &&
          err.message[0] == '\0', "lenet.gnc loads");
    if (!p)
        return;
    check(gnc_plan_devices(p) == 1 && !gnc_plan_is_training(p), "lenet.gnc: 1 device, inference");
    gnc_tensor_info t;
    check(gnc_plan_input_count(p) == 2 && gnc_plan_input(p, 0, &t) == GNC_OK &&
          strcmp(t.name, "image") == 0 && t.dtype == GNC_F32 && t.rank == 4 && t.dims[0] == 4 &&
          t.dims[3] == 28 && t.bytes == 4 * 784 * 4, "lenet's image input");
    check(gnc_plan_input(p, 1, &t) == GNC_OK && strcmp(t.name, "label") == 0 &&
          t.dtype == GNC_I32 && t.bytes == 16, "lenet's label input");
    check(gnc_plan_output_count(p) == 1 && gnc_plan_output(p, 0, &t) == GNC_OK &&
          strcmp(t.name, "logits") == 0 && t.rank == 2 && t.dims[1] == 10 && t.bytes == 160,
          "lenet's logits output");
    check(gnc_plan_input(p, 2, &t) == GNC_ERROR_ARGUMENT &&
          gnc_plan_output(p, -1, &t) == GNC_ERROR_ARGUMENT, "inputs and outputs out of range");
    gnc_plan_free(p);
    gnc_plan_free(NULL);
}

static void test_sessions(void)
{
    gnc_error err;
    gnc_plan *p;
    gnc_session *s = NULL;
    if (gnc_plan_load(&p, path("lenet.gnc"), &err) != GNC_OK) {
        check(0, "lenet.gnc: %s", err.message);
        return;
    }
    /* cuda where the driver cannot load, even on a machine with a GPU: the
       GPU executor's own message (GNC_TEST_CUDA_RUNTIME: a build with the
       toolkit, tests/api.cmake) */
    setenv("GNC_CUDA_LIBDIR", "/nonexistent-gnc", 1);
    const char *no_cuda = GNC_TEST_CUDA_RUNTIME ? "no CUDA driver (/nonexistent-gnc/libcuda.so.1)"
                                                : "no CUDA runtime (built without the CUDA toolkit)";
    gnc_session_options o = {.device = "cuda"};
    check(gnc_session_init(&s, p, &o, &err) == GNC_ERROR_UNSUPPORTED && !s &&
          strstr(err.message, no_cuda), "cuda: '%s'", err.message);
    gnc_plan *step;
    if (gnc_plan_load(&step, path("lenet-train2.gnc"), &err) == GNC_OK) {
        check(gnc_session_init(&s, step, &o, &err) == GNC_ERROR_UNSUPPORTED && !s &&
              strstr(err.message, no_cuda), "cuda, a training plan: '%s'", err.message);
        gnc_plan_free(step);
    } else {
        check(0, "lenet-train2.gnc: %s", err.message);
    }
    o.device = "tpu";
    check(gnc_session_init(&s, p, &o, &err) == GNC_ERROR_ARGUMENT &&
          strstr(err.message, "unknown device 'tpu'"), "tpu: '%s'", err.message);
    /* the default is cuda where a GPU is present, else cpu (device.h) */
    gnc_status st = gnc_session_init(&s, p, NULL, &err);
    if (!gpu_here())
        check(st == GNC_OK && strcmp(gnc_session_device(s), "cpu") == 0,
              "the default device without a GPU is cpu: %s", err.message);
    gnc_session_free(s);
    s = NULL;
    /* eager is the cuda device's: a cpu session takes it and warns of nothing */
    gnc_session_options eager = {.device = "cpu", .eager = 1};
    st = gnc_session_init(&s, p, &eager, &err);
    check(st == GNC_OK && gnc_session_run(s, &err) == GNC_OK && !gnc_session_warning(s),
          "a cpu session with eager set: %s", err.message);
    gnc_session_free(s);
    s = NULL;
    unsetenv("GNC_CUDA_LIBDIR");

    check(gnc_session_init(&s, p, &cpu, &err) == GNC_OK && s, "a cpu session: %s", err.message);
    if (!s) {
        gnc_plan_free(p);
        return;
    }
    float x[4 * 784];
    check(gnc_session_set_input(s, "nope", x, sizeof x, &err) == GNC_ERROR_ARGUMENT &&
          strstr(err.message, "no input 'nope'"), "an unknown input: '%s'", err.message);
    check(gnc_session_set_input(s, "image", x, sizeof x - 4, &err) == GNC_ERROR_ARGUMENT &&
          strstr(err.message, "input image is f32[4, 1, 28, 28]: 12544 bytes, not 12540"),
          "a short input: '%s'", err.message);
    check(gnc_session_train_step(s, 0.1, 0, &err) == GNC_ERROR_ARGUMENT &&
          strstr(err.message, "no training step"), "a step of an inference plan: '%s'",
          err.message);
    feed(s, p, 1);
    check(gnc_session_run(s, &err) == GNC_OK, "run: %s", err.message);
    size_t bytes;
    float *y1 = output(s, p, 0, &bytes);
    double loss;
    check(gnc_session_loss(s, &loss, &err) == GNC_OK && isfinite(loss) && loss > 0,
          "the loss: %g", loss);
    check(gnc_session_run(s, &err) == GNC_OK, "run again");
    float *y2 = output(s, p, 0, &bytes);
    check(memcmp(y1, y2, bytes) == 0, "two runs on the same inputs: the same bits");
    float small[3];
    check(gnc_session_output(s, "logits", small, sizeof small, &err) == GNC_ERROR_ARGUMENT,
          "a short output buffer");
    check(gnc_session_output(s, "probs", y2, bytes, &err) == GNC_ERROR_ARGUMENT &&
          strstr(err.message, "no output 'probs'"), "an unknown output: '%s'", err.message);

    /* another seed: other parameters, other outputs; the same seed: the same */
    gnc_session *s2, *s3;
    gnc_session_options other = {.device = "cpu", .seed = 4};
    check(gnc_session_init(&s2, p, &other, &err) == GNC_OK, "seed 4");
    check(gnc_session_init(&s3, p, &cpu, &err) == GNC_OK, "seed 3 again");
    feed(s2, p, 1);
    feed(s3, p, 1);
    check(gnc_session_run(s2, &err) == GNC_OK && gnc_session_run(s3, &err) == GNC_OK, "runs");
    float *z2 = output(s2, p, 0, &bytes), *z3 = output(s3, p, 0, &bytes);
    check(memcmp(z2, y1, bytes) != 0, "another seed, other outputs");
    check(memcmp(z3, y1, bytes) == 0, "the same seed, the same outputs");
    free(y1), free(y2), free(z2), free(z3);
    gnc_session_free(s2);
    gnc_session_free(s3);
    gnc_session_free(s);
    gnc_plan_free(p);

    /* two virtual devices, the weights in shards */
    if (gnc_plan_load(&p, path("mlp-tensor2.gnc"), &err) != GNC_OK) {
        check(0, "mlp-tensor2.gnc: %s", err.message);
        return;
    }
    check(gnc_plan_devices(p) == 2 && gnc_plan_output_count(p) == 2, "mlp-tensor2: 2 devices");
    check(gnc_session_init(&s, p, &cpu, &err) == GNC_OK, "mlp-tensor2 session: %s", err.message);
    feed(s, p, 2);
    check(gnc_session_run(s, &err) == GNC_OK, "mlp-tensor2 runs: %s", err.message);
    float *probs = output(s, p, 1, &bytes);
    double sum = 0;
    for (size_t i = 0; i < bytes / 4 / 4; i++)
        sum += probs[i];
    check(fabs(sum - 1) < 1e-5, "mlp-tensor2: a row of probabilities sums to 1 (%g)", sum);
    free(probs);
    gnc_session_free(s);
    gnc_plan_free(p);
}

static int steps(gnc_session *s, int64_t from, int count, double *loss)
{
    gnc_error err;
    for (int k = 0; k < count; k++)
        if (gnc_session_train_step(s, 0.05, from + k, &err) != GNC_OK ||
            gnc_session_loss(s, loss, &err) != GNC_OK) {
            check(0, "step %lld: %s", (long long)(from + k), err.message);
            return -1;
        }
    return 0;
}

static void test_training(void)
{
    gnc_error err;
    gnc_plan *p, *inf;
    gnc_session *a, *b, *c;
    if (gnc_plan_load(&p, path("lenet-train2.gnc"), &err) != GNC_OK ||
        gnc_plan_load(&inf, path("lenet.gnc"), &err) != GNC_OK) {
        check(0, "plans: %s", err.message);
        return;
    }
    check(gnc_plan_is_training(p) && gnc_plan_devices(p) == 2, "lenet-train2: a step on 2");
    check(gnc_plan_input_count(p) == 5, "a training step's inputs: image, label, train.*");
    check(gnc_session_init(&a, p, &cpu, &err) == GNC_OK, "a training session: %s", err.message);
    check(gnc_session_run(a, &err) == GNC_ERROR_ARGUMENT &&
          strstr(err.message, "gnc_session_train_step"), "run on a training plan: '%s'",
          err.message);
    check(gnc_session_train_step(a, -1, 0, &err) == GNC_ERROR_ARGUMENT &&
          gnc_session_train_step(a, NAN, 0, &err) == GNC_ERROR_ARGUMENT &&
          gnc_session_train_step(a, 0.1, -1, &err) == GNC_ERROR_ARGUMENT,
          "negative or NaN learning rates, negative steps");
    feed(a, p, 5);
    double first, loss;
    if (steps(a, 0, 1, &first) != 0 || steps(a, 1, 39, &loss) != 0)
        return;
    check(loss < 0.9 * first, "40 steps on one batch lower the loss: %g -> %g", first, loss);

    /* a checkpoint in the middle: a fresh session continues to the same bits */
    double la, lb;
    check(gnc_session_save_checkpoint(a, path("a.safetensors"), 40, &err) == GNC_OK,
          "save: %s", err.message);
    steps(a, 40, 3, &la);
    gnc_session_options seed9 = {.device = "cpu", .seed = 9};
    check(gnc_session_init(&b, p, &seed9, &err) == GNC_OK, "a second session");
    int64_t at = -1;
    check(gnc_session_load_checkpoint(b, path("a.safetensors"), &at, &err) == GNC_OK && at == 40,
          "load: step %lld, %s", (long long)at, err.message);
    feed(b, p, 5);
    steps(b, 40, 3, &lb);
    check(memcmp(&la, &lb, sizeof la) == 0, "resumed from the checkpoint: %.9g and %.9g", la, lb);

    /* an inference session takes the weights (and leaves the momentum) */
    check(gnc_session_init(&c, inf, &cpu, &err) == GNC_OK, "an inference session");
    feed(c, inf, 5);
    double before, after;
    gnc_session_run(c, &err);
    gnc_session_loss(c, &before, &err);
    check(gnc_session_load_checkpoint(c, path("a.safetensors"), NULL, &err) == GNC_OK,
          "a training checkpoint into an inference session: %s", err.message);
    gnc_session_run(c, &err);
    gnc_session_loss(c, &after, &err);
    check(before != after, "the loaded weights change the outputs (%g, %g)", before, after);

    /* checkpoints that do not fit, paths that do not work */
    gnc_plan *mlp = NULL;
    gnc_session *m = NULL;
    int mlp_ok = gnc_plan_load(&mlp, path("mlp-tensor2.gnc"), &err) == GNC_OK &&
                 gnc_session_init(&m, mlp, &cpu, &err) == GNC_OK;
    check(mlp_ok, "mlp session: %s", err.message);
    if (mlp_ok) {
        check(gnc_session_load_checkpoint(m, path("a.safetensors"), NULL, &err) ==
                  GNC_ERROR_FORMAT && strstr(err.message, "does not match the model") &&
                  !strchr(err.message, '\n'),
              "lenet's checkpoint into mlp: '%s'", err.message);
        check(gnc_session_load_checkpoint(m, path("none.safetensors"), NULL, &err) == GNC_ERROR_IO,
              "a missing checkpoint: '%s'", err.message);
    }
    check(gnc_session_save_checkpoint(a, "/nonexistent-dir/x.safetensors", 1, &err) ==
          GNC_ERROR_IO, "an unwritable checkpoint: '%s'", err.message);
    gnc_session_free(m);
    gnc_plan_free(mlp);

    /* NULLs, with and without an error to fill */
    check(gnc_session_set_input(a, NULL, NULL, 0, NULL) == GNC_ERROR_ARGUMENT, "NULLs, no err");
    check(gnc_session_loss(a, NULL, &err) == GNC_ERROR_ARGUMENT, "loss into NULL");
    check(gnc_session_init(NULL, p, NULL, &err) == GNC_ERROR_ARGUMENT, "no session pointer");
    check(gnc_plan_load(NULL, "x", &err) == GNC_ERROR_ARGUMENT, "no plan pointer");
    gnc_session_free(NULL);
    gnc_session_free(a);
    gnc_session_free(b);
    gnc_session_free(c);
    gnc_plan_free(p);
    gnc_plan_free(inf);
}

/* gnc_compile: the plan of a model, as gnc compile -o makes it (the CLI's
 * lenet-train2.gnc and the API's train to the same bits), and its errors. */
static void test_compile(void)
{
    gnc_error err;
    gnc_plan *cli = NULL, *api = NULL;
    const char *batch8[] = {"batch=8"};
    gnc_compile_options o = {.defines = batch8, .ndefines = 1, .train = 1, .momentum = 0.9,
                             .devices = 2, .no_kernels = 1};
    gnc_status st = gnc_compile(&api, GNC_SOURCE_DIR "/models/lenet.net", &o, &err);
    check(st == GNC_OK && gnc_plan_is_training(api) && gnc_plan_devices(api) == 2,
          "gnc_compile lenet, a training step on 2: %s", err.message);
    if (st == GNC_OK && gnc_plan_load(&cli, path("lenet-train2.gnc"), &err) == GNC_OK) {
        gnc_session *a = NULL, *b = NULL;
        double la = 0, lb = -1;
        check(gnc_session_init(&a, cli, &cpu, &err) == GNC_OK &&
              gnc_session_init(&b, api, &cpu, &err) == GNC_OK, "sessions: %s", err.message);
        if (a && b) {
            feed(a, cli, 5);
            feed(b, api, 5);
            steps(a, 0, 2, &la);
            steps(b, 0, 2, &lb);
            check(la == lb, "the API's plan trains as the CLI's: %.9g, %.9g", lb, la);
        }
        gnc_session_free(a);
        gnc_session_free(b);
    }
    gnc_plan_free(cli);
    gnc_plan_free(api);
    /* what does not compile says where */
    FILE *f = fopen(path("bad.net"), "w");
    if (f) {
        fputs("model m(batch = 4) {\n  input x: f32[batch, 8]\n  y = relu(z)\n  output y\n}\n", f);
        fclose(f);
    }
    api = NULL;
    check(gnc_compile(&api, path("bad.net"), NULL, &err) == GNC_ERROR_FORMAT && !api &&
          strstr(err.message, "bad.net:3:12: error: unknown name 'z'"), "a bad model: '%s'",
          err.message);
    check(gnc_compile(&api, path("none.net"), NULL, &err) != GNC_OK && !api &&
          strstr(err.message, "none.net"), "no file: '%s'", err.message);
    const char *bad[] = {"batch"};
    gnc_compile_options nodef = {.defines = bad, .ndefines = 1};
    check(gnc_compile(&api, GNC_SOURCE_DIR "/models/lenet.net", &nodef, &err) ==
              GNC_ERROR_ARGUMENT && strstr(err.message, "NAME=VALUE"), "a define without '=': '%s'",
          err.message);
    gnc_compile_options prec = {.precision = "fp8"};
    check(gnc_compile(&api, GNC_SOURCE_DIR "/models/lenet.net", &prec, &err) ==
              GNC_ERROR_ARGUMENT && strstr(err.message, "unknown precision 'fp8'"),
          "an unknown precision: '%s'", err.message);
    check(gnc_compile(NULL, "x", NULL, &err) == GNC_ERROR_ARGUMENT, "NULL plan");
}

/* The whole file at p, NULL where it does not read. */
static char *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    char *b = NULL;
    *n = 0;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        rewind(f);
        b = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
            free(b);
            b = NULL;
        }
        *n = b ? (size_t)len : 0;
    }
    if (f)
        fclose(f);
    return b;
}

/* One inference run of plan p on inputs of seed 5: its first output. */
static float *first_output(const gnc_plan *p, size_t *bytes)
{
    gnc_session *s = NULL;
    gnc_error err;
    float *y = NULL;
    *bytes = 0;
    if (gnc_session_init(&s, p, &cpu, &err) == GNC_OK) {
        feed(s, p, 5);
        check(gnc_session_run(s, &err) == GNC_OK, "run: %s", err.message);
        y = output(s, p, 0, bytes);
    }
    gnc_session_free(s);
    return y;
}

/* gnc_compile_memory: a model's bytes compile as its file does (ONNX, the
 * format named or told by the bytes; .net text), and its errors say where. */
static void test_compile_memory(void)
{
    gnc_error err;
    gnc_compile_options o = {.no_kernels = 1};
    const char *file = GNC_SOURCE_DIR "/tests/onnx/models/lenet.onnx";
    size_t n = 0;
    char *onnx = slurp(file, &n);
    check(onnx != NULL, "read %s", file);
    gnc_plan *from_file = NULL, *named = NULL, *sniffed = NULL, *x = NULL;
    gnc_status st = gnc_compile(&from_file, file, &o, &err);
    if (st != GNC_OK && strstr(err.message, "without ONNX support")) {
        check(gnc_compile_memory(&named, onnx, n, "lenet.onnx", &o, &err) == GNC_ERROR_UNSUPPORTED ||
                  strstr(err.message, "without ONNX support"),
              "no ONNX: '%s'", err.message);
    } else if (onnx) {
        check(st == GNC_OK, "compile %s: %s", file, err.message);
        check(gnc_compile_memory(&named, onnx, n, "lenet.onnx", &o, &err) == GNC_OK,
              "lenet.onnx's bytes: %s", err.message);
        check(gnc_compile_memory(&sniffed, onnx, n, NULL, &o, &err) == GNC_OK,
              "the bytes without a name: %s", err.message);
        size_t a = 0, b = 0, c = 0;
        float *ya = st == GNC_OK ? first_output(from_file, &a) : NULL;
        float *yb = named ? first_output(named, &b) : NULL;
        float *yc = sniffed ? first_output(sniffed, &c) : NULL;
        check(ya && yb && yc && a == b && a == c && memcmp(ya, yb, a) == 0 && memcmp(ya, yc, a) == 0,
              "the bytes' plans compute the file's outputs, bit for bit");
        free(ya), free(yb), free(yc);
        /* the bytes stand for the name during the call only */
        check(gnc_compile(&x, "lenet.onnx", &o, &err) != GNC_OK && !x &&
                  strstr(err.message, "lenet.onnx"),
              "after the call, lenet.onnx is a file name again: '%s'", err.message);
        check(gnc_compile_memory(&x, onnx, n / 2, "cut.onnx", &o, &err) == GNC_ERROR_FORMAT && !x &&
                  strstr(err.message, "cut.onnx") && strstr(err.message, "not a valid ONNX model"),
              "half a model: '%s'", err.message);
    }
    free(onnx);
    gnc_plan_free(from_file);
    gnc_plan_free(named);
    gnc_plan_free(sniffed);
    static const char good[] = "model m(batch = 4) {\n  input x: f32[batch, 8]\n"
                               "  output y = relu(x)\n}\n";
    static const char bad[] = "model m(batch = 4) {\n  input x: f32[batch, 8]\n  y = relu(z)\n"
                              "  output y\n}\n";
    const char *b2[] = {"batch=2"};
    gnc_compile_options d = {.defines = b2, .ndefines = 1, .no_kernels = 1};
    gnc_tensor_info t = {0};
    check(gnc_compile_memory(&x, good, strlen(good), NULL, &d, &err) == GNC_OK &&
              gnc_plan_input(x, 0, &t) == GNC_OK && t.dims[0] == 2,
          ".net text without a name, -D batch=2: %s", err.message);
    gnc_plan_free(x);
    x = NULL;
    check(gnc_compile_memory(&x, bad, strlen(bad), "m.net", NULL, &err) == GNC_ERROR_FORMAT && !x &&
              strstr(err.message, "m.net:3:12: error: unknown name 'z'"),
          "a bad model's bytes: '%s'", err.message);
    check(gnc_compile_memory(&x, NULL, 5, "m.net", NULL, &err) == GNC_ERROR_ARGUMENT && !x,
          "NULL bytes");
    check(gnc_compile_memory(NULL, good, 4, NULL, NULL, &err) == GNC_ERROR_ARGUMENT, "NULL plan");
}

/* A weight of s by name as floats (NULL on an error, which fails the test). */
static float *read_weight(gnc_session *s, const gnc_plan *p, const char *name, size_t *bytes)
{
    gnc_error err;
    gnc_tensor_info t;
    for (int i = 0; i < gnc_plan_param_count(p); i++)
        if (gnc_plan_param(p, i, &t, NULL) == GNC_OK && strcmp(t.name, name) == 0) {
            float *w = malloc(t.bytes);
            check(gnc_session_read_param(s, name, w, t.bytes, &err) == GNC_OK, "read %s: %s",
                  name, err.message);
            *bytes = t.bytes;
            return w;
        }
    check(0, "the plan lists no weight %s", name);
    return NULL;
}

/* Weights one at a time: gnc_plan_param lists the parameters and buffers
 * (wholes, for a tensor-parallel plan's shards) with the names they came
 * with; gnc_session_read_param and _write_param round-trip them; a weight
 * written changes the next run as the model says (a bias + 1: the logits
 * + 1), and a tensor-parallel plan given a one-device plan's weights computes
 * its outputs.  A training step moves weights it reads back.  The compile
 * options loss and strategy: an ONNX model gets a loss, a plan its strategy. */
static void test_weights(void)
{
    gnc_error err;
    gnc_compile_options o = {.no_kernels = 1};
    gnc_plan *p = NULL, *tp = NULL;
    gnc_session *s = NULL, *ts = NULL;
    check(gnc_compile(&p, GNC_SOURCE_DIR "/models/lenet.net", &o, &err) == GNC_OK, "lenet: %s",
          err.message);
    check(gnc_session_init(&s, p, &cpu, &err) == GNC_OK, "session: %s", err.message);
    if (!p || !s)
        goto done;
    gnc_tensor_info t;
    const char *source = "x";
    check(gnc_plan_param_count(p) == 10 && gnc_plan_param(p, 9, &t, &source) == GNC_OK &&
              strcmp(t.name, "fc3.bias") == 0 && t.rank == 1 && t.dims[0] == 10 &&
              t.bytes == 40 && source == NULL,
          "lenet's weights: %d, the last %s", gnc_plan_param_count(p), t.name);
    check(gnc_plan_param(p, 10, &t, NULL) == GNC_ERROR_ARGUMENT &&
              gnc_plan_param(p, -1, &t, NULL) == GNC_ERROR_ARGUMENT,
          "weights past the list");
    feed(s, p, 7);
    check(gnc_session_run(s, &err) == GNC_OK, "run: %s", err.message);
    size_t nb = 0, ny = 0;
    float *bias = read_weight(s, p, "fc3.bias", &nb), *y0 = output(s, p, 0, &ny);
    for (size_t i = 0; bias && i < nb / 4; i++)
        bias[i] += 1;
    check(bias && gnc_session_write_param(s, "fc3.bias", bias, nb, &err) == GNC_OK, "write: %s",
          err.message);
    float *back = read_weight(s, p, "fc3.bias", &nb);
    check(bias && back && memcmp(bias, back, nb) == 0, "a weight written reads back the same");
    check(gnc_session_run(s, &err) == GNC_OK, "run: %s", err.message);
    float *y1 = output(s, p, 0, &ny);
    double worst = 0;
    for (size_t i = 0; i < ny / 4; i++)
        worst = fmax(worst, fabs(y1[i] - (y0[i] + 1)));
    check(worst < 1e-5, "the logits with fc3.bias + 1 are the logits + 1 (off by %g)", worst);
    check(gnc_session_write_param(s, "fc3.bias", bias, nb - 4, &err) == GNC_ERROR_ARGUMENT &&
              strstr(err.message, "fc3.bias is f32[10]: 40 bytes, not 36"),
          "a wrong size: '%s'", err.message);
    check(gnc_session_read_param(s, "fc9.bias", bias, nb, &err) == GNC_ERROR_ARGUMENT &&
              strstr(err.message, "no parameter or buffer 'fc9.bias'"),
          "an unknown name: '%s'", err.message);
    check(gnc_session_write_param(s, NULL, bias, nb, &err) == GNC_ERROR_ARGUMENT &&
              gnc_session_read_param(NULL, "fc3.bias", bias, nb, &err) == GNC_ERROR_ARGUMENT &&
              gnc_plan_param_count(NULL) == -1,
          "NULLs");
    free(bias), free(back), free(y0), free(y1);

    /* mlp on one device and tensor-parallel on two, with the same weights */
    gnc_plan_free(p);
    gnc_session_free(s);
    p = NULL, s = NULL;
    const char *b8[] = {"batch=8"};
    gnc_compile_options one = {.defines = b8, .ndefines = 1, .no_kernels = 1};
    gnc_compile_options two = {.defines = b8, .ndefines = 1, .no_kernels = 1, .devices = 2,
                               .strategy = "tensor"};
    check(gnc_compile(&p, GNC_SOURCE_DIR "/models/mlp.net", &one, &err) == GNC_OK &&
              gnc_compile(&tp, GNC_SOURCE_DIR "/models/mlp.net", &two, &err) == GNC_OK,
          "mlp: %s", err.message);
    gnc_session_options other = {.device = "cpu", .seed = 99};
    check(p && tp && gnc_session_init(&s, p, &cpu, &err) == GNC_OK &&
              gnc_session_init(&ts, tp, &other, &err) == GNC_OK,
          "sessions: %s", err.message);
    if (!s || !ts)
        goto done;
    check(gnc_plan_devices(tp) == 2 && gnc_plan_param_count(tp) == gnc_plan_param_count(p),
          "the tensor-parallel plan lists its wholes: %d weights, %d", gnc_plan_param_count(tp),
          gnc_plan_param_count(p));
    int copied = 0;
    for (int i = 0; i < gnc_plan_param_count(p); i++) {
        gnc_tensor_info a, b;
        gnc_plan_param(p, i, &a, NULL);
        check(gnc_plan_param(tp, i, &b, NULL) == GNC_OK && strcmp(a.name, b.name) == 0 &&
                  a.bytes == b.bytes,
              "weight %d: %s and %s", i, a.name, b.name);
        size_t n = 0;
        float *w = read_weight(s, p, a.name, &n);
        copied += w && gnc_session_write_param(ts, a.name, w, n, &err) == GNC_OK;
        float *wb = read_weight(ts, tp, a.name, &n);
        check(w && wb && memcmp(w, wb, n) == 0, "%s written across the shards reads back",
              a.name);
        free(w), free(wb);
    }
    feed(s, p, 3);
    feed(ts, tp, 3);
    check(gnc_session_run(s, &err) == GNC_OK && gnc_session_run(ts, &err) == GNC_OK, "runs: %s",
          err.message);
    float *ya = output(s, p, 0, &ny), *yb = output(ts, tp, 0, &nb);
    worst = 0;
    for (size_t i = 0; ny == nb && i < ny / 4; i++)
        worst = fmax(worst, fabs(ya[i] - yb[i]) / (1 + fabs(ya[i])));
    check(copied == gnc_plan_param_count(p) && ny == nb && worst < 1e-5,
          "tensor-parallel with one device's %d weights: its logits %g off", copied, worst);
    free(ya), free(yb);
    gnc_session_free(ts);
    gnc_plan_free(tp);
    ts = NULL, tp = NULL;

    /* ONNX: a loss given, a training step; the names it came with */
    size_t n = 0;
    char *onnx = slurp(GNC_SOURCE_DIR "/tests/onnx/models/lenet.onnx", &n);
    gnc_compile_options train = {.no_kernels = 1, .train = 1, .loss = "cross_entropy:logits"};
    gnc_status st = onnx ? gnc_compile_memory(&tp, onnx, n, "lenet.onnx", &train, &err)
                         : GNC_ERROR_IO;
    if (st == GNC_ERROR_UNSUPPORTED || strstr(err.message, "without ONNX support")) {
        printf("no ONNX import here: its weights' names not checked\n");
    } else {
        check(st == GNC_OK && gnc_plan_is_training(tp) == 1, "lenet.onnx with a loss: %s",
              err.message);
        gnc_tensor_info w;
        check(tp && gnc_plan_param(tp, 0, &w, &source) == GNC_OK && source &&
                  strcmp(source, "0.weight") == 0,
              "the ONNX initializer's name comes with the weight");
        if (tp && gnc_session_init(&ts, tp, &cpu, &err) == GNC_OK) {
            float *before = read_weight(ts, tp, w.name, &n);
            feed(ts, tp, 4);
            check(gnc_session_train_step(ts, 0.1, 0, &err) == GNC_OK, "step: %s", err.message);
            float *after = read_weight(ts, tp, w.name, &n);
            check(before && after && memcmp(before, after, n) != 0,
                  "a training step moves the weights read back");
            free(before), free(after);
        }
    }
    free(onnx);
    gnc_plan *bad = NULL;
    gnc_compile_options strat = {.no_kernels = 1, .devices = 2, .strategy = "sideways"};
    check(gnc_compile(&bad, GNC_SOURCE_DIR "/models/lenet.net", &strat, &err) ==
                  GNC_ERROR_ARGUMENT && !bad && strstr(err.message, "strategy 'sideways'"),
          "an unknown strategy: '%s'", err.message);
done:
    gnc_session_free(s);
    gnc_session_free(ts);
    gnc_plan_free(p);
    gnc_plan_free(tp);
}

/* Every entry point with NULL arguments and out of order: an error status
 * (or -1, NULL for the getters), never a crash or GNC_OK with bytes no run
 * wrote. */
static void test_misuse(void)
{
    gnc_error err;
    gnc_tensor_info info;
    check(gnc_plan_devices(NULL) == -1 && gnc_plan_is_training(NULL) == -1 &&
          gnc_plan_input_count(NULL) == -1 && gnc_plan_output_count(NULL) == -1,
          "the integer getters on a NULL plan give -1");
    check(gnc_plan_input(NULL, 0, &info) == GNC_ERROR_ARGUMENT &&
          gnc_plan_output(NULL, 0, &info) == GNC_ERROR_ARGUMENT, "plan_input/output(NULL)");
    check(gnc_session_device(NULL) == NULL && gnc_session_warning(NULL) == NULL,
          "a NULL session has no device and no warning");
    gnc_plan_free(NULL);
    gnc_session_free(NULL);
    gnc_plan *p, *t;
    gnc_session *s, *ts;
    if (gnc_plan_load(&p, path("lenet.gnc"), &err) != GNC_OK ||
        gnc_plan_load(&t, path("lenet-train2.gnc"), &err) != GNC_OK) {
        check(0, "plans: %s", err.message);
        return;
    }
    check(gnc_plan_input(p, 0, NULL) == GNC_ERROR_ARGUMENT &&
          gnc_plan_input(p, -1, &info) == GNC_ERROR_ARGUMENT &&
          gnc_plan_output(p, gnc_plan_output_count(p), &info) == GNC_ERROR_ARGUMENT,
          "plan_input/output out of range or without info");
    if (gnc_session_init(&s, p, &cpu, &err) != GNC_OK ||
        gnc_session_init(&ts, t, &cpu, &err) != GNC_OK) {
        check(0, "sessions: %s", err.message);
        return;
    }
    float out[40];
    double loss;
    check(gnc_session_output(s, "logits", out, sizeof out, &err) == GNC_ERROR_ARGUMENT &&
          strstr(err.message, "no results yet"), "an output before any run: '%s'", err.message);
    check(gnc_session_loss(ts, &loss, &err) == GNC_ERROR_ARGUMENT &&
          strstr(err.message, "no results yet"), "the loss before any step: '%s'", err.message);
    check(gnc_session_run(NULL, &err) == GNC_ERROR_ARGUMENT &&
          gnc_session_train_step(NULL, 0.1, 0, &err) == GNC_ERROR_ARGUMENT &&
          gnc_session_set_input(s, NULL, out, 4, &err) == GNC_ERROR_ARGUMENT &&
          gnc_session_output(NULL, "logits", out, sizeof out, &err) == GNC_ERROR_ARGUMENT &&
          gnc_session_loss(NULL, &loss, &err) == GNC_ERROR_ARGUMENT &&
          gnc_session_save_checkpoint(NULL, "x", 0, &err) == GNC_ERROR_ARGUMENT &&
          gnc_session_load_checkpoint(s, NULL, NULL, &err) == GNC_ERROR_ARGUMENT,
          "NULL sessions and arguments");
    check(gnc_session_train_step(ts, INFINITY, 0, &err) == GNC_ERROR_ARGUMENT,
          "an infinite learning rate is refused");
    char ck[1100];
    snprintf(ck, sizeof ck, "%s", path("misuse.safetensors"));
    check(gnc_session_save_checkpoint(ts, ck, -5, &err) == GNC_ERROR_ARGUMENT &&
          access(ck, F_OK) != 0, "a checkpoint of step -5 is refused and not written: '%s'",
          err.message);
    /* a checkpoint whose step is not a count: refused when loaded (atoll made
       "-" a 0) */
    static char buf[1 << 22];
    size_t n = 0;
    FILE *f = NULL;
    if (gnc_session_save_checkpoint(ts, ck, 3, &err) == GNC_OK && (f = fopen(ck, "rb"))) {
        n = fread(buf, 1, sizeof buf, f);
        fclose(f);
    }
    char *at = NULL;
    for (size_t i = 0; i + 10 <= n && !at; i++)
        if (memcmp(buf + i, "\"step\":\"3\"", 10) == 0)
            at = buf + i;
    check(at != NULL, "a checkpoint of step 3 holds \"step\":\"3\"");
    if (at) {
        at[8] = '-';
        f = fopen(ck, "wb");
        fwrite(buf, 1, n, f);
        fclose(f);
        int64_t step = 99;
        check(gnc_session_load_checkpoint(ts, ck, &step, &err) == GNC_ERROR_FORMAT &&
              strstr(err.message, "step is '-'") && step == 99,
              "a checkpoint whose step is '-': '%s'", err.message);
    }
    unlink(ck);
    gnc_session_free(s);
    gnc_session_free(ts);
    gnc_plan_free(p);
    gnc_plan_free(t);
}

/* One thread's work: a session of the shared plan, fed the same batch, 12
 * steps; its loss and checkpoint name are the result. */
typedef struct {
    const gnc_plan *plan;
    const char *checkpoint, *other;   /* other: a plan file to load meanwhile */
    double loss;
    gnc_status status;
    gnc_error err;
    gnc_plan *loaded;           /* a plan this thread loaded itself */
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    gnc_session *s;
    w->status = gnc_plan_load(&w->loaded, w->other, &w->err);
    if (w->status == GNC_OK)
        w->status = gnc_session_init(&s, w->plan, &cpu, &w->err);
    if (w->status != GNC_OK)
        return NULL;
    w->status = feed_inputs(s, w->plan, 5, &w->err);
    for (int k = 0; k < 12 && w->status == GNC_OK; k++)
        if ((w->status = gnc_session_train_step(s, 0.05, k, &w->err)) == GNC_OK)
            w->status = gnc_session_loss(s, &w->loss, &w->err);
    if (w->status == GNC_OK)
        w->status = gnc_session_save_checkpoint(s, w->checkpoint, 12, &w->err);
    gnc_session_free(s);
    return NULL;
}

static int same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = getc(fa), cb = getc(fb);
        same = ca == cb;
        if (ca == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

static void test_threads(void)
{
    enum { N = 4 };
    gnc_error err;
    gnc_plan *p;
    if (gnc_plan_load(&p, path("lenet-train2.gnc"), &err) != GNC_OK) {
        check(0, "lenet-train2: %s", err.message);
        return;
    }
    const char *other = strdup(path("lenet.gnc")); /* path()'s buffers are not the threads' */
    worker alone = {.plan = p, .checkpoint = strdup(path("thread-alone.safetensors")),
                    .other = other};
    work(&alone);
    check(alone.status == GNC_OK, "one session alone: %s", alone.err.message);
    worker ws[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        char name[64];
        snprintf(name, sizeof name, "thread-%d.safetensors", i);
        ws[i] = (worker){.plan = p, .checkpoint = strdup(path(name)), .other = other};
        check(pthread_create(&th[i], NULL, work, &ws[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        check(ws[i].status == GNC_OK, "thread %d: %s", i, ws[i].err.message);
        check(ws[i].loss == alone.loss, "thread %d: loss %.9g, alone %.9g", i, ws[i].loss,
              alone.loss);
        check(same_file(ws[i].checkpoint, alone.checkpoint),
              "thread %d's checkpoint differs from one session's alone", i);
        check(gnc_plan_input_count(ws[i].loaded) == gnc_plan_input_count(alone.loaded),
              "thread %d loaded lenet.gnc otherwise", i);
        gnc_plan_free(ws[i].loaded);
        free((char *)ws[i].checkpoint);
    }
    gnc_plan_free(alone.loaded);
    free((char *)alone.checkpoint);
    free((char *)other);
    gnc_plan_free(p);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_api PLANS_DIR\n");
        return 2;
    }
    dir = argv[1];
    test_plans();
    test_sessions();
    test_training();
    test_compile();
    test_compile_memory();
    test_weights();
    test_misuse();
    test_threads();
    printf("test_api: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
