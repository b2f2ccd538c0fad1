// A stand-in for the NVIDIA driver's libcuda.so.1 that holds no driver functions. folio's way to
// a GPU (src/backend/cuda_module.h: the driver looked for, the CUDA module loaded, its device
// count asked) then runs on a machine without a GPU: CUDA's runtime loads this library, finds
// none of its entry points and reports no device, as it would with a driver and no GPU.
extern "C" {
int folio_stand_in_cuda_driver = 1;
}
