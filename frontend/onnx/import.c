/* ONNX ModelProto -> ir_graph (frontend/onnx.h).  Placeholder: replaced by the importer. */
#include "base.h"
#include "onnx.h"
#include "onnx.pb-c.h"

int fe_onnx_available(void) { return 1; }

int fe_onnx_claims(const char *op_type)
{
    (void)op_type;
    return 0;
}

ir_graph *fe_load_onnx(const char *path, const fe_options *opt, diag *d)
{
    (void)opt;
    diag_error(d, (ir_loc){path, 0, 0}, "ONNX import is not written yet");
    return NULL;
}

int fe_onnx_read_tensor(const char *path, ir_type *t, void **data, char *name, size_t namelen,
                        char *err, size_t errlen)
{
    (void)t, (void)data, (void)name, (void)namelen;
    return base_fail(err, errlen, "%s: not written yet", path);
}
