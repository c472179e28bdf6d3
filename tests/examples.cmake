# The usage examples in the internal headers' opening comments, cut out
# (tests/examples/extract.cmake) and compiled with the rest of the build, never
# run: an example that drifts from the signatures breaks the build.  gnc.h's
# own example is built and run by tests/api.cmake.
set(GNC_EXAMPLE_HEADERS codegen/codegen.h passes/cost.h runtime/cuda/cuda.h runtime/format/plan.h
    runtime/api/session.h)
set(GNC_EXAMPLE_SOURCES)
foreach(h ${GNC_EXAMPLE_HEADERS})
  string(REPLACE "/" "_" name ${h})
  string(REPLACE "." "_" name ${name})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/examples/${name}.c)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DIN=${CMAKE_SOURCE_DIR}/${h} -DOUT=${out}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/examples/extract.cmake
    DEPENDS ${CMAKE_SOURCE_DIR}/${h} ${CMAKE_CURRENT_SOURCE_DIR}/examples/extract.cmake
    COMMENT "Cutting the example out of ${h}")
  list(APPEND GNC_EXAMPLE_SOURCES ${out})
endforeach()
add_library(header_examples OBJECT ${GNC_EXAMPLE_SOURCES})
target_link_libraries(header_examples PRIVATE gnc_runtime gnc_codegen gnc_passes gnc_ir)
# an example's variables need not all be used, nor its results checked
target_compile_options(header_examples PRIVATE -Werror -Wno-unused-variable
                       -Wno-unused-but-set-variable -Wno-unused-parameter)
