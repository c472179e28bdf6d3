# Plan files (runtime/format/plan.c, docs/plan.md): round trips that run to the same
# bits, every truncation and single-bit flip and thousands of corruptions
# rejected, each documented inconsistency with its message (tests/test_plan.c).
# Run it in the GNC_SANITIZE build too.
add_executable(test_plan ${CMAKE_CURRENT_LIST_DIR}/test_plan.c ${CMAKE_CURRENT_LIST_DIR}/filecheck.c
               ${CMAKE_CURRENT_LIST_DIR}/harness.c)
target_link_libraries(test_plan PRIVATE gnc_driver gnc_frontend gnc_runtime gnc_passes gnc_ir
                      ZLIB::ZLIB m)
add_test(NAME plan COMMAND test_plan ${CMAKE_SOURCE_DIR})
set_tests_properties(plan PROPERTIES LABELS "unit;exec" TIMEOUT 300)
