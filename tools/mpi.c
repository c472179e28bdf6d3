/* gnc under mpirun: one device of the partitioned program per process
 * (docs/partition.md, "Running under MPI").
 *
 * Every rank parses the same flags, compiles the same program (compilation is
 * deterministic: cli_mpi_agree checks it by a hash of the IR and the plan) and
 * runs device `rank` of it (rt_exec_new_rank).  Rank 0 holds the loss and the
 * outputs (the partitioner ends them on device 0) and the model's whole state,
 * so it alone prints results, writes logs and checkpoints and evaluates.  A
 * failure on any rank ends the job through MPI_Abort (cli_mpi_end): the other
 * ranks may be waiting in a collective for it.  No wait for another rank is
 * for ever: the runtime's have the --timeout deadline (rt_exec_set_timeout),
 * and so do gnc's own collectives here (world_wait), the last of them a
 * barrier before MPI_Finalize, which would otherwise wait for a stopped rank
 * for ever; past it a rank says what it waited for and ends the job.  The
 * blocking calls that have no polled form, MPI_Init (which waits for every
 * rank to start) and the set-up of NCCL's communicator, are watched instead
 * (watch): past the deadline the rank says so and exits, and the launcher
 * ends the job.
 *
 * In a build without MPI (no GNC_HAVE_MPI) gnc still notices a launcher's
 * several ranks, and says it cannot take part. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef GNC_HAVE_MPI
#include <mpi.h>
#endif

#include "cli.h"
#include "cuda.h"
#include "deadline.h"
#include "exec.h"

/* The ranks a launcher announces: Open MPI's mpirun, or MPICH's and Intel's
 * (PMI).  0 when there is none. */
static int launcher_ranks(int *rank)
{
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK"};
    for (int i = 0; i < 2; i++) {
        const char *s = getenv(sizes[i]), *r = getenv(ranks[i]);
        if (s && atoi(s) > 0) {
            *rank = r ? atoi(r) : 0;
            return atoi(s);
        }
    }
    *rank = 0;
    return 0;
}

#ifdef GNC_HAVE_MPI
/* Completes *req, gnc's own collective over the world (`what`), by polling
 * with backoff up to the deadline (--timeout; before the flags are read, the
 * default).  Past it this rank says so and ends the job: every rank takes
 * part in these, so one that never comes has stopped. */
static void world_wait(const cli_world *w, MPI_Request *req, const char *what)
{
    double secs = w->timeout > 0 ? w->timeout : RT_TIMEOUT_DEFAULT;
    rt_wait t;
    rt_wait_start(&t, secs);
    for (;;) {
        int done = 0;
        MPI_Test(req, &done, MPI_STATUS_IGNORE);  /* errors are fatal on the world */
        if (done)
            return;
        if (rt_wait_idle(&t))
            break;
    }
    fprintf(stderr, "gnc: error: rank %d: waited %g s for %s (with ranks 0 to %d): giving up\n",
            w->rank, secs, what, w->ranks - 1);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The watch over one blocking call at a time: a thread that, unless
 * watch_end comes within `secs`, says what this rank waited for and ends the
 * process (the launcher then ends the job: mpirun kills the other ranks of a
 * job one of whose ranks exits with an error).  It calls no MPI: the world is
 * MPI_THREAD_FUNNELED, and the main thread is inside MPI. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t done;
    pthread_t thread;
    int running, over;
    double secs;
    int rank, ranks;
    const char *what;
} watch_ = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *watch_thread(void *unused)
{
    (void)unused;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    double end = (double)until.tv_sec + 1e-9 * (double)until.tv_nsec + watch_.secs;
    until.tv_sec = (time_t)end;
    until.tv_nsec = (long)((end - (double)until.tv_sec) * 1e9);
    pthread_mutex_lock(&watch_.lock);
    int rc = 0;
    while (!watch_.over && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&watch_.done, &watch_.lock, &until);
    if (!watch_.over) {
        fprintf(stderr, "gnc: error: rank %d: waited %g s for %s (with ranks 0 to %d): "
                "giving up\n", watch_.rank, watch_.secs, watch_.what, watch_.ranks - 1);
        fflush(stderr);
        _exit(1);
    }
    pthread_mutex_unlock(&watch_.lock);
    return NULL;
}

/* Watches the blocking call that follows (above), for `what`, up to the
 * deadline.  Without a thread to watch with, the call goes unwatched. */
static void watch_start(int rank, int ranks, double secs, const char *what)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&watch_.done, &a);
    pthread_condattr_destroy(&a);
    watch_.rank = rank, watch_.ranks = ranks, watch_.secs = secs, watch_.what = what;
    watch_.over = 0;
    watch_.running = pthread_create(&watch_.thread, NULL, watch_thread, NULL) == 0;
}

static void watch_end(void)
{
    if (!watch_.running)
        return;
    pthread_mutex_lock(&watch_.lock);
    watch_.over = 1;
    pthread_cond_signal(&watch_.done);
    pthread_mutex_unlock(&watch_.lock);
    pthread_join(watch_.thread, NULL);
    pthread_cond_destroy(&watch_.done);
    watch_.running = 0;
}

/* --timeout's value before the flags are read (for MPI_Init): the default
 * unless the command line gives a valid one. */
static double early_timeout(int argc, char **argv)
{
    double secs = RT_TIMEOUT_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
            v = argv[i + 1];
        else if (strncmp(argv[i], "--timeout=", 10) == 0)
            v = argv[i] + 10;
        char *end;
        double t = v ? strtod(v, &end) : 0;
        if (v && *v && !*end && t > 0 && t <= 1e6)
            secs = t;
    }
    return secs;
}
#endif

int cli_mpi_init(int *argc, char ***argv, cli_world *w)
{
    int rank, n = launcher_ranks(&rank);
    w->ranks = 1, w->rank = 0, w->local_rank = 0, w->local_ranks = 1, w->together = 0;
    if (n <= 1)
        return 0;
#ifdef GNC_HAVE_MPI
    int provided, rc;
    /* MPI_Init waits for every rank to start */
    watch_start(rank, n, early_timeout(*argc, *argv), "MPI_Init on the other ranks");
    /* MPI is called from the main thread only; OpenMP's threads never call it */
    rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    watch_end();
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "gnc: error: rank %d of %d: MPI_Init failed\n", rank, n);
        return -1;
    }
    MPI_Comm_size(MPI_COMM_WORLD, &w->ranks);
    MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_rank(node, &w->local_rank);
        MPI_Comm_size(node, &w->local_ranks);
        MPI_Comm_free(&node);
    }
    return 0;
#else
    (void)argc, (void)argv;
    if (rank == 0)
        fprintf(stderr, "gnc: error: started as %d MPI ranks, but this gnc was built without "
                "MPI; install libopenmpi-dev (tools/deps.sh) and build again, or run one "
                "process with --devices cpu:%d\n", n, n);
    return -1;
#endif
}

/* This rank's share of the cores: those it may run on, split between the
 * ranks on its node. */
static int share_of_cores(const cli_world *w)
{
#ifdef GNC_HAVE_MPI
    int local = w->local_ranks;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int mine = (int)online;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        mine = CPU_COUNT(&set);         /* mpirun binds each rank to a core or two */
    int share = (int)(online / (local > 0 ? local : 1));
    share = share < mine ? share : mine;
    return share > 0 ? share : 1;
#else
    (void)w;
    return 0;
#endif
}

int cli_mpi_options(options *o, const char *cmd)
{
    cli_world *w = o->world;
    w->timeout = o->timeout;
    if (w->ranks <= 1)
        return 0;
    w->solo = strcmp(cmd, "eval") == 0 || strcmp(cmd, "dump") == 0;
    if (strcmp(cmd, "eval") == 0)
        return 0;   /* rank 0 alone evaluates */
    if (o->devices_given && o->c.part.devices != w->ranks) {
        /* the same on every rank: rank 0 says it, then they all stop */
        w->together = 1;
        if (w->rank == 0)
            fprintf(stderr, "gnc: error: --%s gives %d devices, but mpirun started %d ranks: "
                    "each rank runs one device (leave --devices out, or use mpirun -np %d)\n"
                    "(see 'gnc %s --help')\n", o->c.gpus ? "gpus" : "devices", o->c.part.devices,
                    w->ranks, o->c.part.devices, cmd);
        return 2;
    }
    o->c.part.devices = w->ranks;
    o->devices_given = 1;
    if (!o->threads)
        o->threads = share_of_cores(w);
    if (w->rank > 0) { /* what only prints: rank 0 prints it */
        o->c.time_passes = 0;
        o->c.dump_ir = NULL;
        o->c.dump_dir = NULL;
    }
    return 0;
}

const char *cli_mpi_library(void)
{
#ifdef GNC_HAVE_MPI
    static char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(v, &len) != MPI_SUCCESS)
        return "MPI (its version unknown)";
    v[strcspn(v, "\n,")] = '\0';    /* "Open MPI v4.1.4, package: ..." */
    return v;
#else
    return NULL;
#endif
}

void cli_mpi_watch(const cli_world *w, const char *what)
{
#ifdef GNC_HAVE_MPI
    if (w->ranks <= 1)
        return;
    if (what)
        watch_start(w->rank, w->ranks, w->timeout > 0 ? w->timeout : RT_TIMEOUT_DEFAULT, what);
    else
        watch_end();
#else
    (void)w, (void)what;
#endif
}

int cli_mpi_gpus(const cli_world *w)
{
    char err[512];
    int count = rt_cuda_gpu_count(NULL, err, sizeof err), mine = count > w->local_rank;
#ifdef GNC_HAVE_MPI
    if (w->ranks > 1) {
        MPI_Request req;
        MPI_Iallreduce(MPI_IN_PLACE, &mine, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req);
        world_wait(w, &req, "the count of the ranks' GPUs");
    }
#endif
    return mine;
}

int cli_mpi_cuda_id(const cli_world *w, void *id, size_t bytes, char *err, size_t errlen)
{
    rt_cuda_id made;
    int rc = w->rank == 0 ? rt_cuda_unique_id(NULL, &made, err, errlen) : 0;
    if (bytes > sizeof made.bytes)
        bytes = sizeof made.bytes;
    memcpy(id, made.bytes, w->rank == 0 ? bytes : 0);
#ifdef GNC_HAVE_MPI
    MPI_Request req[2];
    MPI_Ibcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD, &req[0]);
    MPI_Ibcast(id, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &req[1]);
    world_wait(w, &req[0], "NCCL's id from rank 0");
    world_wait(w, &req[1], "NCCL's id from rank 0");
#endif
    if (rc && w->rank != 0)
        snprintf(err, errlen, "rank 0 could not make NCCL's id");
    return rc ? -1 : 0;
}

int cli_mpi_end(const cli_world *w, int rc)
{
#ifdef GNC_HAVE_MPI
    if (w->ranks > 1) {
        fflush(stdout);
        fflush(stderr);
        /* a failure every rank found together ends normally: they are all
           here (and Open MPI garbles its message when all ranks abort at once) */
        if (rc != 0 && !w->together)
            MPI_Abort(MPI_COMM_WORLD, rc);
        /* every rank here: MPI_Finalize would wait for a stopped one for ever
           (unless rank 0 worked alone, for as long as it needed) */
        cli_world at_end = *w;
        if (w->solo)
            at_end.timeout = HUGE_VAL;
        MPI_Request req;
        MPI_Ibarrier(MPI_COMM_WORLD, &req);
        world_wait(&at_end, &req, "the other ranks to finish");
        MPI_Finalize();
    }
#else
    (void)w;
#endif
    return rc;
}

#ifdef GNC_HAVE_MPI
/* FNV-1a over the program's text and its memory plan. */
static uint64_t program_hash(const drv_program *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return 1;
    ir_print(p->g, f);
    fwrite(p->mp->offset_by_id, sizeof *p->mp->offset_by_id, (size_t)p->mp->nvalues, f);
    fwrite(p->mp->device_bytes, sizeof *p->mp->device_bytes, (size_t)p->mp->ndevices, f);
    fclose(f);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)text[i]) * 1099511628211ull;
    free(text);
    return h ? h : 1;   /* 0 means "failed" */
}
#endif

int cli_mpi_agree(const options *o, const drv_program *p, diag *d)
{
    cli_world *w = o->world;
    if (w->ranks <= 1) {
        diag_print(d, stderr);
        return p->g ? 0 : -1;
    }
#ifdef GNC_HAVE_MPI
    if (w->rank == 0)
        diag_print(d, stderr);
    uint64_t mine = p->g ? program_hash(p) : 0;
    uint64_t *all = calloc((size_t)w->ranks, sizeof *all);
    if (!all) {
        fprintf(stderr, "gnc: error: rank %d: out of memory\n", w->rank);
        return -1;  /* the others wait: MPI_Abort ends them */
    }
    MPI_Request req;
    MPI_Iallgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD, &req);
    world_wait(w, &req, "the check that every rank compiled the same program");
    int bad = 0;
    for (int r = 0; r < w->ranks; r++) {
        bad |= !all[r];
        if (all[r] && all[0] && all[r] != all[0]) {
            bad = 1;
            if (w->rank == 0)
                fprintf(stderr, "gnc: error: rank %d compiled another program than rank 0 "
                        "(compilation must not depend on the process)\n", r);
        }
    }
    if (w->rank > 0 && !mine && all[0])
        diag_print(d, stderr);  /* a problem of this rank's alone */
    free(all);
    w->together = bad;          /* every rank knows, and stops here */
    return bad ? -1 : 0;
#else
    return -1;
#endif
}

rt_exec *cli_exec_new(const options *o, const drv_program *p, int per_rank, char *err,
                      size_t errlen)
{
    const cli_world *w = o->world;
    if (w->ranks > 1 && per_rank)
        return rt_exec_new_rank(p->g, p->mp->offset_by_id, p->mp->device_bytes, w->rank,
                                o->timeout, err, errlen);
    return rt_exec_new_planned(p->g, p->mp->offset_by_id, p->mp->device_bytes, err, errlen);
}
