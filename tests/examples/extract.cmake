# Cuts the usage examples out of a header's comments into a C file that the
# build compiles (tests/examples.cmake), so an example that drifts from the
# signatures breaks the build:
#   cmake -DIN=codegen/codegen.h -DOUT=codegen_h.c -P extract.cmake
# An example starts at a comment line " *   // given: DECLARATIONS" and runs
# over the lines indented as it is (" *   CODE"); each becomes a function
# int example_N(DECLARATIONS) { CODE return 0; }, and an "#include" in it goes
# to the file's top.  A line's commentary after its statement (";" then three
# or more spaces, then words) is dropped; a "//" comment is C and stays.
file(READ ${IN} text)
# a list of lines: the characters CMake's lists take for their own kept aside
string(REPLACE ";" "@SEMI@" text "${text}")
string(REPLACE "[" "@LB@" text "${text}")
string(REPLACE "]" "@RB@" text "${text}")
string(REPLACE "\n" ";" lines "${text}")
get_filename_component(base ${IN} NAME)
set(out "")
set(includes "")
set(n 0)
set(in_example 0)
foreach(line IN LISTS lines)
  if(line MATCHES "^ \\*   // given: (.*)$")
    if(in_example)
      string(APPEND out "    return 0;\n}\n")
    endif()
    math(EXPR n "${n} + 1")
    set(decls "${CMAKE_MATCH_1}")
    string(APPEND out "\nint example_${n}(${decls});\nint example_${n}(${decls})\n{\n")
    set(in_example 1)
  elseif(in_example AND line MATCHES "^ \\*   (#include .*)$")
    string(APPEND includes "${CMAKE_MATCH_1}\n")
  elseif(in_example AND line MATCHES "^ \\*   (.*)$")
    set(code "${CMAKE_MATCH_1}")
    string(REGEX REPLACE "@SEMI@   +[^/ ].*$" "@SEMI@" code "${code}")
    string(APPEND out "    ${code}\n")
  elseif(in_example)
    string(APPEND out "    return 0;\n}\n")
    set(in_example 0)
  endif()
endforeach()
if(in_example)
  string(APPEND out "    return 0;\n}\n")
endif()
if(n EQUAL 0)
  message(FATAL_ERROR "${IN}: no example (a comment line ' *   // given: ...')")
endif()
set(out "/* Generated from ${IN} by tests/examples/extract.cmake: do not edit. */
#include <stdio.h>
#include <stdlib.h>

#include \"${base}\"
${includes}${out}")
string(REPLACE "@SEMI@" ";" out "${out}")
string(REPLACE "@LB@" "[" out "${out}")
string(REPLACE "@RB@" "]" out "${out}")
file(WRITE ${OUT} "${out}")
