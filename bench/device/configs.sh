# shellcheck shell=bash
# bench/device/configs.sh: the benchmark configurations, sourced by
# bench/device/build_artifacts.sh (CPU side: gptc compiles the executables) and
# bench/device/run_device.sh (GPU side: gptrun and the PyTorch twin run them).
# One source of truth, so the compiled train step and train_torch.py use the
# same model, batch, schedule and AdamW settings. Every value can be
# overridden from the environment (e.g. TRAIN_STEPS=50 bash bench/device/run_device.sh);
# change a *_OPT string or a shape and the .fb files must be rebuilt.
#
# *_OPT strings use gptc compile's train-step flags; bench/twin/train_torch.py
# takes the same flags with the same meaning. Their --total-steps follows
# PARITY_STEPS / TRAIN_STEPS (the schedule ends with the run).

SEED=${SEED:-1337}
ARTIFACTS=${ARTIFACTS:-bench/artifacts}   # the compiled executables + manifest.json

# Parity: fp32, TF32 off, identical init (@init(SEED)) and batches, 10 steps.
# Cosine with a short warm-up so both warm-up and decay are exercised.
PARITY_MODEL=${PARITY_MODEL:-124M}
PARITY_B=${PARITY_B:-4}
PARITY_T=${PARITY_T:-1024}
PARITY_STEPS=${PARITY_STEPS:-10}
PARITY_OPT=${PARITY_OPT:---accum-steps=1 --lr=6e-4 --min-lr=6e-5 --warmup-steps=3 --total-steps=$PARITY_STEPS --schedule=cosine --beta1=0.9 --beta2=0.95 --adam-epsilon=1e-8 --weight-decay=0.1 --grad-clip=1.0}
PARITY_DATA=${PARITY_DATA:-data/austen_train.bin}
PARITY_TOL=${PARITY_TOL:-1e-4}          # max relative loss difference, any step
PARITY_FB=${PARITY_FB:-$ARTIFACTS/gpt2-$PARITY_MODEL-parity.fb}

# Training and speed: 124M, B=16, T=1024, 200 steps on Austen (llm.c-like
# schedule: 20 warm-up steps, cosine to lr/10).
TRAIN_MODEL=${TRAIN_MODEL:-124M}
TRAIN_B=${TRAIN_B:-16}
TRAIN_T=${TRAIN_T:-1024}
TRAIN_STEPS=${TRAIN_STEPS:-200}
TRAIN_OPT=${TRAIN_OPT:---accum-steps=1 --lr=6e-4 --min-lr=6e-5 --warmup-steps=20 --total-steps=$TRAIN_STEPS --schedule=cosine --beta1=0.9 --beta2=0.95 --adam-epsilon=1e-8 --weight-decay=0.1 --grad-clip=1.0}
TRAIN_DATA=${TRAIN_DATA:-data/austen_train.bin}
VAL_DATA=${VAL_DATA:-data/austen_val.bin}
TRAIN_FB=${TRAIN_FB:-$ARTIFACTS/gpt2-$TRAIN_MODEL-train.fb}

# The train config again under gptc --precision=bf16 (bf16 GEMMs, fp32 master
# weights, statistics and loss), for bench/device/run_bf16.sh: BF16_STEPS steps of
# it and of TRAIN_FB, whose losses must agree within BF16_TOL (relative).
BF16_FB=${BF16_FB:-$ARTIFACTS/gpt2-$TRAIN_MODEL-bf16.fb}
BF16_STEPS=${BF16_STEPS:-50}
BF16_TOL=${BF16_TOL:-2e-2}
# The same bf16 step with --flash-attention=false (the scalar attention
# kernels): the tensor-core flash kernels must track it within FLASH_TOL.
BF16_SCALAR_FB=${BF16_SCALAR_FB:-$ARTIFACTS/gpt2-$TRAIN_MODEL-bf16-scalar.fb}
FLASH_TOL=${FLASH_TOL:-1e-3}
# The bf16 step with the fusion passes off (--fuse-matmul-epilogue=false
# --fuse-elementwise=false --fuse-adamw=false --fuse-cross-entropy=false):
# what fusion saves. Its losses must match the fused step within FUSION_TOL
# (elementwise, AdamW and row-kernel fusion are bit-identical, except the
# flash kernels' qkv bias sums, of unrounded dq/dk/dv tiles where the
# unfused step sums the bf16 dqkv: scripts/gpu-test.sh, H100 2026-12-07,
# mini bf16 steps 5.1e-6 apart in loss, 1.4e-4 in grad norm; the
# cross-entropy sums in another order and the GEMM epilogues round the GELU
# and bias gradients once).
BF16_UNFUSED_FB=${BF16_UNFUSED_FB:-$ARTIFACTS/gpt2-$TRAIN_MODEL-bf16-unfused.fb}
FUSION_TOL=${FUSION_TOL:-1e-3}
# Steps the flash and fusion comparisons cover. At lr 6e-4 and B=16 the
# 124M run meets a loss spike near step 24 whose outcome depends on
# rounding: at 47f44ec bf16 and fp32 were 2.4e-3 apart at step 20 and
# 1.8e-2 at step 30, fused and unfused 1.2e-2 (9.4e-5 over steps 1-20),
# flash and scalar attention 6.0e-3 (1.1e-4 over steps 1-20). Comparing
# kernel variants stops before it; BF16_TOL still covers all BF16_STEPS.
VARIANT_STEPS=${VARIANT_STEPS:-20}

# The train config again for any number of ranks (no gptc --world-size: the
# gradient buckets' all-reduces are in the step; gptrun skips them on one
# GPU), for bench/device/run_nccl.sh: NCCL_STEPS steps of it must log the
# losses of TRAIN_FB (one device, no collectives) within NCCL_TOL.
# NCCL_WS2_FB (--world-size=2) checks the GPU count error, or trains on 2 GPUs.
NCCL_FB=${NCCL_FB:-$ARTIFACTS/gpt2-$TRAIN_MODEL-ws1.fb}
NCCL_WS2_FB=${NCCL_WS2_FB:-$ARTIFACTS/gpt2-$TRAIN_MODEL-ws2.fb}
NCCL_STEPS=${NCCL_STEPS:-20}
NCCL_TOL=${NCCL_TOL:-1e-6}

# Precision of the PyTorch runs that are compared with the train .fb. Set it
# to what the .fb computes in (TRAIN_FB is compiled with --precision=fp32).
SPEED_DTYPE=${SPEED_DTYPE:-fp32}        # fp32 | bf16
SPEED_TF32=${SPEED_TF32:-on}            # off | on (fp32 only)
SPEED_STEPS=${SPEED_STEPS:-$TRAIN_STEPS}
TIMING_WARMUP=${TIMING_WARMUP:-10}      # steps left out of every median
# Extra PyTorch-only rows in bf16 (the numbers to beat), fewer steps; 0: off.
TORCH_BF16_STEPS=${TORCH_BF16_STEPS:-50}
