# The CPU executor's own convolution kernels, Winograd F(2x2, 3x3)
# (runtime/cpu/winograd.c) and the direct kernels of few channels
# (runtime/cpu/direct.c), against a float64 direct convolution: odd sizes,
# padding, two chunks of images, the same bits on 1-3 threads, weights changed
# in place, each path turned off.
add_executable(test_cpu_conv ${CMAKE_CURRENT_LIST_DIR}/test_cpu_conv.c)
target_link_libraries(test_cpu_conv PRIVATE gnc_frontend gnc_passes gnc_runtime m)
add_test(NAME cpu_conv COMMAND test_cpu_conv)
set_tests_properties(cpu_conv PROPERTIES LABELS "unit;exec" TIMEOUT 300)

# Dense layers' and matmuls' GEMMs (runtime/cpu/exec.c rt_node_gemm): on
# oneDNN's matmul where its kernels are AVX-512's, else OpenBLAS; against
# float64, the same bits on 1-3 threads, weights changed in place, the memory
# report's oneDNN items.
add_executable(test_cpu_gemm ${CMAKE_CURRENT_LIST_DIR}/test_cpu_gemm.c)
target_link_libraries(test_cpu_gemm PRIVATE gnc_frontend gnc_passes gnc_runtime m)
add_test(NAME cpu_gemm COMMAND test_cpu_gemm)
set_tests_properties(cpu_gemm PROPERTIES LABELS "unit;exec" TIMEOUT 300)
