#include "train/init_from_check.h"

#include <algorithm>

#include "core/printable.h"
#include "model/parameter_layout.h"

namespace folio {

namespace {

std::string shape_text(const std::vector<int>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// The characters of `from` that `other` lacks, quoted, at most a few of them.
std::string characters_missing(const Vocabulary& from, const Vocabulary& other, int* count) {
  std::string listed;
  *count = 0;
  for (int id = 0; id < from.size(); ++id) {
    const std::vector<char32_t>& symbols = other.symbols();
    if (std::binary_search(symbols.begin(), symbols.end(), from.symbols()[id])) continue;
    if (++*count <= 8)
      listed += (listed.empty() ? "'" : ", '") + printable(from.decode({id})) + "'";
  }
  if (*count > 8) listed += ", ...";
  return listed;
}

// What differs between two char vocabularies: the characters each has that the other lacks.
std::string vocabulary_mismatch(const Vocabulary& checkpoint_vocabulary,
                                const Vocabulary& text_vocabulary) {
  int in_text_only = 0, in_checkpoint_only = 0;
  const std::string text_only =
      characters_missing(text_vocabulary, checkpoint_vocabulary, &in_text_only);
  const std::string checkpoint_only =
      characters_missing(checkpoint_vocabulary, text_vocabulary, &in_checkpoint_only);
  std::string what = "its vocabulary (" + std::to_string(checkpoint_vocabulary.size()) +
                     " characters) differs from the text's (" +
                     std::to_string(text_vocabulary.size()) + ")";
  if (in_text_only > 0)
    what += ": the text has " + std::to_string(in_text_only) + " it lacks (" + text_only + ")";
  if (in_checkpoint_only > 0)
    what += std::string(in_text_only > 0 ? ", and" : ":") + " it has " +
            std::to_string(in_checkpoint_only) + " the text lacks (" + checkpoint_only + ")";
  return what;
}

}  // namespace

std::string init_from_mismatch(const LoadedCheckpoint& checkpoint, const ModelShape& run_shape,
                               const Tokenizer& data_tokenizer) {
  if (const std::string difference = checkpoint.tokenizer.difference(data_tokenizer);
      !difference.empty()) {
    if (checkpoint.tokenizer.characters() && data_tokenizer.characters())
      return vocabulary_mismatch(*checkpoint.tokenizer.characters(),
                                 *data_tokenizer.characters()) +
             ": train on a text of the checkpoint's characters (its own text, or one it covers), "
             "or drop --init_from";
    return "its tokenizer (" + checkpoint.tokenizer.description() +
           ") is not the data's tokenizer (" + data_tokenizer.description() + "; " + difference +
           "): prepare the data with the checkpoint's tokenizer (folio export writes it, "
           "or pass the tokenizer the model came with to folio prepare --tokenizer)";
  }
  // The model keys that differ show up as tensors of other shapes, or tensors one side lacks.
  const std::string keep_its_model =
      ": a run started from a checkpoint keeps its model; drop the model keys (n_layer, n_embd, "
      "block_size...) and --config that change it, or drop --init_from";
  const ParameterLayout theirs(checkpoint.shape), ours(run_shape);
  for (const ParameterTensor& tensor : ours.tensors()) {
    const auto match =
        std::find_if(theirs.tensors().begin(), theirs.tensors().end(),
                     [&](const ParameterTensor& t) { return t.name == tensor.name; });
    if (match == theirs.tensors().end())
      return "this run's model has a tensor " + tensor.name + " " + shape_text(tensor.shape) +
             " that the checkpoint lacks" + keep_its_model;
    if (match->shape != tensor.shape)
      return "tensor " + tensor.name + " is " + shape_text(match->shape) +
             " in the checkpoint but " + shape_text(tensor.shape) + " in this run's config" +
             keep_its_model;
  }
  for (const ParameterTensor& tensor : theirs.tensors())
    if (std::none_of(ours.tensors().begin(), ours.tensors().end(),
                     [&](const ParameterTensor& t) { return t.name == tensor.name; }))
      return "the checkpoint has a tensor " + tensor.name + " " + shape_text(tensor.shape) +
             " that this run's model lacks" + keep_its_model;
  return "";
}

}  // namespace folio
