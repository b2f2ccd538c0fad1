// `folio --version`: the version and what this binary was built with, from the compile
// definitions CMakeLists.txt sets (FOLIO_CUDA, FOLIO_MPI, FOLIO_GLOO, the BLAS) and, in a build
// with CUDA, what its module (backend/cuda_module.h) says of itself when loaded.
#pragma once

#include <string>

namespace folio {

// Several lines: "folio 0.1.0", then one line each for the backends, the CPU sgemm and the
// communicators compiled in.
std::string build_info();

}  // namespace folio
