/* frontend/onnx.h where gnc was built without protobuf-c or onnx.proto: every
 * entry point refuses, saying how to get ONNX support. */
#include <stdio.h>

#include "base.h"
#include "onnx.h"

#define WHY "this gnc was built without ONNX support (it needs protobuf-c-compiler, " \
            "libprotobuf-c-dev and python3-onnx at build time: tools/deps.sh installs them)"

int fe_onnx_available(void) { return 0; }

int fe_onnx_claims(const char *op_type)
{
    (void)op_type;
    return 0;
}

ir_graph *fe_load_onnx(const char *path, const fe_options *opt, diag *d)
{
    (void)opt;
    diag_error(d, (ir_loc){path, 0, 0}, "%s", WHY);
    return NULL;
}

int fe_onnx_read_tensor(const char *path, ir_type *t, void **data, char *name, size_t namelen,
                        char *err, size_t errlen)
{
    (void)t, (void)data, (void)name, (void)namelen;
    return base_fail(err, errlen, "%s: %s", path, WHY);
}

int fe_export_onnx(const ir_graph *g, fe_values_fn values, void *ctx, const char *path,
                   char *err, size_t errlen)
{
    (void)g, (void)values, (void)ctx;
    return base_fail(err, errlen, "%s: %s", path, WHY);
}
