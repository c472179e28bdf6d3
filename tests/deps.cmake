# Set-up that cannot depend on what happens to be installed (tests/deps/):
# recommends.sh checks that each recommendation of the packages tools/deps.sh
# installs is in its list or waived with a reason (it installs without
# recommends); optional.sh that an optional dependency whose CMake files fail
# to load leaves its feature out and never stops the configure
# (cmake/optional.cmake): it configures with each of oneDNN, MPI, the CUDA
# toolkit and protoc-c made unloadable, then with all four, and builds and
# runs that.  Not in the sanitizer builds: they test the set-up, and
# optional.sh builds gnc once more.
if(NOT GNC_SANITIZE AND NOT GNC_TSAN)
  add_test(NAME deps_recommends COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/deps/recommends.sh
           ${CMAKE_SOURCE_DIR})
  set_tests_properties(deps_recommends PROPERTIES LABELS "deps" TIMEOUT 120)
  add_test(NAME optional_deps COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/deps/optional.sh
           ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/optional-deps)
  set_tests_properties(optional_deps PROPERTIES LABELS "deps" TIMEOUT 900)
endif()
