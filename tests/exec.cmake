# The CPU executor (runtime/cpu/exec.c) against the float64 reference (tests/ref64.c):
# every op in ir/ops.def on seeded random inputs, one hand-built one-node graph per
# case, plus bad indices and labels.  Run it in the GNC_SANITIZE build too.
add_executable(test_ops ${CMAKE_CURRENT_LIST_DIR}/test_ops.c ${CMAKE_CURRENT_LIST_DIR}/ref64.c
               ${CMAKE_CURRENT_LIST_DIR}/op_walk.c)
target_link_libraries(test_ops PRIVATE gnc_runtime gnc_ir m)
add_test(NAME ops COMMAND test_ops)
set_tests_properties(ops PROPERTIES LABELS "unit;exec" TIMEOUT 120)
