# tools/gpu_check.sh, the GPU machine's one call (docs/gpu.md), without a GPU:
# its pack and its run on the stand-in libraries (tests/gpu_check/run.sh).
if(GNC_HAVE_NVRTC AND EXISTS "${CUDAToolkit_INCLUDE_DIRS}/cuda.h")
  add_test(NAME gpu_check
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/gpu_check/run.sh ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR}/gpu-check-work
                   $<IF:$<BOOL:${GNC_SANITIZE}>,sanitized,plain>)
  set_tests_properties(gpu_check PROPERTIES LABELS "unit" TIMEOUT 900)
endif()
