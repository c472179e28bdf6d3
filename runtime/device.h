/* The devices a program runs on: the CPU executor (exec.h), and CUDA GPUs
 * through the GPU executor (cuda.h; partial: docs/runtime.md) in a build with
 * the CUDA toolkit.  rt_session (session.h) runs a plan on either.
 *
 * The default device is cuda where a GPU is present and cpu elsewhere, so a
 * program written for one machine runs on the other unchanged.  Picking cuda
 * says nothing of the driver: opening a session there fails with the GPU
 * executor's message ("no CUDA driver (libcuda.so.1): ...", "no GPU: ...")
 * where there is none. */
#ifndef GNC_DEVICE_H
#define GNC_DEVICE_H

#include <stddef.h>

typedef enum { RT_DEVICE_CPU, RT_DEVICE_CUDA } rt_device_kind;

/* Whether an NVIDIA GPU is present: the driver lists one under
 * /proc/driver/nvidia/gpus/, or /dev/nvidia0 exists. */
int rt_gpu_present(void);

/* The device name ("cpu", "cuda", or NULL for the default) resolves to.  Returns
 * 0 with *kind set when this build can run on it; -1 with a message for an
 * unknown name; -2 with a message for a device this build cannot run on (cuda
 * in a build without the CUDA toolkit: "this build of gnc has no CUDA runtime"). */
int rt_device_pick(const char *name, rt_device_kind *kind, char *err, size_t errlen);

#endif
