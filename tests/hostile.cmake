# The hostile-input corpus (tests/hostile/run.sh): checkpoints, IDX data, plans,
# DSL and IR text, and flags that break one thing each, written by
# tests/hostile/gen.py at test time, replayed against gnc from
# tests/hostile/cases.txt: each gives its exit status and message, never a
# crash or a sanitizer report, and leaves no output file.  Needs python3, no
# data set.
add_test(NAME hostile COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/hostile/run.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/hostile-work)
set_tests_properties(hostile PROPERTIES LABELS "cli" TIMEOUT 600)
