/* NumPy .npy files (format versions 1 and 2, little-endian, C order): the
 * interchange format of `gnc run --input/-o`, readable by numpy.load and torch. */
#include "base.h"
#include "npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *descr_of(ir_dtype t)
{
    switch (t) {
    case IR_I32: return "<i4";
    case IR_I64: return "<i8";
    case IR_U8: return "|u1";
    default: return "<f4";   /* every float dtype is stored as float32 */
    }
}

int npy_read(const char *path, const ir_type *want, void *out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read file: %s", path, strerror(errno));
        return -1;
    }
    unsigned char pre[12];
    char header[4096];
    int rc = -1;
    size_t hlen = 0, pre_len = 10;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        base_fail(err, errlen, "%s: not a .npy file (bad magic)", path);
        goto done;
    }
    if (pre[6] == 1) {
        hlen = pre[8] | (size_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            base_fail(err, errlen, "%s: truncated .npy header", path);
            goto done;
        }
        hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
        pre_len = 12;
    } else {
        base_fail(err, errlen, "%s: unsupported .npy format version", path);
        goto done;
    }
    (void)pre_len;
    if (hlen >= sizeof header || fread(header, 1, hlen, f) != hlen) {
        base_fail(err, errlen, "%s: truncated or oversized .npy header", path);
        goto done;
    }
    header[hlen] = '\0';
    const char *d = strstr(header, "'descr':"), *o = strstr(header, "'fortran_order':"),
               *s = strstr(header, "'shape':");
    if (!d || !o || !s) {
        base_fail(err, errlen, "%s: malformed .npy header", path);
        goto done;
    }
    char descr[16] = {0};
    if (sscanf(d + 8, " '%15[^']'", descr) != 1 || strcmp(descr, descr_of(want->dtype)) != 0) {
        snprintf(err, errlen, "%s: dtype %s does not match the input's %s (want numpy dtype %s)",
                 path, descr[0] ? descr : "?", ir_dtype_name(want->dtype), descr_of(want->dtype));
        goto done;
    }
    if (strncmp(o + 16, " False", 6) != 0 && strncmp(o + 16, "False", 5) != 0) {
        base_fail(err, errlen, "%s: Fortran-order arrays are not supported", path);
        goto done;
    }
    ir_type got = {want->dtype, 0, {0}};
    const char *p = strchr(s, '(');
    for (p = p ? p + 1 : NULL; p && *p && *p != ')';) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || got.rank == IR_MAX_RANK) {
            base_fail(err, errlen, "%s: malformed shape in .npy header", path);
            goto done;
        }
        got.dims[got.rank++] = v;
        p = end;
        while (*p == ',' || *p == ' ')
            p++;
    }
    if (!p || !ir_type_eq(&got, want)) {
        char a[128], b[128];
        snprintf(err, errlen, "%s: shape %s does not match the input's %s", path,
                 p ? ir_type_str(&got, a, sizeof a) : "?", ir_type_str(want, b, sizeof b));
        goto done;
    }
    size_t bytes = (size_t)ir_type_numel(want) * (want->dtype == IR_I64 ? 8 :
                                                  want->dtype == IR_U8 ? 1 : 4);
    if (fread(out, 1, bytes, f) != bytes) {
        base_fail(err, errlen, "%s: truncated .npy data", path);
        goto done;
    }
    rc = 0;
done:
    fclose(f);
    return rc;
}

int npy_write(const char *path, const ir_type *t, const void *data, char *err, size_t errlen)
{
    char header[512], shape[256] = "";
    size_t used = 0;
    for (int i = 0; i < t->rank; i++)
        used += (size_t)snprintf(shape + used, sizeof shape - used, "%lld%s",
                                 (long long)t->dims[i], t->rank == 1 ? "," : i + 1 < t->rank ? ", " : "");
    int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                     descr_of(t->dtype), shape);
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    size_t tmp_len = strlen(path) + 16;
    char *tmp = malloc(tmp_len);
    if (!tmp)
        return base_fail(err, errlen, "%s: out of memory", path);
    snprintf(tmp, tmp_len, "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        free(tmp);
        return -1;
    }
    size_t hlen = (size_t)(n + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    size_t bytes = (size_t)ir_type_numel(t) * (t->dtype == IR_I64 ? 8 : t->dtype == IR_U8 ? 1 : 4);
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t)n, f) == (size_t)n;
    for (int i = 0; ok && i < pad; i++)
        ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF && fwrite(data, 1, bytes, f) == bytes;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        remove(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}
