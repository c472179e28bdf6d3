# The IR text form and the verifier (ir/print.c, ir/parse.c, ir/verify.c): round
# trips, the samples in tests/ir/*.gir and the example in docs/ir.md, malformed
# texts with their exact diagnostics, corrupted graphs, and a seeded robustness
# loop.  Run it in the GNC_SANITIZE build too.
add_executable(test_ir ${CMAKE_CURRENT_LIST_DIR}/test_ir.c ${CMAKE_CURRENT_LIST_DIR}/filecheck.c)
target_link_libraries(test_ir PRIVATE gnc_ir)
add_test(NAME ir COMMAND test_ir ${CMAKE_SOURCE_DIR})
set_tests_properties(ir PROPERTIES LABELS "unit;ir" TIMEOUT 300)
