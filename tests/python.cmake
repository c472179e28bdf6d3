# The Python module (python/gnc/, ctypes over libgnc; docs/api.md, "Python"):
# python/tests/test_gnc.py runs the libgnc just built against NumPy, trains,
# checks its errors, runs docs/api.md's Python example against the C one
# (api_example) and installs the package into a venv offline.  It needs
# NumPy and says it is skipped (exit 77) without it.  The interpreter is
# GNC_PYTHON if set, else the first of python3 on PATH and /usr/bin/python3
# that imports numpy (a python3 of pyenv or conda may come first on PATH and
# lack it), else python3 (the test then skips).  Nothing it writes is shared
# with other tests or runs but the build's libgnc: its scratch folder, its
# kernel cache (GNC_CACHE_DIR) and pip's files (the test's environment for
# pip) are its own.
# gnc_find_python(VAR MODULES): VAR is the first of python3 and /usr/bin/python3
# that imports MODULES ("numpy, torch"), else python3 (whose test then skips)
function(gnc_find_python var modules)
  set(found python3)
  foreach(candidate python3 /usr/bin/python3)
    execute_process(COMMAND ${candidate} -c "import ${modules}" RESULT_VARIABLE rc
                    OUTPUT_QUIET ERROR_QUIET)
    if(rc EQUAL 0)
      set(found ${candidate})
      break()
    endif()
  endforeach()
  set(${var} ${found} PARENT_SCOPE)
endfunction()
set(GNC_PYTHON "" CACHE FILEPATH "Python 3 with NumPy for the test python_api (empty: look)")
set(gnc_python ${GNC_PYTHON})
if(NOT gnc_python)
  gnc_find_python(gnc_python "numpy")
endif()
set(gnc_python_env GNC_LIBRARY=$<TARGET_FILE:gnc_lib> GNC_BINARY=$<TARGET_FILE:gnc>
    GNC_API_EXAMPLE=$<TARGET_FILE:api_example> GNC_SOURCE_DIR=${CMAKE_SOURCE_DIR}
    GNC_TEST_DIR=${CMAKE_CURRENT_BINARY_DIR}/python PYTHONDONTWRITEBYTECODE=1
    GNC_VERSION=${PROJECT_VERSION}
    GNC_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/python-kernel-cache)
# A libgnc built with AddressSanitizer (GNC_SANITIZE, tools/test.sh --asan)
# loads into an uninstrumented Python only after ASan's runtime, preloaded;
# the interpreter's allocations at exit are not gnc's leaks.
if(GNC_SANITIZE)
  if(CMAKE_C_COMPILER_ID MATCHES "Clang")
    set(gnc_asan_name libclang_rt.asan-${CMAKE_SYSTEM_PROCESSOR}.so)
  else()
    set(gnc_asan_name libasan.so)
  endif()
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=${gnc_asan_name}
                  OUTPUT_VARIABLE gnc_asan OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND gnc_python_env LD_PRELOAD=${gnc_asan} ASAN_OPTIONS=detect_leaks=0)
endif()
add_test(NAME python_api COMMAND ${gnc_python} ${CMAKE_SOURCE_DIR}/python/tests/test_gnc.py)
set_tests_properties(python_api PROPERTIES LABELS "api" SKIP_RETURN_CODE 77 TIMEOUT 600
  ENVIRONMENT "${gnc_python_env}")
# The module against hostile use (tests/hostile/python.py): threads sharing a
# session, integers ctypes would wrap, NUL bytes, labels a conversion would wrap.
add_test(NAME hostile_python COMMAND ${gnc_python} ${CMAKE_SOURCE_DIR}/tests/hostile/python.py)
set_tests_properties(hostile_python PROPERTIES LABELS "api" SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "${gnc_python_env}")
# gnc.from_torch and state_dicts both ways against PyTorch itself
# (python/tests/test_torch.py): an MLP, a transformer encoder and a ResNet-18,
# their outputs, 5 SGD steps each way, the weights back into the module with
# strict=True.  The interpreter: the first of python3 and /usr/bin/python3
# that imports torch (Debian: python3-torch, which tools/deps.sh installs);
# without one the test says it is skipped (exit 77).
gnc_find_python(gnc_torch_python "numpy, torch")
set(gnc_torch_env ${gnc_python_env})
if(GNC_SANITIZE AND NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  # ASan's __cxa_throw interceptor finds the real one only where libstdc++ is
  # loaded with it: PyTorch throws C++ exceptions (it aborts otherwise)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libstdc++.so.6
                  OUTPUT_VARIABLE gnc_libstdcxx OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(TRANSFORM gnc_torch_env REPLACE "^LD_PRELOAD=(.*)$" "LD_PRELOAD=\\1 ${gnc_libstdcxx}")
endif()
add_test(NAME python_torch COMMAND ${gnc_torch_python} ${CMAKE_SOURCE_DIR}/python/tests/test_torch.py)
set_tests_properties(python_torch PROPERTIES LABELS "api" SKIP_RETURN_CODE 77 TIMEOUT 600
  ENVIRONMENT "${gnc_torch_env}")
