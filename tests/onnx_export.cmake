# gnc export end to end: every model of models/ and tests/golden/ops.net to
# ONNX, each file through ONNX's checker (full_check), the weights against
# checkpoints, the errors.  Skips where gnc has no ONNX or no python3 imports
# onnx (python3-onnx).  tests/onnx/export.sh holds the cases.
# (the suites are included in name order: train.cmake's cache entry, again)
set(GNC_FMNIST /usr/share/datasets/fashion-mnist CACHE PATH "Fashion-MNIST IDX files")
add_test(NAME onnx_export COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/onnx/export.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/onnx-export-work
         ${GNC_FMNIST})
set_tests_properties(onnx_export PROPERTIES LABELS "onnx" TIMEOUT 600 SKIP_RETURN_CODE 77)

# fe_export_onnx as a library call: every allocation's failure survived with
# "out of memory" and no file, the refusals, the weights' bytes
# (tests/onnx/test_export.c).
if(GNC_HAVE_ONNX)
  add_executable(test_onnx_export ${CMAKE_CURRENT_SOURCE_DIR}/onnx/test_export.c)
  target_link_libraries(test_onnx_export PRIVATE gnc_frontend gnc_ir)
  add_test(NAME onnx_export_api COMMAND test_onnx_export ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(onnx_export_api PROPERTIES LABELS "onnx;unit" TIMEOUT 600)
endif()
