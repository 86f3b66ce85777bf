#===- Version.cmake - one version string for every tool ------------------===#
#
# Library gptc_version: gptc::versionString(), the project version plus
# `git describe`. Both halves link it, the MLIR-free runtime included, so
# every tool prints the same string. The describe is taken at build time,
# not configure time, so a commit after configuring shows up.
find_package(Git QUIET)
set(GPTC_VERSION_CPP ${PROJECT_BINARY_DIR}/runtime/support/Version.cpp)
set(write_version ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
    -DOUTPUT=${GPTC_VERSION_CPP} -DVERSION=${PROJECT_VERSION} -DGIT=${GIT_EXECUTABLE}
    -P ${PROJECT_SOURCE_DIR}/cmake/WriteVersion.cmake)
execute_process(COMMAND ${write_version}) # so the file exists at configure time
add_custom_target(gptc_version_file
  COMMAND ${write_version}
  BYPRODUCTS ${GPTC_VERSION_CPP}
  VERBATIM)
add_library(gptc_version STATIC ${GPTC_VERSION_CPP})
target_include_directories(gptc_version PUBLIC ${PROJECT_SOURCE_DIR})
add_dependencies(gptc_version gptc_version_file)
