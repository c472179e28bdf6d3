/* Device selection: see device.h.  GNC_HAVE_CUDA_DRIVER: runtime/cuda/cuda.c is
 * the real GPU executor in this build (CMakeLists.txt defines it for both). */
#include "device.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int rt_gpu_present(void)
{
    DIR *dir = opendir("/proc/driver/nvidia/gpus");
    if (dir) {
        int found = 0;
        for (struct dirent *e; !found && (e = readdir(dir));)
            found = e->d_name[0] != '.';
        closedir(dir);
        if (found)
            return 1;
    }
    return access("/dev/nvidia0", F_OK) == 0;
}

int rt_device_pick(const char *name, rt_device_kind *kind, char *err, size_t errlen)
{
    int dflt = name == NULL;
    if (dflt)
        name = RT_GPU_VALIDATED && rt_gpu_present() ? "cuda" : "cpu";
    if (strcmp(name, "cpu") == 0) {
        *kind = RT_DEVICE_CPU;
        return 0;
    }
    if (strcmp(name, "cuda") == 0) {
#ifdef GNC_HAVE_CUDA_DRIVER
        *kind = RT_DEVICE_CUDA;
        return 0;
#else
        snprintf(err, errlen, "device cuda%s: this build of gnc has no CUDA runtime (built "
                 "without the CUDA toolkit); run on the CPU instead (device cpu)", dflt
                 ? " (the default)" : "");
        return -2;
#endif
    }
    snprintf(err, errlen, "unknown device '%s' (cpu or cuda)", name);
    return -1;
}
