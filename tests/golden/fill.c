/* golden_fill: see fill.h; keep in step with Feed.__call__ in gen_golden.py. */
#include "fill.h"

#include <math.h>
#include <string.h>

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

void golden_fill(const ir_value *v, void *data)
{
    const char *name = v->name;
    int64_t n = ir_type_numel(&v->type);
    uint64_t key = fnv1a(name);
    for (int64_t i = 0; i < n; i++) {
        if (v->type.dtype == IR_I32 || v->type.dtype == IR_I64) {
            int64_t label = (i * 7 + 3) % 10;
            if (v->type.dtype == IR_I32)
                ((int32_t *)data)[i] = (int32_t)label;
            else
                ((int64_t *)data)[i] = label;
            continue;
        }
        uint64_t z = key + (uint64_t)i * 0x9e3779b97f4a7c15ull; /* splitmix64's finalizer */
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        double u = (double)(z >> 11) * 0x1.0p-53 * 2 - 1;
        if (ends_with(name, ".running_var"))
            u = 1 + 0.5 * u;
        else if (ends_with(name, ".running_mean") || ends_with(name, ".bias"))
            u = 0.1 * u;
        else if (ends_with(name, ".weight") && v->type.rank == 1)
            u = 1 + 0.1 * u;
        else if (ends_with(name, ".weight")) /* Kaiming-uniform: U(+-sqrt(6 / fan_in)) */
            u = u * sqrt(6 / ((double)n / (double)v->type.dims[0]));
        ((float *)data)[i] = (float)u;
    }
}
