/* Partitioning from the command line: memory caps, the device model, and the
 * auto strategy, which compiles every candidate, rejects those that fail or do
 * not fit, and keeps the one with the shortest predicted step. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "plan.h"

/* "80GiB", "512MB", "1e9": bytes; 0 on a bad size. */
static int64_t parse_size(const char *s, const char *end)
{
    char buf[64];
    size_t n = (size_t)(end - s);
    if (n == 0 || n >= sizeof buf)
        return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *unit;
    errno = 0;
    double v = strtod(buf, &unit);
    static const struct { const char *name; double scale; } units[] = {
        {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
        {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (strcmp(unit, units[i].name) == 0) {
            double b = v * units[i].scale;
            return errno || unit == buf || !(b >= 1 && b < 9.2e18) ? 0 : (int64_t)b;
        }
    return 0;
}

int cli_parse_mem_cap(const char *spec, options *o, char *err, size_t errlen)
{
    const char *p = spec;
    int per_device = strchr(spec, '=') != NULL;
    o->mem_cap_all = 0;
    memset(o->mem_cap, 0, sizeof o->mem_cap);
    while (*p) {
        const char *end = strchr(p, ',');
        end = end ? end : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!per_device) {
            if ((o->mem_cap_all = parse_size(p, end)) <= 0)
                goto bad;
        } else {
            char *dend;
            long dev = eq ? strtol(p, &dend, 10) : -1;
            int64_t b = eq ? parse_size(eq + 1, end) : 0;
            if (!eq || dend != eq || dev < 0 || dev >= MAX_CAPS || b <= 0)
                goto bad;
            o->mem_cap[dev] = b;
        }
        p = *end ? end + 1 : end;
    }
    return 0;
bad:
    snprintf(err, errlen, "--mem-cap needs a size (80GiB) or device=size pairs "
             "(0=80GiB,1=40GiB, devices below %d), got '%s'", MAX_CAPS, spec);
    return -1;
}

/* The cap of device d: --mem-cap, else the device model's memory. */
static int64_t cap_of(const options *o, const cost_device *dev, int d)
{
    if (d < MAX_CAPS && o->mem_cap[d])
        return o->mem_cap[d];
    if (o->mem_cap_all)
        return o->mem_cap_all;
    for (int i = 0; i < MAX_CAPS; i++)
        if (o->mem_cap[i])
            return dev->mem_bytes; /* per-device caps given, not for this one */
    return dev->mem_bytes;
}

static void describe(const pt_options *p, char *buf, size_t len)
{
    switch (p->strategy) {
    case PT_DATA:
        if (p->deterministic)
            snprintf(buf, len, "data, deterministic");
        else
            snprintf(buf, len, "data%s", p->sync_bn ? ", sync-bn" : "");
        return;
    case PT_PIPELINE:
        snprintf(buf, len, "pipeline %s, %d microbatches", p->schedule == PT_GPIPE ? "gpipe" : "1f1b",
                 p->microbatches ? p->microbatches : 2 * p->devices);
        return;
    case PT_HYBRID:
        snprintf(buf, len, "hybrid dp=%d x pp=%d, %d microbatches", p->dp, p->pp,
                 p->microbatches ? p->microbatches : 2 * p->pp);
        return;
    case PT_TENSOR:
        snprintf(buf, len, "tensor");
        return;
    }
}

/* One candidate: the program compiled with part, planned and costed; caps
 * checked.  Returns 0, or -1 with the reason in err (and on d).  A pipeline cuts
 * its stages to fit the caps by an estimate; where the exact plan is still over
 * a device's cap, it is cut again with the cap its estimate must meet lowered
 * by the square of the excess ratio (a few times at most). */
static int build_once(const options *o, const pt_options *part, long long batch, int train,
                      const cost_device *dev, cli_program *out, diag *d, char *err,
                      size_t errlen, int64_t *over);

static int build(const options *o, const pt_options *part, long long batch, int train,
                 const cost_device *dev, cli_program *out, diag *d, char *err, size_t errlen)
{
    int n = part->devices < MAX_CAPS ? part->devices : MAX_CAPS;
    int64_t *caps = calloc((size_t)n + 1, sizeof *caps), *over = calloc((size_t)n + 1, sizeof *over);
    if (!caps || !over) {
        free(caps), free(over);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++)
        caps[i] = cap_of(o, dev, i);
    pt_options p = *part;
    p.mem_caps = caps;
    int rc = -1;
    for (int tries = 0; tries < 6; tries++) {
        diag scratch;
        diag_init(&scratch);
        int again = 0;
        memset(over, 0, (size_t)n * sizeof *over);
        int retry = tries < 5 && (part->strategy == PT_PIPELINE || part->strategy == PT_HYBRID);
        rc = build_once(o, &p, batch, train, dev, out, retry ? &scratch : d, err, errlen, over);
        for (int i = 0; rc != 0 && retry && i < n; i++)
            if (over[i] > 0) {
                int64_t real = cap_of(o, dev, i);
                double ratio = (double)real / (double)(real + over[i]);
                caps[i] = (int64_t)((double)caps[i] * ratio * ratio);
                again = 1;
            }
        if (rc != 0 && !again) /* not a cap the pipeline can dodge: report it */
            for (int i = 0; i < scratch.n; i++)
                diag_error(d, (ir_loc){0}, "%s", scratch.entries[i].msg);
        diag_free(&scratch);
        if (rc == 0 || !again)
            break;
    }
    free(caps);
    free(over);
    return rc;
}

static int build_once(const options *o, const pt_options *part, long long batch, int train,
                      const cost_device *dev, cli_program *out, diag *d, char *err,
                      size_t errlen, int64_t *over)
{
    options c = *o;
    c.part = *part;
    memset(out, 0, sizeof *out);
    int first = d->n;
    out->g = cli_load(&c, batch, d);
    if (out->g && train && (ad_training_graph(out->g, &c.opt, d) != 0 || ir_verify(out->g, d)))
        goto fail;
    if (!out->g || !(out->mp = cli_optimize(&c, out->g, train, d)))
        goto fail;
    describe(part, out->strategy, sizeof out->strategy);
    if (part->devices <= 1 && !part->deterministic)
        snprintf(out->strategy, sizeof out->strategy,
                 pt_devices(out->g) > 1 ? "as partitioned in the IR" : "one device");
    out->plan = pt_plan_new(out->g, out->mp, dev, out->strategy);
    int64_t caps[MAX_CAPS + 1] = {0};
    int ndev = out->plan->ndevices < MAX_CAPS ? out->plan->ndevices : MAX_CAPS;
    for (int i = 0; i < ndev; i++)
        caps[i] = cap_of(o, dev, i);
    if (pt_plan_check_caps(out->plan, out->mp, caps, d) != 0) {
        int first = -1;
        for (int i = 0; i < ndev; i++)
            if (out->plan->dev[i].peak_bytes > caps[i]) {
                over[i] = out->plan->dev[i].peak_bytes - caps[i];
                first = first < 0 ? i : first;
            }
        snprintf(err, errlen, "device %d needs %.2f GiB, over its cap of %.2f GiB", first,
                 (double)out->plan->dev[first].peak_bytes / 1073741824.0,
                 (double)caps[first] / 1073741824.0);
        goto fail_kept;
    }
    return 0;
fail:
    snprintf(err, errlen, "it does not compile");
    for (int i = d->n - 1; i >= first; i--) /* the first error */
        if (d->entries[i].level == DIAG_ERROR)
            snprintf(err, errlen, "%s", d->entries[i].msg);
fail_kept:
    cli_program_free(out);
    return -1;
}

void cli_program_free(cli_program *p)
{
    pt_plan_free(p->plan);
    if (p->file) { /* a plan file's: it owns g and mp */
        rt_plan_free(p->file);
        mp_plan_free(p->compiled_mp);
        if (p->compiled_g)
            ir_graph_free(p->compiled_g);
    } else {
        mp_plan_free(p->mp);
        if (p->g)
            ir_graph_free(p->g);
    }
    memset(p, 0, sizeof *p);
}

const cost_device *cli_device_model(const options *o, cost_device *buf, char *err, size_t errlen)
{
    const char *spec = o->device_model ? o->device_model : o->gpus ? "h100-nvlink" : "cpu";
    if (cost_device_parse(spec, buf, err, errlen) != 0)
        return NULL;
    return buf;
}

int cli_compile_partitioned(const options *o, long long batch, int train, cli_program *out,
                            diag *d)
{
    char err[512];
    cost_device dev;
    if (!cli_device_model(o, &dev, err, sizeof err)) {
        diag_error(d, (ir_loc){0}, "--device-model: %s", err);
        return -1;
    }
    pt_options part = o->part;
    part.cost = &dev;
    if (!o->strategy_auto || part.devices <= 1) {
        if (build(o, &part, batch, train, &dev, out, d, err, sizeof err) != 0)
            return -1;
        out->plan->cost = dev;
        return 0;
    }
    /* auto: every strategy that may fit, the fastest predicted step wins */
    pt_options cand[16];
    int n = 0, N = part.devices;
    cand[n] = part, cand[n].strategy = PT_DATA, n++;
    cand[n] = part, cand[n].strategy = PT_PIPELINE, n++;
    for (int dp = 2; dp < N && n < 14; dp++)
        if (N % dp == 0)
            cand[n] = part, cand[n].strategy = PT_HYBRID, cand[n].dp = dp, cand[n].pp = N / dp, n++;
    cand[n] = part, cand[n].strategy = PT_TENSOR, n++;
    pt_candidate *rank = calloc((size_t)n, sizeof *rank);
    int best = -1;
    cli_program prog;
    for (int i = 0; i < n; i++) {
        diag scratch;
        diag_init(&scratch);
        describe(&cand[i], rank[i].name, sizeof rank[i].name);
        if (build(o, &cand[i], batch, train, &dev, &prog, &scratch, err, sizeof err) != 0) {
            rank[i].error = strdup(err);
        } else {
            rank[i].step_ms = prog.plan->step_ms;
            for (int k = 0; k < prog.plan->ndevices; k++)
                if (prog.plan->dev[k].peak_bytes > rank[i].peak_bytes)
                    rank[i].peak_bytes = prog.plan->dev[k].peak_bytes;
            if (best < 0 || rank[i].step_ms < rank[best].step_ms) {
                if (best >= 0)
                    cli_program_free(out);
                *out = prog;
                best = i;
            } else {
                cli_program_free(&prog);
            }
        }
        diag_free(&scratch);
    }
    if (best < 0) {
        diag_error(d, (ir_loc){0}, "no strategy fits %d devices:", N);
        for (int i = 0; i < n; i++)
            diag_note(d, (ir_loc){0}, "%s: %s", rank[i].name, rank[i].error);
        for (int i = 0; i < n; i++)
            free((char *)rank[i].error);
        free(rank);
        return -1;
    }
    rank[best].chosen = 1;
    out->plan->candidates = rank;
    out->plan->ncandidates = n;
    return 0;
}

void cli_candidates_free(pt_plan *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->ncandidates; i++)
        free((char *)p->candidates[i].error);
    free(p->candidates);
    p->candidates = NULL;
    p->ncandidates = 0;
}

int cli_write_plan(const cli_program *p, const char *path)
{
    if (!path) {
        pt_plan_print(p->plan, p->g, stdout);
        return 0;
    }
    size_t n = strlen(path) + 24;
    char *tmp = malloc(n);
    if (!tmp)
        return -1;
    snprintf(tmp, n, "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    int ok = f && pt_plan_write_json(p->plan, p->g, f) == 0;
    ok = f && fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "gnc: error: cannot write '%s': %s\n", path, strerror(errno));
        remove(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}
