#include "io/parameter_source.h"

#include <algorithm>
#include <cmath>

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
  constexpr size_t kChunk = SafetensorsFile::kChunkBytes / sizeof(float);
  std::vector<float> chunk, other;
  // A duplicate is compared before anything is written, as the values of both are read anyway;
  // exact equality (a NaN differs from itself, so a tied NaN is reported here).
  for (const Duplicate& duplicate : duplicates_) {
    const size_t n = duplicate.original.element_count();
    if (duplicate.copy.element_count() != n) throw Error(duplicate.error);
    for (size_t first = 0; first < n; first += kChunk) {
      const size_t piece = std::min(kChunk, n - first);
      chunk.resize(piece);
      other.resize(piece);
      file_.read_float32(duplicate.copy, first, piece, chunk.data());
      file_.read_float32(duplicate.original, first, piece, other.data());
      if (!std::equal(chunk.begin(), chunk.end(), other.begin())) throw Error(duplicate.error);
    }
  }
  // Every range in order: a tensor's values a chunk at a time, and zeros where no tensor goes
  // (the rows of vocabulary padding, which files do not hold).
  const std::vector<float> zeros(std::min(kChunk, count_), 0.0f);
  auto write_zeros = [&](size_t from, size_t to) {
    for (size_t offset = from; offset < to; offset += zeros.size())
      sink(offset, zeros.data(), std::min(zeros.size(), to - offset));
  };
  size_t written = 0;
  for (const Placement& placement : placements_) {
    write_zeros(written, placement.offset);
    const size_t n = placement.tensor.element_count();
    for (size_t first = 0; first < n; first += kChunk) {
      const size_t piece = std::min(kChunk, n - first);
      chunk.resize(piece);
      file_.read_float32(placement.tensor, first, piece, chunk.data());
      for (float value : chunk)
        if (!std::isfinite(value))
          throw Error("checkpoint " + file_.path() + " holds a non-finite parameter (NaN or Inf)");
      sink(placement.offset + first, chunk.data(), piece);
    }
    written = placement.offset + n;
  }
  write_zeros(written, count_);
}

}  // namespace folio
