# Inputs that once crashed the frontend under the fuzzer (tools/fuzz.sh), kept in
# tests/fuzz/regressions/: each goes through 'gnc dump' and must fail cleanly or
# succeed, with no crash and, in the sanitizer build, no sanitizer report.
add_test(NAME fuzz_regressions
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_regressions.sh
                 $<TARGET_FILE:gnc> ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/regressions)
set_tests_properties(fuzz_regressions PROPERTIES LABELS "unit;frontend" TIMEOUT 600)
