# Deterministic mode: every kernel of the CPU executor, and whole training steps,
# give the same bits on 1, 2, 3 and 4 threads and inside a parallel region (one
# executor per thread, as the virtual devices of a data-parallel program).  Once
# with the OpenBLAS kernels it picks for the machine, once with its AVX2 ones,
# whose sums depend on the blocking in other ways (runtime/cpu/exec.c, rt_gemm).
add_executable(test_threads ${CMAKE_CURRENT_LIST_DIR}/test_threads.c)
target_link_libraries(test_threads PRIVATE gnc_frontend gnc_passes gnc_runtime OpenMP::OpenMP_C m)
add_test(NAME threads COMMAND test_threads ${CMAKE_SOURCE_DIR})
set_tests_properties(threads PROPERTIES LABELS "unit;exec" TIMEOUT 600)
add_test(NAME threads_avx2 COMMAND test_threads ${CMAKE_SOURCE_DIR})
set_tests_properties(threads_avx2 PROPERTIES LABELS "unit;exec" TIMEOUT 600
                     ENVIRONMENT OPENBLAS_CORETYPE=Haswell)
