/* Training curves as SVG (plot.h): the logs' reader and the picture's writer.
 * A .png is the same picture drawn by librsvg's rsvg-convert.
 * The picture is plain SVG 1.1 text, a panel per quantity; each series is one
 * <polyline class="series" data-run=... data-series=...>, whose points are
 * the series' finite values in order, so that a script can read it back. */
#include "plot.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "cli.h"

void plot_run_add(plot_run *r, plot_point p)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->p = base_xrealloc(r->p, (size_t)r->cap * sizeof *r->p);
    }
    r->p[r->n++] = p;
}

void plot_run_free(plot_run *r)
{
    free(r->name);
    free(r->p);
    memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------------------- reading */

/* A row as the log has it; x is made once all are read. */
typedef struct {
    double epoch, steps;
    plot_point p;
} row;

typedef struct {
    row *r;
    int n, cap;
} rows;

static void rows_add(rows *rs, row r)
{
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? 2 * rs->cap : 64;
        rs->r = base_xrealloc(rs->r, (size_t)rs->cap * sizeof *rs->r);
    }
    rs->r[rs->n++] = r;
}

/* A field of a CSV row, [a, b): a number, "nan", or nothing (NaN). */
static int csv_number(const char *a, const char *b, double *v)
{
    char buf[64];
    if (a == b) {
        *v = NAN;
        return 0;
    }
    if (b - a >= (long)sizeof buf)
        return -1;
    memcpy(buf, a, (size_t)(b - a));
    buf[b - a] = 0;
    char *end;
    *v = strtod(buf, &end);
    return *end || end == buf ? -1 : 0;
}

enum { C_EPOCH, C_STEPS, C_TRAIN, C_ACC, C_TEST, C_COUNT };
static const char *const columns[C_COUNT] = {"epoch", "steps", "train_loss", "test_acc",
                                             "test_loss"};

/* Calls fn on each field of the line [a, end) in order: its column (from 1)
 * and its text [f, g).  Stops at fn's non-zero return and returns it. */
typedef int (*field_fn)(void *ctx, int index, int col, const char *f, const char *g);
static int each_field(const char *a, const char *end, field_fn fn, void *ctx)
{
    const char *line = a;
    for (int index = 0;; index++) {
        const char *g = a;
        while (g < end && *g != ',')
            g++;
        int rc = fn(ctx, index, (int)(a - line) + 1, a, g);
        if (rc || g == end)
            return rc;
        a = g + 1;
    }
}

typedef struct {
    const char *file;
    int line, ncols, col_of[64];
    row r;
    diag *d;
} csv;

static int header_field(void *ctx, int index, int col, const char *f, const char *g)
{
    csv *c = ctx;
    if (index == 64) {
        diag_error(c->d, (ir_loc){c->file, 1, col}, "more than 64 columns");
        return -1;
    }
    c->col_of[index] = -1;
    for (int k = 0; k < C_COUNT; k++)
        if ((size_t)(g - f) == strlen(columns[k]) && memcmp(f, columns[k], (size_t)(g - f)) == 0)
            c->col_of[index] = k;
    c->ncols = index + 1;
    return 0;
}

static int row_field(void *ctx, int index, int col, const char *f, const char *g)
{
    csv *c = ctx;
    double v;
    if (index >= c->ncols) {
        diag_error(c->d, (ir_loc){c->file, c->line, col}, "more fields than the header's %d",
                   c->ncols);
        return -1;
    }
    if (csv_number(f, g, &v) != 0) {
        diag_error(c->d, (ir_loc){c->file, c->line, col}, "'%.*s' is not a number",
                   (int)(g - f > 40 ? 40 : g - f), f);
        return -1;
    }
    double *to[C_COUNT] = {&c->r.epoch, &c->r.steps, &c->r.p.train_loss, &c->r.p.test_acc,
                           &c->r.p.test_loss};
    if (c->col_of[index] >= 0)
        *to[c->col_of[index]] = v;
    return 0;
}

/* The end of the line at p, a '\r' before its '\n' left out. */
static const char *line_end(const char *p, const char *end)
{
    const char *e = memchr(p, '\n', (size_t)(end - p));
    e = e ? e : end;
    return e > p && e[-1] == '\r' ? e - 1 : e;
}

static const char *next_line(const char *p, const char *end)
{
    const char *e = memchr(p, '\n', (size_t)(end - p));
    return e ? e + 1 : end;
}

static int read_csv(const char *file, const char *text, size_t len, rows *rs, diag *d)
{
    const char *p = text, *end = text + len;
    csv c = {.file = file, .line = 1, .d = d};
    if (each_field(p, line_end(p, end), header_field, &c) != 0)
        return -1;
    int has_epoch = 0;
    for (int k = 0; k < c.ncols; k++)
        has_epoch |= c.col_of[k] == C_EPOCH;
    if (!has_epoch) {
        diag_error(d, (ir_loc){file, 1, 1}, "the header names no 'epoch' column (gnc train "
                   "--log writes epoch,steps,train_loss,test_acc,...)");
        return -1;
    }
    for (p = next_line(p, end); p < end; p = next_line(p, end)) {
        c.line++;
        const char *e = line_end(p, end);
        if (e == p)
            continue;
        c.r = (row){NAN, NAN, {NAN, NAN, NAN, NAN}};
        if (each_field(p, e, row_field, &c) != 0)
            return -1;
        if (!(c.r.epoch >= 1 && c.r.epoch < 1e9)) {
            diag_error(d, (ir_loc){file, c.line, 1}, "the epoch is not a number from 1");
            return -1;
        }
        rows_add(rs, c.r);
    }
    return 0;
}

/* A number member of a JSON object: NaN where absent or null; -1 where it is
 * something else. */
static int json_number(const cJSON *o, const char *key, double *v)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, key);
    *v = NAN;
    if (!m || cJSON_IsNull(m))
        return 0;
    if (!cJSON_IsNumber(m))
        return -1;
    *v = m->valuedouble;
    return 0;
}

static int read_jsonl(const char *file, const char *text, size_t len, rows *rs, diag *d)
{
    const char *end = text + len;
    int line = 0;
    for (const char *p = text; p < end; p = next_line(p, end)) {
        line++;
        const char *e = line_end(p, end);
        const char *q = p;
        while (q < e && (*q == ' ' || *q == '\t'))
            q++;
        if (q == e)
            continue;
        const char *stop = NULL;
        cJSON *o = cJSON_ParseWithLengthOpts(q, (size_t)(e - q), &stop, 0);
        if (!o || !cJSON_IsObject(o)) {
            int col = (int)((o ? q : stop && stop >= q && stop <= e ? stop : q) - p) + 1;
            diag_error(d, (ir_loc){file, line, col}, o ? "not a JSON object" : "not JSON");
            cJSON_Delete(o);
            return -1;
        }
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "summary"))) { /* torch_fmnist.py's */
            cJSON_Delete(o);
            continue;
        }
        row r = {NAN, NAN, {NAN, NAN, NAN, NAN}};
        const char *bad = json_number(o, "epoch", &r.epoch)             ? "epoch"
                          : json_number(o, "steps", &r.steps)           ? "steps"
                          : json_number(o, "train_loss", &r.p.train_loss) ? "train_loss"
                          : json_number(o, "test_acc", &r.p.test_acc)   ? "test_acc"
                          : json_number(o, "test_loss", &r.p.test_loss) ? "test_loss"
                                                                        : NULL;
        cJSON_Delete(o);
        if (bad) {
            diag_error(d, (ir_loc){file, line, (int)(q - p) + 1}, "'%s' is not a number", bad);
            return -1;
        }
        if (!(r.epoch >= 1 && r.epoch < 1e9)) {
            diag_error(d, (ir_loc){file, line, (int)(q - p) + 1},
                       "no 'epoch' that is a number from 1");
            return -1;
        }
        rows_add(rs, r);
    }
    return 0;
}

/* Whether r is an epoch's end: a test figure, or a log without steps. */
static int at_end(const row *r)
{
    return !isnan(r->p.test_acc) || !isnan(r->p.test_loss) || isnan(r->steps);
}

/* x of each row: an epoch's end at its epoch; a row between at its steps'
 * share of the epoch: steps / per_epoch where the caller knows the epoch's
 * steps, else the epoch's own length from its ends (the one before's where
 * it has no end yet).  ends[e]: the steps at the end of epoch e, NaN where
 * the log has no row of that end (epochs past the row count stay unknown). */
static void place(rows *rs, double per_epoch, plot_run *run)
{
    int nends = rs->n + 2;
    double *ends = base_xmalloc((size_t)nends * sizeof *ends);
    for (int e = 0; e < nends; e++)
        ends[e] = e ? NAN : 0;
    for (int i = 0; i < rs->n; i++)
        if (at_end(&rs->r[i]) && rs->r[i].epoch < nends && rs->r[i].epoch == floor(rs->r[i].epoch))
            ends[(int)rs->r[i].epoch] = rs->r[i].steps;
#define END(e) ((e) >= 0 && (e) < nends ? ends[(int)(e)] : NAN)
    for (int i = 0; i < rs->n; i++) {
        row *r = &rs->r[i];
        double x = r->epoch;
        if (!isnan(r->steps) && per_epoch > 0)
            x = r->steps / per_epoch;
        else if (!at_end(r) && r->epoch == floor(r->epoch)) {
            double before = END(r->epoch - 1), after = END(r->epoch);
            double len = isnan(after) ? before - END(r->epoch - 2) : after - before;
            if (len > 0 && r->steps > before && r->steps - before <= len)
                x = r->epoch - 1 + (r->steps - before) / len;
        }
        r->p.x = x;
        plot_run_add(run, r->p);
    }
#undef END
    free(ends);
}

int plot_read_log(const char *path, double per_epoch, plot_run *run, diag *d)
{
    size_t len = 0;
    const char *why = NULL;
    char *text = base_read_file(path, &len, &why);
    if (!text) {
        diag_error(d, (ir_loc){0}, "cannot read the log '%s': %s", path, why);
        return -1;
    }
    const char *file = diag_add_source(d, path, text, len);
    const char *q = text;
    while (q < text + len && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
        q++;
    rows rs = {0};
    int rc = -1;
    if (q == text + len)
        diag_error(d, (ir_loc){file, 1, 1}, "the log is empty");
    else
        rc = *q == '{' ? read_jsonl(file, text, len, &rs, d) : read_csv(file, text, len, &rs, d);
    if (rc == 0 && rs.n == 0) {
        diag_error(d, (ir_loc){file, 1, 1}, "the log has no rows");
        rc = -1;
    }
    if (rc == 0)
        place(&rs, per_epoch, run);
    free(rs.r);
    free(text);
    return rc;
}

/* ---------------------------------------------------------------- drawing */

enum { WIDTH = 900, PANEL_W = 360, PANEL_H = 240, LEFT = 70, TOP = 50, LEGEND = 62 };
static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                     "#8c564b"};

/* The picture's panels and the series each draws. */
static const struct {
    const char *title;
    struct {
        const char *key, *label, *dash;
        size_t off;
    } s[2];
    int nseries;
} panels[2] = {
    {"loss", {{"train_loss", "train loss", "", offsetof(plot_point, train_loss)},
              {"test_loss", "test loss", "6,4", offsetof(plot_point, test_loss)}}, 2},
    {"test accuracy", {{"test_acc", "test accuracy", "", offsetof(plot_point, test_acc)}}, 1},
};

static double value(const plot_point *p, size_t off) { return *(const double *)((const char *)p + off); }

/* A tick step of about n ticks over span: 1, 2 or 5 times a power of ten. */
static double tick_step(double span, int n)
{
    double raw = span / n, p = pow(10, floor(log10(raw)));
    return raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
}

/* The points' range over panel k's series (k < 0: every panel's), in x and
 * in y; infinite where there is none. */
static void extent(const plot_run *runs, int nruns, int k, double *x0, double *x1, double *y0,
                   double *y1)
{
    *x0 = *y0 = INFINITY, *x1 = *y1 = -INFINITY;
    for (int q = k < 0 ? 0 : k; q < (k < 0 ? 2 : k + 1); q++)
        for (int r = 0; r < nruns; r++)
            for (int i = 0; i < runs[r].n; i++)
                for (int s = 0; s < panels[q].nseries; s++) {
                    double v = value(&runs[r].p[i], panels[q].s[s].off);
                    if (!isfinite(v) || !isfinite(runs[r].p[i].x))
                        continue;
                    *x0 = fmin(*x0, runs[r].p[i].x), *x1 = fmax(*x1, runs[r].p[i].x);
                    *y0 = fmin(*y0, v), *y1 = fmax(*y1, v);
                }
}

/* How many points series s of panel k has in run r. */
static int points(const plot_run *r, int k, int s)
{
    int n = 0;
    for (int i = 0; i < r->n; i++)
        n += isfinite(value(&r->p[i], panels[k].s[s].off)) && isfinite(r->p[i].x);
    return n;
}

/* Panel k, its x axis over [x0, x1] (both panels share it) */
static void draw_panel(FILE *f, int k, const plot_run *runs, int nruns, double x0, double x1)
{
    double xa, xb, y0, y1;
    extent(runs, nruns, k, &xa, &xb, &y0, &y1);
    if (!(y0 <= y1)) /* nothing to draw yet */
        y0 = 0, y1 = 1;
    if (k == 0)
        y0 = fmin(y0, 0); /* losses from 0 */
    if (y1 - y0 < 1e-9)
        y1 = y0 + 1;
    double ys = tick_step(y1 - y0, 5), xs = tick_step(x1 - x0, 6);
    if (xs < 1 && x1 - x0 >= 1)
        xs = 1;
    y0 = floor(y0 / ys) * ys, y1 = ceil(y1 / ys) * ys;
    int ox = LEFT + k * (PANEL_W + 80), oy = TOP;
#define PX(x) (ox + ((x) - x0) / (x1 - x0) * PANEL_W)
#define PY(y) (oy + PANEL_H - ((y) - y0) / (y1 - y0) * PANEL_H)
    fprintf(f, "<g class=\"panel\" data-panel=\"%s\">\n", panels[k].s[0].key);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-weight=\"bold\">%s</text>\n",
            ox + PANEL_W / 2, oy - 12, panels[k].title);
    fprintf(f, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n",
            ox, oy + PANEL_H, ox + PANEL_W, oy + PANEL_H);
    fprintf(f, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n",
            ox, oy, ox, oy + PANEL_H);
    for (double t = ceil(x0 / xs) * xs; t <= x1 + 1e-9 * xs; t += xs)
        fprintf(f, "<line class=\"tick\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>"
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
                PX(t), oy + PANEL_H, PX(t), oy + PANEL_H + 5, PX(t), oy + PANEL_H + 18, t);
    for (double t = y0; t <= y1 + 1e-9 * ys; t += ys)
        fprintf(f, "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                ox, PY(t), ox + PANEL_W, PY(t), ox - 6, PY(t) + 4, fabs(t) < 1e-12 ? 0 : t);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">epoch</text>\n", ox + PANEL_W / 2,
            oy + PANEL_H + 36);
    int legend = 0;
    for (int r = 0; r < nruns; r++)
        for (int s = 0; s < panels[k].nseries; s++) {
            const char *color = colors[r % (int)(sizeof colors / sizeof *colors)];
            fprintf(f, "<polyline class=\"series\" data-run=\"");
            cli_put_xml(f, runs[r].name ? runs[r].name : "");
            fprintf(f, "\" data-series=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s%s%s "
                       "points=\"", panels[k].s[s].key, color,
                    *panels[k].s[s].dash ? " stroke-dasharray=\"" : "", panels[k].s[s].dash,
                    *panels[k].s[s].dash ? "\"" : "");
            int npts = 0;
            double lx = 0, ly = 0;
            for (int i = 0; i < runs[r].n; i++) {
                double v = value(&runs[r].p[i], panels[k].s[s].off);
                if (!isfinite(v) || !isfinite(runs[r].p[i].x))
                    continue;
                lx = PX(runs[r].p[i].x), ly = PY(v);
                fprintf(f, "%s%.1f,%.1f", npts++ ? " " : "", lx, ly);
            }
            fputs("\"/>\n", f);
            if (npts == 1) /* a line of one point is invisible */
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", lx, ly, color);
            if (!npts) /* nothing of it in the legend */
                continue;
            int lyy = oy + PANEL_H + LEGEND + 16 * legend++;
            fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"1.5\"%s%s%s/>"
                       "<text class=\"legend\" x=\"%d\" y=\"%d\">",
                    ox, lyy - 4, ox + 25, lyy - 4, color,
                    *panels[k].s[s].dash ? " stroke-dasharray=\"" : "", panels[k].s[s].dash,
                    *panels[k].s[s].dash ? "\"" : "", ox + 30, lyy);
            if (runs[r].name && nruns > 1) {
                cli_put_xml(f, runs[r].name);
                fputc(' ', f);
            }
            fprintf(f, "%s</text>\n", panels[k].s[s].label);
        }
#undef PX
#undef PY
    fputs("</g>\n", f);
}

/* The picture as SVG text into f. */
static void write_svg(FILE *f, const plot_run *runs, int nruns)
{
    /* the legends below the panels: as tall as the longer */
    int entries = 0;
    for (int k = 0; k < 2; k++) {
        int n = 0;
        for (int r = 0; r < nruns; r++)
            for (int s = 0; s < panels[k].nseries; s++)
                n += points(&runs[r], k, s) > 0;
        entries = n > entries ? n : entries;
    }
    int height = TOP + PANEL_H + LEGEND + 16 * entries;
    double x0, x1, y0, y1;
    extent(runs, nruns, -1, &x0, &x1, &y0, &y1);
    if (!(x0 <= x1)) /* nothing to draw yet */
        x0 = 0, x1 = 1;
    x0 = fmin(0, floor(x0)); /* from the start of training */
    x1 = fmax(ceil(x1), x0 + 1);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            WIDTH, height, WIDTH, height);
    for (int k = 0; k < 2; k++)
        draw_panel(f, k, runs, nruns, x0, x1);
    fputs("</svg>\n", f);
}

typedef struct {
    const plot_run *runs;
    int nruns;
} svg_job;

static void write_svg_job(FILE *f, const void *ctx)
{
    const svg_job *j = ctx;
    write_svg(f, j->runs, j->nruns);
}

/* The picture drawn as PNG by librsvg's rsvg-convert into file descriptor
 * out: the SVG text through a pipe, no file of its own.  0, or -1 with err. */
static int write_png(int out, const char *path, const plot_run *runs, int nruns, char *err,
                     size_t errlen)
{
    char *argv[] = {"rsvg-convert", "--format", "png", NULL}, why[256];
    svg_job j = {runs, nruns};
    int rc = cli_pipe_to(argv, out, write_svg_job, &j, why, sizeof why);
    if (rc == 1)
        return base_fail(err, errlen, "cannot draw '%s': librsvg's rsvg-convert is not installed "
                         "(Debian: librsvg2-bin); write FILE.svg instead", path);
    return rc ? base_fail(err, errlen, "cannot draw '%s': %s", path, why) : 0;
}

int plot_write(const char *path, const plot_run *runs, int nruns, char *err, size_t errlen)
{
    base_out out;
    if (base_out_open(&out, path, err, errlen) != 0)
        return -1;
    if (cli_has_suffix(path, ".png")) {
        fflush(out.f);
        if (write_png(fileno(out.f), path, runs, nruns, err, errlen) != 0) {
            base_out_abandon(&out);
            return -1;
        }
    } else {
        write_svg(out.f, runs, nruns);
    }
    return base_out_commit(&out, err, errlen);
}
