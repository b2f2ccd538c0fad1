// Lets small pure functions (the random generator, dropout decisions) be compiled for both the
// host and a GPU, so every backend draws exactly the same numbers from the same code.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define FOLIO_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FOLIO_HOST_DEVICE inline
#endif
