# The ONNX importer against two oracles besides the conformance suite (label
# "onnx"); both skip (exit 77) while this gnc has no ONNX import: built without
# protobuf-c and python3-onnx, or with the importer's placeholder.
#   onnx_torch    the PyTorch-exported models of tests/onnx/models/ (LeNet, a
#                 small ResNet-18, a depthwise-separable CNN, a transformer
#                 encoder and a causal decoder, whose attention gnc fuses;
#                 written by tests/onnx/gen.py) run by gnc on the CPU,
#                 their outputs within 1e-5 + 1e-4 |x| of PyTorch's
#                 (tests/onnx/torch_models.sh; python3 without numpy or torch)
#   onnx_hostile  truncated, garbage, huge, cyclic, inconsistent models and
#                 external data outside the model's folder, written at test
#                 time by tests/onnx/hostile_gen.py and replayed from
#                 tests/onnx/hostile_cases.txt: each an error naming what is
#                 wrong, never a crash, no output file (tests/onnx/hostile.sh)
add_test(NAME onnx_torch COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/onnx/torch_models.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/onnx-torch-work)
set_tests_properties(onnx_torch PROPERTIES LABELS "onnx" TIMEOUT 600 SKIP_RETURN_CODE 77)
add_test(NAME onnx_hostile COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/onnx/hostile.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/onnx-hostile-work)
set_tests_properties(onnx_hostile PROPERTIES LABELS "onnx" TIMEOUT 600 SKIP_RETURN_CODE 77)
