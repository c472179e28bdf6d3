# Training against PyTorch: gradients of lenet, resnet18 and the models of
# tests/grad/ops.net, and the optimizers' steps (golden files made by
# tests/grad/gen_grad.py, committed).
add_executable(test_grad ${CMAKE_CURRENT_LIST_DIR}/grad/test_grad.c
               ${CMAKE_CURRENT_LIST_DIR}/golden/fill.c)
target_include_directories(test_grad PRIVATE ${CMAKE_CURRENT_LIST_DIR}/golden)
target_link_libraries(test_grad PRIVATE gnc_frontend gnc_passes gnc_runtime m)
add_test(NAME grad COMMAND test_grad ${CMAKE_SOURCE_DIR})
# The tolerance (1e-4) was calibrated on OpenBLAS's AVX2 kernels, which the test
# pins: a float32 step of resnet18 at batch 8 amplifies rounding through 20
# batchnorms, and with OpenBLAS's AVX-512 kernels the worst element drifts to
# 5.7e-3 (PyTorch's own float32 step: 1.8e-4 from the float64 reference).
set_tests_properties(grad PROPERTIES LABELS "unit;train" TIMEOUT 300
                     ENVIRONMENT OPENBLAS_CORETYPE=Haswell)

# Every differentiable op against finite differences of a float64 reference.
add_executable(test_fd ${CMAKE_CURRENT_LIST_DIR}/grad/test_fd.c ${CMAKE_CURRENT_LIST_DIR}/ref64.c)
target_include_directories(test_fd PRIVATE ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(test_fd PRIVATE gnc_frontend gnc_passes gnc_runtime m)
add_test(NAME fd COMMAND test_fd)
set_tests_properties(fd PROPERTIES LABELS "unit;train" TIMEOUT 300)
