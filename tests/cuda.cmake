# runtime/cuda.c, the GPU executor.  test_cuda: its refusals, without a GPU
# (no driver, a plan too large, status words, steps it cannot run yet).
add_executable(test_cuda ${CMAKE_CURRENT_LIST_DIR}/test_cuda.c)
target_link_libraries(test_cuda PRIVATE gnc_runtime gnc_codegen gnc_passes gnc_ir)
if(GNC_HAVE_NVRTC AND EXISTS "${CUDAToolkit_INCLUDE_DIRS}/cuda.h")
  target_compile_definitions(test_cuda PRIVATE GNC_HAVE_CUDA_DRIVER)
endif()
add_test(NAME cuda_runtime COMMAND test_cuda)
set_tests_properties(cuda_runtime PROPERTIES LABELS "unit")

# On a GPU (label gpu): ops against the CPU executor, graph replay against
# eager, the arena's size.  Reported skipped (77) without a driver or GPU.
add_executable(test_gpu_ops ${CMAKE_CURRENT_LIST_DIR}/gpu/test_gpu_ops.c)
target_link_libraries(test_gpu_ops PRIVATE gnc_runtime gnc_codegen gnc_passes gnc_ir m)
add_test(NAME gpu_ops COMMAND test_gpu_ops)
set_tests_properties(gpu_ops PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77 TIMEOUT 600)
