# The cost model against the one GPU run so far (tests/test_calibration.c):
# resnet18's training step on the h200 model beside the steps measured on an
# H200 and the kernel classes of its ncu profile (bench/results/2026-11-26-h200/).
add_executable(test_calibration ${CMAKE_CURRENT_LIST_DIR}/test_calibration.c)
target_link_libraries(test_calibration PRIVATE gnc_driver m)
add_test(NAME calibration COMMAND test_calibration ${CMAKE_SOURCE_DIR})
set_tests_properties(calibration PROPERTIES LABELS "unit;passes" TIMEOUT 120)
