# Partitioning from the command line: flags, errors, plans (balance, overlap,
# auto, memory caps), the --dump-plan time bar, runs and training on virtual
# devices (tests/partition/run.sh).
add_test(NAME partition_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/partition/run.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/partition-work)
set_tests_properties(partition_cli PROPERTIES LABELS "cli;passes" TIMEOUT 600)
