# The embedding API (include/gnc/gnc.h, libgnc; docs/api.md).  api_plans
# compiles the plans the others run (tests/api/plans.sh).  api_example cuts
# the example out of gnc.h's opening comment, builds it against libgnc and runs
# it, so the header's example is the API as it is; api_doc checks that
# docs/api.md shows the same.  api (tests/api/test_api.c)
# goes through the whole API with only the public header.  api_install installs
# libgnc and builds examples/app.c against it with pkg-config and with
# find_package, as CI does (tests/api/install.sh).
add_test(NAME api_plans COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/api/plans.sh $<TARGET_FILE:gnc>
         ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/api-plans)
set_tests_properties(api_plans PROPERTIES FIXTURES_SETUP api_plans LABELS "api" TIMEOUT 120)

add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/api_example.c
  COMMAND ${CMAKE_COMMAND} -DIN=${CMAKE_SOURCE_DIR}/include/gnc/gnc.h
          -DOUT=${CMAKE_CURRENT_BINARY_DIR}/api_example.c -P ${CMAKE_CURRENT_SOURCE_DIR}/api/example.cmake
  DEPENDS ${CMAKE_SOURCE_DIR}/include/gnc/gnc.h ${CMAKE_CURRENT_SOURCE_DIR}/api/example.cmake
  COMMENT "Cutting the example out of include/gnc/gnc.h")
add_executable(api_example ${CMAKE_CURRENT_BINARY_DIR}/api_example.c)
target_link_libraries(api_example PRIVATE gnc_lib)
target_compile_options(api_example PRIVATE -Werror)
add_test(NAME api_example COMMAND sh -c "out=$(\"$0\" \"$1\") && echo \"$out\" && echo \"$out\" | grep -q '^logits: 40 values, the first '"
         $<TARGET_FILE:api_example> ${CMAKE_CURRENT_BINARY_DIR}/api-plans/lenet.gnc)
set_tests_properties(api_example PROPERTIES FIXTURES_REQUIRED api_plans LABELS "api" TIMEOUT 60)

# docs/api.md shows the same example
add_test(NAME api_doc COMMAND ${CMAKE_COMMAND} -DIN=${CMAKE_SOURCE_DIR}/include/gnc/gnc.h
         -DOUT=${CMAKE_CURRENT_BINARY_DIR}/api_doc_example.c -DDOC=${CMAKE_SOURCE_DIR}/docs/api.md
         -P ${CMAKE_CURRENT_SOURCE_DIR}/api/example.cmake)
set_tests_properties(api_doc PROPERTIES LABELS "api")

find_package(Threads REQUIRED)
add_executable(test_api ${CMAKE_CURRENT_SOURCE_DIR}/api/test_api.c)
target_link_libraries(test_api PRIVATE gnc_lib m Threads::Threads)
# whether libgnc has the GPU executor (the message a cuda session fails with)
target_compile_definitions(test_api PRIVATE GNC_TEST_CUDA_RUNTIME=$<BOOL:${GNC_HAVE_CUDA_RUNTIME}>
                           GNC_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
                           GNC_TEST_VERSION="${PROJECT_VERSION}")
add_test(NAME api COMMAND test_api ${CMAKE_CURRENT_BINARY_DIR}/api-plans)
set_tests_properties(api PROPERTIES FIXTURES_REQUIRED api_plans LABELS "unit;api" TIMEOUT 300)

if(GNC_SANITIZE)
  set(GNC_APP_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
endif()
add_test(NAME api_install COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/api/install.sh ${CMAKE_BINARY_DIR}
         ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/api-install ${CMAKE_C_COMPILER} ${GNC_APP_FLAGS})
set_tests_properties(api_install PROPERTIES LABELS "api;cli" TIMEOUT 600
                     ENVIRONMENT GNC_TEST_CUDA_RUNTIME=${GNC_HAVE_CUDA_RUNTIME})

# out of memory in a plan load and a compile, at every allocation
# (tests/api/test_oom.c): linked with libgnc's code, not the library, whose
# symbols hide the allocation hook
add_executable(test_oom ${CMAKE_CURRENT_SOURCE_DIR}/api/test_oom.c
               ${CMAKE_SOURCE_DIR}/runtime/api/api.c ${CMAKE_SOURCE_DIR}/driver/compile_api.c)
target_include_directories(test_oom PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/driver)
target_link_libraries(test_oom PRIVATE gnc_driver gnc_frontend gnc_passes gnc_runtime gnc_codegen
                      gnc_ir)
add_test(NAME api_oom COMMAND test_oom ${CMAKE_CURRENT_BINARY_DIR}/api-plans ${CMAKE_SOURCE_DIR})
set_tests_properties(api_oom PROPERTIES FIXTURES_REQUIRED api_plans LABELS "unit;api" TIMEOUT 600)
