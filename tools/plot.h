/* Training curves as SVG (or PNG) pictures (tools/plot.c): `gnc train --plot
 * FILE.svg` redraws one as training runs; `gnc plot LOG... -o FILE.svg` draws
 * the logs of finished runs side by side (docs/train.md, "Curves"). */
#ifndef GNC_PLOT_H
#define GNC_PLOT_H

#include "diag.h"

/* A point of a run: x in epochs (fractional between an epoch's ends) and the
 * three series; NaN where a row does not have one. */
typedef struct {
    double x, train_loss, test_loss, test_acc;
} plot_point;

typedef struct {
    char *name;                 /* the legend's label */
    plot_point *p;
    int n, cap;
} plot_run;

void plot_run_add(plot_run *r, plot_point p);
void plot_run_free(plot_run *r);

/* Appends the rows of a training log to r: gnc's --log (CSV with its header,
 * or JSON lines) or ../shared/bench/torch_fmnist.py's JSON lines (their
 * summary line skipped).  A row at an epoch's end has x = its epoch; a
 * --log-every row between, x = its place among the epoch's steps: steps /
 * per_epoch where per_epoch > 0 (the caller knows it), else as the log's
 * epoch ends say.  -1 with the error in d (FILE:LINE:COL with the line) on a
 * bad file. */
int plot_read_log(const char *path, double per_epoch, plot_run *r, diag *d);

/* Writes the runs as one SVG picture, a loss panel (train loss solid, test
 * loss dashed) beside an accuracy panel (test accuracy), a color per run:
 * the file replaced whole (ir/outfile.c), never left half written.  A path
 * ending in .png gets the picture drawn as PNG by librsvg's rsvg-convert
 * (Debian: librsvg2-bin; without it an error and no file).  -1 with err on a
 * failure. */
int plot_write(const char *path, const plot_run *runs, int nruns, char *err, size_t errlen);

#endif
