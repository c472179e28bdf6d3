/* Compiling the generated kernels with NVRTC (built only where CMake finds the
 * CUDA toolkit; nothing in the build is compiled by nvcc).
 *
 * Each module (translation unit) is compiled for each target architecture
 * into a cubin; the compile for the newest one also gives its PTX, which the
 * driver compiles for GPUs newer than every target.  The (module, arch) jobs
 * run on a pool of threads, so the architectures of one module, and modules,
 * compile at once.
 *
 * The cache: one file per image under $GNC_CACHE_DIR (default ~/.cache/gnc),
 * named by the SHA-256 of the NVRTC version, the options, the target and the
 * source.  A file holds a header (magic, that key, the payload's size and
 * SHA-256) and the payload (ptxas's report, then the image); a file whose
 * header or checksum does not hold is compiled again and replaced.  Files are
 * written to a temporary name and renamed: a reader never sees half of one.
 *
 * A compile error names the kernel whose lines hold the first error (and the
 * IR node and DSL line it computes), the line of the generated source, and
 * that line. */
#include <errno.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#ifndef GNC_CUDA_INCLUDE
#define GNC_CUDA_INCLUDE "/usr/local/cuda/include"
#endif

#define MAGIC "GNCCACHE1\n"
#define MAGIC_LEN 10

int cg_have_nvrtc(void) { return 1; }

const char *cg_nvrtc_version(void)
{
    static char v[32];
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
        return NULL;
    snprintf(v, sizeof v, "%d.%d", major, minor);
    return v;
}

/* ---- the cache ---- */

typedef struct {
    char dir[4096];             /* "" without a cache */
    int broken;                 /* one was asked for, and its folder cannot be made */
} cache;

static void cache_open(cache *c, const char *want)
{
    c->broken = 0;
    base_cache_dir(want, c->dir, sizeof c->dir);
    char failed[4096];
    if (c->dir[0] && base_make_dirs(c->dir, 0755, failed, sizeof failed) != 0) {
        c->dir[0] = 0; /* no cache where none can be made: cache_put says so */
        c->broken = 1;
    }
}

static void hex(const unsigned char *k, char *out)
{
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", k[i]);
}

static void entry_path(const cache *c, const unsigned char key[32], const char *ext, char *out,
                       size_t size)
{
    char h[65];
    hex(key, h);
    snprintf(out, size, "%s/%s.%s", c->dir, h, ext);
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#define HEADER (MAGIC_LEN + 32 + 8 + 32)

/* The payload of entry key, or NULL (absent: *corrupt 0; damaged: 1). */
static unsigned char *cache_get(const cache *c, const unsigned char key[32], const char *ext,
                                size_t *len, int *corrupt)
{
    *corrupt = 0;
    if (!c->dir[0])
        return NULL;
    char path[4200];
    entry_path(c, key, ext, path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char h[HEADER];
    unsigned char *data = NULL;
    *corrupt = 1;
    if (fread(h, 1, HEADER, f) != HEADER || memcmp(h, MAGIC, MAGIC_LEN) != 0 ||
        memcmp(h + MAGIC_LEN, key, 32) != 0)
        goto done;
    uint64_t n = get64(h + MAGIC_LEN + 32);
    if (n > ((uint64_t)1 << 32))
        goto done;
    data = base_malloc(n ? n : 1);
    if (!data || fread(data, 1, n, f) != n || fgetc(f) != EOF)
        goto bad;
    cg_sha256 s;
    unsigned char sum[32];
    cg_sha256_init(&s);
    cg_sha256_update(&s, data, n);
    cg_sha256_final(&s, sum);
    if (memcmp(sum, h + MAGIC_LEN + 40, 32) != 0)
        goto bad;
    *corrupt = 0;
    *len = n;
    fclose(f);
    return data;
bad:
    base_free(data);
    data = NULL;
done:
    fclose(f);
    return NULL;
}

/* 0 when stored (or no cache was asked for), -1 when the cache could not
 * take it (counted in cg_compile_stats.cache_unwritten). */
static int cache_put(const cache *c, const unsigned char key[32], const char *ext,
                     const void *data, size_t n)
{
    if (!c->dir[0])
        return c->broken ? -1 : 0;
    char path[4200], tmp[4300];
    entry_path(c, key, ext, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return -1;
    unsigned char h[HEADER];
    memcpy(h, MAGIC, MAGIC_LEN);
    memcpy(h + MAGIC_LEN, key, 32);
    put64(h + MAGIC_LEN + 32, n);
    cg_sha256 s;
    cg_sha256_init(&s);
    cg_sha256_update(&s, data, n);
    cg_sha256_final(&s, h + MAGIC_LEN + 40);
    FILE *f = fdopen(fd, "wb");
    int ok = f && fwrite(h, 1, HEADER, f) == HEADER && fwrite(data, 1, n, f) == n;
    ok = f && fclose(f) == 0 && ok;
    if (!f)
        close(fd);
    if (ok && rename(tmp, path) == 0)
        return 0;
    unlink(tmp);
    return -1;
}

/* ---- jobs ---- */

typedef struct {
    cg_program *p;
    const cache *c;
    int module, arch;           /* arch: index into p->archs */
    int ptx;                    /* also the PTX (the newest arch) */
    const char *opts[8];
    int nopts;
    int ptxas_info;
    /* results */
    int rc;
    char err[2048];
    int compiled, hits, corrupt, unwritten;
    cg_image cubin, ptximg;
    char *log;
} job;

typedef struct {
    pthread_mutex_t mu;
    job *jobs;
    int njobs, next;
    int done;                   /* jobs finished, for o->progress */
    const cg_compile_options *o;
} pool;

static void key_of(const job *j, const char *what, unsigned char key[32])
{
    cg_sha256 s;
    cg_sha256_init(&s);
    const char *v = cg_nvrtc_version();
    cg_sha256_update(&s, "gnc-nvrtc-1\n", 12);
    cg_sha256_update(&s, v ? v : "?", strlen(v ? v : "?"));
    for (int i = 0; i < j->nopts; i++) {
        cg_sha256_update(&s, "\n", 1);
        cg_sha256_update(&s, j->opts[i], strlen(j->opts[i]));
    }
    cg_sha256_update(&s, "\n", 1);
    cg_sha256_update(&s, what, strlen(what));
    cg_sha256_update(&s, "\n", 1);
    const cg_module *m = &j->p->modules[j->module];
    cg_sha256_update(&s, m->source, m->source_len);
    cg_sha256_final(&s, key);
}

/* payload: 8 bytes of log length, the log, the image */
static unsigned char *payload(const char *log, const void *img, size_t n, size_t *len)
{
    size_t ll = log ? strlen(log) : 0;
    unsigned char *p = base_xmalloc(8 + ll + n);
    put64(p, ll);
    if (ll)
        memcpy(p + 8, log, ll);
    memcpy(p + 8 + ll, img, n);
    *len = 8 + ll + n;
    return p;
}

static int unpack(unsigned char *data, size_t len, char **log, cg_image *img)
{
    if (len < 8)
        return -1;
    uint64_t ll = get64(data);
    if (ll > len - 8)
        return -1;
    *log = base_xmalloc(ll + 1);
    memcpy(*log, data + 8, ll);
    (*log)[ll] = 0;
    img->size = len - 8 - ll;
    img->data = base_xmalloc(img->size ? img->size : 1);
    memcpy(img->data, data + 8 + ll, img->size);
    return 0;
}

/* The line of src numbered line (from 1), into out. */
static void source_line(const char *src, int line, char *out, size_t size)
{
    const char *s = src;
    for (int l = 1; l < line && s; l++) {
        s = strchr(s, '\n');
        if (s)
            s++;
    }
    if (!s) {
        snprintf(out, size, "?");
        return;
    }
    size_t n = strcspn(s, "\n");
    snprintf(out, size, "%.*s", (int)(n < size - 1 ? n : size - 1), s);
}

/* The first error of log as "kernel K (...): line L of ...: error: ...". */
static void describe_error(job *j, const char *log)
{
    const cg_program *p = j->p;
    const cg_module *m = &p->modules[j->module];
    const char *e = strstr(log, ": error");
    if (!e) {
        snprintf(j->err, sizeof j->err, "NVRTC failed on module %d for %s: %.1500s",
                 j->module, p->archs[j->arch], log);
        return;
    }
    /* "module_3.cu(123): error: ..." */
    const char *open = e;
    while (open > log && open[-1] != '(' && open[-1] != '\n')
        open--;
    int line = open > log && open[-1] == '(' ? atoi(open) : 0;
    const char *msg = e + 2;
    size_t mlen = strcspn(msg, "\n");
    int k = -1;
    for (int i = 0; i < m->nkernels; i++)
        if (m->kernel_line[i] <= line)
            k = i;
    char text[512], where[600] = "the prelude";
    source_line(m->source, line, text, sizeof text);
    if (k >= 0 && line >= m->kernel_line[0]) {
        const cg_kernel *K = &p->kernels[m->kernels[k]];
        if (K->node && K->node->loc.file)
            snprintf(where, sizeof where, "kernel %s (%%%s @%s:%d:%d)", K->name,
                     K->node->out[0]->name, K->node->loc.file, K->node->loc.line,
                     K->node->loc.col);
        else
            snprintf(where, sizeof where, "kernel %s", K->name);
    }
    snprintf(j->err, sizeof j->err,
             "NVRTC: %s: line %d of the generated source (module %d, %s): %.*s\n    %d | %s", where,
             line, j->module, p->archs[j->arch], (int)mlen, msg, line, text);
}

/* Where what starts on the line at s, or NULL when that line lacks it. */
static const char *on_line(const char *s, const char *what)
{
    const char *q = strstr(s, what);
    return q && q < s + strcspn(s, "\n") ? q : NULL;
}

/* The number just before q ("12 bytes spill stores": 12), looking no further
 * back than start. */
static int number_before(const char *start, const char *q)
{
    while (q > start && q[-1] == ' ')
        q--;
    while (q > start && q[-1] >= '0' && q[-1] <= '9')
        q--;
    return atoi(q);
}

/* The index of module m's kernel whose name starts at q and ends at one of
 * stop, or -1. */
static int kernel_named(const cg_program *p, const cg_module *m, const char *q, const char *stop)
{
    size_t n = strcspn(q, stop);
    for (int i = 0; i < m->nkernels; i++) {
        const char *name = p->kernels[m->kernels[i]].name;
        if (strlen(name) == n && strncmp(name, q, n) == 0)
            return m->kernels[i];
    }
    return -1;
}

/* Reads ptxas -v's report into the kernels' registers and spills: a kernel's
 * lines follow the line that names it. */
static void parse_ptxas(job *j, const char *log)
{
    cg_program *p = j->p;
    const cg_module *m = &p->modules[j->module];
    static const char props[] = "Function properties for ", entry[] = "Compiling entry function '";
    int k = -1;
    for (const char *s = log; s && *s; s = strchr(s, '\n'), s = s ? s + 1 : NULL) {
        const char *q;
        if ((q = on_line(s, props))) {
            k = kernel_named(p, m, q + strlen(props), " \n");
            continue;
        }
        if ((q = on_line(s, entry))) {
            k = kernel_named(p, m, q + strlen(entry), "'\n");
            continue;
        }
        if (k < 0)
            continue;
        cg_kernel *K = &p->kernels[k];
        if ((q = on_line(s, "bytes spill stores"))) {
            K->spill_stores[j->arch] = number_before(s, q);
            const char *l = strstr(q, "bytes spill loads");
            if (l)
                K->spill_loads[j->arch] = number_before(q, l);
        }
        if ((q = on_line(s, "Used "))) {
            K->regs[j->arch] = atoi(q + 5);
            const char *sm = on_line(q, "bytes smem");
            if (sm)
                K->shared_bytes[j->arch] = number_before(q, sm);
        }
    }
}

static void run_job(job *j)
{
    cg_program *p = j->p;
    const cg_module *m = &p->modules[j->module];
    unsigned char kc[32], kp[32];
    char what[64];
    snprintf(what, sizeof what, "cubin:%s", p->archs[j->arch]);
    key_of(j, what, kc);
    snprintf(what, sizeof what, "ptx:%s", p->archs[j->arch]);
    key_of(j, what, kp);
    snprintf(j->cubin.arch, sizeof j->cubin.arch, "%s", p->archs[j->arch]);
    snprintf(j->ptximg.arch, sizeof j->ptximg.arch, "compute_%s", p->archs[j->arch] + 3);
    j->ptximg.ptx = 1;

    size_t len = 0, plen = 0;
    int bad1 = 0, bad2 = 0;
    unsigned char *hit = cache_get(j->c, kc, "cubin", &len, &bad1);
    unsigned char *phit = j->ptx ? cache_get(j->c, kp, "ptx", &plen, &bad2) : NULL;
    j->corrupt = bad1 + bad2;
    if (hit && (!j->ptx || phit)) {
        char *log = NULL, *plog = NULL;
        int ok = unpack(hit, len, &log, &j->cubin) == 0 &&
                 (!phit || unpack(phit, plen, &plog, &j->ptximg) == 0);
        base_free(hit);
        base_free(phit);
        base_free(plog);
        if (ok) {
            j->cubin.from_cache = j->ptximg.from_cache = 1;
            j->hits = 1 + (j->ptx != 0);
            if (j->ptxas_info)
                parse_ptxas(j, log);
            j->log = log;
            return;
        }
        base_free(log);
        base_free(j->cubin.data);
        base_free(j->ptximg.data);
        j->cubin.data = j->ptximg.data = NULL;
        j->corrupt++;
    } else {
        base_free(hit);
        base_free(phit);
    }

    nvrtcProgram prog;
    char name[64];
    snprintf(name, sizeof name, "gnc_module_%d.cu", j->module);
    j->compiled = 1;
    if (nvrtcCreateProgram(&prog, m->source, name, 0, NULL, NULL) != NVRTC_SUCCESS) {
        snprintf(j->err, sizeof j->err, "NVRTC: could not create a program for module %d",
                 j->module);
        j->rc = -1;
        return;
    }
    nvrtcResult r = nvrtcCompileProgram(prog, j->nopts, j->opts);
    size_t ls = 0;
    nvrtcGetProgramLogSize(prog, &ls);
    char *log = base_xmalloc(ls + 1);
    log[0] = 0;
    if (ls)
        nvrtcGetProgramLog(prog, log);
    if (r != NVRTC_SUCCESS) {
        describe_error(j, log);
        base_free(log);
        nvrtcDestroyProgram(&prog);
        j->rc = -1;
        return;
    }
    size_t cs = 0, ps = 0;
    int ok = nvrtcGetCUBINSize(prog, &cs) == NVRTC_SUCCESS && cs > 0;
    if (ok) {
        j->cubin.data = base_xmalloc(cs);
        j->cubin.size = cs;
        ok = nvrtcGetCUBIN(prog, j->cubin.data) == NVRTC_SUCCESS;
    }
    if (ok && j->ptx) {
        ok = nvrtcGetPTXSize(prog, &ps) == NVRTC_SUCCESS && ps > 0;
        if (ok) {
            j->ptximg.data = base_xmalloc(ps);
            j->ptximg.size = ps;
            ok = nvrtcGetPTX(prog, j->ptximg.data) == NVRTC_SUCCESS;
        }
    }
    nvrtcDestroyProgram(&prog);
    if (!ok) {
        snprintf(j->err, sizeof j->err, "NVRTC gave no image for module %d (%s)", j->module,
                 p->archs[j->arch]);
        base_free(log);
        j->rc = -1;
        return;
    }
    if (j->ptxas_info)
        parse_ptxas(j, log);
    size_t n;
    unsigned char *pl = payload(log, j->cubin.data, j->cubin.size, &n);
    j->unwritten += cache_put(j->c, kc, "cubin", pl, n) != 0;
    base_free(pl);
    if (j->ptx) {
        pl = payload("", j->ptximg.data, j->ptximg.size, &n);
        j->unwritten += cache_put(j->c, kp, "ptx", pl, n) != 0;
        base_free(pl);
    }
    j->log = log;
}

static void *worker(void *arg)
{
    pool *P = arg;
    for (;;) {
        pthread_mutex_lock(&P->mu);
        int i = P->next < P->njobs ? P->next++ : -1;
        pthread_mutex_unlock(&P->mu);
        if (i < 0)
            return NULL;
        run_job(&P->jobs[i]);
        if (P->o->progress) {
            pthread_mutex_lock(&P->mu);
            P->o->progress(P->o->ctx, ++P->done, P->njobs);
            pthread_mutex_unlock(&P->mu);
        }
    }
}

int cg_compile(cg_program *p, const cg_compile_options *o, cg_compile_stats *stats, char *err,
               size_t errlen)
{
    double t0 = base_now_ms();
    cg_compile_options def = {NULL, 0, 1, NULL, NULL};
    if (!o)
        o = &def;
    cache c;
    if (o->cache_dir && !o->cache_dir[0])
        c.dir[0] = 0;
    else
        cache_open(&c, o->cache_dir);
    int newest = 0;
    for (int a = 1; a < p->narchs; a++)
        if (atoi(p->archs[a] + 3) > atoi(p->archs[newest] + 3))
            newest = a;
    int njobs = p->nmodules * p->narchs;
    job *jobs = base_xcalloc((size_t)(njobs ? njobs : 1), sizeof *jobs);
    char opts[CG_MAX_ARCHS][32];
    for (int a = 0; a < p->narchs; a++)
        snprintf(opts[a], sizeof opts[a], "-arch=%s", p->archs[a]);
    for (int m = 0; m < p->nmodules; m++)
        for (int a = 0; a < p->narchs; a++) {
            job *j = &jobs[m * p->narchs + a];
            j->p = p;
            j->c = &c;
            j->module = m;
            j->arch = a;
            j->ptx = a == newest;
            j->ptxas_info = o->ptxas_info;
            j->opts[j->nopts++] = opts[a];
            j->opts[j->nopts++] = "-std=c++17";
            j->opts[j->nopts++] = "--ptxas-options=-v";
            j->opts[j->nopts++] = "-I" GNC_CUDA_INCLUDE;
        }
    pool P = {PTHREAD_MUTEX_INITIALIZER, jobs, njobs, 0, 0, o};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = o->threads > 0 ? o->threads : ncpu > 0 ? (int)ncpu : 1;
    if (nt > njobs)
        nt = njobs;
    if (nt < 1)
        nt = 1;
    pthread_t *th = base_xcalloc((size_t)nt, sizeof *th);
    int started = 0;
    for (int i = 1; i < nt; i++)
        if (pthread_create(&th[i], NULL, worker, &P) == 0)
            started++;
        else
            break;
    worker(&P); /* this thread too */
    for (int i = 1; i <= started; i++)
        pthread_join(th[i], NULL);
    base_free(th);

    int rc = 0;
    cg_compile_stats st = {0};
    for (int m = 0; m < p->nmodules; m++) {
        cg_module *mod = &p->modules[m];
        for (int i = 0; i < mod->nimages; i++)
            base_free(mod->images[i].data);
        base_free(mod->images);
        base_free(mod->log);
        mod->log = NULL;
        mod->nimages = 0;
        mod->images = base_xcalloc((size_t)p->narchs + 1, sizeof *mod->images);
        cg_sb logs = {0};
        for (int a = 0; a < p->narchs; a++) {
            job *j = &jobs[m * p->narchs + a];
            st.compiles += j->compiled;
            st.cache_hits += j->hits;
            st.cache_corrupt += j->corrupt;
            st.cache_unwritten += j->unwritten;
            if (j->rc && !rc) {
                rc = -1;
                snprintf(err, errlen, "%s", j->err);
            }
            if (j->log)
                cg_sb_printf(&logs, "%s", j->log);
            base_free(j->log);
            if (!j->rc)
                mod->images[mod->nimages++] = j->cubin;
            else
                base_free(j->cubin.data);
        }
        job *jn = &jobs[m * p->narchs + newest];
        if (!jn->rc && jn->ptximg.data)
            mod->images[mod->nimages++] = jn->ptximg;
        else
            base_free(jn->ptximg.data);
        mod->log = logs.s;
    }
    base_free(jobs);
    st.ms = base_now_ms() - t0;
    if (stats)
        *stats = st;
    return rc;
}
