# Cuts the example out of include/gnc/gnc.h's opening comment into a C file:
#   cmake -DIN=include/gnc/gnc.h -DOUT=api_example.c [-DDOC=docs/api.md] -P example.cmake
# The example is the comment's lines from the first " *     #include" up to
# " * (end of the example)", each without its " *     " (tests/api.cmake).
# With DOC, it fails unless DOC shows the same example, line for line.
file(READ ${IN} text)
string(FIND "${text}" "\n *     #include" start)
string(FIND "${text}" "\n * (end of the example)" end)
if(start LESS 0 OR end LESS start)
  message(FATAL_ERROR "${IN}: no example between ' *     #include' and ' * (end of the example)'")
endif()
math(EXPR len "${end} - ${start}")
string(SUBSTRING "${text}" ${start} ${len} example)
string(REPLACE "\n *     " "\n" example "${example}")
string(REPLACE "\n *" "\n" example "${example}")
file(WRITE ${OUT} "/* Generated from ${IN} by tests/api/example.cmake: do not edit. */${example}\n")
if(DOC)
  file(READ ${DOC} doc)
  string(STRIP "${example}" stripped)
  string(FIND "${doc}" "${stripped}" at)
  if(at LESS 0)
    message(FATAL_ERROR "${DOC} does not show the example of ${IN} as it is: copy it again")
  endif()
  message(STATUS "${DOC} shows the example of ${IN}")
endif()
