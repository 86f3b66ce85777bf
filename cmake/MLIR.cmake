# Finds MLIR/LLVM 22 (Debian packages) and sets up their CMake helpers and
# compile flags for the compiler half. Included after the runtime half.
find_package(MLIR REQUIRED CONFIG HINTS /usr/lib/llvm-22/lib/cmake/mlir)
message(STATUS "Using MLIRConfig.cmake in: ${MLIR_DIR}")
set(LLVM_RUNTIME_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/bin)
set(LLVM_LIBRARY_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/lib)
set(MLIR_BINARY_DIR ${CMAKE_BINARY_DIR})
# Debian ships lit as /usr/lib/llvm-22/bin/lit, not llvm-lit.
set(LLVM_EXTERNAL_LIT ${LLVM_TOOLS_BINARY_DIR}/lit CACHE STRING "")
list(APPEND CMAKE_MODULE_PATH ${MLIR_CMAKE_DIR} ${LLVM_CMAKE_DIR})
include(TableGen)
include(AddLLVM)
include(AddMLIR)
include(HandleLLVMOptions)
set(MLIR_LINK_MLIR_DYLIB ${GPTC_LINK_MLIR_DYLIB})

include_directories(${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
add_definitions(${LLVM_DEFINITIONS})
