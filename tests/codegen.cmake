# codegen/: the generated kernels against the CPU executor on the host, through
# the host C++ compiler and tests/cg_emu.h (no GPU, no CUDA toolkit needed):
# every op, every kind of fused node, whole lenet and mlp programs, the status
# word and fp16 loss scaling (tests/test_codegen.c).
find_program(GNC_HOST_CXX NAMES c++ g++ clang++ DOC "the host C++ compiler of the codegen emulation tests")
add_executable(test_codegen ${CMAKE_CURRENT_LIST_DIR}/test_codegen.c ${CMAKE_CURRENT_LIST_DIR}/cg_host.c
               ${CMAKE_CURRENT_LIST_DIR}/op_walk.c
               ${CMAKE_CURRENT_LIST_DIR}/gpu/gpu_env.c)
target_include_directories(test_codegen PRIVATE ${CMAKE_CURRENT_LIST_DIR} ${CMAKE_CURRENT_LIST_DIR}/gpu)
target_compile_definitions(test_codegen PRIVATE GNC_HOST_CXX="${GNC_HOST_CXX}"
                           GNC_TESTS_DIR="${CMAKE_CURRENT_LIST_DIR}")
target_link_libraries(test_codegen PRIVATE gnc_codegen gnc_frontend gnc_passes gnc_runtime ${CMAKE_DL_LIBS} m)
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/codegen-work)
add_test(NAME codegen_emulation COMMAND test_codegen ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/codegen-work)
set_tests_properties(codegen_emulation PROPERTIES LABELS "unit;codegen" TIMEOUT 900)

# NVRTC (tests/test_nvrtc.c): every kernel of every model (inference and
# training, 1 and 2 devices, every precision) to cubin for sm_80 and sm_90 and
# PTX, no spills in elementwise kernels, the compile cache, compile errors.
# Reported skipped (77) where the build has no CUDA toolkit.
add_executable(test_nvrtc ${CMAKE_CURRENT_LIST_DIR}/test_nvrtc.c)
target_link_libraries(test_nvrtc PRIVATE gnc_codegen gnc_frontend gnc_passes m)
add_test(NAME codegen_nvrtc COMMAND test_nvrtc ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/codegen-work)
set_tests_properties(codegen_nvrtc PROPERTIES LABELS "unit;codegen" TIMEOUT 1200 SKIP_RETURN_CODE 77)
