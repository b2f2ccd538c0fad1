// The safetensors format (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}},
// then the raw little-endian tensor bytes.
//
// The reader trusts nothing in the file: sizes are bounded and overflow-checked, offsets must
// lie inside the data section without overlapping, and each tensor's byte length must match its
// dtype and shape. Every problem is a folio::Error naming the file and what is wrong.
//
// folio's writer adds two checksums to the metadata: "data_sha256" over the data section, and
// "header_sha256" over the header text as written, with the checksum's own 64 hex digits read
// as zeros. Together they turn any flipped bit or torn write into an error rather than a silently
// different model. A header that another tool re-serialised (other spacing) no longer holds the
// checksum's text as folio wrote it, so only its data checksum and the structural checks apply.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace folio {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // "F32", "F64", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;
  size_t begin = 0, end = 0;  // byte range inside the data section
  size_t element_count() const;
};

class SafetensorsFile {
 public:
  static SafetensorsFile read(const std::string& path);
  // Checks `bytes` as the contents of a safetensors file; `path` only names it in errors.
  static SafetensorsFile parse(std::string bytes, const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  // The tensor's values as fp32 (F32 as is; F64, F16 and BF16 converted).
  std::vector<float> to_float32(const SafetensorsTensor& tensor) const;
  // SHA-256 of the data section, as stored by folio in the "data_sha256" metadata entry.
  std::string data_sha256() const;
  size_t file_size() const { return file_size_; }

 private:
  // Verifies the header and data checksums that folio's writer stores, where present.
  void check_checksums(std::string_view header_text) const;

  std::string path_;
  std::string bytes_;  // the whole file
  size_t data_start_ = 0, file_size_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;  // name -> position in tensors_
};

struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const float* data;  // F32, element count = product of shape
};

// Writes an F32 safetensors file atomically: a temporary file beside `path`, fsync, rename over
// `path`, fsync of the folder. A crash leaves either the old file or the new one, never a mix.
// The checksums "data_sha256" and "header_sha256" are added to the metadata.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       std::map<std::string, std::string> metadata);

// Writes `bytes` to `path` by the same temporary-file, fsync and rename steps. On any failure
// (a full disk included) the temporary file is removed, `path` keeps its previous contents, and
// the folio::Error names `path` and the cause.
void write_file_atomically(const std::string& path, const std::string& bytes);

}  // namespace folio
