#===- Version.cmake - one version string for every tool ------------------===#
#
# The project version plus `git describe` at configure time (absent outside
# a git checkout), written to runtime/support/Version.h in the build tree so
# that both halves, MLIR-free runtime included, print the same string.
set(GPTC_GIT_DESCRIBE "")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(
    COMMAND ${GIT_EXECUTABLE} describe --always --dirty --abbrev=12
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    OUTPUT_VARIABLE GPTC_GIT_DESCRIBE
    OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET
    RESULT_VARIABLE git_result)
  if(NOT git_result EQUAL 0)
    set(GPTC_GIT_DESCRIBE "")
  endif()
endif()
if(GPTC_GIT_DESCRIBE)
  set(GPTC_VERSION_STRING "${PROJECT_VERSION} (git ${GPTC_GIT_DESCRIBE})")
else()
  set(GPTC_VERSION_STRING "${PROJECT_VERSION}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/runtime/support/Version.h.in
               ${PROJECT_BINARY_DIR}/runtime/support/Version.h @ONLY)
message(STATUS "gptc version: ${GPTC_VERSION_STRING}")
