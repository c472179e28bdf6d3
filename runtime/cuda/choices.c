/* cuDNN's timed choices, kept on disk (cuda_lib.c times them at open; gnc
 * inspect lists them): a file per GPU, cuDNN version and problem under the
 * cache folder (base_cache_dir), cudnn/HASH.txt, HASH the FNV-1a of its key:
 *
 *   gpu NVIDIA H200, cudnn 91000, forward, n 256 c 64 ... workspace 67108864
 *   algo 1 math 1 ms 0.123456
 *
 * Nothing here needs the CUDA libraries: a machine without a GPU can list
 * what one kept (a cache folder copied from it). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "cuda.h"

void rt_cudnn_problem(const cg_conv *c, char *out, size_t len)
{
    static const char *const kind[] = {"forward", "backward_data", "backward_filter"};
    /* a forward step with a bias or ReLU is cuDNN's fused call (cuda_lib.c) */
    int fused = c->kind == CG_CONV_FORWARD && (c->relu || c->has_bias);
    snprintf(out, len, "%s%s, n %lld c %lld h %lld w %lld, k %lld r %lld s %lld, pad %d %d, "
             "stride %d %d, dilation %d %d, groups %d, %s, %s, %s, workspace %lld%s",
             kind[c->kind], fused ? " fused" : "", (long long)c->n, (long long)c->c,
             (long long)c->h, (long long)c->w, (long long)c->k, (long long)c->r, (long long)c->s,
             c->pad[0], c->pad[1], c->stride[0], c->stride[1], c->dilation[0], c->dilation[1],
             c->groups, ir_dtype_name(c->dtype), c->math == CG_MATH_FMA ? "fma" : "tensor_op",
             c->nhwc ? "nhwc" : "nchw", (long long)c->workspace_bytes,
             c->deterministic ? ", deterministic" : "");
}

/* The cache folder's cudnn/ in dir; -1 where there is no cache. */
static int choices_dir(char *dir, size_t len)
{
    char base[4096];
    base_cache_dir(NULL, base, sizeof base);
    return base[0] && snprintf(dir, len, "%s/cudnn", base) < (int)len ? 0 : -1;
}

/* The file of key, in path. */
static int choice_path(const char *key, char *path, size_t len)
{
    char dir[4200];
    if (choices_dir(dir, sizeof dir) != 0)
        return -1;
    uint64_t h = 14695981039346656037ull;
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return snprintf(path, len, "%s/%016llx.txt", dir, (unsigned long long)h) < (int)len ? 0 : -1;
}

/* The key and choice in file path: 0, or -1 where it holds none whole. */
static int read_entry(const char *path, char *key, size_t len, int *algo, int *math, double *ms)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fgets(key, (int)len, f) && key[strcspn(key, "\n")] == '\n' &&
             fscanf(f, "algo %d math %d ms %lf", algo, math, ms) == 3 && *algo >= 0;
    fclose(f);
    if (ok)
        key[strcspn(key, "\n")] = 0;
    return ok ? 0 : -1;
}

int rt_cudnn_choice_read(const char *key, int *algo, int *math, double *ms)
{
    char path[4300], line[1300];
    return choice_path(key, path, sizeof path) == 0 &&
                   read_entry(path, line, sizeof line, algo, math, ms) == 0 &&
                   strcmp(line, key) == 0
               ? 0 : -1;
}

/* A temporary file in the folder, renamed over the entry: a reader sees the
 * old whole or the new whole.  Silent where the cache cannot be written, as
 * the choice is only timed again. */
void rt_cudnn_choice_write(const char *key, int algo, int math, double ms)
{
    char path[4300], tmp[4400], failed[4096];
    if (choice_path(key, path, sizeof path) != 0)
        return;
    char *slash = strrchr(path, '/');
    *slash = 0;
    int made = base_make_dirs(path, 0755, failed, sizeof failed);
    *slash = '/';
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
    int fd = made == 0 ? mkstemp(tmp) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd), unlink(tmp);
        return;
    }
    int bad = fprintf(f, "%s\nalgo %d math %d ms %.6f\n", key, algo, math, ms) < 0;
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0)
        unlink(tmp);
}

int rt_cudnn_kept(const cg_conv *c, rt_cudnn_kept_fn fn, void *ctx)
{
    char dir[4200], problem[900];
    if (choices_dir(dir, sizeof dir) != 0)
        return 0;
    DIR *dp = opendir(dir);
    if (!dp)
        return 0;
    rt_cudnn_problem(c, problem, sizeof problem);
    size_t plen = strlen(problem);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".txt") != 0)
            continue;
        char path[4500], key[1300];
        int algo, math;
        double ms;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (read_entry(path, key, sizeof key, &algo, &math, &ms) != 0)
            continue;
        /* "gpu NAME, cudnn VERSION, " then the problem */
        size_t klen = strlen(key);
        if (strncmp(key, "gpu ", 4) != 0 || klen < plen + 2 ||
            strcmp(key + klen - plen, problem) != 0 || strncmp(key + klen - plen - 2, ", ", 2))
            continue;
        key[klen - plen - 2] = 0;
        fn(ctx, key + 4, algo, ms);
        n++;
    }
    closedir(dp);
    return n;
}
