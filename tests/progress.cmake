# The verifier's proof that a partitioned program cannot hang, held against the
# CPU executor: the kept hanging programs (tests/comm/hang_*.gir) and random
# multi-device programs, each run in a child process with an alarm.
add_executable(test_progress ${CMAKE_CURRENT_LIST_DIR}/test_progress.c)
target_link_libraries(test_progress PRIVATE gnc_runtime gnc_ir m)
add_test(NAME progress COMMAND test_progress ${CMAKE_SOURCE_DIR})
set_tests_properties(progress PROPERTIES LABELS "unit;ir;exec" TIMEOUT 300)
