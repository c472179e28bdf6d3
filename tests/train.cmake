# gnc train and gnc eval end to end on a slice of Fashion-MNIST (the Debian
# package dataset-fashion-mnist): exact resume, killed checkpoint writes, bad data,
# bad checkpoints, flags.  tests/train/run.sh holds the cases.
set(GNC_FMNIST /usr/share/datasets/fashion-mnist CACHE PATH "Fashion-MNIST IDX files")
add_test(NAME train COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train/run.sh
         $<TARGET_FILE:gnc> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/train-work ${GNC_FMNIST})
set_tests_properties(train PROPERTIES LABELS "cli;train" TIMEOUT 900)
