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
target_link_libraries(fakecuda_driver PRIVATE gnc_ir m Threads::Threads)
target_link_options(fakecuda_driver PRIVATE -Wl,--exclude-libs,ALL)

foreach(lib cublaslt:libcublasLt.so.13 cudnn:libcudnn.so.9 nccl:libnccl.so.2)
  string(REPLACE ":" ";" pair ${lib})
  list(GET pair 0 name)
  list(GET pair 1 file)
  add_library(fakecuda_${name} SHARED ${fk}/${name}.c)
  gnc_fakecuda_lib(fakecuda_${name} ${file} ${file})
  target_link_libraries(fakecuda_${name} PRIVATE fakecuda_driver m Threads::Threads)
  # unloadable, as the real libraries are: the executor must keep them loaded
  # (RTLD_NODELETE), since work they queued (a captured graph's nodes) points
  # at their code and NCCL's bootstrap thread runs it
endforeach()
# the reference of the libraries' results (ref.h), which tests/cg_host.c
# shares with them
target_sources(fakecuda_cublaslt PRIVATE ${fk}/ref.c)
target_sources(fakecuda_cudnn PRIVATE ${fk}/ref.c)

# the fakes through their API, as the executor uses them (tests/test_fakecuda.c)
add_executable(test_fakecuda ${CMAKE_CURRENT_LIST_DIR}/../test_fakecuda.c)
target_include_directories(test_fakecuda PRIVATE ${fk} ${CUDAToolkit_INCLUDE_DIRS})
target_compile_definitions(test_fakecuda PRIVATE GNC_FAKECUDA_DIR="${GNC_FAKECUDA_DIR}")
target_link_libraries(test_fakecuda PRIVATE gnc_codegen ${CMAKE_DL_LIBS} m Threads::Threads)
add_dependencies(test_fakecuda fakecuda_driver fakecuda_cublaslt fakecuda_cudnn fakecuda_nccl)
add_test(NAME fakecuda COMMAND test_fakecuda)
set_tests_properties(fakecuda PROPERTIES LABELS "unit" SKIP_RETURN_CODE 77 TIMEOUT 120)

# The GPU tests (tests/gpu/) on the fakes, label unit: the executor end to end
# against the CPU executor, its kernels' host emulations (tests/cg_host.c)
# registered with the fake driver: every op (gpu_ops_fake) and training steps
# of lenet and mlp on 1, 2 and 4 devices, data, pipeline, tensor and hybrid
# (gpu_train_fake).  The _lazy runs use the fake's lazy schedule (work runs
# only when synchronized, streams visited in reverse), which exposes a missing
# wait between streams.
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fakecuda-work)
foreach(sched eager lazy)
  set(suffix "")
  if(sched STREQUAL "lazy")
    set(suffix "_lazy")
  endif()
  add_test(NAME gpu_ops_fake${suffix} COMMAND test_gpu_ops ${CMAKE_CURRENT_BINARY_DIR}/fakecuda-work
           --fake ${GNC_FAKECUDA_DIR})
  add_test(NAME gpu_train_fake${suffix} COMMAND test_gpu_train ${CMAKE_SOURCE_DIR}
           ${CMAKE_CURRENT_BINARY_DIR}/fakecuda-work --fake ${GNC_FAKECUDA_DIR})
  set_tests_properties(gpu_ops_fake${suffix} gpu_train_fake${suffix} PROPERTIES LABELS "unit"
                       TIMEOUT 900 ENVIRONMENT "GNC_FAKECUDA_SCHEDULE=${sched};GNC_FAKECUDA_GPUS=4")
endforeach()
foreach(t test_gpu_ops test_gpu_train)
  add_dependencies(${t} fakecuda_driver fakecuda_cublaslt fakecuda_cudnn fakecuda_nccl)
endforeach()

# The session layer (runtime/api/session.h) on the fakes: a cpu and a cuda session
# of plans with kernels, built in memory, side by side: lenet (SGD) and a
# batch-norm net (Adam) training on one device and their inference, lenet and
# mlp data parallel on two (4 steps, checkpoints saved by both and loaded
# across, sessions that ran rewound), and the GPU profile's events of lenet
# and mlp (tests/gpu/test_session_fake.c).
add_executable(test_session_fake ${CMAKE_CURRENT_LIST_DIR}/../gpu/test_session_fake.c
               ${CMAKE_CURRENT_LIST_DIR}/../cg_host.c)
target_include_directories(test_session_fake PRIVATE ${CMAKE_CURRENT_LIST_DIR}/..)
target_compile_definitions(test_session_fake PRIVATE GNC_HOST_CXX="${GNC_HOST_CXX}"
                           GNC_TESTS_DIR="${CMAKE_CURRENT_LIST_DIR}/..")
target_link_libraries(test_session_fake PRIVATE gnc_runtime gnc_codegen gnc_frontend gnc_passes
                      gnc_ir ${CMAKE_DL_LIBS} m)
add_dependencies(test_session_fake fakecuda_driver fakecuda_cublaslt fakecuda_cudnn fakecuda_nccl)
foreach(sched eager lazy)
  set(suffix "")
  if(sched STREQUAL "lazy")
    set(suffix "_lazy")
  endif()
  add_test(NAME session_fake${suffix} COMMAND test_session_fake ${CMAKE_SOURCE_DIR}
           ${CMAKE_CURRENT_BINARY_DIR}/fakecuda-work ${GNC_FAKECUDA_DIR})
  set_tests_properties(session_fake${suffix} PROPERTIES LABELS "unit" SKIP_RETURN_CODE 77
                       TIMEOUT 900 ENVIRONMENT "GNC_FAKECUDA_SCHEDULE=${sched};GNC_FAKECUDA_GPUS=4")
endforeach()

# Layout transposes: the count a plan declares (gnc inspect --json) against
# the stand-in cuDNN's, which counts those the real one makes inside its calls
# on NCHW tensors (tests/gpu/layout.sh; skipped without NVRTC).
add_test(NAME layout_transposes COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/../gpu/layout.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/layout-work
         ${GNC_FAKECUDA_DIR})
set_tests_properties(layout_transposes PROPERTIES LABELS "unit" SKIP_RETURN_CODE 77 TIMEOUT 300)

# cuDNN's algorithms timed at open and kept on disk, per GPU, cuDNN version and
# problem (tests/gpu/cudnn_timing.sh; skipped without NVRTC).
add_test(NAME cudnn_timing COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/../gpu/cudnn_timing.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/cudnn-timing-work
         ${GNC_FAKECUDA_DIR})
set_tests_properties(cudnn_timing PROPERTIES LABELS "unit" SKIP_RETURN_CODE 77 TIMEOUT 300)
