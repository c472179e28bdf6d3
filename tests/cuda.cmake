# runtime/cuda/cuda.c, the GPU executor.  test_cuda: its refusals, without a GPU
# (no driver, a plan too large, status words, steps it cannot run yet).
add_executable(test_cuda ${CMAKE_CURRENT_LIST_DIR}/test_cuda.c)
target_link_libraries(test_cuda PRIVATE gnc_runtime gnc_codegen gnc_passes gnc_ir)
if(GNC_HAVE_NVRTC AND EXISTS "${CUDAToolkit_INCLUDE_DIRS}/cuda.h")
  target_compile_definitions(test_cuda PRIVATE GNC_HAVE_CUDA_DRIVER)
endif()
add_test(NAME cuda_runtime COMMAND test_cuda)
set_tests_properties(cuda_runtime PROPERTIES LABELS "unit")

# On a GPU (label gpu): ops against the CPU executor, graph replay against
# eager, the arena's size (test_gpu_ops); resnet18 training for 50 steps
# against the CPU executor's losses (test_gpu_train).  Reported skipped (77)
# without a driver or GPU.  tests/gpu/gpu_env.c runs them on the stand-in
# libraries instead (tests/fakecuda/), where the kernels are host emulations.
set(GNC_GPU_TEST_SOURCES ${CMAKE_CURRENT_LIST_DIR}/gpu/gpu_env.c ${CMAKE_CURRENT_LIST_DIR}/cg_host.c)
foreach(t gpu_ops gpu_train)
  add_executable(test_${t} ${CMAKE_CURRENT_LIST_DIR}/gpu/test_${t}.c ${GNC_GPU_TEST_SOURCES})
  target_include_directories(test_${t} PRIVATE ${CMAKE_CURRENT_LIST_DIR} ${CMAKE_CURRENT_LIST_DIR}/gpu)
  target_compile_definitions(test_${t} PRIVATE GNC_HOST_CXX="${GNC_HOST_CXX}"
                             GNC_TESTS_DIR="${CMAKE_CURRENT_LIST_DIR}")
  target_link_libraries(test_${t} PRIVATE gnc_runtime gnc_codegen gnc_frontend gnc_passes gnc_ir
                        ${CMAKE_DL_LIBS} m)
endforeach()
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/gpu-work)
add_test(NAME gpu_ops COMMAND test_gpu_ops ${CMAKE_CURRENT_BINARY_DIR}/gpu-work)
add_test(NAME gpu_train COMMAND test_gpu_train ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/gpu-work)
set_tests_properties(gpu_ops gpu_train PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77 TIMEOUT 900)
# One device per process on two GPUs (NCCL across processes); skipped with
# fewer GPUs, without mpirun or MPI.
add_test(NAME gpu_train_mpi COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/gpu/mpirun.sh 2
         $<TARGET_FILE:test_gpu_train> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/gpu-work --mpi)
set_tests_properties(gpu_train_mpi PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77 TIMEOUT 900)
