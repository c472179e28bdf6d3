/* ir_graph -> ONNX ModelProto (frontend/onnx.h).  Placeholder: replaced by the exporter. */
#include "base.h"
#include "onnx.h"
#include "onnx.pb-c.h"

int fe_export_onnx(const ir_graph *g, fe_values_fn values, void *ctx, const char *path,
                   char *err, size_t errlen)
{
    (void)g, (void)values, (void)ctx;
    return base_fail(err, errlen, "%s: ONNX export is not written yet", path);
}
