# The cost model (passes/cost.c): the device presets and the spec parser's errors.
add_executable(test_cost ${CMAKE_CURRENT_LIST_DIR}/test_cost.c)
target_link_libraries(test_cost PRIVATE gnc_passes m)
add_test(NAME cost COMMAND test_cost ${CMAKE_SOURCE_DIR})
set_tests_properties(cost PROPERTIES LABELS "unit;passes" TIMEOUT 120)
