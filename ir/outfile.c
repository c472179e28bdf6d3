/* Output files written safely (base.h, base_out; docs/reliability.md,
 * "Output paths and temporaries"). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"

/* The temporary being written, for a signal handler: a plain array, read
 * without locks or allocation.  Kept only once a program asks
 * (base_out_track_pending: the gnc command, which writes one file at a
 * time); a library embedded in a threaded program writes files from several
 * threads at once and keeps nothing here. */
static char pending[4200];
static int tracking;

void base_out_track_pending(void)
{
    tracking = 1;
}

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISBLK(m)  ? "a block device"
           : S_ISCHR(m)  ? "a character device"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

static int in_place(base_out *o, const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0 || !(o->f = fdopen(fd, "wb"))) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return base_fail(err, errlen, "cannot write '%s': %s", path, strerror(e));
    }
    o->path = base_strdup(path);
    return o->path ? 0 : (fclose(o->f), o->f = NULL, base_fail(err, errlen, "out of memory"));
}

int base_out_open(base_out *o, const char *path, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    struct stat st;
    int exists = stat(path, &st) == 0; /* through links */
    if (!exists && errno != ENOENT)
        return base_fail(err, errlen, "cannot write '%s': %s", path, strerror(errno));
    struct stat ln;
    if (!exists && lstat(path, &ln) == 0) /* a link to nothing */
        return base_fail(err, errlen, "cannot write '%s': it is a link to nothing", path);
    if (exists && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
        return in_place(o, path, err, errlen);
    if (exists && !S_ISREG(st.st_mode))
        return base_fail(err, errlen, "cannot write '%s': it is %s", path, kind_of(st.st_mode));
    /* a regular file or none: the temporary beside the file a link names */
    char real[PATH_MAX];
    const char *target = path;
    if (exists && lstat(path, &ln) == 0 && S_ISLNK(ln.st_mode)) {
        if (!realpath(path, real))
            return base_fail(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        target = real;
    }
    mode_t mode;
    if (exists) {
        mode = st.st_mode & 07777;
    } else {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }
    size_t n = strlen(target) + 16;
    o->path = base_strdup(target);
    o->tmp = base_malloc(n);
    if (!o->path || !o->tmp) {
        base_out_abandon(o);
        return base_fail(err, errlen, "out of memory");
    }
    snprintf(o->tmp, n, "%s.XXXXXX", target);
    int fd = mkstemp(o->tmp); /* O_CREAT | O_EXCL: never through a link */
    if (fd < 0 || fchmod(fd, mode) != 0 || !(o->f = fdopen(fd, "wb"))) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(o->tmp);
        }
        base_free(o->tmp);
        o->tmp = NULL;
        base_out_abandon(o);
        return base_fail(err, errlen, "cannot write '%s': %s", path, strerror(e));
    }
    if (tracking && strlen(o->tmp) < sizeof pending)
        memcpy(pending, o->tmp, strlen(o->tmp) + 1);
    return 0;
}

int base_out_commit(base_out *o, char *err, size_t errlen)
{
    int ok = o->f && fflush(o->f) == 0 && !ferror(o->f);
    ok = ok && (!o->tmp || fsync(fileno(o->f)) == 0);
    int e = errno;
    if (o->f && fclose(o->f) != 0 && ok)
        ok = 0, e = errno;
    o->f = NULL;
    if (ok && o->tmp && rename(o->tmp, o->path) != 0)
        ok = 0, e = errno;
    if (ok && o->tmp) { /* the rename reaches the disk with the folder */
        const char *slash = strrchr(o->path, '/');
        char *dir = slash ? base_strndup(o->path, (size_t)(slash - o->path + 1)) : base_strdup(".");
        int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        base_free(dir);
    }
    if (!ok)
        base_fail(err, errlen, "cannot write '%s': %s", o->path ? o->path : "?", strerror(e));
    if (ok && o->tmp) { /* renamed: nothing to remove */
        if (tracking)
            pending[0] = 0;
        base_free(o->tmp);
        o->tmp = NULL;
    }
    base_out_abandon(o);
    return ok ? 0 : -1;
}

void base_out_abandon(base_out *o)
{
    if (o->f)
        fclose(o->f);
    if (o->tmp) {
        unlink(o->tmp);
        if (tracking)
            pending[0] = 0;
    }
    base_free(o->tmp);
    base_free(o->path);
    memset(o, 0, sizeof *o);
}

void base_out_remove_pending(void)
{
    if (tracking && pending[0])
        unlink(pending);
}
