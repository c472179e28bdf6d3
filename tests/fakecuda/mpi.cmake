# Programs run one device per process on the stand-ins (label unit, CI):
# test_gpu_train --mpi under mpirun on 2 ranks (lenet data parallel, mlp and
# lenet pipeline, mlp tensor parallel), on 3 (mlp pipelines of 3 stages)
# and on 4 (mlp hybrid, data parallel, pipelines of 4 stages): NCCL communicators across processes from rank 0's id, sends
# against receives posted when a run starts.  Both schedules of the fake.
foreach(sched eager lazy)
  set(suffix "")
  if(sched STREQUAL "lazy")
    set(suffix "_lazy")
  endif()
  foreach(n 2 3 4)
    add_test(NAME gpu_mpi${n}_fake${suffix}
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/../gpu/mpirun.sh ${n}
                     $<TARGET_FILE:test_gpu_train> ${CMAKE_SOURCE_DIR}
                     ${CMAKE_CURRENT_BINARY_DIR}/fakecuda-work/mpi${n}${suffix}
                     --fake ${GNC_FAKECUDA_DIR} --mpi)
    file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fakecuda-work/mpi${n}${suffix})
    set_tests_properties(gpu_mpi${n}_fake${suffix} PROPERTIES LABELS "unit;mpi"
                         SKIP_RETURN_CODE 77 TIMEOUT 900 PROCESSORS 2
                         ENVIRONMENT "GNC_FAKECUDA_SCHEDULE=${sched};GNC_FAKECUDA_GPUS=4;FAKECUDA_NCCL_TIMEOUT=120")
  endforeach()
endforeach()

# The session layer as gnc train uses it under mpirun (test_session_fake
# --mpi): a cuda session of each rank's device beside the whole program on
# the CPU, the parameters read back and gathered to rank 0.
add_test(NAME session_mpi_fake
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/../gpu/mpirun.sh 2
                 $<TARGET_FILE:test_session_fake> ${CMAKE_SOURCE_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/fakecuda-work/session-mpi ${GNC_FAKECUDA_DIR} --mpi)
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fakecuda-work/session-mpi)
set_tests_properties(session_mpi_fake PROPERTIES LABELS "unit;mpi" SKIP_RETURN_CODE 77
                     TIMEOUT 900 PROCESSORS 2
                     ENVIRONMENT "GNC_FAKECUDA_GPUS=4;FAKECUDA_NCCL_TIMEOUT=120")
