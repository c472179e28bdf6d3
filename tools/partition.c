/* Partitioning from the command line: --mem-cap's sizes, and --dump-plan's
 * output (the strategy search itself is the driver's: driver/driver.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
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
    o->c.mem_cap_all = 0;
    memset(o->mem_cap, 0, sizeof o->mem_cap);
    while (*p) {
        const char *end = strchr(p, ',');
        end = end ? end : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!per_device) {
            if ((o->c.mem_cap_all = parse_size(p, end)) <= 0)
                goto bad;
        } else {
            char *dend;
            long dev = eq ? strtol(p, &dend, 10) : -1;
            int64_t b = eq ? parse_size(eq + 1, end) : 0;
            if (!eq || dend != eq || dev < 0 || dev >= MAX_CAPS || b <= 0)
                goto bad;
            if (o->mem_cap[dev]) {
                snprintf(err, errlen, "--mem-cap gives device %ld two caps ('%s')", dev, spec);
                return -1;
            }
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

int cli_write_plan(const drv_program *p, const char *path)
{
    if (!path) {
        pt_plan_print(p->plan, p->g, stdout);
        return 0;
    }
    if (strcmp(path, "-") == 0)
        return pt_plan_write_json(p->plan, p->g, stdout);
    char err[1024];
    base_out o;
    if (base_out_open(&o, path, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s\n", err);
        return -1;
    }
    if (pt_plan_write_json(p->plan, p->g, o.f) != 0) {
        fprintf(stderr, "gnc: error: cannot write '%s': %s\n", path, strerror(errno));
        base_out_abandon(&o);
        return -1;
    }
    if (base_out_commit(&o, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s\n", err);
        return -1;
    }
    return 0;
}
