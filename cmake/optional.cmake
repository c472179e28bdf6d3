# Optional dependencies that cannot stop the configure.
#
# find_package runs the package's own CMake files (a config file, or a Find
# module), and an error in them ends the whole configure: CMake has no way to
# catch it.  Debian's oneDNN config, for one, calls find_package(OpenCL
# REQUIRED), which fails where OpenCL's headers are missing.  So each optional
# package is first looked for in a CMake process of its own (cmake/probe/),
# with the same search paths; only where that configure succeeds is the
# package looked for here.  Where it fails, the feature is left out, with the
# first lines of the package's error in a message.
#
#   gnc_find_optional(VAR WHAT NAME [ARGS...])
#
# VAR is set to TRUE where find_package(NAME ARGS) may be called here (the
# package may still not be found), FALSE where its files fail to load.  WHAT
# names the feature in the message.
function(gnc_find_optional var what name)
  set(dir ${CMAKE_BINARY_DIR}/probe/${name})
  file(REMOVE_RECURSE ${dir})
  set(args -DGNC_PROBE_PACKAGE=${name} "-DGNC_PROBE_ARGS=${ARGN}"
           -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER})
  # the places find_package looks that a user sets on the command line
  foreach(v CMAKE_PREFIX_PATH CMAKE_MODULE_PATH CMAKE_FIND_ROOT_PATH CMAKE_TOOLCHAIN_FILE
            ${name}_DIR ${name}_ROOT)
    if(DEFINED ${v})
      list(APPEND args "-D${v}=${${v}}")
    endif()
  endforeach()
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/probe
                          -B ${dir} ${args}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE errors)
  if(rc EQUAL 0)
    set(${var} TRUE PARENT_SCOPE)
    file(REMOVE_RECURSE ${dir})
    return()
  endif()
  file(WRITE ${dir}/probe.log "${out}${errors}")
  # the error's first lines, without CMake's call stack
  string(REGEX REPLACE "\nCall Stack.*" "" errors "${errors}")
  string(REGEX REPLACE "\n+$" "" errors "${errors}")
  message(WARNING "gnc: ${name}'s CMake files fail to load, so ${what} is left out "
                  "(the probe's output: ${dir}/probe.log):\n${errors}")
  set(${var} FALSE PARENT_SCOPE)
endfunction()
