/* The ONNX importer against broken and hostile models: each case below changes
 * one thing of a small valid model (x -> MatMul(W) -> Relu -> z), writes it
 * with protobuf-c and imports it; the import must fail with the expected
 * message, or succeed where the change is legal.  Then every truncation and
 * a few thousand byte flips of the valid file: each either imports a graph
 * that verifies or fails with a message, never a crash (run it under
 * GNC_SANITIZE for leaks and overflows).
 *
 *   onnx_hostile WORKDIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "diag.h"
#include "frontend.h"
#include "ir.h"
#include "onnx.h"
#include "onnx.pb-c.h"

static int failed, passed;

typedef struct {
    Onnx__ModelProto m;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    Onnx__GraphProto g;
    Onnx__ValueInfoProto in, out, *ins[1], *outs[1];
    Onnx__TypeProto tin, tout;
    Onnx__TypeProto__Tensor ttin, ttout;
    Onnx__TensorShapeProto sin;
    Onnx__TensorShapeProto__Dimension d0, d1, *dims[2];
    Onnx__TensorProto w, *inits[1];
    int64_t wdims[2];
    float wdata[4];
    Onnx__NodeProto n1, n2, *nodes[2];
    char *n1in[2], *n1out[1], *n2in[1], *n2out[1];
    Onnx__AttributeProto attr, *attrs[1];
    Onnx__StringStringEntryProto ext[3], *exts[3];
} model;

static void model_init(model *s)
{
    memset(s, 0, sizeof *s);
    s->m = (Onnx__ModelProto)ONNX__MODEL_PROTO__INIT;
    s->m.has_ir_version = 1;
    s->m.ir_version = 8;
    s->opset = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
    s->opset.domain = "";
    s->opset.has_version = 1;
    s->opset.version = 13;
    s->opsets[0] = &s->opset;
    s->m.n_opset_import = 1;
    s->m.opset_import = s->opsets;
    s->g = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
    s->g.name = "hostile";
    s->m.graph = &s->g;

    s->d0 = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    s->d0.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    s->d0.dim_value = 1;
    s->d1 = s->d0;
    s->d1.dim_value = 2;
    s->dims[0] = &s->d0;
    s->dims[1] = &s->d1;
    s->sin = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    s->sin.n_dim = 2;
    s->sin.dim = s->dims;
    s->ttin = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    s->ttin.has_elem_type = 1;
    s->ttin.elem_type = 1;
    s->ttin.shape = &s->sin;
    s->ttout = s->ttin;
    s->tin = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    s->tin.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    s->tin.tensor_type = &s->ttin;
    s->tout = s->tin;
    s->tout.tensor_type = &s->ttout;
    s->in = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    s->in.name = "x";
    s->in.type = &s->tin;
    s->out = s->in;
    s->out.name = "z";
    s->out.type = &s->tout;
    s->ins[0] = &s->in;
    s->outs[0] = &s->out;
    s->g.n_input = 1;
    s->g.input = s->ins;
    s->g.n_output = 1;
    s->g.output = s->outs;

    s->w = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    s->w.name = "W";
    s->w.has_data_type = 1;
    s->w.data_type = 1;
    s->wdims[0] = s->wdims[1] = 2;
    s->w.n_dims = 2;
    s->w.dims = s->wdims;
    for (int i = 0; i < 4; i++)
        s->wdata[i] = (float)(i + 1) * 0.5f;
    s->w.has_raw_data = 1;
    s->w.raw_data.len = sizeof s->wdata;
    s->w.raw_data.data = (uint8_t *)s->wdata;
    s->inits[0] = &s->w;
    s->g.n_initializer = 1;
    s->g.initializer = s->inits;

    s->n1 = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    s->n1.op_type = "MatMul";
    s->n1.name = "mm";
    s->n1in[0] = "x";
    s->n1in[1] = "W";
    s->n1out[0] = "y";
    s->n1.n_input = 2;
    s->n1.input = s->n1in;
    s->n1.n_output = 1;
    s->n1.output = s->n1out;
    s->n2 = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    s->n2.op_type = "Relu";
    s->n2.name = "act";
    s->n2in[0] = "y";
    s->n2out[0] = "z";
    s->n2.n_input = 1;
    s->n2.input = s->n2in;
    s->n2.n_output = 1;
    s->n2.output = s->n2out;
    s->nodes[0] = &s->n1;
    s->nodes[1] = &s->n2;
    s->g.n_node = 2;
    s->g.node = s->nodes;
}

/* The second node as op with one attribute, name, of type type: its int i
   (where i >= 0) or else its float f set */
static void with_attr(model *s, const char *op, const char *name, int type, int64_t i, float f)
{
    s->attr = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    s->attr.name = (char *)name;
    s->attr.has_type = 1;
    s->attr.type = (Onnx__AttributeProto__AttributeType)type;
    s->attr.has_i = i >= 0;
    s->attr.i = i;
    s->attr.has_f = i < 0;
    s->attr.f = f;
    s->attrs[0] = &s->attr;
    s->n2.n_attribute = 1;
    s->n2.attribute = s->attrs;
    s->n2.op_type = (char *)op;
}

/* W's data in the file `location` of the model's folder */
static void model_external(model *s, const char *location, const char *offset, const char *length)
{
    const char *keys[3] = {"location", "offset", "length"}, *vals[3] = {location, offset, length};
    s->w.has_raw_data = 0;
    s->w.has_data_location = 1;
    s->w.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    s->w.n_external_data = 0;
    s->w.external_data = s->exts;
    for (int i = 0; i < 3; i++) {
        if (!vals[i])
            continue;
        s->ext[i] = (Onnx__StringStringEntryProto)ONNX__STRING_STRING_ENTRY_PROTO__INIT;
        s->ext[i].key = (char *)keys[i];
        s->ext[i].value = (char *)vals[i];
        s->exts[s->w.n_external_data++] = &s->ext[i];
    }
}

static void write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    fclose(f);
}

static uint8_t *pack(const model *s, size_t *len)
{
    *len = onnx__model_proto__get_packed_size(&s->m);
    uint8_t *buf = base_xmalloc(*len ? *len : 1);
    onnx__model_proto__pack(&s->m, buf);
    return buf;
}

static char dir[1024], path[1200];

/* Imports path with the define (NULL: none); the graph or NULL, the first message in msg. */
static ir_graph *import(const char *define, char *msg, size_t len)
{
    const char *names[1] = {"batch"}, *values[1] = {define};
    fe_options fo = {NULL, define ? 1 : 0, names, values};
    diag d;
    diag_init(&d);
    ir_graph *g = fe_load_onnx(path, &fo, &d);
    snprintf(msg, len, "%s", d.n ? d.entries[0].msg : "");
    if (g && ir_verify(g, &d) != 0) {
        snprintf(msg, len, "imported a graph that does not verify: %s",
                 d.n ? d.entries[0].msg : "");
        ir_graph_free(g);
        g = NULL;
    }
    diag_free(&d);
    return g;
}

static void check(int ok, const char *name, const char *msg)
{
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s: %s\n", name, msg[0] ? msg : "(no message)");
    }
}

/* The model s must be refused with a message containing want. */
static void refused(const char *name, const model *s, const char *define, const char *want)
{
    size_t len;
    uint8_t *buf = pack(s, &len);
    write_bytes(path, buf, len);
    base_free(buf);
    char msg[1024];
    ir_graph *g = import(define, msg, sizeof msg);
    check(!g && strstr(msg, want), name, g ? "imported" : msg);
    if (g)
        ir_graph_free(g);
}

/* The model s must import; W must hold its values. */
static void accepted(const char *name, const model *s, const char *define, int64_t batch)
{
    size_t len;
    uint8_t *buf = pack(s, &len);
    write_bytes(path, buf, len);
    base_free(buf);
    char msg[1024];
    ir_graph *g = import(define, msg, sizeof msg);
    int ok = g != NULL;
    if (ok) {
        const ir_value *w = ir_find_value(g, "W");
        ok = w && w->init.kind == IR_INIT_DATA && w->init.data &&
             memcmp(w->init.data, s->wdata, sizeof s->wdata) == 0 &&
             g->inputs[0]->type.dims[0] == batch && g->noutputs == 1 &&
             strcmp(g->outputs[0].name, "z") == 0;
        if (!ok)
            snprintf(msg, sizeof msg, "imported, but the weights, input or output differ");
        ir_graph_free(g);
    }
    check(ok, name, msg);
}

/* 50,000 Relu nodes without a name or an output name (each value named
   after its op, then erased as dead): names in constant time each, so the
   import takes a fraction of a second where the search for a free suffix
   one at a time took minutes (bounded here at 20 s, a sanitizer build's
   margin; the quadratic search fails it by far). */
static void unnamed_chain(void)
{
    enum { N = 50000 };
    model s;
    model_init(&s);
    Onnx__NodeProto *nodes = base_xcalloc(N, sizeof *nodes);
    Onnx__NodeProto **list = base_xcalloc(N + 2, sizeof *list);
    static char *in[1] = {"y"}, *out[1] = {""};
    list[0] = &s.n1;
    for (int i = 0; i < N; i++) {
        Onnx__NodeProto *n = &nodes[i];
        *n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
        n->op_type = "Relu";
        n->n_input = n->n_output = 1;
        n->input = in;
        n->output = out;
        list[i + 1] = n;
    }
    list[N + 1] = &s.n2;
    s.g.n_node = N + 2;
    s.g.node = list;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    accepted("50,000 unnamed nodes", &s, NULL, 1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    char msg[64];
    snprintf(msg, sizeof msg, "%.1f s", dt);
    check(dt < 20, "50,000 unnamed nodes in linear time", msg);
    base_free(nodes), base_free(list);
}

/* Every prefix and a few thousand one-byte changes of the valid model: a
   graph that verifies or a message, never a crash. */
static void mutations(void)
{
    model s;
    model_init(&s);
    size_t len;
    uint8_t *good = pack(&s, &len), *buf = base_xmalloc(len);
    int loaded = 0, refusedn = 0;
    char msg[1024];
    for (size_t cut = 0; cut < len; cut++) {
        write_bytes(path, good, cut);
        ir_graph *g = import(NULL, msg, sizeof msg);
        if (g)
            loaded++, ir_graph_free(g);
        else if (msg[0])
            refusedn++;
        else
            check(0, "truncation", "refused without a message");
    }
    uint64_t seed = 12345;
    for (int k = 0; k < 2000; k++) {
        memcpy(buf, good, len);
        for (int j = 0; j < 1 + k % 3; j++) {
            seed = base_splitmix64(seed);
            buf[seed % len] = (uint8_t)(seed >> 32);
        }
        write_bytes(path, buf, len);
        ir_graph *g = import("4", msg, sizeof msg);
        if (g)
            loaded++, ir_graph_free(g);
        else if (msg[0])
            refusedn++;
        else
            check(0, "byte flips", "refused without a message");
        if (strstr(msg, "does not verify"))
            check(0, "byte flips", msg);
    }
    printf("mutations: %d imported, %d refused with a message\n", loaded, refusedn);
    check(refusedn > 0, "mutations", "nothing was refused");
    base_free(good);
    base_free(buf);
}

static void tensors(void)
{
    /* fe_onnx_read_tensor: a valid TensorProto, then a truncated one */
    model s;
    model_init(&s);
    size_t len = onnx__tensor_proto__get_packed_size(&s.w);
    uint8_t *buf = base_xmalloc(len);
    onnx__tensor_proto__pack(&s.w, buf);
    char tpath[1300], name[64], err[512];
    snprintf(tpath, sizeof tpath, "%s/w.pb", dir);
    write_bytes(tpath, buf, len);
    ir_type t;
    void *data = NULL;
    int rc = fe_onnx_read_tensor(tpath, &t, &data, name, sizeof name, err, sizeof err);
    check(rc == 0 && t.dtype == IR_F32 && t.rank == 2 && strcmp(name, "W") == 0 &&
          memcmp(data, s.wdata, sizeof s.wdata) == 0, "read_tensor", err);
    base_free(data);
    write_bytes(tpath, buf, len - 3);
    data = NULL;
    rc = fe_onnx_read_tensor(tpath, &t, &data, name, sizeof name, err, sizeof err);
    check(rc != 0 && !data && err[0], "read_tensor truncated", err);
    base_free(buf);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s WORKDIR\n", argv[0]);
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    char failed_dir[1024];
    if (base_make_dirs(dir, 0755, failed_dir, sizeof failed_dir) != 0) {
        fprintf(stderr, "cannot make %s\n", dir);
        return 2;
    }
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    model s;

    model_init(&s);
    accepted("the valid model", &s, NULL, 1);

    model_init(&s);
    s.d0.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    s.d0.dim_param = "batch";
    refused("a symbolic dimension without -D", &s, NULL, "'batch'");
    accepted("a symbolic dimension with -D", &s, "3", 3);
    refused("a symbolic dimension with a bad -D", &s, "-3", "batch");

    model_init(&s);
    s.d0.dim_value = (int64_t)1 << 40;
    refused("a huge dimension", &s, NULL, "too large");
    s.d0.dim_value = -5;
    refused("a negative dimension", &s, NULL, "dimension 0");
    s.d0.dim_value = 0;
    refused("an empty dimension", &s, NULL, "unsupported");

    model_init(&s);
    s.w.raw_data.len = 12;
    refused("raw_data shorter than the shape", &s, NULL, "raw_data");
    model_init(&s);
    s.wdims[0] = (int64_t)1 << 36;
    refused("an initializer with a huge shape", &s, NULL, "raw_data");
    s.wdims[0] = -1;
    refused("an initializer with a negative dimension", &s, NULL, "dimension");
    model_init(&s);
    s.w.has_raw_data = 0;
    s.w.n_float_data = 3;
    s.w.float_data = s.wdata;
    refused("float_data shorter than the shape", &s, NULL, "float_data");
    model_init(&s);
    s.w.data_type = 11;
    refused("a double initializer", &s, NULL, "unsupported");

    /* a small constant asking for a huge one: ConstantOfShape of [2^20, 2^20], [2^14, 2^14] */
    model_init(&s);
    int64_t huge[2] = {(int64_t)1 << 20, (int64_t)1 << 20}, two = 2;
    s.w.data_type = 7;
    s.w.n_dims = 1;
    s.w.dims = &two;
    s.w.raw_data.len = sizeof huge;
    s.w.raw_data.data = (uint8_t *)huge;
    s.n1.op_type = "ConstantOfShape";
    s.n1in[0] = "W";
    s.n1.n_input = 1;
    refused("a huge constant from a small one", &s, NULL, "too large");
    huge[0] = huge[1] = (int64_t)1 << 14;
    refused("a large constant from a small one", &s, NULL, "2^26");

    model_init(&s);
    s.n1in[0] = "z";
    refused("a cycle", &s, NULL, "not defined before");
    model_init(&s);
    s.n1in[1] = "nowhere";
    refused("an unknown input", &s, NULL, "'nowhere' is not defined");
    model_init(&s);
    s.n2out[0] = "y";
    refused("a name defined twice", &s, NULL, "defined twice");
    model_init(&s);
    s.out.name = "missing";
    refused("an output no node computes", &s, NULL, "computed by no node");
    model_init(&s);
    s.g.n_output = 0;
    refused("no outputs", &s, NULL, "no outputs");

    model_init(&s);
    s.n2.op_type = "FancyOp";
    refused("an op gnc does not have", &s, NULL, "unsupported: the op FancyOp");
    model_init(&s);
    with_attr(&s, "Relu", "flavour", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED, -1, 0);
    refused("an attribute gnc does not know", &s, NULL,
            "(Relu, opset 13): unsupported: the attribute 'flavour'");
    /* an attribute of the wrong type: an error naming it and both types,
       never read as 0 (Softmax over axis 0, LeakyRelu of slope 0) */
    with_attr(&s, "Softmax", "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, 1, 0);
    accepted("Softmax's axis as an INT", &s, NULL, 1);
    with_attr(&s, "Softmax", "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, -1, 1.0f);
    refused("Softmax's axis as a FLOAT", &s, NULL,
            "(Softmax, opset 13): attribute 'axis' is of type FLOAT, not the INT it must be");
    with_attr(&s, "LeakyRelu", "alpha", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, 1, 0);
    refused("LeakyRelu's alpha as an INT", &s, NULL,
            "attribute 'alpha' is of type INT, not the FLOAT it must be");
    with_attr(&s, "LeakyRelu", "alpha", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED, -1, 0.5f);
    accepted("LeakyRelu's alpha of no stated type, its float set (IR version 1)", &s, NULL, 1);
    /* an op of ops.def's ONNX table before its first opset (HardSwish: 14) */
    model_init(&s);
    s.n2.op_type = "HardSwish";
    refused("HardSwish at opset 13", &s, NULL,
            "(HardSwish, opset 13): unsupported: HardSwish is in ONNX from opset 14");
    s.opset.version = 14;
    accepted("HardSwish at opset 14", &s, NULL, 1);
    model_init(&s);
    s.n2.domain = "com.example";
    refused("a node of another domain", &s, NULL, "unsupported: the domain");
    model_init(&s);
    s.opset.version = 22;
    refused("opset 22", &s, NULL, "opset is 22");
    s.opset.version = 6;
    refused("opset 6", &s, NULL, "opset is 6");
    model_init(&s);
    s.m.has_ir_version = 0;
    refused("no IR version", &s, NULL, "IR version");
    model_init(&s);
    s.m.graph = NULL;
    refused("no graph", &s, NULL, "no graph");

    /* external data */
    char file[1300];
    snprintf(file, sizeof file, "%s/w.bin", dir);
    float ext[6] = {0, 0, 0.5f, 1, 1.5f, 2};   /* W's values after 8 bytes */
    write_bytes(file, ext, sizeof ext);
    model_init(&s);
    model_external(&s, "w.bin", "8", "16");
    accepted("external data", &s, NULL, 1);
    model_external(&s, "w.bin", "0", NULL);
    refused("external data longer than the tensor", &s, NULL, "holds 24 bytes");
    model_external(&s, "w.bin", "8", NULL);
    accepted("external data to the file's end", &s, NULL, 1);
    model_external(&s, "w.bin", "16", "16");
    refused("external data past the file's end", &s, NULL, "w.bin");
    model_external(&s, "w.bin", "8", "12");
    refused("external data of the wrong length", &s, NULL, "length 12");
    model_external(&s, "w.bin", "x", "16");
    refused("external data at a bad offset", &s, NULL, "offset");
    model_external(&s, "../w.bin", NULL, NULL);
    refused("external data above the folder", &s, NULL, "'..'");
    model_external(&s, "/etc/passwd", NULL, NULL);
    refused("external data at an absolute path", &s, NULL, "absolute");
    model_external(&s, "none.bin", NULL, NULL);
    refused("missing external data", &s, NULL, "none.bin");
    char link[1300];
    snprintf(link, sizeof link, "%s/escape.bin", dir);
    unlink(link);
    if (symlink("/etc/hostname", link) == 0) {
        model_external(&s, "escape.bin", NULL, NULL);
        refused("external data through a link out of the folder", &s, NULL, "outside");
    }

    char fifo[1300];
    snprintf(fifo, sizeof fifo, "%s/fifo.bin", dir);
    unlink(fifo);
    if (mkfifo(fifo, 0600) == 0) { /* a FIFO would block the open for ever */
        model_external(&s, "fifo.bin", NULL, NULL);
        refused("external data in a FIFO", &s, NULL, "is not a regular file");
        unlink(fifo);
    }

    unnamed_chain();
    tensors();
    mutations();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
