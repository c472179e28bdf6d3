# The passes and the memory planner: IR text in and out (tests/passes/*.gir),
# every model's optimized and planned program against the program as loaded,
# and seeded random graphs.
add_executable(test_passes ${CMAKE_CURRENT_LIST_DIR}/test_passes.c
               ${CMAKE_CURRENT_LIST_DIR}/filecheck.c)
target_include_directories(test_passes PRIVATE ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(test_passes PRIVATE gnc_frontend gnc_passes gnc_runtime m)
add_test(NAME passes COMMAND test_passes ${CMAKE_SOURCE_DIR})
set_tests_properties(passes PROPERTIES LABELS "unit;passes" TIMEOUT 300)
