/* What the fuzz targets share: writing an input or a seed to a file. */
#ifndef GNC_FUZZ_FILES_H
#define GNC_FUZZ_FILES_H

#include <stdint.h>
#include <stdio.h>

/* data to path, whole: 0, or -1 when it could not be written */
static inline int fuzz_write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok ? 0 : -1;
}

#endif
