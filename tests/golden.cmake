# The CPU executor against outputs made by PyTorch (tests/golden/gen_golden.py;
# the golden files are committed, so the test needs no Python): conv2d, batchnorm,
# pooling, dense, softmax, cross_entropy (tests/golden/ops.net), lenet and the
# resnet18 forward pass, whose files also check the gnc -> PyTorch parameter name
# mapping.  Run it in the GNC_SANITIZE build too.
add_executable(test_golden ${CMAKE_CURRENT_LIST_DIR}/golden/test_golden.c
               ${CMAKE_CURRENT_LIST_DIR}/golden/fill.c)
target_link_libraries(test_golden PRIVATE gnc_frontend gnc_runtime m)
add_test(NAME golden COMMAND test_golden ${CMAKE_SOURCE_DIR})
set_tests_properties(golden PROPERTIES LABELS "unit;exec" TIMEOUT 300)
