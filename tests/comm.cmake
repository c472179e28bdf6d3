# Partitioned programs: devices, collectives, send and recv (tests/comm/), and
# the verifier's proof that a partitioned program cannot hang.
add_executable(test_comm ${CMAKE_CURRENT_LIST_DIR}/test_comm.c ${CMAKE_CURRENT_LIST_DIR}/filecheck.c)
target_link_libraries(test_comm PRIVATE gnc_passes gnc_runtime m)
add_test(NAME comm COMMAND test_comm ${CMAKE_SOURCE_DIR})
set_tests_properties(comm PROPERTIES LABELS "unit;ir;exec" TIMEOUT 120)

# Point-to-point calls across processes as NCCL runs them (codegen/p2p.c):
# the batches of one group, and the check that no device waits for ever.
add_executable(test_p2p ${CMAKE_CURRENT_LIST_DIR}/test_p2p.c)
target_link_libraries(test_p2p PRIVATE gnc_codegen m)
add_test(NAME p2p_order COMMAND test_p2p)
set_tests_properties(p2p_order PROPERTIES LABELS "unit" TIMEOUT 60)
