# Writes OUT, a header with the source tree's commit (GNC_COMMIT), at every
# build; the file changes (and gnc is compiled again) only when the commit
# does.  cmake -DSRC=DIR -DOUT=FILE -P commit.cmake
execute_process(COMMAND git -C "${SRC}" describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE failed ERROR_QUIET)
if(failed OR commit STREQUAL "")
  set(commit "unknown (not built from a git checkout)")
endif()
file(CONFIGURE OUTPUT "${OUT}" CONTENT "#define GNC_COMMIT \"${commit}\"\n")
