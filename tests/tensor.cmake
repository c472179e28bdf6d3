# Tensor parallelism against the single-device program (tests/test_tensor.c):
# IR text in and out (tests/tensor/*.gir), lenet, mlp and resnet18 on 1, 2 and
# 4 devices (inference outputs, 10 training steps), what the mlp communicates,
# checkpoints shared with single-device runs, and the requests it refuses.
add_executable(test_tensor ${CMAKE_CURRENT_LIST_DIR}/test_tensor.c ${CMAKE_CURRENT_LIST_DIR}/filecheck.c
               ${CMAKE_CURRENT_LIST_DIR}/harness.c)
target_link_libraries(test_tensor PRIVATE gnc_frontend gnc_passes gnc_runtime m)
add_test(NAME tensor COMMAND test_tensor ${CMAKE_SOURCE_DIR})
set_tests_properties(tensor PROPERTIES LABELS "unit;passes;exec" TIMEOUT 900)
