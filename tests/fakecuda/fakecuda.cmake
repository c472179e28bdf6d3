# Host-memory stand-ins of the CUDA libraries (tests/fakecuda/, docs/runtime.md
# "Testing without a GPU"): libcuda.so.1, libcublasLt.so.13, libcudnn.so.9 and
# libnccl.so.2 in one folder, build/tests/fakecuda/, for the GPU executor's
# libdir.  Each includes the toolkit's real header, so its symbols are the ones
# the real library exports; none links a real CUDA library.  The driver holds
# the core (streams, memory, capture); the other three link it and find it
# beside themselves ($ORIGIN).
set(GNC_FAKECUDA_DIR ${CMAKE_BINARY_DIR}/tests/fakecuda)
set(fk ${CMAKE_CURRENT_LIST_DIR})

function(gnc_fakecuda_lib target file soname)
  set_target_properties(${target} PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${GNC_FAKECUDA_DIR} OUTPUT_NAME ${file} PREFIX "" SUFFIX ""
    C_VISIBILITY_PRESET hidden BUILD_RPATH "$ORIGIN" NO_SONAME ON)
  target_include_directories(${target} PRIVATE ${fk} ${CUDAToolkit_INCLUDE_DIRS})
  target_link_options(${target} PRIVATE -Wl,-soname,${soname} -Wl,--no-undefined)
endfunction()

# the driver, with codegen's float16/bfloat16 conversions compiled in.  Its
# soname is its own (libgnc-fakecuda.so, a link to libcuda.so.1 beside it), so
# that the other fakes bind to it and never to a real libcuda.so.1 that NVRTC
# or anything else may have loaded first.
add_library(fakecuda_driver SHARED ${fk}/driver.c ${CMAKE_SOURCE_DIR}/codegen/util.c)
gnc_fakecuda_lib(fakecuda_driver libcuda.so.1 libgnc-fakecuda.so)
add_custom_command(TARGET fakecuda_driver POST_BUILD
  COMMAND ${CMAKE_COMMAND} -E create_symlink libcuda.so.1 ${GNC_FAKECUDA_DIR}/libgnc-fakecuda.so
  VERBATIM)
target_include_directories(fakecuda_driver PRIVATE
  $<TARGET_PROPERTY:gnc_codegen,INTERFACE_INCLUDE_DIRECTORIES>)
target_link_libraries(fakecuda_driver PRIVATE gnc_ir m)
target_link_options(fakecuda_driver PRIVATE -Wl,--exclude-libs,ALL)

foreach(lib cublaslt:libcublasLt.so.13 cudnn:libcudnn.so.9 nccl:libnccl.so.2)
  string(REPLACE ":" ";" pair ${lib})
  list(GET pair 0 name)
  list(GET pair 1 file)
  add_library(fakecuda_${name} SHARED ${fk}/${name}.c)
  gnc_fakecuda_lib(fakecuda_${name} ${file} ${file})
  target_link_libraries(fakecuda_${name} PRIVATE fakecuda_driver m)
  # never unloaded: work they queued (a captured graph's nodes) points at their
  # code, and a graph outlives the library that filled it, as on a GPU where the
  # nodes are kernels the driver holds
  target_link_options(fakecuda_${name} PRIVATE -Wl,-z,nodelete)
endforeach()

# the fakes through their API, as the executor uses them (tests/test_fakecuda.c)
add_executable(test_fakecuda ${CMAKE_CURRENT_LIST_DIR}/../test_fakecuda.c)
target_include_directories(test_fakecuda PRIVATE ${fk} ${CUDAToolkit_INCLUDE_DIRS})
target_compile_definitions(test_fakecuda PRIVATE GNC_FAKECUDA_DIR="${GNC_FAKECUDA_DIR}")
target_link_libraries(test_fakecuda PRIVATE gnc_codegen ${CMAKE_DL_LIBS} m)
add_dependencies(test_fakecuda fakecuda_driver fakecuda_cublaslt fakecuda_cudnn fakecuda_nccl)
add_test(NAME fakecuda COMMAND test_fakecuda)
set_tests_properties(fakecuda PROPERTIES LABELS "unit" SKIP_RETURN_CODE 77 TIMEOUT 120)

# The GPU executor on the fakes against the CPU executor (tests/test_cuda_fake.c):
# kernels compiled by NVRTC, their host emulations (tests/cg_host.c) registered
# with the fake driver.  cuda_fake_lazy runs the same with the fake's lazy
# schedule (work runs only when synchronized, streams visited in reverse), which
# exposes a missing wait between streams.
add_executable(test_cuda_fake ${CMAKE_CURRENT_LIST_DIR}/../test_cuda_fake.c
               ${CMAKE_CURRENT_LIST_DIR}/../cg_host.c)
target_compile_definitions(test_cuda_fake PRIVATE GNC_HOST_CXX="${GNC_HOST_CXX}"
                           GNC_TESTS_DIR="${CMAKE_SOURCE_DIR}/tests")
target_include_directories(test_cuda_fake PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_link_libraries(test_cuda_fake PRIVATE gnc_runtime gnc_codegen gnc_passes gnc_ir
                      ${CMAKE_DL_LIBS} m)
add_dependencies(test_cuda_fake fakecuda_driver fakecuda_cublaslt fakecuda_cudnn fakecuda_nccl)
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fakecuda-work)
foreach(sched eager lazy)
  set(name cuda_fake)
  if(sched STREQUAL "lazy")
    set(name cuda_fake_lazy)
  endif()
  add_test(NAME ${name} COMMAND test_cuda_fake ${GNC_FAKECUDA_DIR}
           ${CMAKE_CURRENT_BINARY_DIR}/fakecuda-work)
  set_tests_properties(${name} PROPERTIES LABELS "unit" SKIP_RETURN_CODE 77 TIMEOUT 300
                       ENVIRONMENT "GNC_FAKECUDA_SCHEDULE=${sched}")
endforeach()
