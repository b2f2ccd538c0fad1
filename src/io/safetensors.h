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
#include <functional>
#include <map>
#include <memory>
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

// The header length that a safetensors file's first 8 bytes hold (little-endian), and the most
// folio reads (the official reader's limit).
uint64_t safetensors_header_length(const char* first_eight_bytes);
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100u << 20;

// Where a SafetensorsFile's bytes come from: the file itself, read on demand (pread), or a
// buffer in memory (parse). Defined in safetensors.cpp.
class SafetensorsBytes;

// When the data checksum that folio's writer stores is checked.
enum class DataCheck {
  // On opening: the data section is read through once, in chunks, before anything else.
  kOnOpen,
  // By read_in_order(), which reads every value anyway: the file is read once, and the error
  // comes at its end. For callers that read every value that way (the parameters of a model,
  // ParameterSource), or none (the header alone), and let nothing use the values before it ends.
  kInOnePass,
};

// A checked safetensors file. Only the header is held in memory: tensor values are read from the
// file when asked for, in chunks of bounded size, so a 6 GB checkpoint costs its header plus a
// few MiB to open, and its values go straight to where they are wanted (the model's memory).
// The file stays open while any copy of this object lives; copies share it.
class SafetensorsFile {
 public:
  // The most values read_float32 converts through its buffer at a time, and the bytes each
  // pread asks for: 4 MiB, large enough to read at the disk's speed, small beside any model.
  static constexpr size_t kChunkBytes = size_t(4) << 20;

  // Opens and checks the file: the header, and the data checksum folio's writer stores (when
  // `check` says so).
  static SafetensorsFile read(const std::string& path, DataCheck check = DataCheck::kOnOpen);
  // Checks `bytes` as the contents of a safetensors file; `path` only names it in errors.
  static SafetensorsFile parse(std::string bytes, const std::string& path,
                               DataCheck check = DataCheck::kOnOpen);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  // Throws unless the tensor holds floating point values (F32, F64, F16 or BF16).
  void require_float(const SafetensorsTensor& tensor) const;
  // Elements [first, first + count) of the tensor as fp32 into `out` (F32 as is; F64, F16 and
  // BF16 converted), read from the file in chunks of at most kChunkBytes.
  void read_float32(const SafetensorsTensor& tensor, size_t first, size_t count, float* out) const;
  // The whole tensor as fp32 (for tensors that are wanted in memory anyway).
  std::vector<float> to_float32(const SafetensorsTensor& tensor) const;

  // Receives `count` values of a floating point tensor, from element `first` on, as fp32.
  using TensorChunkVisitor = std::function<void(const SafetensorsTensor& tensor, size_t first,
                                                const float* values, size_t count)>;
  // Reads the whole data section once, front to back, in chunks of at most kChunkBytes: each
  // floating point tensor's values go to `visit` (converted to fp32), in file order; the bytes
  // of other tensors and between tensors are only read. Every byte goes through SHA-256 on the
  // way when the file was opened with DataCheck::kInOnePass, and if the data checksum stored in
  // the file differs, this throws at the end saying the file is damaged: `visit` has then been
  // given values of a damaged file, which the caller must not use.
  void read_in_order(const TensorChunkVisitor& visit) const;

  // SHA-256 of the data section, as stored by folio in the "data_sha256" metadata entry; reads
  // the section through in chunks the first time (opening a file that stores it with
  // DataCheck::kOnOpen does).
  std::string data_sha256() const;
  // The "data_sha256" metadata entry, or "" when the file has none (checked or to be checked).
  std::string stored_data_sha256() const;
  size_t file_size() const { return file_size_; }

 private:
  static SafetensorsFile open(std::shared_ptr<const SafetensorsBytes> bytes, size_t file_size,
                              const std::string& path, DataCheck check);
  // The bytes of a pipe or device, no more than the file they claim to be needs (read()).
  static std::string read_stream(int fd, const std::string& path);
  // Verifies the header checksum that folio's writer stores, and with kOnOpen the data's.
  void check_checksums(std::string_view header_text, DataCheck check) const;
  // `size` bytes of the file from `offset`; a short read is an error naming the file.
  void read_bytes(size_t offset, size_t size, char* out) const;

  std::string path_;
  std::shared_ptr<const SafetensorsBytes> bytes_;
  size_t data_start_ = 0, file_size_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;  // name -> position in tensors_
  bool data_check_pending_ = false;      // kInOnePass with a stored checksum: read_in_order checks
  mutable std::string data_sha256_;      // once computed
};

struct TensorToWrite {
  // Values in memory: F32, element count = product of shape.
  TensorToWrite(std::string name, std::vector<int64_t> shape, const float* data)
      : name(std::move(name)), shape(std::move(shape)), data(data) {}
  // Values made as they are written (a transposed matrix, a zero bias): `fill` writes the
  // tensor's elements [first, first + count) to out[0, count).
  using Fill = std::function<void(size_t first, size_t count, float* out)>;
  TensorToWrite(std::string name, std::vector<int64_t> shape, Fill fill)
      : name(std::move(name)), shape(std::move(shape)), fill(std::move(fill)) {}

  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;  // or null, and `fill` makes them
  Fill fill;
};

// Writes an F32 safetensors file atomically (write_file_atomically) and a chunk at a time: the
// header, then each tensor's values in chunks of at most kChunkBytes, so that writing costs a
// chunk of memory beside the values, whatever the file's size. The checksums "data_sha256" and
// "header_sha256" are added to the metadata: the data's is computed as the bytes pass, and the
// header, written first with zeros in its place, is written again at the end.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       std::map<std::string, std::string> metadata);

// A temporary file being written by write_file_atomically. Each call writes all it is given or
// throws (and the temporary file is then removed).
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(int fd) : fd_(fd) {}
  // Appends `size` bytes.
  void write(const char* data, size_t size);
  // Writes `size` bytes again at the start of the file (what was written there first is
  // replaced: a header whose checksums are known only at the end).
  void rewrite_start(const char* data, size_t size);

 private:
  int fd_;
};

// Writes `path` atomically: `write` fills a temporary file beside it (hidden, unique to this
// process), which is fsynced, renamed over `path`, and its folder fsynced. A crash leaves either
// the old file or the new one, never a mix. On any failure (a full disk included, or an
// exception from `write`) the temporary file is removed and `path` keeps its previous contents;
// a failed write is a folio::Error naming `path` and the cause.
void write_file_atomically(const std::string& path,
                           const std::function<void(AtomicFileWriter& out)>& write);
// The same for bytes already in memory.
void write_file_atomically(const std::string& path, const std::string& bytes);

}  // namespace folio
