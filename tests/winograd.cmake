# The CPU executor's Winograd F(2x2, 3x3) convolutions (runtime/cpu/winograd.c)
# against a float64 direct convolution: odd sizes, padding 0-2, two chunks of
# images, the same bits on 1-3 threads, weights changed in place.
add_executable(test_winograd ${CMAKE_CURRENT_LIST_DIR}/test_winograd.c)
target_link_libraries(test_winograd PRIVATE gnc_frontend gnc_passes gnc_runtime m)
add_test(NAME winograd COMMAND test_winograd)
set_tests_properties(winograd PROPERTIES LABELS "unit;exec" TIMEOUT 300)
