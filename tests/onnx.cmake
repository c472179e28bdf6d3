# ONNX's backend conformance cases (Debian's libonnx-testdata) imported, compiled
# and run on the CPU executor against their expected outputs; reports skipped
# without the data, and is left out where gnc was built without ONNX
# (tests/onnx/conformance.c; the known failures and their reasons in
# tests/onnx/known_failures.txt).
if(GNC_HAVE_ONNX)
  add_executable(onnx_conformance ${CMAKE_CURRENT_LIST_DIR}/onnx/conformance.c)
  target_include_directories(onnx_conformance PRIVATE ${GNC_ONNX_GEN})
  target_link_libraries(onnx_conformance PRIVATE gnc_frontend gnc_passes gnc_runtime m)
  add_test(NAME onnx_conformance
           COMMAND onnx_conformance --known ${CMAKE_CURRENT_LIST_DIR}/onnx/known_failures.txt)
  set_tests_properties(onnx_conformance PROPERTIES LABELS "onnx" SKIP_RETURN_CODE 77
                       TIMEOUT 600)
endif()

# The importer against broken and hostile models (truncated, huge dims, data
# that does not match its shape, cycles, external data leaving the model's
# folder, byte flips): a message each, never a crash (tests/onnx/hostile.c;
# tests/onnx/hostile.sh is the same through the gnc command, onnx_hostile).
if(GNC_HAVE_ONNX)
  add_executable(test_onnx_import ${CMAKE_CURRENT_LIST_DIR}/onnx/hostile.c)
  target_include_directories(test_onnx_import PRIVATE ${GNC_ONNX_GEN})
  target_link_libraries(test_onnx_import PRIVATE gnc_frontend)
  add_test(NAME onnx_import_errors COMMAND test_onnx_import ${CMAKE_CURRENT_BINARY_DIR}/onnx-hostile)
  set_tests_properties(onnx_import_errors PROPERTIES LABELS "onnx;unit" TIMEOUT 300)
endif()
