#include "train/init_from_check.h"

#include <algorithm>

#include "model/parameter_layout.h"

namespace folio {

namespace {

std::string shape_text(const std::vector<int>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace

std::string init_from_mismatch(const LoadedCheckpoint& checkpoint, const ModelShape& run_shape,
                               const Tokenizer& data_tokenizer) {
  if (const std::string difference = checkpoint.tokenizer.difference(data_tokenizer);
      !difference.empty()) {
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
