# gnc train and gnc eval end to end on a slice of Fashion-MNIST (the Debian
# package dataset-fashion-mnist): exact resume, killed checkpoint writes, bad data,
# bad checkpoints, flags.  tests/train/run.sh holds the cases.
set(GNC_FMNIST /usr/share/datasets/fashion-mnist CACHE PATH "Fashion-MNIST IDX files")
add_test(NAME train COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train/run.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/train-work ${GNC_FMNIST})
set_tests_properties(train PROPERTIES LABELS "cli;train" TIMEOUT 900
                     ENVIRONMENT GNC_TEST_CUDA_RUNTIME=${GNC_HAVE_CUDA_RUNTIME})

# The training bar: lenet on the whole of Fashion-MNIST, 2 epochs, >= 0.85 test
# accuracy (about 20 s).
add_test(NAME lenet_fmnist COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train/lenet_accuracy.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/lenet-work ${GNC_FMNIST})
set_tests_properties(lenet_fmnist PROPERTIES LABELS "train" TIMEOUT 1800)

# Long runs: line-buffered output, Ctrl-C and SIGTERM (checkpoint, log row, the
# command that resumes, bitwise), a second Ctrl-C, folders, --log-every, JSON
# lines, a closed pipe.  tests/train/long_runs.sh holds the cases.
add_test(NAME long_runs COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train/long_runs.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/long-runs-work ${GNC_FMNIST})
set_tests_properties(long_runs PROPERTIES LABELS "cli;train" TIMEOUT 600)

# Data sets of named arrays: .npy folders, safetensors, token streams, and
# every refusal.  tests/train/arrays.sh holds the cases.
add_test(NAME train_arrays COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train/arrays.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/arrays-work)
set_tests_properties(train_arrays PROPERTIES LABELS "cli;train" TIMEOUT 300)

# Predicted beside measured: gnc run and gnc train print the predicted step
# beside the measured one, and the memory the plan counts beside the measured
# peak, within 10% on the CPU.  tests/cli/memory.sh holds the cases.  Not in
# the sanitizer builds: their shadow memory and freed-memory quarantine are
# resident memory no plan counts (ASan put resnet18 42% over its plan).
if(NOT GNC_SANITIZE AND NOT GNC_TSAN)
  add_test(NAME cli_memory COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/memory.sh
           $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/cli-memory-work
           ${GNC_FMNIST})
  set_tests_properties(cli_memory PROPERTIES LABELS "cli" TIMEOUT 900)
endif()
