# bench/gpu_race.sh on stand-ins of nvidia-smi, PyTorch and gnc: the order of
# the configurations, both layouts at each precision, the same momentum on both
# sides, --done lines of another momentum kept out (tests/bench/gpu_race.sh).
add_test(NAME gpu_race COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bench/gpu_race.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/gpu-race-work)
set_tests_properties(gpu_race PROPERTIES LABELS "unit" TIMEOUT 300)
