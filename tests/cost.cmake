# The cost model (passes/cost.c): single nodes against hand-computed costs,
# simulations of hand-written partitioned programs (tests/cost/*.gir) against
# their timelines, the device-spec parser's errors, and the simulation's speed.
add_executable(test_cost ${CMAKE_CURRENT_LIST_DIR}/test_cost.c ${CMAKE_CURRENT_LIST_DIR}/filecheck.c)
target_include_directories(test_cost PRIVATE ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(test_cost PRIVATE gnc_frontend gnc_passes m)
add_test(NAME cost COMMAND test_cost ${CMAKE_SOURCE_DIR})
set_tests_properties(cost PROPERTIES LABELS "unit;passes" TIMEOUT 120)
