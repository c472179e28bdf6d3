/* The verifier's proof that a partitioned program cannot hang (ir/verify.c,
 * check_progress), held against the CPU executor, which runs each device on
 * its own thread (runtime/cpu/comm.c):
 *
 *   1. tests/comm/hang_p2p.gir and hang_ring.gir, which hung every runner
 *      while the verifier accepted them, are refused with the ring of devices
 *      that wait on each other.
 *   2. Random programs of 2 to 4 devices: collectives (random groups) and
 *      send/recv pairs in one order, swapped here and there on some devices.
 *      Every program the verifier accepts runs to its end, and programs it
 *      refuses as hanging (the ring, or two collectives in opposite orders)
 *      do hang: their run is still waiting after a second.  Each run is a child process with an
 *      alarm, so a hang fails the test instead of stopping it.
 *
 *   test_progress SOURCE_DIR */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "diag.h"
#include "exec.h"
#include "ir.h"

static int passed, failed;

static void check(int ok, const char *fmt, ...)
{
    if (ok) {
        passed++;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL: ");
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    failed++;
}

/* The verifier's messages for text, "" when it accepts it; the graph in *g
 * (NULL when it does not parse). */
static char *verify(const char *text, ir_graph **g)
{
    diag d;
    diag_init(&d);
    *g = ir_parse("t.gir", text, strlen(text), &d);
    if (*g)
        ir_verify(*g, &d);
    char *msg = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&msg, &len);
    diag_print(&d, f);
    fclose(f);
    diag_free(&d);
    return msg;
}

/* Runs g on the CPU executor in a child process: 0 when the run ended well,
 * 1 when it failed, 2 when it was still running after seconds (a hang). */
static pid_t start_run(const ir_graph *g, unsigned seconds)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    alarm(seconds);
    char err[256];
    rt_exec *x = rt_exec_new(g, err, sizeof err);
    _exit(!x || rt_exec_run(x, err, sizeof err) != 0);
}

static int end_run(pid_t pid)
{
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return 1;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        return 2;
    return WIFEXITED(status) ? WEXITSTATUS(status) != 0 : 1;
}

static void kept_hangs(const char *src)
{
    static const struct {
        const char *file, *want;
    } cases[] = {
        {"hang_p2p.gir", "the program would hang: device 0 waits for device 1 in %a0 "
                         "(all_reduce), collective 1; device 1 waits for device 0 in %v (recv), "
                         "recv 2"},
        {"hang_ring.gir", "the program would hang: device 0 waits for device 1 in %a "
                          "(all_reduce), collective 1; device 1 waits for device 2 in %b "
                          "(all_reduce), collective 2; device 2 waits for device 0 in %c "
                          "(all_reduce), collective 3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tests/comm/%s", src, cases[i].file);
        FILE *f = fopen(path, "rb");
        char text[4096] = "";
        size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
        text[n] = '\0';
        if (f)
            fclose(f);
        ir_graph *g;
        char *msg = verify(text, &g);
        check(strstr(msg, cases[i].want) != NULL, "%s: want '%s', got '%s'", cases[i].file,
              cases[i].want, msg);
        /* and it does hang on the executor */
        check(g && end_run(start_run(g, 1)) == 2, "%s: the run did not hang", cases[i].file);
        free(msg);
        if (g)
            ir_graph_free(g);
    }
}

/* ---- random programs ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static unsigned next(unsigned n)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned)(rng % n);
}

enum { MAXDEV = 4, MAXEV = 8 };

typedef struct {
    int collective;     /* else a send from `from` to `to` */
    int group[MAXDEV], size;
    int from, to;
} event;

/* Appends to text the node of event e (id e + 1) on device d. */
static void emit(char *text, size_t cap, const event *ev, int e, int d)
{
    size_t len = strlen(text);
    char on[16] = "";
    if (d)
        snprintf(on, sizeof on, " on %d", d);
    if (ev[e].collective) {
        char group[32] = "";
        for (int r = 0; r < ev[e].size; r++)
            snprintf(group + strlen(group), sizeof group - strlen(group), "%s%d", r ? ", " : "",
                     ev[e].group[r]);
        snprintf(text + len, cap - len,
                 "  %%c%d_%d: f32[2] = all_reduce(%%x) {id = %d, group = [%s]}%s\n", e + 1, d,
                 e + 1, group, on);
    } else if (d == ev[e].from) {
        snprintf(text + len, cap - len, "  %%s%d: i32[] = send(%%x) {id = %d, peer = %d}%s\n",
                 e + 1, e + 1, ev[e].to, on);
    } else {
        snprintf(text + len, cap - len,
                 "  %%r%d: f32[2] = recv() {id = %d, peer = %d, shape = [2]}%s\n", e + 1, e + 1,
                 ev[e].from, on);
    }
}

/* A random program: its events, each device's order of those it takes part
 * in, and one interleaving of the devices' orders as the node list (a recv
 * after its send where the orders allow). */
static void random_program(char *text, size_t cap)
{
    int ndev = 2 + (int)next(3), nev = 2 + (int)next(MAXEV - 1);
    event ev[MAXEV];
    int order[MAXDEV][MAXEV], len[MAXDEV] = {0};
    for (int e = 0; e < nev; e++) {
        event *v = &ev[e];
        v->collective = next(2);
        if (v->collective) {
            v->size = 0;
            for (int d = 0; d < ndev; d++)
                if (next(3))
                    v->group[v->size++] = d;
            for (int d = 0; v->size < 2; d++)   /* at least two devices */
                if (v->size == 0 || v->group[0] != d)
                    v->group[v->size++] = d;
            if (v->size == 2 && v->group[0] > v->group[1]) {
                int t = v->group[0];
                v->group[0] = v->group[1], v->group[1] = t;
            }
            for (int r = 0; r < v->size; r++)
                order[v->group[r]][len[v->group[r]]++] = e;
        } else {
            v->from = (int)next((unsigned)ndev);
            v->to = (v->from + 1 + (int)next((unsigned)ndev - 1)) % ndev;
            order[v->from][len[v->from]++] = e;
            order[v->to][len[v->to]++] = e;
        }
    }
    /* each device's order: the events' order of creation (one order all
       devices agree on), then on some devices two of its ops swapped */
    for (int d = 0; d < ndev; d++)
        if (len[d] > 1 && next(3) == 0) {
            int i = (int)next((unsigned)len[d]), j = (int)next((unsigned)len[d]);
            int t = order[d][i];
            order[d][i] = order[d][j], order[d][j] = t;
        }
    snprintf(text, cap, "graph random {\n  input %%x: f32[2]\n");
    int at[MAXDEV] = {0}, sent[MAXEV] = {0};
    for (;;) {
        int ready[MAXDEV], nready = 0, left[MAXDEV], nleft = 0;
        for (int d = 0; d < ndev; d++) {
            if (at[d] == len[d])
                continue;
            left[nleft++] = d;
            const event *v = &ev[order[d][at[d]]];
            if (v->collective || v->from == d || sent[order[d][at[d]]])
                ready[nready++] = d;
        }
        if (!nleft)
            break;
        int d = nready ? ready[next((unsigned)nready)] : left[next((unsigned)nleft)];
        int e = order[d][at[d]++];
        if (!ev[e].collective && ev[e].from == d)
            sent[e] = 1;
        emit(text, cap, ev, e, d);
    }
    snprintf(text + strlen(text), cap - strlen(text), "  output y = %%x\n}\n");
}

static void random_programs(void)
{
    enum { PROGRAMS = 400, HANG_RUNS = 12 };
    int accepted = 0, hangs = 0, rings = 0, other = 0, hang_runs = 0;
    pid_t pids[HANG_RUNS];
    char *texts[HANG_RUNS];
    ir_graph *graphs[HANG_RUNS];
    for (int p = 0; p < PROGRAMS; p++) {
        char text[8192];
        random_program(text, sizeof text);
        ir_graph *g;
        char *msg = verify(text, &g);
        check(g != NULL, "a random program does not parse:\n%s%s", text, msg);
        if (g && !*msg) {
            accepted++;
            int r = end_run(start_run(g, 20));
            check(r == 0, "an accepted program %s:\n%s", r == 2 ? "hangs" : "fails", text);
        } else if (g && (strstr(msg, "the program would hang: ") ||
                         strstr(msg, "come in one order on device"))) {
            hangs++;
            rings += strstr(msg, "the program would hang: ") != NULL;
            if (hang_runs < HANG_RUNS) {   /* the runs in parallel: a second in all */
                texts[hang_runs] = strdup(text);
                graphs[hang_runs] = g;
                pids[hang_runs++] = start_run(g, 1);
                g = NULL;
            }
        } else {
            other++;    /* a recv that the orders put before its send */
            check(g && strstr(msg, "comes before its send"), "an unexpected refusal:\n%s%s",
                  text, msg);
        }
        free(msg);
        if (g)
            ir_graph_free(g);
    }
    for (int i = 0; i < hang_runs; i++) {
        check(end_run(pids[i]) == 2, "a program refused as hanging ran to its end:\n%s",
              texts[i]);
        free(texts[i]);
        ir_graph_free(graphs[i]);
    }
    printf("progress: %d random programs: %d accepted and run to their end, %d refused as "
           "hanging (%d as a ring of waits; %d of them run: all hung), %d refused otherwise\n",
           PROGRAMS, accepted, hangs, rings, hang_runs, other);
    /* the generator reaches both sides of the proof, and the ring check */
    check(accepted >= PROGRAMS / 10 && rings >= PROGRAMS / 20,
          "too few accepted (%d) or ring-hanging (%d) programs", accepted, rings);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_progress SOURCE_DIR\n");
        return 2;
    }
    kept_hangs(argv[1]);
    random_programs();
    printf("test_progress: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
