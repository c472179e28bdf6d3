# Partitioned programs under MPI, one device per process, against the same
# programs in one process: tests/test_mpi.c (the runtime, on 2 and 4 ranks)
# and tests/mpi/run.sh (gnc train, run and compile under mpirun, failures).
# Without mpirun or without the MPI backend the test reports itself skipped,
# never passed; tools/deps.sh installs both, so CI runs it.
set(GNC_FMNIST /usr/share/datasets/fashion-mnist CACHE PATH "Fashion-MNIST IDX files")
if(MPI_C_FOUND)
  add_executable(test_mpi ${CMAKE_CURRENT_LIST_DIR}/test_mpi.c ${CMAKE_CURRENT_LIST_DIR}/harness.c)
  target_link_libraries(test_mpi PRIVATE gnc_frontend gnc_passes gnc_runtime m)
  set(GNC_TEST_MPI $<TARGET_FILE:test_mpi>)
else()
  set(GNC_TEST_MPI "")
endif()
add_test(NAME mpi COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/run.sh $<TARGET_FILE:gnc>
         "${GNC_TEST_MPI}" ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/mpi-work ${GNC_FMNIST})
# the ranks take both cores: nothing else runs beside it
set_tests_properties(mpi PROPERTIES LABELS "mpi;unit" SKIP_RETURN_CODE 77 TIMEOUT 900
                     PROCESSORS 2)
