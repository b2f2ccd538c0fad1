#include "io/safetensors.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/printable.h"
#include "core/sha256.h"

namespace folio {

namespace {


size_t dtype_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" ||
      dtype == "F8_E5M2")
    return 1;
  return 0;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int shift = 0;
      uint32_t m = mantissa;
      while ((m & 0x400) == 0) m <<= 1, ++shift;
      bits = sign | ((127 - 15 - shift + 1) << 23) | ((m & 0x3FF) << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7F800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool is_float_dtype(const std::string& dtype) {
  return dtype == "F32" || dtype == "F64" || dtype == "F16" || dtype == "BF16";
}

// `count` values of a floating point dtype other than F32, as fp32.
void convert_to_float32(const std::string& dtype, const char* raw, size_t count, float* out) {
  if (dtype == "F64") {
    for (size_t i = 0; i < count; ++i) {
      double d;
      std::memcpy(&d, raw + 8 * i, 8);
      out[i] = static_cast<float>(d);
    }
    return;
  }
  const bool bfloat = dtype == "BF16";  // else F16
  for (size_t i = 0; i < count; ++i) {
    uint16_t h;
    std::memcpy(&h, raw + 2 * i, 2);
    if (bfloat) {
      const uint32_t bits = static_cast<uint32_t>(h) << 16;
      std::memcpy(&out[i], &bits, 4);
    } else {
      out[i] = half_to_float(h);
    }
  }
}

[[noreturn]] void corrupt(const std::string& path, const std::string& why) {
  throw Error("checkpoint " + path + " is not a valid safetensors file: " + why);
}

// The data section differs from the checksum stored at save: flipped bits on the disk, or a
// copy gone wrong. Nothing read from it can be trusted.
// A file folio wrote that another program saved again with folio's metadata (safetensors'
// save_file(tensors, path, metadata)) carries checksums of what folio wrote, not of what it holds.
constexpr const char* kRewrittenByAnotherProgram =
    " (or another program saved it again with folio's metadata: save it without the entries "
    "header_sha256 and data_sha256, which folio then does not check)";

[[noreturn]] void damaged_data(const std::string& path) {
  throw Error("checkpoint " + path +
              " is damaged: its tensor data does not match the checksum stored in it: "
              "re-download it or use another checkpoint" +
              kRewrittenByAnotherProgram);
}

constexpr const char* kHeaderChecksumKey = "header_sha256";

// The header text with the value of its "header_sha256" entry read as zeros, or nullopt when the
// header does not hold that entry as folio writes it (absent, or re-serialised by another tool).
std::optional<std::string> header_with_zeroed_checksum(std::string header_text,
                                                       const std::string& checksum) {
  const std::string prefix = std::string("\"") + kHeaderChecksumKey + "\":\"";
  const size_t at = header_text.find(prefix + checksum + "\"");
  if (at == std::string::npos) return std::nullopt;
  header_text.replace(at + prefix.size(), checksum.size(), std::string(checksum.size(), '0'));
  return header_text;
}

// One line naming the file, the cause and what to do: a full disk is the common case.
std::string write_failure(const std::string& path, int error_number) {
  const std::string cause = std::strerror(error_number);
  std::error_code error;
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (error_number == ENOENT && !folder.empty() && !std::filesystem::is_directory(folder, error))
    return "cannot write " + path + ": the folder " + folder.string() +
           " does not exist: create it, or write somewhere else";
  // Said only of a file that was there: a first save has nothing to keep.
  const std::string kept =
      std::filesystem::exists(path, error)
          ? "; " + std::filesystem::path(path).filename().string() + " keeps its previous contents"
          : "";
  if (error_number == ENOSPC || error_number == EDQUOT)
    return "cannot write " + path + ": the disk is full (" + cause + "): free some space" + kept;
  if (error_number == EROFS || error_number == EACCES || error_number == EPERM)
    return "cannot write " + path + ": " + cause + ": make its folder writable" + kept;
  return "cannot write " + path + ": " + cause + kept;
}

// Writes everything, retrying short writes; returns 0 or the errno of the failure.
int write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t written = ::write(fd, data, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += written;
    size -= static_cast<size_t>(written);
  }
  return 0;
}

}  // namespace

// See safetensors.h. read() returns the bytes read (fewer than `size` only at the end of the
// file) or -1 with errno set.
class SafetensorsBytes {
 public:
  virtual ~SafetensorsBytes() = default;
  virtual ssize_t read(size_t offset, size_t size, char* out) const = 0;
};

namespace {

// The file, read with pread rather than memory-mapped: the bytes land where the caller wants
// them (for F32 the model's own memory) with no mapping whose pages count in the process's
// resident memory until unmapped, and a file truncated under us is a short read to report, not
// a SIGBUS.
class FileBytes : public SafetensorsBytes {
 public:
  explicit FileBytes(int fd) : fd_(fd) {}
  ~FileBytes() override { ::close(fd_); }
  ssize_t read(size_t offset, size_t size, char* out) const override {
    ssize_t got;
    do got = ::pread(fd_, out, size, static_cast<off_t>(offset));
    while (got < 0 && errno == EINTR);
    return got;
  }

 private:
  int fd_;
};

// A file's contents already in memory (parse: the fuzz tests, and files that are no regular
// file, such as a pipe).
class MemoryBytes : public SafetensorsBytes {
 public:
  explicit MemoryBytes(std::string bytes) : bytes_(std::move(bytes)) {}
  ssize_t read(size_t offset, size_t size, char* out) const override {
    if (offset >= bytes_.size()) return 0;
    const size_t n = std::min(size, bytes_.size() - offset);
    std::memcpy(out, bytes_.data() + offset, n);
    return static_cast<ssize_t>(n);
  }
  size_t size() const { return bytes_.size(); }

 private:
  std::string bytes_;
};

}  // namespace

size_t SafetensorsTensor::element_count() const {
  size_t count = 1;
  for (int64_t d : shape) count *= static_cast<size_t>(d);
  return count;
}

uint64_t safetensors_header_length(const char* first_eight_bytes) {
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(first_eight_bytes[i]);
  return length;
}

SafetensorsFile SafetensorsFile::read(const std::string& path, DataCheck check) {
  std::error_code error;
  if (!std::filesystem::exists(path, error))
    throw Error("checkpoint " + path +
                " does not exist: give the path of a file written by "
                "`folio train` (OUT_DIR/ckpt.safetensors)");
  if (std::filesystem::is_directory(path, error))
    throw Error("checkpoint " + path + " is a folder: give the ckpt.safetensors file inside it");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open checkpoint " + path + ": check its permissions");
  auto file = std::make_shared<FileBytes>(fd);
  struct stat status;
  if (::fstat(fd, &status) != 0)
    throw Error("cannot read checkpoint " + path + ": an I/O error occurred");
  if (S_ISREG(status.st_mode)) return open(file, static_cast<size_t>(status.st_size), path, check);
  return parse(read_stream(fd, path), path, check);
}

// A pipe or a device has no size to read at: its bytes as they come, but no more than the file
// it claims to be needs, so that `folio info /dev/zero` fails at once instead of reading until
// memory runs out: the 8-byte length and the header's first byte, the header if those look like
// one (open() refuses the rest), then the data up to the end of its last tensor and one byte
// more, so that open() sees a file longer than its tensors and refuses it.
std::string SafetensorsFile::read_stream(int fd, const std::string& path) {
  std::string bytes;
  const auto read_up_to = [&](size_t total) {
    std::vector<char> chunk(1 << 16);
    while (bytes.size() < total) {
      const ssize_t got = ::read(fd, chunk.data(), std::min(chunk.size(), total - bytes.size()));
      if (got == 0) return;
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw Error("cannot read checkpoint " + path + ": an I/O error occurred");
      bytes.append(chunk.data(), static_cast<size_t>(got));
    }
  };
  read_up_to(9);
  if (bytes.size() < 9 || bytes[8] != '{') return bytes;
  const uint64_t header_size = safetensors_header_length(bytes.data());
  if (header_size > kSafetensorsMaxHeaderBytes) return bytes;
  read_up_to(8 + static_cast<size_t>(header_size));
  const nlohmann::json header =
      nlohmann::json::parse(bytes.substr(8), nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return bytes;
  uint64_t data_end = 0;  // the furthest end of a tensor's data; open() checks each
  for (const auto& [name, entry] : header.items()) {
    if (!entry.is_object() || !entry.contains("data_offsets")) continue;
    const auto& offsets = entry["data_offsets"];
    if (offsets.is_array() && offsets.size() == 2 && offsets[1].is_number_unsigned())
      data_end = std::max(data_end, offsets[1].get<uint64_t>());
  }
  const uint64_t most = std::numeric_limits<size_t>::max() - bytes.size() - 1;
  read_up_to(bytes.size() + static_cast<size_t>(std::min(data_end, most)) + 1);
  return bytes;
}

SafetensorsFile SafetensorsFile::parse(std::string bytes, const std::string& path,
                                       DataCheck check) {
  auto memory = std::make_shared<MemoryBytes>(std::move(bytes));
  const size_t size = memory->size();
  return open(std::move(memory), size, path, check);
}

SafetensorsFile SafetensorsFile::open(std::shared_ptr<const SafetensorsBytes> bytes,
                                      size_t file_size, const std::string& path, DataCheck check) {
  SafetensorsFile result;
  result.path_ = path;
  result.bytes_ = std::move(bytes);
  result.file_size_ = file_size;
  if (file_size < 8) corrupt(path, "it is shorter than the 8-byte header length (truncated?)");
  char length[8];
  result.read_bytes(0, 8, length);
  const uint64_t header_size = safetensors_header_length(length);
  char first_header_byte = '\0';
  if (file_size > 8) result.read_bytes(8, 1, &first_header_byte);
  // A safetensors file is an 8-byte length, then a JSON object: anything else (a text, a
  // PyTorch .pt zip) fails here, whatever its first 8 bytes happen to say as a length.
  if (file_size > 8 && first_header_byte != '{')
    corrupt(path,
            "it does not start with a length and a JSON header; give a checkpoint that folio "
            "train (OUT_DIR/ckpt.safetensors) or safetensors' save_file wrote");
  if (header_size > kSafetensorsMaxHeaderBytes)
    corrupt(path, "its header claims " + std::to_string(header_size) + " bytes (limit 100 MiB)");
  if (header_size > file_size - 8)
    corrupt(path, "its header runs past the end of the file (truncated?)");
  result.data_start_ = 8 + static_cast<size_t>(header_size);
  const size_t data_size = file_size - result.data_start_;
  std::string header_text(static_cast<size_t>(header_size), '\0');
  result.read_bytes(8, header_text.size(), header_text.data());

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text);
  } catch (const nlohmann::json::exception&) {
    corrupt(path, "its header is not valid JSON");
  }
  // It began with '{' (checked above), so a header that parses is an object.
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) corrupt(path, "__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          corrupt(path, "metadata entry " + printable(key) + " is not a string");
        result.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    // Names are quoted in every later error message, by code that trusts them to be one line.
    if (has_control_character(name))
      corrupt(path, "tensor name '" + printable(name) + "' holds control characters");
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets"))
      corrupt(path, "tensor " + printable(name) + " lacks dtype, shape or data_offsets");
    SafetensorsTensor tensor;
    tensor.name = name;
    if (!entry["dtype"].is_string())
      corrupt(path, "tensor " + printable(name) + " has a non-string dtype");
    tensor.dtype = entry["dtype"].get<std::string>();
    const size_t element_size = dtype_size(tensor.dtype);
    if (element_size == 0)
      corrupt(path, "tensor " + printable(name) + " has unknown dtype " + printable(tensor.dtype));
    const auto& shape = entry["shape"];
    if (!shape.is_array() || shape.size() > 8)
      corrupt(path, "tensor " + printable(name) + " has a malformed shape");
    // Every product stays under SIZE_MAX / 8 (so below INT64_MAX too): count * element_size and
    // the int64_t dimensions cannot wrap.
    size_t count = 1;
    for (const auto& d : shape) {
      if (!d.is_number_unsigned())
        corrupt(path, "tensor " + printable(name) +
                          " has a dimension that is not a non-negative integer");
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && count > std::numeric_limits<size_t>::max() / 8 / dim)
        corrupt(path, "tensor " + printable(name) + " is impossibly large");
      count *= static_cast<size_t>(dim);
      tensor.shape.push_back(static_cast<int64_t>(dim));
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      corrupt(path, "tensor " + printable(name) + " has malformed data_offsets");
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end > data_size)
      corrupt(path, "tensor " + printable(name) + " lies outside the file (truncated?)");
    if (end - begin != count * element_size)
      corrupt(path, "tensor " + printable(name) + " has " + std::to_string(end - begin) +
                        " bytes, but its dtype and shape need " +
                        std::to_string(count * element_size));
    tensor.begin = static_cast<size_t>(begin);
    tensor.end = static_cast<size_t>(end);
    ranges.emplace_back(tensor.begin, tensor.end);
    result.index_[tensor.name] = result.tensors_.size();
    result.tensors_.push_back(std::move(tensor));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) corrupt(path, "two tensors overlap");
  result.check_checksums(header_text, check);
  result.data_check_pending_ =
      check == DataCheck::kInOnePass && !result.stored_data_sha256().empty();
  return result;
}

void SafetensorsFile::check_checksums(std::string_view header_text, DataCheck check) const {
  auto header_checksum = metadata_.find(kHeaderChecksumKey);
  if (header_checksum != metadata_.end()) {
    const std::optional<std::string> hashed =
        header_with_zeroed_checksum(std::string(header_text), header_checksum->second);
    if (hashed && sha256_hex(*hashed) != header_checksum->second)
      throw Error("checkpoint " + path_ +
                  " is damaged: its header does not match the checksum stored in it" +
                  kRewrittenByAnotherProgram);
  }
  const std::string stored = stored_data_sha256();
  if (check == DataCheck::kOnOpen && !stored.empty() && stored != data_sha256())
    damaged_data(path_);
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::read_bytes(size_t offset, size_t size, char* out) const {
  while (size > 0) {
    const ssize_t got = bytes_->read(offset, size, out);
    if (got < 0)
      throw Error("cannot read checkpoint " + path_ + ": an I/O error occurred (" +
                  std::strerror(errno) + ")");
    if (got == 0) corrupt(path_, "it ended while being read (truncated since it was opened?)");
    offset += static_cast<size_t>(got);
    out += got;
    size -= static_cast<size_t>(got);
  }
}

void SafetensorsFile::require_float(const SafetensorsTensor& tensor) const {
  const std::string& dtype = tensor.dtype;
  if (!is_float_dtype(dtype))
    throw Error("checkpoint " + path_ + ": tensor " + tensor.name + " has dtype " + dtype +
                ", but parameters must be floating point (F32, F64, F16 or BF16)");
}

void SafetensorsFile::read_float32(const SafetensorsTensor& tensor, size_t first, size_t count,
                                   float* out) const {
  require_float(tensor);
  const std::string& dtype = tensor.dtype;
  if (first > tensor.element_count() || count > tensor.element_count() - first)
    throw Error("internal: reading past the end of tensor " + tensor.name);
  const size_t element_size = dtype_size(dtype);
  const size_t offset = data_start_ + tensor.begin + first * element_size;
  if (dtype == "F32") {  // straight into `out`: no copy of the bytes in between
    read_bytes(offset, count * 4, reinterpret_cast<char*>(out));
    return;
  }
  // The other dtypes go through a buffer of at most kChunkBytes, converted a chunk at a time.
  const size_t per_chunk = kChunkBytes / element_size;
  std::vector<char> raw(std::min(count, per_chunk) * element_size);
  for (size_t done = 0; done < count;) {
    const size_t n = std::min(count - done, per_chunk);
    read_bytes(offset + done * element_size, n * element_size, raw.data());
    convert_to_float32(dtype, raw.data(), n, out + done);
    done += n;
  }
}

std::vector<float> SafetensorsFile::to_float32(const SafetensorsTensor& tensor) const {
  std::vector<float> values(tensor.element_count());
  read_float32(tensor, 0, values.size(), values.data());
  return values;
}

void SafetensorsFile::read_in_order(const TensorChunkVisitor& visit) const {
  // The tensors in the order of their bytes, so that the file is read front to back once; the
  // bytes between them (alignment padding some writers leave) are read too, for the checksum.
  std::vector<const SafetensorsTensor*> in_order;
  for (const SafetensorsTensor& tensor : tensors_) in_order.push_back(&tensor);
  std::sort(
      in_order.begin(), in_order.end(),
      [](const SafetensorsTensor* a, const SafetensorsTensor* b) { return a->begin < b->begin; });
  std::optional<Sha256> hash;
  if (data_check_pending_) hash.emplace();
  // Buffers of a chunk, or less for a small file (opened and checked many times in the tests).
  size_t largest = 0;
  for (const SafetensorsTensor& tensor : tensors_)
    largest = std::max(largest, tensor.element_count());
  std::vector<char> raw(std::min(kChunkBytes, file_size_ - data_start_));
  std::vector<float> values(std::min(kChunkBytes / sizeof(float), largest));  // F32 read here
  auto read_chunk = [&](size_t data_offset, size_t size, char* out) {
    read_bytes(data_start_ + data_offset, size, out);
    if (hash) hash->update(out, size);
  };
  auto read_only = [&](size_t from, size_t to) {  // offsets in the data section
    for (size_t offset = from; offset < to; offset += kChunkBytes)
      read_chunk(offset, std::min(kChunkBytes, to - offset), raw.data());
  };
  size_t position = 0;
  for (const SafetensorsTensor* tensor : in_order) {
    read_only(position, tensor->begin);
    position = tensor->end;
    if (!is_float_dtype(tensor->dtype)) {
      read_only(tensor->begin, tensor->end);
      continue;
    }
    const size_t element_size = dtype_size(tensor->dtype);
    const bool is_f32 = tensor->dtype == "F32";
    // At most `values`' worth of elements a chunk (F64's raw bytes then fill `raw` exactly).
    const size_t per_chunk = kChunkBytes / std::max(element_size, sizeof(float));
    const size_t count = tensor->element_count();
    for (size_t first = 0; first < count; first += per_chunk) {
      const size_t n = std::min(per_chunk, count - first);
      char* bytes = is_f32 ? reinterpret_cast<char*>(values.data()) : raw.data();
      read_chunk(tensor->begin + first * element_size, n * element_size, bytes);
      if (!is_f32) convert_to_float32(tensor->dtype, raw.data(), n, values.data());
      visit(*tensor, first, values.data(), n);
    }
  }
  read_only(position, file_size_ - data_start_);
  if (!hash) return;
  const std::string digest = hash->hex_digest();
  if (digest != stored_data_sha256()) damaged_data(path_);
  data_sha256_ = digest;
}

std::string SafetensorsFile::data_sha256() const {
  if (!data_sha256_.empty()) return data_sha256_;
  Sha256 hash;
  std::vector<char> chunk(std::min(kChunkBytes, file_size_ - data_start_));
  for (size_t offset = data_start_; offset < file_size_;) {
    const size_t n = std::min(chunk.size(), file_size_ - offset);
    read_bytes(offset, n, chunk.data());
    hash.update(chunk.data(), n);
    offset += n;
  }
  data_sha256_ = hash.hex_digest();
  return data_sha256_;
}

std::string SafetensorsFile::stored_data_sha256() const {
  const auto stored = metadata_.find("data_sha256");
  return stored == metadata_.end() ? "" : stored->second;
}

namespace {

// A failed write, fsync or close: its errno, for write_file_atomically to report.
struct WriteFailure {
  int error_number;
};

// The temporary file a write has open, while it is open. A Ctrl-C (or SIGTERM) of a command
// whose signals take their default action (`folio export` of gpt2-xl writes 6 GB) left it in the
// folder, hidden, for good: the handler removes it, then lets the signal end the process as it
// would have. `folio train` takes its signals on a thread of its own (train/stop_signal.h), which
// this leaves alone, and removes its own files' temporaries when it starts again.
char temporary_being_written[4096];
std::atomic<bool> temporary_recorded{false};

void remove_temporary_and_end(int signal_number) {
  if (temporary_recorded.load()) ::unlink(temporary_being_written);
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

// From construction to destruction, SIGINT and SIGTERM remove `temporary` before ending the
// process, each where it would have ended it anyway (its action is the default: not where it is
// ignored, as in a shell's background job, nor where folio handles it).
class TemporaryRemovedOnSignal {
 public:
  explicit TemporaryRemovedOnSignal(const std::string& temporary) {
    if (temporary.size() >= sizeof temporary_being_written || temporary_recorded.load()) return;
    std::memcpy(temporary_being_written, temporary.c_str(), temporary.size() + 1);
    temporary_recorded.store(true);
    recorded_ = true;
    for (size_t i = 0; i < kSignals.size(); ++i) {
      struct sigaction current {};
      if (::sigaction(kSignals[i], nullptr, &current) != 0 || current.sa_handler != SIG_DFL)
        continue;
      struct sigaction action {};
      action.sa_handler = remove_temporary_and_end;
      sigemptyset(&action.sa_mask);
      installed_[i] = ::sigaction(kSignals[i], &action, nullptr) == 0;
    }
  }
  ~TemporaryRemovedOnSignal() {
    for (size_t i = 0; i < kSignals.size(); ++i) {
      if (!installed_[i]) continue;
      struct sigaction action {};
      action.sa_handler = SIG_DFL;
      sigemptyset(&action.sa_mask);
      ::sigaction(kSignals[i], &action, nullptr);
    }
    if (recorded_) temporary_recorded.store(false);
  }
  TemporaryRemovedOnSignal(const TemporaryRemovedOnSignal&) = delete;
  TemporaryRemovedOnSignal& operator=(const TemporaryRemovedOnSignal&) = delete;

 private:
  static constexpr std::array<int, 2> kSignals = {SIGINT, SIGTERM};
  std::array<bool, 2> installed_ = {false, false};
  bool recorded_ = false;
};

// The 8-byte little-endian length that starts a safetensors file.
std::string length_prefix(uint64_t size) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((size >> (8 * i)) & 0xFF));
  return bytes;
}

// The header text folio writes for `header` (tensors, then "__metadata__" with "header_sha256"
// holding 64 zeros): padded with spaces so that the data section starts 8-byte aligned, as the
// official writer does, and with the checksum of the padded text in place of the zeros (the
// reader undoes the same).
std::string header_text(const nlohmann::ordered_json& header) {
  // Invalid UTF-8 in a name or metadata value becomes U+FFFD instead of an exception mid-save.
  std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::string zeros(64, '0');
  const std::string placeholder = std::string("\"") + kHeaderChecksumKey + "\":\"" + zeros;
  text.replace(text.find(placeholder) + placeholder.size() - zeros.size(), zeros.size(),
               sha256_hex(text));
  return text;
}

}  // namespace

void AtomicFileWriter::write(const char* data, size_t size) {
  if (const int failure = write_all(fd_, data, size)) throw WriteFailure{failure};
}

void AtomicFileWriter::rewrite_start(const char* data, size_t size) {
  // Through write() like every other byte (the fault-injection shim of the disk-full tests
  // watches write), then back to the end for whatever follows.
  if (::lseek(fd_, 0, SEEK_SET) != 0) throw WriteFailure{errno};
  write(data, size);
  if (::lseek(fd_, 0, SEEK_END) < 0) throw WriteFailure{errno};
}

void write_file_atomically(const std::string& path,
                           const std::function<void(AtomicFileWriter& out)>& write) {
  const std::filesystem::path target(path);
  const std::filesystem::path folder =
      target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  // Hidden, and made only if no file of that name exists (O_EXCL), so that concurrent writers
  // never write into one another's file: the process id alone was not enough, since two
  // containers' processes (each often pid 1) or two hosts writing one shared folder can have the
  // same; a random suffix after it, drawn again where the name is taken.
  std::random_device random;
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 16; ++attempt) {
    char suffix[9];
    std::snprintf(suffix, sizeof suffix, "%08x", static_cast<unsigned>(random()));
    std::string name = ".";  // .NAME.tmp.PID.RANDOM
    name.append(target.filename().string()).append(".tmp.");
    name.append(std::to_string(::getpid())).append(".").append(suffix);
    temporary = (folder / name).string();
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) throw Error(write_failure(path, errno));
  }
  if (fd < 0) throw Error(write_failure(path, EEXIST));
  const TemporaryRemovedOnSignal removed_on_signal(temporary);
  int failure = 0;
  try {
    AtomicFileWriter out(fd);
    write(out);
  } catch (const WriteFailure& write_failed) {
    failure = write_failed.error_number;
  } catch (...) {  // the caller's own error (a value it refuses): no partial file stays behind
    ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
  // Errors of write, fsync and close all mean the data may not be on disk; close is checked
  // because some file systems (NFS, quotas) report a full disk only there.
  if (failure == 0 && ::fsync(fd) != 0) failure = errno;
  if (::close(fd) != 0 && failure == 0) failure = errno;
  if (failure == 0 && ::rename(temporary.c_str(), path.c_str()) != 0) failure = errno;
  if (failure != 0) {
    ::unlink(temporary.c_str());
    throw Error(write_failure(path, failure));
  }
  const int folder_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder_fd >= 0) {
    ::fsync(folder_fd);
    ::close(folder_fd);
  }
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  write_file_atomically(path,
                        [&](AtomicFileWriter& out) { out.write(bytes.data(), bytes.size()); });
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       std::map<std::string, std::string> metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  size_t data_size = 0;
  for (const TensorToWrite& tensor : tensors) {
    size_t count = 1;
    for (int64_t d : tensor.shape) count *= static_cast<size_t>(d);
    header[tensor.name] = {{"dtype", "F32"},
                           {"shape", tensor.shape},
                           {"data_offsets", {data_size, data_size + count * sizeof(float)}}};
    data_size += count * sizeof(float);
  }
  // The data's checksum is known only once the data has passed, but goes in the header before
  // it: the header is written first with zeros in its place, which are as long as the 64 hex
  // digits, and written again at the end. The file is then exactly what writing it whole gives.
  const std::string zeros(64, '0');
  metadata["data_sha256"] = zeros;
  metadata[kHeaderChecksumKey] = zeros;
  header["__metadata__"] = metadata;
  const std::string placeholder = header_text(header);
  write_file_atomically(path, [&](AtomicFileWriter& out) {
    const std::string start = length_prefix(placeholder.size()) + placeholder;
    out.write(start.data(), start.size());
    Sha256 data_hash;
    constexpr size_t kChunk = SafetensorsFile::kChunkBytes / sizeof(float);
    std::vector<float> made;  // a chunk of the values of a tensor made as it is written
    for (const TensorToWrite& tensor : tensors) {
      size_t count = 1;
      for (int64_t d : tensor.shape) count *= static_cast<size_t>(d);
      for (size_t first = 0; first < count; first += kChunk) {
        const size_t n = std::min(kChunk, count - first);
        const float* values;
        if (tensor.data != nullptr) {
          values = tensor.data + first;
        } else {
          made.resize(n);
          tensor.fill(first, n, made.data());
          values = made.data();
        }
        data_hash.update(values, n * sizeof(float));
        out.write(reinterpret_cast<const char*>(values), n * sizeof(float));
      }
    }
    header["__metadata__"]["data_sha256"] = data_hash.hex_digest();
    const std::string text = header_text(header);
    if (text.size() != placeholder.size())
      throw Error("internal: the header of " + path + " changed length when its checksum was set");
    const std::string final_start = length_prefix(text.size()) + text;
    out.rewrite_start(final_start.data(), final_start.size());
  });
}

}  // namespace folio
