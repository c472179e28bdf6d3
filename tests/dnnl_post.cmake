# oneDNN's post-ops (runtime/cpu/dnnl.c): the fused epilogues run inside the
# convolution give the same bits as the executor's own epilogue after it
# (GNC_DNNL_POSTOPS=0), on 1 to 4 threads, with the kernels oneDNN picks on
# this CPU (AVX-512's brgconv on most servers, AVX2's JIT kernels elsewhere;
# the test prints which).  Passes with nothing to compare in a build without
# oneDNN.
add_executable(test_dnnl_post ${CMAKE_CURRENT_LIST_DIR}/test_dnnl_post.c)
target_link_libraries(test_dnnl_post PRIVATE gnc_frontend gnc_passes gnc_runtime m)
add_test(NAME dnnl_post COMMAND test_dnnl_post ${CMAKE_SOURCE_DIR})
set_tests_properties(dnnl_post PROPERTIES LABELS "unit;exec" TIMEOUT 300)
# AVX2's JIT kernels, on an AVX-512 machine too, with residuals as oneDNN's sum
# post-op, which jit:avx2 rounds otherwise than the epilogue: the trial runs
# must refuse those chains and the bits stay the epilogue's.
add_test(NAME dnnl_post_avx2 COMMAND test_dnnl_post ${CMAKE_SOURCE_DIR} sum)
set_tests_properties(dnnl_post_avx2 PROPERTIES LABELS "unit;exec" TIMEOUT 300
                     ENVIRONMENT DNNL_MAX_CPU_ISA=AVX2)
# The same with oneDNN's SSE4.1 kernels: other JIT kernels, and its GEMM-based
# convolution for the depthwise case, which must keep the epilogue.
add_test(NAME dnnl_post_sse41 COMMAND test_dnnl_post ${CMAKE_SOURCE_DIR})
set_tests_properties(dnnl_post_sse41 PROPERTIES LABELS "unit;exec" TIMEOUT 300
                     ENVIRONMENT DNNL_MAX_CPU_ISA=SSE41)
