# Partitioned programs against the single-device one: every strategy on 1, 2
# and 4 virtual devices, inference outputs and 10 training steps, deterministic
# mode bitwise (tests/test_partition.c).
add_executable(test_partition ${CMAKE_CURRENT_LIST_DIR}/test_partition.c ${CMAKE_CURRENT_LIST_DIR}/harness.c)
target_link_libraries(test_partition PRIVATE gnc_frontend gnc_passes gnc_runtime m)
add_test(NAME partition COMMAND test_partition ${CMAKE_SOURCE_DIR})
set_tests_properties(partition PROPERTIES LABELS "unit;passes;exec" TIMEOUT 900)
