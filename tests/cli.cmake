# The gnc command, end to end: help texts, flag errors, IR round trips of every
# model, inference runs, .npy inputs and outputs.  tests/cli/run.sh holds the cases.
add_test(NAME cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/run.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/cli-work)
set_tests_properties(cli PROPERTIES LABELS "cli" TIMEOUT 600)

# --json of compile, run and eval: one JSON object alone on standard output, its
# keys as docs/cli.md lists them, its values as the text output's.
add_test(NAME cli_json COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/json.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/cli-json-work)
set_tests_properties(cli_json PROPERTIES LABELS "cli" TIMEOUT 600)
