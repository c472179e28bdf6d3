# Plan files from the command line (tests/plan/run.sh): gnc compile -o
# reproducible for 1 and 2 devices, plans running, training and evaluating as
# their models do, gnc inspect on valid and broken plans, --device, the
# options a plan refuses.  Needs Fashion-MNIST (dataset-fashion-mnist).
set(GNC_FMNIST /usr/share/datasets/fashion-mnist CACHE PATH "Fashion-MNIST IDX files")
add_test(NAME plan_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/plan/run.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/plan-work ${GNC_FMNIST}
         ${GNC_HAVE_NVRTC} ${CMAKE_BINARY_DIR}/tests/fakecuda)
# GNC_TEST_CUDA_RUNTIME: whether gnc has the GPU executor (the message of --device cuda)
set_tests_properties(plan_cli PROPERTIES LABELS "cli;exec" TIMEOUT 600
                     ENVIRONMENT GNC_TEST_CUDA_RUNTIME=${GNC_HAVE_CUDA_RUNTIME})
