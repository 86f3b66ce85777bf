# shellcheck shell=bash
# bench/device/runtime.sh: which gptrun a device script runs, sourced by
# run_sweep.sh and ab_device.sh.
#   pick_runtime   sets GPTRUN and CUDA_TEST (RuntimeCudaBackendTest)
# A GPTRUN the caller set is kept. Otherwise the CPU machine's own build
# (CUDA 13, Release; bench/device/build_sweep.sh copies build/bin/gptrun and
# build/bin/RuntimeCudaBackendTest into bench/artifacts/bin) is used where it
# runs on the device as it is, which saves the ~60 s of
# scripts/device-build.sh; where it does not, build-device/ is built there.
pick_runtime() {
  local carried=${ARTIFACTS:-bench/artifacts}/bin
  if [ -z "${GPTRUN:-}" ] && "$carried/gptrun" --help > /dev/null 2>&1 &&
      "$carried/RuntimeCudaBackendTest" --gtest_list_tests > /dev/null 2>&1; then
    # shellcheck disable=SC2034 # read by the scripts that source this
    GPTRUN=$carried/gptrun CUDA_TEST=$carried/RuntimeCudaBackendTest
    echo "runtime: the CPU machine's build, carried in $carried"
    return 0
  fi
  GPTRUN=${GPTRUN:-build-device/bin/gptrun}
  # shellcheck disable=SC2034 # read by the scripts that source this
  CUDA_TEST=$(dirname "$GPTRUN")/RuntimeCudaBackendTest
  return 0
}

# copy_runtime (CPU side): the CPU build's gptrun and CUDA test into
# bench/artifacts/bin, when they link the CUDA runtime.
copy_runtime() {
  local dest=${ARTIFACTS:-bench/artifacts}/bin
  if ldd build/bin/gptrun 2> /dev/null | grep -q libcudart &&
      [ -x build/bin/RuntimeCudaBackendTest ]; then
    mkdir -p "$dest" && cp build/bin/gptrun build/bin/RuntimeCudaBackendTest "$dest/"
  fi
}
