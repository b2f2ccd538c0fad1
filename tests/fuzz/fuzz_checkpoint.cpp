// libFuzzer target: arbitrary bytes as a checkpoint file. The safetensors reader, then the
// mapping of tensor names and shapes to folio's parameters (load_checkpoint), must either load
// the file or throw one folio::Error: any other exception, crash, leak or out-of-bounds access
// (AddressSanitizer) or undefined behaviour (UBSan) is a finding.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "config/config.h"
#include "core/error.h"
#include "data/vocabulary.h"
#include "fuzz_checks.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/parameter_layout.h"

namespace {

using folio::fuzz::check;
using folio::fuzz::check_message;

// Metadata-less (PyTorch-written) files take their vocabulary from --data; the seeds were made
// from text with these characters (tests/fuzz/make_checkpoint_seeds.py).
const folio::Vocabulary& data_vocabulary() {
  static const folio::Vocabulary vocabulary = folio::Vocabulary::from_text(U"\n !,.:;?abcdefgh");
  return vocabulary;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    // As eval and sample open a checkpoint: the data checksum checked on the pass that reads
    // the values (read_all below), so that pass meets damaged data too.
    const folio::SafetensorsFile file =
        folio::SafetensorsFile::parse(std::move(bytes), "fuzz", folio::DataCheck::kInOnePass);
    for (const folio::SafetensorsTensor& tensor : file.tensors()) {
      check(tensor.begin <= tensor.end && tensor.end <= file.file_size());
      try {
        check(file.to_float32(tensor).size() == tensor.element_count());
      } catch (const folio::Error& error) {  // an integer dtype: parameters must be floats
        check_message(error);
      }
    }
    const folio::LoadedCheckpoint loaded =
        folio::load_checkpoint(file, folio::Config{}, &data_vocabulary());
    const std::vector<float> parameters = loaded.parameters->read_all();
    check(parameters.size() == folio::ParameterLayout(loaded.shape).total());
    for (float value : parameters) check(std::isfinite(value));
  } catch (const folio::Error& error) {
    // The expected way to refuse a file. Tensor names are free text and may be long, so only
    // the one-line rule applies.
    check_message(error);
  }
  return 0;
}
