# The .net frontend (frontend/*): every construct of the language in
# tests/dsl/valid, malformed programs with their exact diagnostics in
# tests/dsl/invalid, the models' parameters, and hostile inputs.  Needs only
# the frontend and IR libraries.  Run it in the GNC_SANITIZE build too.
add_executable(test_dsl ${CMAKE_CURRENT_LIST_DIR}/test_dsl.c ${CMAKE_CURRENT_LIST_DIR}/filecheck.c)
target_link_libraries(test_dsl PRIVATE gnc_frontend gnc_ir)
add_test(NAME frontend COMMAND test_dsl ${CMAKE_SOURCE_DIR})
set_tests_properties(frontend PROPERTIES LABELS "unit;frontend" TIMEOUT 300)
