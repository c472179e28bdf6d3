# libFuzzer targets for the frontend, the IR text, the plan loader, the
# checkpoint loader, the IDX data set reader, the .npy reader and the ONNX
# importer (included from the top-level CMakeLists.txt when GNC_FUZZ is ON).
# Needs clang:
#   CC=clang cmake -S . -B build-fuzz -G Ninja -DGNC_FUZZ=ON && ninja -C build-fuzz fuzz_frontend
# or simply: bash tools/fuzz.sh SECONDS
#
# The libraries under test are compiled with AddressSanitizer, UBSan (every
# undefined behaviour aborts, so the fuzzer sees it as a crash) and libFuzzer's
# coverage instrumentation; whatever links them links the sanitizer runtimes.
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "GNC_FUZZ needs clang (libFuzzer): configure with CC=clang")
endif()

set(GNC_FUZZ_SANITIZE -fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
foreach(lib gnc_ir gnc_frontend gnc_passes gnc_runtime)
  target_compile_options(${lib} PRIVATE -fsanitize=fuzzer-no-link ${GNC_FUZZ_SANITIZE})
  target_link_options(${lib} INTERFACE -fsanitize=address,undefined)
endforeach()

add_executable(fuzz_frontend ${CMAKE_CURRENT_LIST_DIR}/fuzz_frontend.c)
target_link_libraries(fuzz_frontend PRIVATE gnc_frontend gnc_ir)
target_compile_options(fuzz_frontend PRIVATE -fsanitize=fuzzer ${GNC_FUZZ_SANITIZE})
target_link_options(fuzz_frontend PRIVATE -fsanitize=fuzzer,address,undefined)

# The IR text parser and verifier (bash tools/fuzz.sh SECONDS ir).
add_executable(fuzz_ir ${CMAKE_CURRENT_LIST_DIR}/fuzz_ir.c)
target_link_libraries(fuzz_ir PRIVATE gnc_ir)
target_compile_options(fuzz_ir PRIVATE -fsanitize=fuzzer ${GNC_FUZZ_SANITIZE})
target_link_options(fuzz_ir PRIVATE -fsanitize=fuzzer,address,undefined)

# The plan loader (bash tools/fuzz.sh SECONDS plan): runtime/format/plan.c, with the
# IR parser and verifier and the memory plan's proof behind it.
add_executable(fuzz_plan ${CMAKE_CURRENT_LIST_DIR}/fuzz_plan.c)
target_link_libraries(fuzz_plan PRIVATE gnc_runtime gnc_passes gnc_ir)
target_compile_options(fuzz_plan PRIVATE -fsanitize=fuzzer ${GNC_FUZZ_SANITIZE})
target_link_options(fuzz_plan PRIVATE -fsanitize=fuzzer,address,undefined)

# The safetensors checkpoint loader (bash tools/fuzz.sh SECONDS checkpoint):
# runtime/format/checkpoint.c, its JSON header from a file of unknown origin.
add_executable(fuzz_checkpoint ${CMAKE_CURRENT_LIST_DIR}/fuzz_checkpoint.c)
target_link_libraries(fuzz_checkpoint PRIVATE gnc_runtime gnc_passes gnc_ir)
target_compile_options(fuzz_checkpoint PRIVATE -fsanitize=fuzzer ${GNC_FUZZ_SANITIZE})
target_link_options(fuzz_checkpoint PRIVATE -fsanitize=fuzzer,address,undefined)

# The readers of the gnc command, which are in no library: their tools/ source
# is compiled into the target, with the same sanitizers and coverage.
# The IDX data set reader (bash tools/fuzz.sh SECONDS idx): tools/data.c, its
# files plain or gzipped (data.c's array readers need npy.c, cJSON and the
# runtime's safetensors reader to link).
add_executable(fuzz_idx ${CMAKE_CURRENT_LIST_DIR}/fuzz_idx.c ${CMAKE_SOURCE_DIR}/tools/data.c
               ${CMAKE_SOURCE_DIR}/tools/npy.c)
target_include_directories(fuzz_idx PRIVATE ${CMAKE_SOURCE_DIR}/tools)
target_link_libraries(fuzz_idx PRIVATE gnc_runtime gnc_passes gnc_ir PkgConfig::CJSON ZLIB::ZLIB)
target_compile_options(fuzz_idx PRIVATE -fsanitize=fuzzer ${GNC_FUZZ_SANITIZE})
target_link_options(fuzz_idx PRIVATE -fsanitize=fuzzer,address,undefined)

# The .npy reader (bash tools/fuzz.sh SECONDS npy): tools/npy.c, the files of
# `gnc run --input`.
add_executable(fuzz_npy ${CMAKE_CURRENT_LIST_DIR}/fuzz_npy.c ${CMAKE_SOURCE_DIR}/tools/npy.c)
target_include_directories(fuzz_npy PRIVATE ${CMAKE_SOURCE_DIR}/tools)
target_link_libraries(fuzz_npy PRIVATE gnc_ir)
target_compile_options(fuzz_npy PRIVATE -fsanitize=fuzzer ${GNC_FUZZ_SANITIZE})
target_link_options(fuzz_npy PRIVATE -fsanitize=fuzzer,address,undefined)

# The ONNX importer (bash tools/fuzz.sh SECONDS onnx): frontend/onnx/, protobuf-c's
# unpacking and everything the importer checks after it; without ONNX support
# (frontend/onnx/none.c) it only sees the refusal.
add_executable(fuzz_onnx ${CMAKE_CURRENT_LIST_DIR}/fuzz_onnx.c)
target_link_libraries(fuzz_onnx PRIVATE gnc_frontend gnc_ir)
target_compile_options(fuzz_onnx PRIVATE -fsanitize=fuzzer ${GNC_FUZZ_SANITIZE})
target_link_options(fuzz_onnx PRIVATE -fsanitize=fuzzer,address,undefined)
