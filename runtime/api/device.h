/* The devices a program runs on: the CPU executor (exec.h), and CUDA GPUs
 * through the GPU executor (cuda.h; partial: docs/runtime.md) in a build with
 * the CUDA toolkit.  rt_session (session.h) runs a plan on either.
 *
 * The default device was cpu until the GPU path passed tools/gpu_check.sh on
 * a real GPU (RT_GPU_VALIDATED, README's status table; an H200, 2026-11-26);
 * now it is cuda where a GPU is present and cpu elsewhere, so that a program written
 * for one machine runs on the other unchanged.  Picking cuda
 * says nothing of the driver: opening a session there fails with the GPU
 * executor's message ("no CUDA driver (libcuda.so.1): ...", "no GPU: ...")
 * where there is none. */
#ifndef GNC_DEVICE_H
#define GNC_DEVICE_H

#include <stddef.h>

typedef enum { RT_DEVICE_CPU, RT_DEVICE_CUDA } rt_device_kind;

/* 1 once a run of tools/gpu_check.sh on a real GPU has passed: cuda becomes
 * the default device where a GPU is present.  0: the default is cpu. */
#define RT_GPU_VALIDATED 1

/* The default device's words, for help texts and messages. */
#define RT_DEVICE_DEFAULT_WORDS                                                      \
    (RT_GPU_VALIDATED ? "the default where a GPU is present"                         \
                      : "the default is cpu until the GPU path passes tools/gpu_check.sh")

/* Whether an NVIDIA GPU is present: the driver lists one under
 * /proc/driver/nvidia/gpus/, or /dev/nvidia0 exists. */
int rt_gpu_present(void);

/* The device name ("cpu", "cuda", or NULL for the default) resolves to.  Returns
 * 0 with *kind set when this build can run on it; -1 with a message for an
 * unknown name; -2 with a message for a device this build cannot run on (cuda
 * in a build without the CUDA toolkit: "this build of gnc has no CUDA runtime"). */
int rt_device_pick(const char *name, rt_device_kind *kind, char *err, size_t errlen);

#endif
