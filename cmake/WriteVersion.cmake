#===- WriteVersion.cmake - runtime/support/Version.cpp at build time ------===#
#
# Run with `cmake -P` on every build (target gptc_version_file). The project
# version plus `git describe`; configure_file rewrites OUTPUT only when the
# text changes, so an unchanged version recompiles nothing.
#
# In: SOURCE_DIR, OUTPUT, VERSION, GIT (may be empty).
set(describe "")
if(GIT)
  execute_process(
    COMMAND ${GIT} describe --always --dirty --abbrev=12
    WORKING_DIRECTORY ${SOURCE_DIR}
    OUTPUT_VARIABLE describe
    OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET
    RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    set(describe "")
  endif()
endif()
if(describe)
  set(GPTC_VERSION_STRING "${VERSION} (git ${describe})")
else()
  set(GPTC_VERSION_STRING "${VERSION}")
endif()
configure_file(${SOURCE_DIR}/runtime/support/Version.cpp.in ${OUTPUT} @ONLY)
