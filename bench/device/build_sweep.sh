#!/usr/bin/env bash
# bench/device/build_sweep.sh: CPU side of bench/device/run_sweep.sh. Compiles the issue's
# four sizes at its batch sizes (T=1024), by default each in fp8 with the
# FP8 LM head (774M and 1.5B with its logit gradient in bf16, the faster
# there) and then in bf16 (sweep-<model>.fb), into bench/artifacts and
# records each compile time in
# bench/artifacts/sweep.tsv (model, B, file, gptc seconds, tag, command).
# An entry model:B:V compiles a variant, V a comma-separated list of
#   <GiB>  --memory-budget=GiB (tag remat<GiB>)
#   nr     --narrow-residual, the bf16 residual stream (tag nr)
#   fp8    --precision=fp8, the blocks' GEMMs in FP8 (tag fp8), delayed scaling
#   current  with fp8: --fp8-history=0, scales from each tensor's own amax
#            (tag current)
#   head   with fp8: --fp8-lm-head, the LM head's GEMMs in FP8 (tag head)
#   ce16   with head: --disable-patterns=fp8-cross-entropy-grad, the logits' gradient
#          in bf16, scaled by its amax and cast (tag ce16)
#   nofc   with fp8: --disable-patterns=fp8-cast-gelu-grad,fp8-cast-column-sum, the bias sums and the GELU
#          gradient in kernels of their own, not in the FP8 casts (tag nofc)
#   nosteady  with fp8: --fp8-steady-step=false, every step measures empty
#          histories' tensors (an amax and a scale launch per FP8 operand;
#          tag nosteady)
#   nolnf  with fp8: --disable-patterns=fp8-layernorm-codes, the steady step's layernorms
#          store bf16 for a cast kernel (tag nolnf)
#   gf     with fp8: --enable-patterns=fp8-gelu-matmul-codes, the steady step's MLP GEMM writes
#          its GELU's FP8 codes (tag gf)
#   nofold with fp8: --disable-patterns=fp8-fold-input-cast, the steady step's weight
#          casts read a bf16 copy of each master weight (tag nofold)
#   xfl    with fp8: --fp8-exclude=first,last, the first and last blocks'
#          linear layers in bf16 (tag xfl)
#   dN     with a budget: --remat-max-depth=N (tag dN)
#   aN     --accum-steps=N: the step takes N micro-batches of B rows each
#   split  with a budget: --split-batch, gptc picks the micro-batches (tag split)
#   fga    with fp8 and aN: --fuse-grad-accumulation, the micro-batch sums
#          of the weight gradients in their GEMMs, in f32 (tag fga)
#          (tag aN), so 1558M:8:fp8,a2 trains on 16 rows a step as 1558M:16
# into sweep-<model>-<tags>.fb; run_sweep.sh runs torch once per model,
# after the model's first entry.
#   bash bench/device/build_sweep.sh                 # all four, fp8 and bf16
#   SWEEP="124M:64 124M:64:nr 350M:32 1558M:16:40 1558M:16:40,nr 774M:16:fp8 774M:16:fp8,current" bash bench/device/build_sweep.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=bench/device/configs.sh
source bench/device/configs.sh
GPTC=${GPTC:-build/bin/gptc}
SWEEP=${SWEEP:-124M:64:fp8,head 124M:64 350M:32:fp8,head 350M:32 774M:16:fp8,head,ce16 774M:16 1558M:16:fp8,head,ce16 1558M:16}
[ -x "$GPTC" ] || { echo "build_sweep: no $GPTC (run scripts/setup.sh)"; exit 1; }
mkdir -p "$ARTIFACTS"
tsv=$ARTIFACTS/sweep.tsv
: > "$tsv"
status=0
for entry in $SWEEP; do
  IFS=: read -r model b variant <<< "$entry"
  tag="" extra=() disabled="" precision=bf16 accum=1
  IFS=, read -ra parts <<< "$variant"
  for part in "${parts[@]}"; do
    case $part in
      nr) tag=${tag:+$tag-}nr extra+=(--narrow-residual) ;;
      fp8) tag=${tag:+$tag-}fp8 precision=fp8 ;;
      current) tag=${tag:+$tag-}current extra+=(--fp8-history=0) ;;
      head) tag=${tag:+$tag-}head extra+=(--fp8-lm-head) ;;
      ce16) tag=${tag:+$tag-}ce16 disabled+=${disabled:+,}fp8-cross-entropy-grad ;;
      nofc) tag=${tag:+$tag-}nofc disabled+=${disabled:+,}fp8-cast-gelu-grad,fp8-cast-column-sum ;;
      nosteady) tag=${tag:+$tag-}nosteady extra+=(--fp8-steady-step=false) ;;
      nolnf) tag=${tag:+$tag-}nolnf disabled+=${disabled:+,}fp8-layernorm-codes ;;
      gf) tag=${tag:+$tag-}gf extra+=(--enable-patterns=fp8-gelu-matmul-codes) ;;
      nofold) tag=${tag:+$tag-}nofold disabled+=${disabled:+,}fp8-fold-input-cast ;;
      xfl) tag=${tag:+$tag-}xfl extra+=(--fp8-exclude=first,last) ;;
      d[0-9]*) tag=${tag:+$tag-}$part extra+=(--remat-max-depth="${part#d}") ;;
      a[0-9]*) tag=${tag:+$tag-}$part accum=${part#a} ;;
      fga) tag=${tag:+$tag-}fga extra+=(--fuse-grad-accumulation) ;;
      split) tag=${tag:+$tag-}split extra+=(--split-batch) ;;
      *) if [[ $part =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
           tag=${tag:+$tag-}remat$part extra+=(--memory-budget="$part")
         else
           echo "build_sweep: unknown variant '$part' in '$entry' (a GiB budget, nr, fp8, current, head, ce16, nofc, nosteady, nolnf, gf, nofold, xfl, dN, aN, fga or split)"
           status=1
           continue 2
         fi ;;
    esac
  done
  # The variants' disabled patterns: one --disable-patterns list.
  [[ -n $disabled ]] && extra+=(--disable-patterns="$disabled")
  file=$ARTIFACTS/sweep-$model${tag:+-$tag}.fb
  # shellcheck disable=SC2206
  cmd=("$GPTC" compile models/gpt2.mlir --model="$model" --batch="$b" --seq="${SWEEP_SEQ:-1024}" ${TRAIN_OPT/--accum-steps=1/--accum-steps=$accum} --precision="$precision" "${extra[@]}" -o "$file")
  echo "+ ${cmd[*]}"
  t0=$(date +%s.%N)
  if "${cmd[@]}"; then
    t1=$(date +%s.%N)
    printf '%s\t%s\t%s\t%.1f\t%s\t%s\n' "$model" "$b" "$file" "$(awk -v a="$t0" -v b="$t1" "BEGIN { print b - a }")" "${tag:--}" "${cmd[*]}" >> "$tsv"
  else
    echo "build_sweep: gptc failed for $model"
    status=1
  fi
done
cat "$tsv"
# The CPU build's gptrun, for bench/device/runtime.sh on the device.
# shellcheck source=bench/device/runtime.sh
source bench/device/runtime.sh
copy_runtime
exit $status
