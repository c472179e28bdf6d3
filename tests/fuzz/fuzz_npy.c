/* libFuzzer target for the .npy reader (tools/npy.c, `gnc run --input`),
 * which reads files of unknown origin: the input bytes are a .npy file, read
 * as each of a few wanted types (float32, a float dtype stored as float32,
 * int32, int64, a u8 scalar).  Each input is read as it is, and again with
 * its header length set to end at the header's first '\n' and the header
 * padded with spaces to the alignment, so that mutations reach the dict.  A
 * crash, a sanitizer report, a leak, a timeout, or a refusal without a
 * message is a bug; a file that is read must read again to the same
 * elements, and so must the file npy_write writes of them.
 *
 * Build and run: bash tools/fuzz.sh SECONDS npy (see tests/fuzz/fuzz.cmake);
 * the seeds, files npy_write writes and a few headers written by hand (other
 * versions, whitespace, quotes), are written by the first run
 * (LLVMFuzzerInitialize: --seeds DIR). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_files.h"
#include "ir.h"
#include "npy.h"

static const ir_type wants[] = {
    {IR_F32, 2, {2, 3}},
    {IR_BF16, 1, {5}},
    {IR_I32, 3, {1, 2, 2}},
    {IR_I64, 1, {4}},
    {IR_U8, 0, {0}},
};
#define NWANTS (sizeof wants / sizeof *wants)

static char path[64], again[80];

static size_t bytes_of(const ir_type *t)
{
    return (size_t)ir_type_numel(t) * (t->dtype == IR_I64 ? 8 : t->dtype == IR_U8 ? 1 : 4);
}

/* A version major.0 file at dir/name: header (padded to 64 bytes with
 * spaces and a '\n'), then the data, bytes of 0x3f. */
static void seed_by_hand(const char *dir, const char *name, int major, const char *header,
                         size_t bytes)
{
    uint8_t b[1024];
    size_t pre = major == 1 ? 10 : 12, n = strlen(header);
    size_t hlen = (pre + n + 1 + 63) / 64 * 64 - pre;
    if (pre + hlen + bytes > sizeof b)
        abort();
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major, b[7] = 0;
    for (size_t k = 0; k < pre - 8; k++)
        b[8 + k] = (uint8_t)(hlen >> (8 * k));
    memcpy(b + pre, header, n);
    memset(b + pre + n, ' ', hlen - n - 1);
    b[pre + hlen - 1] = '\n';
    memset(b + pre + hlen, 0x3f, bytes);
    char to[4096];
    snprintf(to, sizeof to, "%s/seed_%s.npy", dir, name);
    if (fuzz_write_file(to, b, pre + hlen + bytes) != 0)
        abort();
}

static void seeds(const char *dir)
{
    char err[512], to[4096];
    for (size_t k = 0; k < NWANTS; k++) {
        uint8_t data[64];
        for (size_t i = 0; i < sizeof data; i++)
            data[i] = (uint8_t)(i * 37 + k);
        if (wants[k].dtype != IR_I32 && wants[k].dtype != IR_I64 && wants[k].dtype != IR_U8)
            for (size_t i = 0; i < sizeof data; i += 4)
                data[i + 3] = 0x3f; /* floats of about 1 */
        snprintf(to, sizeof to, "%s/seed_want%zu.npy", dir, k);
        if (npy_write(to, &wants[k], data, err, sizeof err) != 0) {
            fprintf(stderr, "fuzz_npy: %s\n", err);
            abort();
        }
    }
    seed_by_hand(dir, "v2", 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
    seed_by_hand(dir, "v3", 3, "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }", 32);
    seed_by_hand(dir, "spaced", 1,
                 "{\n\t\"descr\" :\t'<i4' ,\n 'fortran_order' : False ,\r\n 'shape' : (\n 1 ,\n"
                 " 2 , 2 ,\n ) }", 16);
    seed_by_hand(dir, "literals", 1,
                 "{'shape': (0x5,), 'fortran_order': False, 'descr': u'<' r'f4'}", 20);
    seed_by_hand(dir, "escapes", 2, "{'descr': '|\\x75\\061', 'shape': (), 'fortran_order': False}", 1);
    seed_by_hand(dir, "python2", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }",
                 24);
}

static void clean_up(void)
{
    unlink(path);
    unlink(again);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    snprintf(path, sizeof path, "/tmp/fuzz_npy.%ld", (long)getpid());
    snprintf(again, sizeof again, "%s.again.npy", path);
    atexit(clean_up);
    /* --seeds DIR: write the seeds there, then stop */
    for (int i = 1; i + 1 < *argc; i++)
        if (strcmp((*argv)[i], "--seeds") == 0) {
            seeds((*argv)[i + 1]);
            exit(0);
        }
    return 0;
}

static void read_as_each(const uint8_t *data, size_t size)
{
    if (fuzz_write_file(path, data, size) != 0)
        return;
    for (size_t k = 0; k < NWANTS; k++) {
        size_t bytes = bytes_of(&wants[k]);
        uint8_t *a = malloc(bytes), *b = malloc(bytes); /* exact: ASan sees a byte more */
        char err[4096] = "";
        if (!a || !b)
            abort();
        if (npy_read(path, &wants[k], a, err, sizeof err) != 0) {
            if (err[0] == '\0' || strncmp(err, path, strlen(path)) != 0) {
                fprintf(stderr, "fuzz_npy: a refusal without a message naming the file: '%s'\n",
                        err);
                abort();
            }
        } else if (npy_read(path, &wants[k], b, err, sizeof err) != 0 || memcmp(a, b, bytes) != 0) {
            fprintf(stderr, "fuzz_npy: a file read once does not read again the same: %s\n", err);
            abort();
        } else if (npy_write(again, &wants[k], a, err, sizeof err) != 0 ||
                   npy_read(again, &wants[k], b, err, sizeof err) != 0 || memcmp(a, b, bytes) != 0) {
            fprintf(stderr, "fuzz_npy: what was read does not write and read again: %s\n", err);
            abort();
        }
        free(a);
        free(b);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_as_each(data, size);
    if (size < 10 || memcmp(data, "\x93NUMPY", 6) != 0 || data[6] < 1 || data[6] > 3)
        return 0;
    /* the header to its first '\n', its length set to that, padded to 16 bytes */
    size_t pre = data[6] == 1 ? 10 : 12, nl = pre;
    while (nl < size && data[nl] != '\n')
        nl++;
    if (nl >= size)
        return 0;
    size_t text = nl - pre, pad = (16 - (pre + text + 1) % 16) % 16, hlen = text + pad + 1;
    if (hlen > 0xffff)
        return 0;
    uint8_t *fixed = malloc(size + pad);
    if (!fixed)
        return 0;
    memcpy(fixed, data, pre + text);
    memset(fixed + pre + text, ' ', pad);
    memcpy(fixed + pre + text + pad, data + nl, size - nl);
    for (size_t k = 0; k < pre - 8; k++)
        fixed[8 + k] = (uint8_t)(hlen >> (8 * k));
    if (size + pad != size || memcmp(fixed, data, size) != 0)
        read_as_each(fixed, size + pad);
    free(fixed);
    return 0;
}
