// A checkpoint's parameters on their way into a model, written range by range into the flat
// ParameterLayout instead of held as a second copy of the weights: a file's tensors are read,
// converted to fp32 and checked a chunk at a time, each chunk written where it belongs. Sampling
// from gpt2-xl (6.2 GB of fp32 weights) so needs the weights once, not the file, a converted copy
// and the model's. The file is read once: its data checksum is computed on the same pass, so a
// damaged file is found only once its values have gone to the sink, and write() then throws. A
// caller must so let nothing use what it wrote until write() has returned (the commands load
// before they train, sample or write anything, and an exception ends them).
//
// write_into(model) fills a model a chunk of at most 4 MiB at a time (on a GPU that chunk is the
// host staging buffer of each copy to the device); read_all() gives the values in host memory,
// for what needs them there (export, tests).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace folio {

class GPT;

// Receives `count` values for flat positions [offset, offset + count).
using ParameterSink = std::function<void(size_t offset, const float* values, size_t count)>;

class ParameterSource {
 public:
  virtual ~ParameterSource() = default;
  // The flat parameter count (ParameterLayout::total), padding included.
  virtual size_t count() const = 0;
  // Calls `sink` for ranges that together cover [0, count()) exactly once, in no particular
  // order (vocabulary padding as zeros). Throws folio::Error, naming the file, for a damaged file
  // (its data checksum), a value that is not finite or a tied head that differs from the
  // embedding; the sink then holds part or all of the values, which must not be used.
  virtual void write(const ParameterSink& sink) const = 0;

  // Into the model's parameters (their count must be count()).
  void write_into(GPT& model) const;
  std::vector<float> read_all() const;
};

// Values already in memory (a Hugging Face folder's, converted and transposed on reading).
class HostParameters : public ParameterSource {
 public:
  explicit HostParameters(std::vector<float> values) : values_(std::move(values)) {}
  size_t count() const override { return values_.size(); }
  void write(const ParameterSink& sink) const override;

 private:
  std::vector<float> values_;
};

// A file's tensors, each going whole to one range of the flat parameters (the per-head query,
// key and value matrices of the seed's names to their rows of the fused qkv): nothing is read
// until write(), which reads the file front to back once (SafetensorsFile::read_in_order; open
// the file with DataCheck::kInOnePass for its data checksum to be checked on that pass).
class FileParameters : public ParameterSource {
 public:
  struct Placement {
    SafetensorsTensor tensor;  // of `file`
    size_t offset;             // of its first value in the flat parameters
  };
  // A tensor that must hold exactly the values of another (a tied head stored twice, as
  // PyTorch's state_dict does); `error` is the message when it does not.
  struct Duplicate {
    SafetensorsTensor copy, original;
    std::string error;
  };
  FileParameters(SafetensorsFile file, size_t count, std::vector<Placement> placements,
                 std::vector<Duplicate> duplicates);
  size_t count() const override { return count_; }
  void write(const ParameterSink& sink) const override;

 private:
  SafetensorsFile file_;  // a copy sharing the open file with the caller's
  size_t count_;
  std::vector<Placement> placements_;  // sorted by offset, none overlapping
  std::vector<Duplicate> duplicates_;
};

}  // namespace folio
