# codegen/: the generated kernels against the CPU executor on the host, through
# the host C++ compiler and tests/cg_emu.h (no GPU, no CUDA toolkit needed):
# every op, every kind of fused node, whole lenet and mlp programs, the status
# word and fp16 loss scaling (tests/test_codegen.c).
find_program(GNC_HOST_CXX NAMES c++ g++ clang++ DOC "the host C++ compiler of the codegen emulation tests")
add_executable(test_codegen ${CMAKE_CURRENT_LIST_DIR}/test_codegen.c ${CMAKE_CURRENT_LIST_DIR}/cg_host.c)
target_compile_definitions(test_codegen PRIVATE GNC_HOST_CXX="${GNC_HOST_CXX}"
                           GNC_TESTS_DIR="${CMAKE_CURRENT_LIST_DIR}")
target_link_libraries(test_codegen PRIVATE gnc_codegen gnc_frontend gnc_passes gnc_runtime ${CMAKE_DL_LIBS} m)
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/codegen-work)
add_test(NAME codegen_emulation COMMAND test_codegen ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/codegen-work)
set_tests_properties(codegen_emulation PROPERTIES LABELS "unit;codegen" TIMEOUT 900)
