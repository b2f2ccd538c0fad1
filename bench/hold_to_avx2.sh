# Sourced by the comparison scripts (cpu_compare.sh, gpt2_sample_compare.sh). AS_AVX2=1 holds both
# sides to AVX2 + FMA, as on an AVX2-only CPU (AMD Zen 3): folio through FOLIO_CPU_ISA=avx2 (its
# own kernels and oneDNN's), PyTorch through ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2 and
# MKL_ENABLE_INSTRUCTIONS=AVX2. An emulation on this CPU's caches and memory, not a measurement on
# a Zen 3.
if [ "${AS_AVX2:-0}" = 1 ]; then
  export FOLIO_CPU_ISA=avx2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 \
         MKL_ENABLE_INSTRUCTIONS=AVX2
fi
