/* Waiting for a peer with a deadline: the polling loops of the MPI backend
 * (comm_mpi.c, around MPI_Test) and of the GPU executor's NCCL waits
 * (runtime/cuda/cuda.c, around cuStreamQuery).  Not a public header.
 *
 *   rt_wait w;
 *   rt_wait_start(&w, timeout_s);
 *   while (!done()) {            one poll: MPI_Test, cuStreamQuery
 *       if (rt_wait_idle(&w))    backs off; 1: the deadline has passed
 *           return give_up(rt_wait_elapsed(&w));
 *   }
 *
 * A poll that finds the wait not over is followed by a spin for the first
 * RT_WAIT_SPIN_S of the wait (a collective between ranks that are in step
 * ends within microseconds, and a nap would only add to it), then by naps
 * that grow with the time waited, a sixteenth of it, from 20 us up to 1 ms:
 * a wait that ends after t seconds ends at most t/16 (and never more than
 * 1 ms) late, and a rank waiting for a peer that never comes polls a
 * thousand times a second instead of burning its core. */
#ifndef GNC_DEADLINE_H
#define GNC_DEADLINE_H

#include <time.h>

#define RT_WAIT_SPIN_S 0.002
#define RT_WAIT_NAP_MIN_S 20e-6
#define RT_WAIT_NAP_MAX_S 1e-3

typedef struct {
    double start;       /* seconds on CLOCK_MONOTONIC */
    double limit;       /* the deadline's distance from start */
} rt_wait;

static inline double rt_wait_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline void rt_wait_start(rt_wait *w, double timeout_s)
{
    w->start = rt_wait_now();
    w->limit = timeout_s;
}

static inline double rt_wait_elapsed(const rt_wait *w) { return rt_wait_now() - w->start; }

/* After a poll that found the wait not over: 1 when the deadline has passed,
 * else 0 after spinning on or napping (above). */
static inline int rt_wait_idle(rt_wait *w)
{
    double t = rt_wait_elapsed(w);
    if (t >= w->limit)
        return 1;
    if (t < RT_WAIT_SPIN_S)
        return 0;
    double nap = t / 16;
    nap = nap < RT_WAIT_NAP_MIN_S ? RT_WAIT_NAP_MIN_S : nap > RT_WAIT_NAP_MAX_S ? RT_WAIT_NAP_MAX_S
                                                                                : nap;
    struct timespec ts = {0, (long)(nap * 1e9)};
    nanosleep(&ts, NULL);
    return 0;
}

#endif
