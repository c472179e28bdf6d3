/* The cost model (passes/cost.c): device specs, the presets and overrides,
 * and each error's message.
 *
 *   test_cost SOURCE_DIR */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"

static int passed, failed;
static const char *src;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    if (ok) {
        passed++;
        return;
    }
    failed++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Equal but for rounding: atol + rtol |want|. */
static int close_to(double got, double want)
{
    return fabs(got - want) <= 1e-12 + 1e-9 * fabs(want);
}

#define CHECK_NEAR(got, want, what) \
    check(close_to((got), (want)), "%s: got %.10g, want %.10g", (what), (double)(got), (double)(want))

/* ---- 4. device specs ---- */

static void specs(void)
{
    int count;
    const cost_device *list = cost_device_list(&count);
    check(count == 3, "three presets");
    for (int i = 0; i < count; i++)
        check(cost_device_lookup(list[i].name) == &list[i] && list[i].flops > 0 &&
                  list[i].flops_other > 0 && list[i].mem_bw > 0 && list[i].link_bw > 0 &&
                  list[i].link_latency >= 0 && list[i].launch >= 0 && list[i].mem_bytes > 0,
              "preset %s is sound", list[i].name);
    check(!cost_device_lookup("h200"), "no h200 preset");
    const cost_device *nv = cost_device_lookup("h100-nvlink");
    CHECK_NEAR(nv->flops, 494.7e12 * 0.6, "h100-nvlink: TF32 times 0.6");
    check(nv->mem_bytes == (int64_t)80 << 30, "h100-nvlink: 80 GiB");

    cost_device d;
    char err[256] = "";
    check(cost_device_parse("h100-nvlink,link_bw=100e9,mem=40GiB", &d, err, sizeof err) == 0 &&
              d.link_bw == 100e9 && d.mem_bytes == (int64_t)40 << 30 && d.flops == nv->flops &&
              strcmp(d.name, "h100-nvlink") == 0,
          "overrides: %s", err);
    check(cost_device_parse("cpu,launch=5us,link_latency=2ms,mem=1.5KB,flops=2e12", &d, err,
                            sizeof err) == 0 &&
              close_to(d.launch, 5e-6) && close_to(d.link_latency, 2e-3) && d.mem_bytes == 1500 &&
              d.flops == 2e12,
          "units: %s", err);
    check(cost_device_parse("h100-pcie,launch=0", &d, err, sizeof err) == 0 && d.launch == 0,
          "a zero time: %s", err);

    static const struct {
        const char *spec, *want;
    } bad[] = {
        {"h200", "unknown device 'h200'; devices: h100-nvlink, h100-pcie, cpu"},
        {"", "unknown device ''; devices: h100-nvlink, h100-pcie, cpu"},
        {"H100-nvlink", "unknown device 'H100-nvlink'; devices: h100-nvlink, h100-pcie, cpu"},
        {"cpu,lnk_bw=1e9", "unknown key 'lnk_bw'; keys: flops, flops_other, mem_bw, link_bw, "
                           "link_latency, launch, mem"},
        {"cpu,link_bw", "expected key=value, got 'link_bw'"},
        {"cpu,", "expected key=value, got ''"},
        {"cpu,link_bw=1e9,", "expected key=value, got ''"},
        {"cpu,link_bw=fast", "bad number 'fast' for link_bw: expected a number per second"},
        {"cpu,link_bw=", "bad number '' for link_bw: expected a number per second"},
        {"cpu,link_bw= 1", "bad number ' 1' for link_bw: expected a number per second"},
        {"cpu,link_bw=5GB", "bad number '5GB' for link_bw: expected a number per second"},
        {"cpu,flops=nan", "bad number 'nan' for flops: expected a number per second"},
        {"cpu,flops=inf", "bad number 'inf' for flops: expected a number per second"},
        {"cpu,flops=1e999", "bad number '1e999' for flops: expected a number per second"},
        {"cpu,launch=3 us", "bad number '3 us' for launch: expected seconds, or a number with "
                            "s, ms, us or ns"},
        {"cpu,mem=40XB", "bad number '40XB' for mem: expected bytes, or a number with B, KB, "
                         "MB, GB, TB, KiB, MiB, GiB or TiB"},
        {"cpu,link_bw=-1", "link_bw must be positive, got -1"},
        {"cpu,flops=0", "flops must be positive, got 0"},
        {"cpu,mem=0GiB", "mem must be positive, got 0GiB"},
        {"cpu,launch=-1us", "launch must be zero or more, got -1us"},
        {"cpu,mem=1e30", "mem is too large: 1e30"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cost_device out = {.name = "untouched"};
        snprintf(err, sizeof err, "(no message)");
        int rc = cost_device_parse(bad[i].spec, &out, err, sizeof err);
        check(rc == -1 && strcmp(err, bad[i].want) == 0 && strcmp(out.name, "untouched") == 0,
              "spec '%s': want -1 and '%s', got %d and '%s'", bad[i].spec, bad[i].want, rc, err);
    }
    /* a message cut to fit */
    char tiny[8];
    check(cost_device_parse("nope", &d, tiny, sizeof tiny) == -1 && strlen(tiny) == 7,
          "a short buffer takes the message's start");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_cost SOURCE_DIR\n");
        return 2;
    }
    src = argv[1];
    specs();
    printf("test_cost: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
