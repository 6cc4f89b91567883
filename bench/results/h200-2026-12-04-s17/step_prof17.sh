set -x
R=$1
# Session 17 call 1, after the build from source: where a decode step's time goes, kernel by
# kernel (Nsight Compute through bench/cuda/step_kernels.sh), for tinyglm BF16 at C1 and C4 (the
# issue 15 target at 46 % of floor) and glm-5.3-flash fp4-local at 4 layers, C1.
rc=0
BUILD=build bash bench/cuda/step_kernels.sh $R/steps-tinyglm-bf16-c1 --preset tinyglm --cells decode_c1
rc=$((rc | $?))
BUILD=build bash bench/cuda/step_kernels.sh $R/steps-tinyglm-bf16-c4 --preset tinyglm --cells decode_c4
rc=$((rc | $?))
BUILD=build bash bench/cuda/step_kernels.sh $R/steps-glm4-fp4-c1 --preset glm-5.3-flash --num-layers 4 --weight-format fp4-local --cells decode_c1
rc=$((rc | $?))
exit $rc
