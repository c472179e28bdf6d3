/* What libgnc's entry points share (api.c) with the one that lives above the
 * runtime: gnc_compile (driver/compile_api.c), which calls the compile driver,
 * a stage that the runtime must not depend on. */
#ifndef GNC_LIBGNC_H
#define GNC_LIBGNC_H
#include <gnc/gnc.h>

#include "plan.h"

/* err (if not NULL) set to st and the message; returns st. */
gnc_status rt_api_error(gnc_error *err, gnc_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The status of a runtime message: files that cannot be read or written,
 * memory, or else fallback. */
gnc_status rt_api_kind_of(const char *msg, gnc_status fallback);
/* *out a new gnc_plan owning p; p NULL: the failure msg describes. */
gnc_status rt_api_plan_made(gnc_plan **out, rt_plan *p, const char *msg, gnc_error *err);
/* Out of memory inside a call that catches it (ir/base.h). */
gnc_status rt_api_out_of_memory(gnc_error *err);
#endif
