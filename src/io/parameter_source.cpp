#include "io/parameter_source.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "model/gpt.h"

namespace folio {

void ParameterSource::write_into(GPT& model) const {
  if (model.parameter_count() != count())
    throw Error("internal: " + std::to_string(count()) + " parameters for a model of " +
                std::to_string(model.parameter_count()));
  write([&](size_t offset, const float* values, size_t n) {
    model.write_parameters(offset, values, n);
  });
}

std::vector<float> ParameterSource::read_all() const {
  std::vector<float> values(count());
  write([&](size_t offset, const float* chunk, size_t n) {
    std::copy(chunk, chunk + n, values.begin() + offset);
  });
  return values;
}

void HostParameters::write(const ParameterSink& sink) const {
  if (!values_.empty()) sink(0, values_.data(), values_.size());
}

FileParameters::FileParameters(SafetensorsFile file, size_t count,
                               std::vector<Placement> placements, std::vector<Duplicate> duplicates)
    : file_(std::move(file)),
      count_(count),
      placements_(std::move(placements)),
      duplicates_(std::move(duplicates)) {
  std::sort(placements_.begin(), placements_.end(),
            [](const Placement& a, const Placement& b) { return a.offset < b.offset; });
  size_t end = 0;
  for (const Placement& placement : placements_) {
    if (placement.offset < end || placement.offset > count_ ||
        placement.tensor.element_count() > count_ - placement.offset)
      throw Error("internal: tensor " + placement.tensor.name + " placed outside the parameters");
    end = placement.offset + placement.tensor.element_count();
  }
}

void FileParameters::write(const ParameterSink& sink) const {
  // Zeros where no tensor goes (the rows of vocabulary padding, which files do not hold).
  constexpr size_t kChunk = SafetensorsFile::kChunkBytes / sizeof(float);
  const std::vector<float> zeros(std::min(kChunk, count_), 0.0f);
  auto write_zeros = [&](size_t from, size_t to) {
    for (size_t offset = from; offset < to; offset += zeros.size())
      sink(offset, zeros.data(), std::min(zeros.size(), to - offset));
  };
  size_t covered = 0;
  std::map<std::string, const Placement*> placed;  // by tensor name
  for (const Placement& placement : placements_) {
    write_zeros(covered, placement.offset);
    covered = placement.offset + placement.tensor.element_count();
    placed[placement.tensor.name] = &placement;
  }
  write_zeros(covered, count_);

  for (const Duplicate& duplicate : duplicates_)
    if (duplicate.copy.element_count() != duplicate.original.element_count())
      throw Error(duplicate.error);

  // The file front to back, each tensor's values written to their place a chunk at a time. A
  // bad value is reported only after the pass: if the file's data checksum fails, that is the
  // cause to name (read_in_order throws it at the end), not the NaN a flipped bit made.
  std::string problem;
  std::vector<float> earlier;
  file_.read_in_order(
      [&](const SafetensorsTensor& tensor, size_t first, const float* values, size_t n) {
        if (!problem.empty()) return;
        // A duplicate and its original lie apart in the file. When the later of the two passes, the
        // same chunk of the earlier is read again (from the page cache: it passed moments ago) and
        // compared exactly (a NaN differs from itself, so a tied NaN is reported here).
        for (const Duplicate& duplicate : duplicates_) {
          const bool copy_is_later = duplicate.copy.begin > duplicate.original.begin;
          const SafetensorsTensor& later = copy_is_later ? duplicate.copy : duplicate.original;
          if (tensor.name != later.name) continue;
          earlier.resize(n);
          file_.read_float32(copy_is_later ? duplicate.original : duplicate.copy, first, n,
                             earlier.data());
          if (!std::equal(values, values + n, earlier.begin())) {
            problem = duplicate.error;
            return;
          }
        }
        const auto it = placed.find(tensor.name);
        if (it == placed.end()) return;  // a duplicate, or a buffer that is no parameter (tril)
        for (size_t i = 0; i < n; ++i)
          if (!std::isfinite(values[i])) {
            problem = "checkpoint " + file_.path() + " holds a non-finite parameter (NaN or Inf)";
            return;
          }
        sink(it->second->offset + first, values, n);
      });
  if (!problem.empty()) throw Error(problem);
}

}  // namespace folio
